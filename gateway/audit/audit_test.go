package audit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/audit/audittest"
)

func TestMemStore(t *testing.T) {
	audittest.Run(t, func(*testing.T) audit.Store { return audit.NewMemStore() })
}

func TestBoundedMemStoreConformance(t *testing.T) {
	audittest.Run(t, func(*testing.T) audit.Store { return audit.NewBoundedMemStore(10_000) })
}

// slowStore blocks every Append until release is closed.
type slowStore struct {
	*audit.MemStore
	release chan struct{}
}

func (s *slowStore) Append(ctx context.Context, recs []audit.Record) error {
	<-s.release
	return s.MemStore.Append(ctx, recs)
}

func TestWriterWritesAndFlushes(t *testing.T) {
	st := audit.NewMemStore()
	w := audit.NewWriter(st, audit.WriterOptions{BatchSize: 7})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for range 250 {
				w.Append(audit.Record{Tool: "x", Front: string(rune('a' + g))})
			}
		})
	}
	wg.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Query(t.Context(), audit.Query{Limit: audit.MaxLimit})
	if len(got) != 1000 || w.Written() != 1000 || w.Dropped() != 0 {
		t.Errorf("stored %d, written %d, dropped %d; want 1000, 1000, 0", len(got), w.Written(), w.Dropped())
	}
	if got[0].Time.IsZero() {
		t.Error("Append did not set the time")
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	w.Append(audit.Record{Tool: "late"})
	if w.Dropped() != 1 {
		t.Errorf("a record appended after Close was not dropped: %d", w.Dropped())
	}
}

func TestWriterDropsWhenFullWithoutBlocking(t *testing.T) {
	st := &slowStore{MemStore: audit.NewMemStore(), release: make(chan struct{})}
	w := audit.NewWriter(st, audit.WriterOptions{QueueSize: 10, BatchSize: 1})
	start := time.Now()
	for range 100 {
		w.Append(audit.Record{Tool: "x"})
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("100 appends to a stuck store took %v: Append blocks", d)
	}
	// At most the queue plus the batch being written are kept.
	if w.Dropped() < 89 {
		t.Errorf("dropped %d, want at least 89", w.Dropped())
	}
	close(st.release)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Written() + w.Dropped(); got != 100 {
		t.Errorf("written %d + dropped %d = %d, want 100", w.Written(), w.Dropped(), got)
	}
}

func TestWriterCloseFlushes(t *testing.T) {
	st := audit.NewMemStore()
	w := audit.NewWriter(st, audit.WriterOptions{})
	for range 500 {
		w.Append(audit.Record{Tool: "x"})
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Query(t.Context(), audit.Query{Limit: audit.MaxLimit})
	if len(got) != 500 {
		t.Errorf("after Close: %d stored, want 500", len(got))
	}
}

func TestWriterRetentionPrunes(t *testing.T) {
	st := audit.NewMemStore()
	now := time.Now()
	_ = st.Append(t.Context(), []audit.Record{
		{Time: now.Add(-3 * time.Hour), Tool: "old"},
		{Time: now.Add(-time.Minute), Tool: "new"},
	})
	w := audit.NewWriter(st, audit.WriterOptions{Retention: time.Hour, PruneInterval: 20 * time.Millisecond})
	defer w.Close(t.Context())
	deadline := time.Now().Add(5 * time.Second)
	for w.Pruned() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// A record that ages past retention is pruned by the periodic pass.
	_ = st.Append(t.Context(), []audit.Record{{Time: now.Add(-2 * time.Hour), Tool: "aged"}})
	for w.Pruned() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got, _ := st.Query(t.Context(), audit.Query{})
	if len(got) != 1 || got[0].Tool != "new" || w.Pruned() != 2 {
		t.Errorf("after pruning: %v, pruned %d; want only \"new\", 2 pruned", got, w.Pruned())
	}
}

// TestBoundedMemStore: a bounded MemStore keeps the newest records only,
// however many are appended, with their ids going on; Query never sees
// more than the bound.
func TestBoundedMemStore(t *testing.T) {
	s := audit.NewBoundedMemStore(8)
	base := time.Now()
	var last int64
	for i := range 100 {
		if err := s.Append(t.Context(), []audit.Record{{Time: base.Add(time.Duration(i)), Tool: fmt.Sprintf("t%d", i), Decision: "allow", Outcome: "ok", Steps: []audit.Step{}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Query(t.Context(), audit.Query{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(i+1, 8); len(got) != want {
			t.Fatalf("after %d appends: %d records, want %d", i+1, len(got), want)
		}
		if got[0].Tool != fmt.Sprintf("t%d", i) || got[0].ID <= last {
			t.Fatalf("after %d appends: newest %s id %d (previous id %d)", i+1, got[0].Tool, got[0].ID, last)
		}
		last = got[0].ID
		if oldest := got[len(got)-1].Tool; oldest != fmt.Sprintf("t%d", max(0, i-7)) {
			t.Fatalf("after %d appends: oldest kept %s", i+1, oldest)
		}
	}
}
