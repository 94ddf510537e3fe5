// Package reviewtest is the conformance suite every review.Store passes.
//
//	func TestReviewStore(t *testing.T) {
//		reviewtest.Run(t, func(t *testing.T) review.Store { return review.NewMemStore() })
//	}
//
// newStore must return a new, empty store for every call.
package reviewtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// Run runs the suite against stores made by newStore. Subtest names are
// stable.
func Run(t *testing.T, newStore func(t *testing.T) review.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s review.Store)
	}{
		{"round_trip", testRoundTrip},
		{"put_existing", testPutExisting},
		{"not_found", testNotFound},
		{"invalid", testInvalid},
		{"list_by_status_oldest_first", testList},
		{"update_compare_and_swap", testUpdate},
		{"concurrent_claims_one_wins", testConcurrentClaims},
		{"copies_not_aliases", testCopies},
		{"prune", testPrune},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// base is the time fixtures are created at (millisecond precision).
var base = time.Date(2026, 11, 30, 12, 0, 0, 123_000_000, time.UTC)

// Fixture returns a pending review called id created at base+offset,
// with every field set.
func Fixture(id string, offset time.Duration) *review.Review {
	created := base.Add(offset)
	return &review.Review{
		ID: id, Tool: "payments.transfer", Qualified: "payments.transfer",
		Arguments: json.RawMessage(`{"amount":1200,"to":"ACME — ünïcode","api_key":"s3cr3t"}`),
		Principal: "key:ops", Front: "rest", Guard: "0:policy",
		Reasons:   []string{"large transfer", "second reason"},
		Approvals: []string{"1:webhook"}, Prior: "rv_prior",
		CallTimeout: 45 * time.Second,
		Status:      review.StatusPending, Created: created, Expires: created.Add(10 * time.Minute),
	}
}

// Diff compares reviews: JSON fields as values, times by instant.
func Diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
		cmp.Transformer("json", func(r json.RawMessage) any {
			if r == nil {
				return nil
			}
			var v any
			if err := json.Unmarshal(r, &v); err != nil {
				return "invalid JSON: " + string(r)
			}
			return v
		}))
}

func put(t *testing.T, s review.Store, r *review.Review) {
	t.Helper()
	if err := s.Put(t.Context(), r); err != nil {
		t.Fatalf("Put(%s): %v", r.ID, err)
	}
}

func get(t *testing.T, s review.Store, id string) *review.Review {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	if r == nil {
		t.Fatalf("Get(%s) returned nil, nil", id)
	}
	return r
}

func testRoundTrip(t *testing.T, s review.Store) {
	r := Fixture("rv_a", 0)
	put(t, s, r)
	if d := Diff(Fixture("rv_a", 0), get(t, s, "rv_a")); d != "" {
		t.Errorf("Get after Put (-want +got):\n%s", d)
	}
	// A finished review with every outcome field.
	done := Fixture("rv_a", 0)
	done.Status, done.Decided, done.DecidedBy, done.Note = review.StatusDone, base.Add(time.Minute), "alice", "ok — go"
	done.Dispatcher, done.Finished, done.Dispatched = "daemon", base.Add(2*time.Minute), true
	done.Outcome, done.Message, done.Result, done.Next = utcp.CodeToolError, "tool said no", json.RawMessage(`{"error":"no"}`), "rv_next"
	if err := s.Update(t.Context(), done, review.StatusPending); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if d := Diff(done, get(t, s, "rv_a")); d != "" {
		t.Errorf("Get after Update (-want +got):\n%s", d)
	}
	// The kind of a resource read or prompt get survives (it decides how
	// an approved review is dispatched); an unknown kind is refused.
	for i, kind := range []string{"resource", "prompt"} {
		r := Fixture(fmt.Sprintf("rv_kind%d", i), time.Duration(i)*time.Second)
		r.Tool, r.Qualified, r.Kind = "utcpd://conf.srv/test://static-text", "utcpd://conf.srv/test://static-text", kind
		put(t, s, r)
		if got := get(t, s, r.ID); got.Kind != kind || Diff(r, got) != "" {
			t.Errorf("kind %s after Put: got kind %q (-want +got):\n%s", kind, got.Kind, Diff(r, got))
		}
	}
	bad := Fixture("rv_badkind", 0)
	bad.Kind = "shell"
	if err := s.Put(t.Context(), bad); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("Put with kind shell: %v, want invalid_request", err)
	}
}

func testPutExisting(t *testing.T, s review.Store) {
	put(t, s, Fixture("rv_a", 0))
	err := s.Put(t.Context(), Fixture("rv_a", time.Second))
	if !errors.Is(err, review.ErrExists) {
		t.Errorf("Put of an existing id: %v, want ErrExists", err)
	}
}

func testNotFound(t *testing.T, s review.Store) {
	_, err := s.Get(t.Context(), "rv_missing")
	if !errors.Is(err, review.ErrNotFound) || utcp.CodeOf(err) != utcp.CodeNotFound {
		t.Errorf("Get of a missing id: %v (code %q), want ErrNotFound/not_found", err, utcp.CodeOf(err))
	}
	err = s.Update(t.Context(), Fixture("rv_missing", 0), review.StatusPending)
	if !errors.Is(err, review.ErrNotFound) {
		t.Errorf("Update of a missing id: %v, want ErrNotFound", err)
	}
}

func testInvalid(t *testing.T, s review.Store) {
	bad := []*review.Review{nil, {}, Fixture("", 0)}
	noTool := Fixture("rv_t", 0)
	noTool.Tool = ""
	badArgs := Fixture("rv_b", 0)
	badArgs.Arguments = json.RawMessage(`{"a":`)
	badStatus := Fixture("rv_s", 0)
	badStatus.Status = "maybe"
	bad = append(bad, noTool, badArgs, badStatus)
	for i, r := range bad {
		if err := s.Put(t.Context(), r); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("Put of invalid review %d: %v, want invalid_request", i, err)
		}
	}
}

