// Package audittest is the conformance suite every audit.Store passes.
//
//	func TestAuditStore(t *testing.T) {
//		audittest.Run(t, func(t *testing.T) audit.Store { return audit.NewMemStore() })
//	}
//
// newStore must return a new, empty store for every call.
package audittest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/utcp"
)

// Run runs the suite against stores made by newStore. Subtest names are
// stable. A store that is an audit.Trimmer also has its Trim checked
// (the subtest "trim" is empty for the others).
func Run(t *testing.T, newStore func(t *testing.T) audit.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s audit.Store)
	}{
		{"round_trip", testRoundTrip},
		{"ids_increase_newest_first", testOrder},
		{"filters", testFilters},
		{"paging", testPaging},
		{"limit", testLimit},
		{"prune", testPrune},
		{"invalid", testInvalid},
		{"concurrent_appends", testConcurrent},
		{"trim", testTrim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// Fixture returns a record of a call to tool at base+offset with every
// field set; the ID is left for the store.
func Fixture(tool string, offset time.Duration) audit.Record {
	return audit.Record{
		Time: base.Add(offset), Front: "rest", Principal: "key:ops", Tool: tool, Qualified: "demo." + tool, Protocol: "http",
		Decision: "allow", Guard: "1:webhook", Reason: "ok — ünïcode",
		Steps: []audit.Step{
			{Guard: "0:policy", Decision: "review", Reason: "big"},
			{Guard: "0:policy", Decision: "allow", Reason: "approved on review rv_x", Review: true},
			{Guard: "1:webhook", Decision: "allow", Reason: "ok — ünïcode"},
		},
		Dispatched: true, Outcome: "ok", Duration: 1234567 * time.Nanosecond, ReviewID: "rv_x", Stream: true,
	}
}

func diff(want, got any) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }))
}

func appendAll(t *testing.T, s audit.Store, recs ...audit.Record) {
	t.Helper()
	if err := s.Append(t.Context(), recs); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func query(t *testing.T, s audit.Store, q audit.Query) []audit.Record {
	t.Helper()
	got, err := s.Query(t.Context(), q)
	if err != nil {
		t.Fatalf("Query(%+v): %v", q, err)
	}
	return got
}

func tools(recs []audit.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Tool)
	}
	return out
}

