package review_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// TestReplicasApproveElsewhere runs two Queues named as replicas over one
// store. A call waiting on A is approved through B: A's caller claims it
// (read on its poll), B's dispatcher, though it wakes on the approval,
// leaves it to A, and nothing is dispatched twice.
func TestReplicasApproveElsewhere(t *testing.T) {
	st := review.NewMemStore()
	opts := review.Options{SweepInterval: 20 * time.Millisecond}
	optsA, optsB := opts, opts
	optsA.Replica, optsB.Replica = "a", "b"
	qa, qb := review.NewQueue(st, optsA), review.NewQueue(st, optsB)
	var daemonRuns atomic.Int64
	dispatch := func(context.Context, *review.Review) (*utcp.Result, bool, error) {
		daemonRuns.Add(1)
		return &utcp.Result{Value: "ran"}, true, nil
	}
	for _, q := range []*review.Queue{qa, qb} {
		q.Start(dispatch)
		t.Cleanup(func() { _ = q.Close(context.Background()) })
	}

	ticket := &review.Ticket{Front: "rest"}
	type answer struct {
		v   guard.Verdict
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := qa.Approve(review.WithTicket(t.Context(), ticket), call, asked)
		ch <- answer{v, err}
	}()
	r := pendingOf(t, qb) // B sees A's review
	if r.Replica != "a" {
		t.Errorf("review replica %q, want a", r.Replica)
	}
	if _, err := qb.Decide(t.Context(), r.ID, review.Decision{Approve: true, By: "bob"}); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("A's caller not woken by B's approval")
	}
	if a.err != nil || a.v.Decision != guard.Allow || !ticket.Claimed {
		t.Fatalf("A's caller: %+v %v claimed=%v", a.v, a.err, ticket.Claimed)
	}
	if err := qa.Complete(t.Context(), r.ID, &utcp.Result{Value: "by caller"}, true, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := st.Get(t.Context(), r.ID)
	if got.Status != review.StatusDone || got.Dispatcher != "caller" || got.ClaimedBy != "a" {
		t.Errorf("review after the call: status %s dispatcher %q claimed by %q", got.Status, got.Dispatcher, got.ClaimedBy)
	}
	time.Sleep(100 * time.Millisecond) // several sweeps of both
	if n := daemonRuns.Load(); n != 0 {
		t.Errorf("a dispatcher ran the call %d times besides its caller", n)
	}
}

// TestReplicasChangedWakes checks that Changed wakes a waiting caller at
// once (no poll: a long SweepInterval), as a store's Watcher does.
func TestReplicasChangedWakes(t *testing.T) {
	st := review.NewMemStore()
	qa := review.NewQueue(st, review.Options{Replica: "a", SweepInterval: time.Hour})
	qb := review.NewQueue(st, review.Options{Replica: "b", SweepInterval: time.Hour})
	ch := make(chan error, 1)
	go func() {
		_, err := qa.Approve(review.WithTicket(t.Context(), &review.Ticket{}), call, asked)
		ch <- err
	}()
	r := pendingOf(t, qb)
	if _, err := qb.Decide(t.Context(), r.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	qa.Changed(r.ID)
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changed did not wake the caller")
	}
}

// TestReplicaTakesOverAbandoned checks that an approved review whose
// replica went away is dispatched by another after TakeoverAfter, and a
// claim far older than the dispatch deadline is marked interrupted.
func TestReplicaTakesOverAbandoned(t *testing.T) {
	st := review.NewMemStore()
	now := time.Now()
	orphan := &review.Review{ID: "rv_orphan", Tool: "pay", Arguments: []byte(`{}`), Guard: "0:policy", Status: review.StatusApproved,
		Created: now.Add(-time.Minute), Expires: now.Add(time.Hour), Decided: now.Add(-time.Second), Replica: "gone"}
	stuck := &review.Review{ID: "rv_stuck", Tool: "pay", Arguments: []byte(`{}`), Guard: "0:policy", Status: review.StatusDispatching,
		Created: now.Add(-time.Minute), Expires: now.Add(time.Hour), Replica: "gone", ClaimedBy: "gone", Claimed: now.Add(-time.Second)}
	fresh := &review.Review{ID: "rv_fresh", Tool: "pay", Arguments: []byte(`{}`), Guard: "0:policy", Status: review.StatusDispatching,
		Created: now, Expires: now.Add(time.Hour), Replica: "other", ClaimedBy: "other", Claimed: now, CallTimeout: time.Hour}
	for _, r := range []*review.Review{orphan, stuck, fresh} {
		if err := st.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	q := review.NewQueue(st, review.Options{Replica: "b", SweepInterval: 10 * time.Millisecond,
		TakeoverAfter: 200 * time.Millisecond, DispatchTimeout: 100 * time.Millisecond})
	var runs atomic.Int64
	q.Start(func(context.Context, *review.Review) (*utcp.Result, bool, error) {
		runs.Add(1)
		return &utcp.Result{}, true, nil
	})
	defer q.Close(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, _ := st.Get(t.Context(), "rv_orphan")
		s, _ := st.Get(t.Context(), "rv_stuck")
		if o.Status == review.StatusDone && s.Status == review.StatusInterrupted {
			if o.ClaimedBy != "b" {
				t.Errorf("orphan claimed by %q", o.ClaimedBy)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %s, stuck %s", o.Status, s.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if runs.Load() != 1 {
		t.Errorf("dispatched %d times, want 1 (the orphan)", runs.Load())
	}
	if f, _ := st.Get(t.Context(), "rv_fresh"); f.Status != review.StatusDispatching {
		t.Errorf("a fresh claim of another replica was touched: %s", f.Status)
	}
}
