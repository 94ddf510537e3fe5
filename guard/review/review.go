// Package review is human review of tool calls: the guard.Approver a
// guard.Chain hands its review verdicts to (Queue), the persisted review
// records (Review) and the Store they live in.
//
// # Life of a review
//
// A guard answers review; the chain asks the Queue; the Queue stores a
// Review in status pending and either waits for a person's decision (the
// default: the caller's request waits) or parks the call and returns at
// once (the caller asked not to wait, see Ticket.NoWait). An operator
// approves or denies it through the admin API (Queue.Decide).
//
//	pending ──approve──► approved ──claim──► dispatching ──► done
//	   │                    ▲                   │   │
//	   │                    └──────release──────┘   └──(restart)──► interrupted
//	   ├──deny──► denied
//	   └──review_timeout──► expired
//
// Every transition is a compare-and-swap on the status in the Store
// (Store.Update), so it happens at most once however many requests race:
// one approval wins, the others see the review already approved. The
// claim approved → dispatching is the right to dispatch the call, and
// only its winner dispatches:
//
//   - a caller still waiting for the decision claims it and dispatches in
//     its own request (the chain continues with the next guard); should
//     the caller go away before the dispatch, it hands the claim back
//     (Queue.Release: dispatching → approved);
//   - otherwise (the caller asked not to wait, went away, or the daemon
//     restarted) the Queue's dispatcher claims it and dispatches it
//     itself, and keeps the outcome and result with the review, where the
//     caller polls for them.
//
// A review found in status dispatching when the Queue starts was claimed
// by a process that stopped before recording the outcome: it may or may
// not have run, so it is marked interrupted and never dispatched again
// (at most once). Pending and approved reviews survive a restart: pending
// ones can still be decided, approved ones are dispatched by the daemon.
// A pending review past its expiry becomes expired and never runs.
//
// Several replicas may share one Store (store/postgres): each names
// itself in Options.Replica, a review is decided through any replica and
// its call runs on the replica where it was made, and only claims older
// than their dispatch deadline are marked interrupted; see Options.Replica.
//
// The package imports only guard and utcp, as a guard does.
package review

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

// Status is the state of a Review.
type Status string

// The statuses. See the package documentation for the transitions.
const (
	// StatusPending waits for a decision.
	StatusPending Status = "pending"
	// StatusApproved was approved and waits to be claimed for dispatch.
	StatusApproved Status = "approved"
	// StatusDenied was denied; the call never runs.
	StatusDenied Status = "denied"
	// StatusExpired was not decided in time; the call never runs.
	StatusExpired Status = "expired"
	// StatusDispatching was claimed for dispatch by a waiting caller or
	// the daemon; its outcome is not recorded yet.
	StatusDispatching Status = "dispatching"
	// StatusDone has its outcome recorded (Outcome, Result, Dispatched).
	StatusDone Status = "done"
	// StatusInterrupted was claimed by a process that stopped before
	// recording the outcome; it is never dispatched again.
	StatusInterrupted Status = "interrupted"
)

// Final reports whether s is a status no transition leaves.
func (s Status) Final() bool {
	switch s {
	case StatusDenied, StatusExpired, StatusDone, StatusInterrupted:
		return true
	}
	return false
}

// Approved reports whether a review in status s was approved (whether or
// not it ran since).
func (s Status) Approved() bool {
	switch s {
	case StatusApproved, StatusDispatching, StatusDone, StatusInterrupted:
		return true
	}
	return false
}

