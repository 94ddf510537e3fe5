// Package storetest is the conformance suite every registry.Store passes.
//
// A store package calls Run from a test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) registry.Store { return memstore.New() })
//	}
//
// newStore must return a new, empty store for every call; Run closes it
// when the subtest ends (Close must be idempotent, so the harness may close
// it too).
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// Run runs the conformance suite against stores made by newStore. The
// subtest names are stable.
func Run(t *testing.T, newStore func(t *testing.T) registry.Store) {
	t.Helper()
	open := func(t *testing.T) registry.Store {
		s := newStore(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s registry.Store)
	}{
		{"round_trip", testRoundTrip},
		{"round_trip_without_manual", testRoundTripNoManual},
		{"replace", testReplace},
		{"delete", testDelete},
		{"not_found", testNotFound},
		{"invalid_record", testInvalid},
		{"list_order", testListOrder},
		{"copies_not_aliases", testCopies},
		{"concurrent_puts", testConcurrent},
		{"watch_closes", testWatch},
		{"close_idempotent", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// Record returns a fixture record called name whose manual has two tools
// (one with auth and tags), with times of millisecond precision.
func Record(name string) *registry.Record {
	tmpl := fmt.Sprintf(`{"name":%q,"call_template_type":"http","url":"https://example.com/utcp","http_method":"GET","auth":{"auth_type":"api_key","api_key":"${API_KEY}","var_name":"X-Key"}}`, name)
	manual := fmt.Sprintf(`{"utcp_version":"1.1.0","manual_version":"2.0.0","tools":[
		{"name":%[1]q,"description":"Echo a message back — ünïcödé","inputs":{"type":"object","properties":{"msg":{"type":"string"}}},"outputs":{"type":"object"},"tags":["echo","Test"],"average_response_size":12,
		 "tool_call_template":{"call_template_type":"http","url":"https://example.com/echo","http_method":"POST","auth":{"auth_type":"basic","username":"u","password":"${PW}"}}},
		{"name":"%[2]s.add","description":"","tags":[],"tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo $X"}]}}]}`,
		name+".echo", name)
	var m utcp.Manual
	if err := json.Unmarshal([]byte(manual), &m); err != nil {
		panic(err)
	}
	base := time.Date(2026, 11, 30, 12, 34, 56, 789_000_000, time.UTC)
	return &registry.Record{
		Name:       name,
		Template:   json.RawMessage(tmpl),
		Manual:     &m,
		Source:     registry.SourceAPI,
		Registered: base,
		Refreshed:  base.Add(90 * time.Minute),
	}
}

// Diff compares records semantically: templates and manuals as JSON
// values (key order and spacing ignored), times by instant.
func Diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Transformer("json", func(r json.RawMessage) any {
			var v any
			if err := json.Unmarshal(r, &v); err != nil {
				return "invalid JSON: " + string(r)
			}
			return v
		}),
		cmp.Transformer("manual", func(m *utcp.Manual) any {
			if m == nil {
				return nil
			}
			b, err := json.Marshal(m)
			if err != nil {
				return "unencodable manual: " + err.Error()
			}
			var v any
			_ = json.Unmarshal(b, &v)
			return v
		}),
	)
}

func put(t *testing.T, s registry.Store, rec *registry.Record) {
	t.Helper()
	if err := s.Put(t.Context(), rec); err != nil {
		t.Fatalf("Put(%q): %v", rec.Name, err)
	}
}

func get(t *testing.T, s registry.Store, name string) *registry.Record {
	t.Helper()
	rec, err := s.Get(t.Context(), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	if rec == nil {
		t.Fatalf("Get(%q) returned nil, nil", name)
	}
	return rec
}

func names(recs []*registry.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name
	}
	return out
}

func testRoundTrip(t *testing.T, s registry.Store) {
	want := Record("weather")
	put(t, s, Record("weather"))
	if d := Diff(want, get(t, s, "weather")); d != "" {
		t.Errorf("Get after Put (-want +got):\n%s", d)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if d := Diff([]*registry.Record{want}, list); d != "" {
		t.Errorf("List after Put (-want +got):\n%s", d)
	}
}

func testRoundTripNoManual(t *testing.T, s registry.Store) {
	want := Record("pending")
	want.Manual = nil
	want.Refreshed = time.Time{}
	rec := *want
	put(t, s, &rec)
	got := get(t, s, "pending")
	if d := Diff(want, got); d != "" {
		t.Errorf("Get (-want +got):\n%s", d)
	}
	if got.Manual != nil {
		t.Errorf("Manual = %+v, want nil", got.Manual)
	}
	if !got.Refreshed.IsZero() {
		t.Errorf("Refreshed = %v, want zero time", got.Refreshed)
	}
}

func testReplace(t *testing.T, s registry.Store) {
	put(t, s, Record("m"))
	second := Record("m")
	second.Template = json.RawMessage(`{"name":"m","call_template_type":"text","file_path":"/tmp/x.json"}`)
	second.Manual.Tools = second.Manual.Tools[:1]
	second.Source = registry.SourceConfig
	second.Refreshed = second.Refreshed.Add(time.Hour)
	put(t, s, second)
	if d := Diff(second, get(t, s, "m")); d != "" {
		t.Errorf("Get after replace (-want +got):\n%s", d)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if d := cmp.Diff([]string{"m"}, names(list)); d != "" {
		t.Errorf("List names after replace (-want +got):\n%s", d)
	}
}

func wantNotFound(t *testing.T, op string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want manual_not_found", op)
	}
	if !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("%s: %v does not match registry.ErrNotFound", op, err)
	}
	if c := utcp.CodeOf(err); c != utcp.CodeManualNotFound {
		t.Errorf("%s: code %q, want %q", op, c, utcp.CodeManualNotFound)
	}
}

func testDelete(t *testing.T, s registry.Store) {
	put(t, s, Record("a"))
	put(t, s, Record("b"))
	if err := s.Delete(t.Context(), "a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Get(t.Context(), "a")
	wantNotFound(t, "Get after Delete", err)
	wantNotFound(t, "second Delete", s.Delete(t.Context(), "a"))
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if d := cmp.Diff([]string{"b"}, names(list)); d != "" {
		t.Errorf("List after Delete (-want +got):\n%s", d)
	}
	put(t, s, Record("a")) // a deleted name can be stored again
	get(t, s, "a")
}

func testNotFound(t *testing.T, s registry.Store) {
	rec, err := s.Get(t.Context(), "missing")
	wantNotFound(t, "Get", err)
	if rec != nil {
		t.Errorf("Get returned a record with the error: %+v", rec)
	}
	wantNotFound(t, "Delete", s.Delete(t.Context(), "missing"))
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List of an empty store: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("List of an empty store = %v, want none", names(list))
	}
}

func testInvalid(t *testing.T, s registry.Store) {
	noName := Record("x")
	noName.Name = ""
	badJSON := Record("x")
	badJSON.Template = json.RawMessage(`{"name":`)
	empty := Record("x")
	empty.Template = nil
	for _, tc := range []struct {
		name string
		rec  *registry.Record
	}{{"nil", nil}, {"empty_name", noName}, {"invalid_template", badJSON}, {"no_template", empty}} {
		err := s.Put(t.Context(), tc.rec)
		if c := utcp.CodeOf(err); c != utcp.CodeInvalidRequest {
			t.Errorf("Put(%s) = %v (code %q), want code %q", tc.name, err, c, utcp.CodeInvalidRequest)
		}
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 0 {
		t.Errorf("invalid Puts stored %v", names(list))
	}
}

func testListOrder(t *testing.T, s registry.Store) {
	// Byte order: upper case before lower case, "_" between them, digits first.
	in := []string{"zeta", "alpha", "Zeta", "a_b", "ab", "a1", "beta", "_x"}
	want := []string{"Zeta", "_x", "a1", "a_b", "ab", "alpha", "beta", "zeta"}
	for _, n := range in {
		put(t, s, Record(n))
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if d := cmp.Diff(want, names(list)); d != "" {
		t.Errorf("List order (-want +got):\n%s", d)
	}
}

func testCopies(t *testing.T, s registry.Store) {
	want := Record("c")
	rec := Record("c")
	put(t, s, rec)
	// Modifying what was put must not change what is stored.
	rec.Template[2] = 'X'
	rec.Manual.Tools[0].Name = "changed"
	rec.Manual.Tools[0].Tags[0] = "changed"
	rec.Source = "changed"
	got := get(t, s, "c")
	if d := Diff(want, got); d != "" {
		t.Fatalf("stored record changed with the caller's copy (-want +got):\n%s", d)
	}
	// Modifying what was returned must not change what is stored.
	got.Template[2] = 'Y'
	got.Manual.Tools[0].Name = "changed"
	got.Manual.Tools[0].Tags[0] = "changed"
	got.Manual.Tools = got.Manual.Tools[:1]
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	list[0].Manual.Tools[0].Description = "changed"
	if d := Diff(want, get(t, s, "c")); d != "" {
		t.Errorf("stored record changed with a returned copy (-want +got):\n%s", d)
	}
}

func testConcurrent(t *testing.T, s registry.Store) {
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*3)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Own names, and one name every worker fights over.
				for _, n := range []string{fmt.Sprintf("w%d_%d", w, i), "shared"} {
					if err := s.Put(t.Context(), Record(n)); err != nil {
						errs <- err
					}
				}
				if _, err := s.Get(t.Context(), "shared"); err != nil {
					errs <- err
				}
				if _, err := s.List(t.Context()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent operation: %v", err)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != workers*each+1 {
		t.Errorf("List has %d records, want %d", len(list), workers*each+1)
	}
	if d := Diff(Record("shared"), get(t, s, "shared")); d != "" {
		t.Errorf("shared record (-want +got):\n%s", d)
	}
}

func testWatch(t *testing.T, s registry.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	ch := s.Watch(ctx)
	if ch == nil {
		t.Fatal("Watch returned a nil channel")
	}
	put(t, s, Record("own")) // our own changes are not reported (but may be; drain)
	cancel()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("Watch channel not closed 5s after its context ended")
		}
	}
}

func testClose(t *testing.T, s registry.Store) {
	put(t, s, Record("x"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Put(t.Context(), Record("y")); err == nil {
		t.Error("Put after Close succeeded")
	}
}
