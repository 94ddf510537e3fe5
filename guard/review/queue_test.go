package review_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

var call = &guard.Call{Tool: "pay", Qualified: "bank.pay", Arguments: map[string]any{"amount": 5}, Principal: "key:x"}

var asked = guard.Verdict{Decision: guard.Review, Guard: "0:policy", Reason: "money"}

func pendingOf(t *testing.T, q *review.Queue) *review.Review {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs, err := q.List(t.Context(), review.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 {
			return rs[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending", len(rs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestApproveWithoutTicket(t *testing.T) {
	st := review.NewMemStore()
	q := review.NewQueue(st, review.Options{})
	type answer struct {
		v   guard.Verdict
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		v, err := q.Approve(t.Context(), call, asked)
		ch <- answer{v, err}
	}()
	r := pendingOf(t, q)
	if r.Tool != "pay" || r.Qualified != "bank.pay" || string(r.Arguments) != `{"amount":5}` || r.Guard != "0:policy" || r.Principal != "key:x" {
		t.Errorf("review %+v", r)
	}
	if _, err := q.Decide(t.Context(), r.ID, review.Decision{Approve: true, By: "ann"}); err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil || a.v.Decision != guard.Allow || !strings.Contains(a.v.Reason, "by ann") {
		t.Fatalf("answer %+v %v", a.v, a.err)
	}
	got, _ := st.Get(t.Context(), r.ID)
	if got.Status != review.StatusDone || got.Dispatcher != "caller" {
		t.Errorf("without a ticket nobody records the outcome, so the claim finishes it: %+v", got)
	}
}

func TestTicketDenied(t *testing.T) {
	exp := time.Now().Add(time.Minute)
	cases := []struct {
		name string
		t    *review.Ticket
		v    guard.Verdict
		code utcp.Code
	}{
		{"no ticket", nil, asked, utcp.CodeReviewPending},
		{"no review", &review.Ticket{}, guard.Verdict{Decision: guard.Deny}, utcp.CodeGuardDenied},
		{"expired", &review.Ticket{ID: "rv_1", State: review.StatusExpired}, asked, utcp.CodeGuardReviewTimeout},
		{"caller left", &review.Ticket{ID: "rv_1", State: review.StatusPending}, asked, utcp.CodeReviewPending},
		{"parked", &review.Ticket{ID: "rv_1", State: review.StatusPending, NoWait: true, Expires: exp}, asked, utcp.CodeReviewPending},
		{"denied on review", &review.Ticket{ID: "rv_1", State: review.StatusDenied}, guard.Verdict{Decision: guard.Deny, Reason: "no"}, utcp.CodeGuardDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Denied(tc.v)
			if utcp.CodeOf(err) != tc.code {
				t.Fatalf("code %q (%v), want %q", utcp.CodeOf(err), err, tc.code)
			}
			var pe *review.ParkedError
			if parked := errors.As(err, &pe); parked != (tc.name == "parked") {
				t.Errorf("parked error: %v", err)
			} else if parked && (pe.ID != "rv_1" || !pe.Expires.Equal(exp)) {
				t.Errorf("parked %+v", pe)
			}
			var ue *utcp.Error
			if errors.As(err, &ue) && tc.t != nil && tc.t.ID != "" && ue.Details["review_id"] != "rv_1" {
				t.Errorf("details %v lack the review_id", ue.Details)
			}
		})
	}
	if err := (&review.Ticket{ID: "rv_1"}).Denied(guard.Verdict{Decision: guard.Allow}); err != nil {
		t.Errorf("allow: %v", err)
	}
}

func TestDecideErrors(t *testing.T) {
	q := review.NewQueue(review.NewMemStore(), review.Options{Timeout: 50 * time.Millisecond})
	if _, err := q.Decide(t.Context(), "rv_none", review.Decision{Approve: true}); !errors.Is(err, review.ErrNotFound) {
		t.Errorf("unknown review: %v", err)
	}
	ctx := review.WithTicket(t.Context(), &review.Ticket{NoWait: true})
	if _, err := q.Approve(ctx, call, asked); !errors.Is(err, guard.ErrParked) {
		t.Fatalf("parking: %v", err)
	}
	r := pendingOf(t, q)
	time.Sleep(80 * time.Millisecond)
	_, err := q.Decide(t.Context(), r.ID, review.Decision{Approve: true})
	if utcp.CodeOf(err) != utcp.CodeInvalidRequest || !strings.Contains(err.Error(), "expired") {
		t.Errorf("deciding an overdue review: %v", err)
	}
	if got, _ := q.Get(t.Context(), r.ID); got.Status != review.StatusExpired {
		t.Errorf("status %s", got.Status)
	}
	if err := q.Complete(t.Context(), r.ID, nil, false, nil); !errors.Is(err, review.ErrConflict) {
		t.Errorf("completing an expired review: %v", err)
	}
}

func TestStartRecoversAndSurvivesPanics(t *testing.T) {
	st := review.NewMemStore()
	now := time.Now()
	stuck := &review.Review{ID: "rv_stuck", Tool: "pay", Status: review.StatusDispatching, Created: now, Expires: now.Add(time.Minute)}
	approved := &review.Review{ID: "rv_ok", Tool: "pay", Status: review.StatusApproved, Created: now, Expires: now.Add(time.Minute)}
	for _, r := range []*review.Review{stuck, approved} {
		if err := st.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	q := review.NewQueue(st, review.Options{SweepInterval: 10 * time.Millisecond})
	defer q.Close(context.Background())
	calls := make(chan string, 4)
	q.Start(func(_ context.Context, r *review.Review) (*utcp.Result, bool, error) {
		calls <- r.ID
		panic("dispatcher bug")
	})
	select {
	case id := <-calls:
		if id != "rv_ok" {
			t.Fatalf("dispatched %s", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the approved review was not dispatched")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := st.Get(t.Context(), "rv_ok")
		if got.Status == review.StatusDone {
			if got.Outcome != utcp.CodeInternal {
				t.Errorf("outcome of a panicking dispatch: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %s", got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got, _ := st.Get(t.Context(), "rv_stuck")
	if got.Status != review.StatusInterrupted || got.Message == "" {
		t.Errorf("a review left dispatching: %+v", got)
	}
	select {
	case id := <-calls:
		t.Errorf("dispatched again: %s", id)
	case <-time.After(50 * time.Millisecond):
	}
	if err := q.Close(t.Context()); err != nil {
		t.Error(err)
	}
}