// Review is one call parked for a decision, and what became of it. The
// JSON encoding is the persisted form.
type Review struct {
	// ID identifies the review ("rv_" and 16 lower-case base32 letters).
	ID string `json:"id"`
	// Tool is the tool name as the caller requested it; Qualified the
	// resolved name, "" when it did not resolve.
	Tool      string `json:"tool"`
	Qualified string `json:"qualified,omitempty"`
	// Kind is what the call does, as guard.Call.Kind: "" (or
	// guard.ActionTool) a tool call, guard.ActionResource a resource
	// read (Tool the URI as requested), guard.ActionPrompt a prompt get
	// (Tool the prompt's name as requested). It decides how an approved
	// review is dispatched, so it is persisted with the review.
	Kind string `json:"kind,omitempty"`
	// Arguments are the call's arguments as given (a JSON object),
	// needed to dispatch the call later. They may hold secrets: show
	// them only through utcp.Redact.
	Arguments json.RawMessage `json:"arguments"`
	// Principal names the caller who made the call, "" if anonymous;
	// Front is where it came in: "rest", "mcp", "cli".
	Principal string `json:"principal,omitempty"`
	Front     string `json:"front,omitempty"`
	// Guard names the guard that asked for the review; Reasons say why
	// (its reason first).
	Guard   string   `json:"guard"`
	Reasons []string `json:"reasons"`
	// Approvals name the guards whose reviews of the same call were
	// approved before this one (a follow-up review, see Prior): they are
	// not asked again when the call is dispatched.
	Approvals []string `json:"approvals,omitempty"`
	// Prior is the review this one follows up, "" if none: dispatching
	// an approved review, another guard asked for a review too.
	Prior string `json:"prior,omitempty"`
	// CallTimeout is the dispatch deadline the caller asked for; 0 means
	// the Queue's default.
	CallTimeout time.Duration `json:"call_timeout,omitempty"`

	// Status is where the review is in its life.
	Status Status `json:"status"`
	// Created is when the review was requested; Expires when it expires
	// if still pending.
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	// Decided is when it was approved or denied, by whom, with the
	// decider's note.
	Decided   time.Time `json:"decided,omitzero"`
	DecidedBy string    `json:"decided_by,omitempty"`
	Note      string    `json:"note,omitempty"`
	// Dispatcher says who claimed the dispatch: "caller" or "daemon".
	Dispatcher string `json:"dispatcher,omitempty"`
	// Replica names the replica where the call was made (and its caller
	// waits), "" when the store is not shared (Options.Replica).
	// ClaimedBy names the replica that claimed the dispatch, Claimed
	// when; a claim far older than the dispatch deadline is one whose
	// replica stopped (see Options.TakeoverAfter).
	Replica   string    `json:"replica,omitempty"`
	ClaimedBy string    `json:"claimed_by,omitempty"`
	Claimed   time.Time `json:"claimed,omitzero"`
	// Finished is when the review reached a final status.
	Finished time.Time `json:"finished,omitzero"`

	// Dispatched reports that the call reached its tool's transport.
	Dispatched bool `json:"dispatched,omitempty"`
	// Outcome is "" when the call succeeded, else the error code of its
	// outcome (tool_error when the tool reported a failure).
	Outcome utcp.Code `json:"outcome,omitempty"`
	// Message explains a failed outcome.
	Message string `json:"message,omitempty"`
	// Result is the call's result value, or the tool's error value for
	// tool_error; nil when there is none or it was over MaxResultBytes.
	Result json.RawMessage `json:"result,omitempty"`
	// Next is the follow-up review the dispatch parked (Outcome
	// review_pending), "" if none.
	Next string `json:"next,omitempty"`
}

// Clone returns a deep copy of r (nil for nil).
func (r *Review) Clone() *Review {
	if r == nil {
		return nil
	}
	c := *r
	c.Arguments = slices.Clone(r.Arguments)
	c.Reasons = slices.Clone(r.Reasons)
	c.Approvals = slices.Clone(r.Approvals)
	c.Result = slices.Clone(r.Result)
	return &c
}

// covers reports whether approving r answers a review asked by guard.
func (r *Review) covers(guard string) bool {
	return r.Guard == guard || slices.Contains(r.Approvals, guard)
}

// MaxResultBytes caps the encoded result kept with a review; a larger
// result is not kept (Message says so).
const MaxResultBytes = 1 << 20