func testList(t *testing.T, s review.Store) {
	statuses := []review.Status{review.StatusPending, review.StatusApproved, review.StatusPending, review.StatusDenied, review.StatusPending}
	// Put newest first, so that insertion order is not the answer.
	for i := len(statuses) - 1; i >= 0; i-- {
		r := Fixture(fmt.Sprintf("rv_%d", i), time.Duration(i)*time.Second)
		r.Status = statuses[i]
		put(t, s, r)
	}
	ids := func(rs []*review.Review) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		statuses []review.Status
		want     []string
	}{
		{[]review.Status{review.StatusPending}, []string{"rv_0", "rv_2", "rv_4"}},
		{[]review.Status{review.StatusApproved, review.StatusDenied}, []string{"rv_1", "rv_3"}},
		{nil, []string{"rv_0", "rv_1", "rv_2", "rv_3", "rv_4"}},
		{[]review.Status{review.StatusExpired}, []string{}},
	} {
		got, err := s.List(t.Context(), tc.statuses...)
		if err != nil {
			t.Fatalf("List(%v): %v", tc.statuses, err)
		}
		if d := cmp.Diff(tc.want, ids(got)); d != "" {
			t.Errorf("List(%v) (-want +got):\n%s", tc.statuses, d)
		}
	}
	// Same creation time: ordered by id.
	s2 := []*review.Review{Fixture("rv_z", time.Hour), Fixture("rv_y", time.Hour)}
	for _, r := range s2 {
		r.Status = review.StatusExpired
		put(t, s, r)
	}
	got, _ := s.List(t.Context(), review.StatusExpired)
	if d := cmp.Diff([]string{"rv_y", "rv_z"}, ids(got)); d != "" {
		t.Errorf("ties (-want +got):\n%s", d)
	}
}

func testUpdate(t *testing.T, s review.Store) {
	put(t, s, Fixture("rv_a", 0))
	next := Fixture("rv_a", 0)
	next.Status = review.StatusApproved
	if err := s.Update(t.Context(), next, review.StatusApproved); !errors.Is(err, review.ErrConflict) {
		t.Fatalf("Update from the wrong status: %v, want ErrConflict", err)
	}
	if got := get(t, s, "rv_a").Status; got != review.StatusPending {
		t.Fatalf("a failed Update changed the status to %s", got)
	}
	if err := s.Update(t.Context(), next, review.StatusPending); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Update(t.Context(), next, review.StatusPending); !errors.Is(err, review.ErrConflict) {
		t.Errorf("second Update from pending: %v, want ErrConflict", err)
	}
	if got := get(t, s, "rv_a").Status; got != review.StatusApproved {
		t.Errorf("status %s, want approved", got)
	}
	bad := Fixture("rv_a", 0)
	bad.Status = ""
	if err := s.Update(t.Context(), bad, review.StatusApproved); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("Update to an invalid review: %v, want invalid_request", err)
	}
}

func testConcurrentClaims(t *testing.T, s review.Store) {
	put(t, s, Fixture("rv_a", 0))
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			next := Fixture("rv_a", 0)
			next.Status, next.DecidedBy = review.StatusApproved, fmt.Sprint("approver-", i)
			switch err := s.Update(t.Context(), next, review.StatusPending); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, review.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 31 {
		t.Errorf("%d updates won and %d conflicted; want exactly 1 and 31", wins.Load(), conflicts.Load())
	}
}

func testCopies(t *testing.T, s review.Store) {
	r := Fixture("rv_a", 0)
	put(t, s, r)
	r.Reasons[0] = "changed"
	r.Arguments[1] = 'X'
	got := get(t, s, "rv_a")
	if d := Diff(Fixture("rv_a", 0), got); d != "" {
		t.Errorf("the store aliases what Put got (-want +got):\n%s", d)
	}
	got.Reasons[0] = "changed again"
	if d := Diff(Fixture("rv_a", 0), get(t, s, "rv_a")); d != "" {
		t.Errorf("the store aliases what Get returned (-want +got):\n%s", d)
	}
}

func testPrune(t *testing.T, s review.Store) {
	type row struct {
		id       string
		status   review.Status
		finished time.Duration // after base; 0: not finished
		gone     bool
	}
	rows := []row{
		{"rv_old_done", review.StatusDone, time.Hour, true},
		{"rv_old_denied", review.StatusDenied, time.Hour, true},
		{"rv_old_expired", review.StatusExpired, time.Hour, true},
		{"rv_old_interrupted", review.StatusInterrupted, time.Hour, true},
		{"rv_old_pending", review.StatusPending, 0, false},
		{"rv_old_approved", review.StatusApproved, 0, false},
		{"rv_old_dispatching", review.StatusDispatching, 0, false},
		{"rv_new_done", review.StatusDone, 3 * time.Hour, false},
	}
	for _, r := range rows {
		f := Fixture(r.id, 0)
		f.Status = r.status
		if r.finished > 0 {
			f.Finished = base.Add(r.finished)
		}
		put(t, s, f)
	}
	n, err := s.Prune(t.Context(), base.Add(2*time.Hour))
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if n != 4 {
		t.Errorf("Prune removed %d, want 4", n)
	}
	for _, r := range rows {
		_, err := s.Get(t.Context(), r.id)
		if gone := errors.Is(err, review.ErrNotFound); gone != r.gone {
			t.Errorf("%s: gone %v, want %v (%v)", r.id, gone, r.gone, err)
		}
	}
}