func testRoundTrip(t *testing.T, s audit.Store) {
	full := Fixture("echo", 0)
	bare := audit.Record{Time: base.Add(time.Second), Tool: "nope", Decision: "deny", Outcome: "guard_denied", Steps: []audit.Step{}}
	appendAll(t, s, full, bare)
	got := query(t, s, audit.Query{})
	if len(got) != 2 {
		t.Fatalf("got %d records, want 2", len(got))
	}
	full.ID, bare.ID = got[1].ID, got[0].ID
	if got[1].Steps == nil {
		got[1].Steps = []audit.Step{}
	}
	if got[0].Steps == nil {
		got[0].Steps = []audit.Step{}
	}
	if d := diff([]audit.Record{bare, full}, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if full.ID <= 0 || bare.ID <= full.ID {
		t.Errorf("ids %d then %d: want positive and increasing", full.ID, bare.ID)
	}
}

func testOrder(t *testing.T, s audit.Store) {
	// Appended out of time order: the order is the append order.
	appendAll(t, s, Fixture("a", 2*time.Second), Fixture("b", time.Second))
	appendAll(t, s, Fixture("c", 0))
	got := query(t, s, audit.Query{})
	if d := cmp.Diff([]string{"c", "b", "a"}, tools(got)); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
	ids := []int64{got[2].ID, got[1].ID, got[0].ID}
	if !slices.IsSorted(ids) || ids[0] == ids[1] || ids[1] == ids[2] {
		t.Errorf("ids %v are not increasing", ids)
	}
}

func testFilters(t *testing.T, s audit.Store) {
	recs := []audit.Record{Fixture("echo", 0), Fixture("add", time.Minute), Fixture("echo", 2*time.Minute), Fixture("fail", 3*time.Minute)}
	recs[1].Decision, recs[1].Outcome, recs[1].Dispatched = "deny", string(utcp.CodeGuardDenied), false
	recs[3].Decision, recs[3].Outcome = "review", string(utcp.CodeReviewPending)
	recs[3].Qualified = ""
	// Called by its qualified name: Tool and Qualified are the same.
	byQualified := Fixture("demo.sum", 4*time.Minute)
	byQualified.Qualified = "demo.sum"
	recs = append(recs, byQualified)
	appendAll(t, s, recs...)
	for _, tc := range []struct {
		name string
		q    audit.Query
		want []string
	}{
		{"tool_requested", audit.Query{Tool: "echo"}, []string{"echo", "echo"}},
		{"tool_qualified", audit.Query{Tool: "demo.add"}, []string{"add"}},
		{"tool_no_prefix_match", audit.Query{Tool: "demo"}, []string{}},
		{"tool_called_qualified", audit.Query{Tool: "demo.sum"}, []string{"demo.sum"}},
		{"tool_unresolved", audit.Query{Tool: "fail"}, []string{"fail"}},
		{"decision", audit.Query{Decision: "deny"}, []string{"add"}},
		{"decision_review", audit.Query{Decision: "review"}, []string{"fail"}},
		{"outcome", audit.Query{Outcome: "ok"}, []string{"demo.sum", "echo", "echo"}},
		{"since", audit.Query{Since: base.Add(2 * time.Minute)}, []string{"demo.sum", "fail", "echo"}},
		{"combined", audit.Query{Tool: "echo", Since: base.Add(time.Minute)}, []string{"echo"}},
		{"none", audit.Query{Decision: "error"}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tools(query(t, s, tc.q))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func testPaging(t *testing.T, s audit.Store) {
	var recs []audit.Record
	for i := range 25 {
		recs = append(recs, Fixture(fmt.Sprintf("t%02d", i), time.Duration(i)*time.Second))
	}
	appendAll(t, s, recs...)
	var seen []string
	q := audit.Query{Limit: 10}
	for page := 0; ; page++ {
		got := query(t, s, q)
		seen = append(seen, tools(got)...)
		if len(got) < q.Limit {
			break
		}
		q.Before = got[len(got)-1].ID
		if page > 5 {
			t.Fatal("paging does not end")
		}
	}
	var want []string
	for i := 24; i >= 0; i-- {
		want = append(want, fmt.Sprintf("t%02d", i))
	}
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}
	// Paging with a filter.
	got := query(t, s, audit.Query{Tool: "t03", Before: 1 << 40})
	if d := cmp.Diff([]string{"t03"}, tools(got)); d != "" {
		t.Errorf("filtered page (-want +got):\n%s", d)
	}
}

func testLimit(t *testing.T, s audit.Store) {
	var recs []audit.Record
	for i := range audit.DefaultLimit + 5 {
		recs = append(recs, Fixture("x", time.Duration(i)*time.Millisecond))
	}
	appendAll(t, s, recs...)
	if n := len(query(t, s, audit.Query{})); n != audit.DefaultLimit {
		t.Errorf("default limit: %d records, want %d", n, audit.DefaultLimit)
	}
	if n := len(query(t, s, audit.Query{Limit: 3})); n != 3 {
		t.Errorf("limit 3: %d records", n)
	}
}

func testPrune(t *testing.T, s audit.Store) {
	appendAll(t, s, Fixture("old1", 0), Fixture("new1", 2*time.Hour), Fixture("old2", time.Hour), Fixture("new2", 3*time.Hour))
	n, err := s.Prune(t.Context(), base.Add(90*time.Minute))
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if n != 2 {
		t.Errorf("Prune removed %d, want 2", n)
	}
	if d := cmp.Diff([]string{"new2", "new1"}, tools(query(t, s, audit.Query{}))); d != "" {
		t.Errorf("after prune (-want +got):\n%s", d)
	}
	// IDs keep increasing after a prune.
	appendAll(t, s, Fixture("later", 4*time.Hour))
	got := query(t, s, audit.Query{})
	if got[0].Tool != "later" || got[0].ID <= got[1].ID {
		t.Errorf("after prune and append: %v", tools(got))
	}
}

func testInvalid(t *testing.T, s audit.Store) {
	bad := Fixture("x", 0)
	bad.Time = time.Time{}
	if err := s.Append(t.Context(), []audit.Record{Fixture("ok", 0), bad}); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("Append of a record without time: %v, want invalid_request", err)
	}
	if got := query(t, s, audit.Query{}); len(got) != 0 {
		t.Errorf("a failed Append stored %v", tools(got))
	}
}

func testConcurrent(t *testing.T, s audit.Store) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if err := s.Append(t.Context(), []audit.Record{Fixture(fmt.Sprintf("g%d_%d", g, i), 0)}); err != nil {
					t.Errorf("Append: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got := query(t, s, audit.Query{Limit: 1000})
	if len(got) != 80 {
		t.Fatalf("%d records, want 80", len(got))
	}
	ids := map[int64]bool{}
	for _, r := range got {
		if ids[r.ID] {
			t.Errorf("id %d assigned twice", r.ID)
		}
		ids[r.ID] = true
	}
}

// testTrim: Trim keeps the newest records within the row and byte limits
// (the bytes of each record's JSON encoding, ID zero), deletes the
// oldest, and treats a limit ≤ 0 as none.
func testTrim(t *testing.T, s audit.Store) {
	tr, ok := s.(audit.Trimmer)
	if !ok {
		return
	}
	var recs []audit.Record
	for i := range 20 {
		r := Fixture(fmt.Sprintf("t%02d", i), time.Duration(i)*time.Second)
		r.Reason = strings.Repeat("x", i) // sizes differ
		recs = append(recs, r)
	}
	appendAll(t, s, recs...)
	size := func(r audit.Record) int64 {
		r.ID = 0
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(b))
	}
	kept := func() []string {
		var out []string
		for _, r := range query(t, s, audit.Query{Limit: audit.MaxLimit}) {
			out = append(out, r.Tool)
		}
		slices.Reverse(out)
		return out
	}
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("t%02d", i))
		}
		return out
	}
	trim := func(rows, bytes int64) int64 {
		t.Helper()
		n, err := tr.Trim(t.Context(), rows, bytes)
		if err != nil {
			t.Fatalf("Trim(%d, %d): %v", rows, bytes, err)
		}
		return n
	}
	if n := trim(0, 0); n != 0 || len(kept()) != 20 {
		t.Fatalf("Trim without limits deleted %d", n)
	}
	if n := trim(100, 1<<40); n != 0 {
		t.Errorf("Trim within the limits deleted %d", n)
	}
	if n := trim(15, 0); n != 5 {
		t.Errorf("Trim(15 rows) deleted %d, want 5", n)
	}
	if d := diff(names(5, 20), kept()); d != "" {
		t.Errorf("after Trim(15 rows) (-want +got):\n%s", d)
	}
	// The byte limit: exactly the newest four fit, not five.
	var four int64
	for i := 16; i < 20; i++ {
		four += size(recs[i])
	}
	if n := trim(0, four+size(recs[15])-1); n != 11 {
		t.Errorf("Trim(bytes) deleted %d, want 11", n)
	}
	if d := diff(names(16, 20), kept()); d != "" {
		t.Errorf("after Trim(bytes) (-want +got):\n%s", d)
	}
	if n := trim(0, four); n != 0 {
		t.Errorf("Trim at exactly the kept size deleted %d", n)
	}
	// Both limits: the stricter wins.
	if n := trim(1, four); n != 3 {
		t.Errorf("Trim(1 row, bytes) deleted %d, want 3", n)
	}
	if d := diff(names(19, 20), kept()); d != "" {
		t.Errorf("after Trim(1 row) (-want +got):\n%s", d)
	}
	if n := trim(0, 1); n != 1 || len(kept()) != 0 {
		t.Errorf("Trim(1 byte) deleted %d, kept %v", n, kept())
	}
	// New records after a trim still get increasing IDs.
	appendAll(t, s, Fixture("after", time.Minute))
	if got := kept(); len(got) != 1 || got[0] != "after" {
		t.Errorf("after appending: %v", got)
	}
}