// Store persists reviews. Implementations are safe for concurrent use,
// keep copies (a Store never aliases what it is given or returns), and
// pass the suite in guard/review/reviewtest.
type Store interface {
	// Put creates r. The record is durable when Put returns nil. An
	// empty ID or an invalid record is an invalid_request *utcp.Error;
	// an ID already stored is an error wrapping ErrExists.
	Put(ctx context.Context, r *Review) error
	// Get returns the review called id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (*Review, error)
	// List returns the reviews whose status is one of statuses (every
	// review when none is given), oldest first (by Created, then ID).
	List(ctx context.Context, statuses ...Status) ([]*Review, error)
	// Update replaces the stored review r.ID with r if, and only if, its
	// stored status is from: a compare-and-swap, atomic with respect to
	// every other Update. It returns an error wrapping ErrConflict when
	// the stored status is not from, and one wrapping ErrNotFound when
	// there is no such review.
	Update(ctx context.Context, r *Review, from Status) error
	// Prune deletes the reviews in a final status that finished before
	// before, and returns how many.
	Prune(ctx context.Context, before time.Time) (int, error)
}

// Watcher is implemented by a Store that several processes share
// (replicas on one database). Watch reports the IDs of the reviews other
// processes wrote, "" when any review may have changed (notifications were
// lost); the channel is closed when ctx ends or the Store is closed. A
// Queue over a Watcher follows it from Start, so that a caller waiting in
// this process learns at once of a decision taken through another.
type Watcher interface {
	Watch(ctx context.Context) <-chan string
}

// Errors a Store returns, wrapped.
var (
	// ErrNotFound: no review has that ID. It is a not_found *utcp.Error.
	ErrNotFound error = &utcp.Error{Code: utcp.CodeNotFound, Message: "review not found"}
	// ErrConflict: Update found another status than the expected one.
	ErrConflict = errors.New("review: status changed concurrently")
	// ErrExists: Put found a review with the same ID.
	ErrExists = errors.New("review: a review with this ID exists")
)

// NotFound returns the error a Store reports for a missing review id: a
// not_found *utcp.Error wrapping ErrNotFound.
func NotFound(id string) error {
	return &utcp.Error{Code: utcp.CodeNotFound, Message: "review " + id + " not found",
		Details: map[string]any{"review_id": id}, Err: ErrNotFound}
}

// Check validates r as Store.Put and Store.Update require: an ID, a tool
// name, a known kind ("", tool, resource or prompt), a known status, a
// creation time and arguments that are a JSON object (or empty).
func Check(r *Review) error {
	switch {
	case r == nil:
		return utcp.NewError(utcp.CodeInvalidRequest, "review: nil review")
	case r.ID == "":
		return utcp.NewError(utcp.CodeInvalidRequest, "review: no id")
	case r.Tool == "":
		return utcp.NewError(utcp.CodeInvalidRequest, "review %s: no tool", r.ID)
	case r.Created.IsZero():
		return utcp.NewError(utcp.CodeInvalidRequest, "review %s: no creation time", r.ID)
	case len(r.Arguments) > 0 && !json.Valid(r.Arguments):
		return utcp.NewError(utcp.CodeInvalidRequest, "review %s: arguments are not valid JSON", r.ID)
	}
	switch r.Kind {
	case "", guard.ActionTool, guard.ActionResource, guard.ActionPrompt:
	default:
		return utcp.NewError(utcp.CodeInvalidRequest, "review %s: unknown kind %q", r.ID, r.Kind)
	}
	switch r.Status {
	case StatusPending, StatusApproved, StatusDenied, StatusExpired, StatusDispatching, StatusDone, StatusInterrupted:
		return nil
	}
	return utcp.NewError(utcp.CodeInvalidRequest, "review %s: unknown status %q", r.ID, r.Status)
}

// Action is the review's kind as shown to people: Kind, or
// guard.ActionTool when Kind is "" (reviews stored before kinds existed
// are tool calls).
func (r *Review) Action() string {
	if r.Kind == "" {
		return guard.ActionTool
	}
	return r.Kind
}
