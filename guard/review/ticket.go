package review

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

// Ticket is how the caller of a guard.Chain (the gateway) and the Queue
// talk about one call: the caller says how to handle a review before the
// chain runs, and the Queue says what it did. The caller attaches it to
// the call's context with WithTicket. A Ticket belongs to one call and is
// not safe for concurrent use (the chain asks the Queue from the call's
// goroutine).
type Ticket struct {
	// Front is where the call came in ("rest", "mcp", "cli"), kept with
	// a review.
	Front string
	// NoWait parks a call that needs review instead of waiting for the
	// decision: the Queue returns at once (guard.ErrParked) and the
	// daemon dispatches the call once approved.
	NoWait bool
	// CallTimeout is the call's dispatch deadline, kept with a review
	// for the daemon's dispatch.
	CallTimeout time.Duration
	// Approved is set when the daemon dispatches an approved review: it
	// answers, without a new review, a review asked by the guard it
	// approved or by one of its Approvals. A review asked by another
	// guard is parked as a follow-up.
	Approved *Review

	// ID is the review this call created, "" if none (set by the Queue).
	ID string
	// State is what became of review ID as far as this call saw (set by
	// the Queue): pending (parked, or the caller stopped waiting),
	// dispatching (approved and claimed by this call), denied or expired.
	State Status
	// Expires is when review ID expires if still pending.
	Expires time.Time
	// Claimed reports that this call claimed review ID for dispatch: its
	// caller must record the outcome with Queue.Complete.
	Claimed bool
}

type ticketKey struct{}

// WithTicket returns a copy of ctx carrying t.
func WithTicket(ctx context.Context, t *Ticket) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// TicketFrom returns the Ticket ctx carries, nil if none.
func TicketFrom(ctx context.Context) *Ticket {
	t, _ := ctx.Value(ticketKey{}).(*Ticket)
	return t
}

// ReviewID returns the review the call is about: the one it created, else
// the approved review being dispatched, else "". Nil-safe.
func (t *Ticket) ReviewID() string {
	switch {
	case t == nil:
		return ""
	case t.ID != "":
		return t.ID
	case t.Approved != nil:
		return t.Approved.ID
	}
	return ""
}

// Denied returns the error for a verdict v that does not allow the call,
// as guard.Denied does, but knowing what became of the call's review:
//
//   - a review that expired is guard_review_timeout;
//   - a parked call (NoWait, or a follow-up during the daemon's dispatch)
//     is a *ParkedError (code review_pending);
//   - a review still pending when the caller stopped waiting is
//     review_pending whose details name the review_id to poll;
//   - otherwise guard.Denied(v), with the review_id in its details when
//     the call has one.
//
// Nil-safe; nil for an Allow verdict.
func (t *Ticket) Denied(v guard.Verdict) error {
	err := guard.Denied(v)
	if err == nil || t == nil || t.ID == "" {
		return err
	}
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		return err
	}
	ue.WithDetail("review_id", t.ID)
	if v.Decision != guard.Review {
		return ue
	}
	switch t.State {
	case StatusExpired:
		ue.Code = utcp.CodeGuardReviewTimeout
		ue.Message = fmt.Sprintf("call refused: review %s was not decided in time (guard %q: %s); the call did not run", t.ID, v.Guard, v.Reason)
		return ue
	case StatusPending:
		if t.NoWait || t.Approved != nil {
			return &ParkedError{ID: t.ID, Expires: t.Expires, err: ue}
		}
		ue.Message = fmt.Sprintf("call awaits review %s (guard %q): no decision arrived while the request waited; "+
			"GET /v1/reviews/%s reports the decision and, if it is approved, the daemon runs the call and keeps the result there",
			t.ID, v.Guard, t.ID)
	}
	return ue
}

// ParkedError is the error of a call parked for review: nothing ran yet;
// once the review is approved the daemon dispatches the call and keeps
// its outcome with the review. Its code is review_pending.
type ParkedError struct {
	// ID is the review to poll.
	ID string
	// Expires is when the review expires if nobody decides it.
	Expires time.Time
	err     *utcp.Error
}

// Error describes the parked call.
func (e *ParkedError) Error() string {
	return fmt.Sprintf("call parked for review %s: it runs once approved", e.ID)
}

// Unwrap returns the review_pending *utcp.Error, with details review_id.
func (e *ParkedError) Unwrap() error {
	if e.err == nil {
		return utcp.NewError(utcp.CodeReviewPending, "%s", e.Error()).WithDetail("review_id", e.ID)
	}
	return e.err
}
