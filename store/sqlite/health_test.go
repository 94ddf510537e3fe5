package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

func putRecord(t *testing.T, s *Store, name string) error {
	t.Helper()
	return s.Put(t.Context(), &registry.Record{Name: name, Template: json.RawMessage(`{"name":"` + name + `"}`), Source: registry.SourceAPI})
}

// TestRefusedWritesAreVisibleAndRecover: a store whose writer connection
// cannot write (opened read-only, as a database file without write
// permission opens) opens all the same, reads, refuses writes with
// unavailable, says so in Health, and takes writes again once a fresh
// connection can write — by its probe, without a restart.
func TestRefusedWritesAreVisibleAndRecover(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	s, err := Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := putRecord(t, s, "kept"); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("healthy store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The probe waits an hour: the test drives it.
	s, err = Open(t.Context(), dir, withReadOnlyWriter(), WithProbeInterval(time.Hour))
	if err != nil {
		t.Fatalf("opening a store that cannot be written: %v", err)
	}
	if s.Health() == nil {
		t.Error("a store that cannot be written is healthy at open")
	}
	if _, err := s.Get(t.Context(), "kept"); err != nil {
		t.Errorf("read while writes are refused: %v", err)
	}
	if err := putRecord(t, s, "new"); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("write while refused: %v", err)
	}
	if err := s.Audit().Append(t.Context(), []audit.Record{{Time: time.Now(), Tool: "x"}}); utcp.CodeOf(err) != utcp.CodeUnavailable || !audit.Retryable(err) {
		t.Errorf("audit append while refused: %v (retryable %v)", err, audit.Retryable(err))
	}
	h := s.Health()
	if utcp.CodeOf(h) != utcp.CodeUnavailable {
		t.Fatalf("Health while refused: %v", h)
	}
	t.Logf("Health: %v", h)
	if err := s.tryWrite(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	s.wrote()
	if err := s.Health(); err != nil {
		t.Errorf("Health after the probe wrote: %v", err)
	}
	if err := putRecord(t, s, "new"); err != nil {
		t.Errorf("write after recovery: %v", err)
	}
	if recs, err := s.List(t.Context()); err != nil || len(recs) != 2 {
		t.Errorf("records after recovery: %v %v", recs, err)
	}
	if err := s.Close(); err != nil { // ends the waiting probe
		t.Fatal(err)
	}

	// The probe recovers by itself.
	s, err = Open(t.Context(), dir, withReadOnlyWriter(), WithProbeInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(30 * time.Second)
	for s.Health() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the probe never recovered: %v", s.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := putRecord(t, s, "third"); err != nil {
		t.Errorf("write after the probe recovered: %v", err)
	}
	if s.probing.Load() {
		// It stops once writes succeed (it may still be finishing its
		// last round).
		for deadline := time.Now().Add(30 * time.Second); s.probing.Load() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		if s.probing.Load() {
			t.Error("the probe kept running after recovery")
		}
	}
}

// TestHealthyStoreHasNoProbe: a write that succeeds clears a refusal, and
// a store that never refused has no probe goroutine.
func TestHealthyStoreHasNoProbe(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := openStore(t, t.TempDir())
	if err := putRecord(t, s, "a"); err != nil {
		t.Fatal(err)
	}
	if s.probing.Load() || s.Health() != nil {
		t.Errorf("probing %v, health %v", s.probing.Load(), s.Health())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditAppendAfterWriterReopen: the audit log's prepared INSERTs
// belong to the writer pool they were prepared on; once the probe has
// replaced that pool (and closed the old one), Append prepares them anew
// instead of failing on statements of a closed pool.
func TestAuditAppendAfterWriterReopen(t *testing.T) {
	s := openStore(t, t.TempDir())
	rec := func(tool string) []audit.Record {
		return []audit.Record{{Time: time.Now(), Tool: tool, Decision: "allow", Outcome: "ok"}}
	}
	if err := s.Audit().Append(t.Context(), rec("before")); err != nil {
		t.Fatal(err)
	}
	old := s.wdb()
	if err := s.tryWrite(); err != nil {
		t.Fatalf("reopening the writer: %v", err)
	}
	if s.wdb() == old {
		t.Fatal("tryWrite kept the old writer pool")
	}
	if err := s.Audit().Append(t.Context(), rec("after")); err != nil {
		t.Fatalf("Append after the writer was reopened: %v", err)
	}
	got, err := s.Audit().Query(t.Context(), audit.Query{})
	if err != nil || len(got) != 2 || got[0].Tool != "after" || got[1].Tool != "before" {
		t.Fatalf("records after the reopen: %+v, %v", got, err)
	}
}
