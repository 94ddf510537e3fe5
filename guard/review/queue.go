package review

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of Options.
const (
	// DefaultTimeout is how long a review stays pending (review_timeout).
	DefaultTimeout = 10 * time.Minute
	// DefaultDispatchTimeout bounds a daemon dispatch whose review has no
	// CallTimeout.
	DefaultDispatchTimeout = 30 * time.Second
	// DefaultRetention is how long finished reviews are kept.
	DefaultRetention = 720 * time.Hour
	// DefaultSweepInterval is how often the dispatcher looks for expired
	// and unclaimed approved reviews (it also wakes on every approval).
	DefaultSweepInterval = time.Second
	// DefaultConcurrency is how many approved calls the daemon
	// dispatches at once.
	DefaultConcurrency = 4
	// DefaultTakeoverAfter is how long, with a shared store, an approved
	// review stays with the replica where its call was made before
	// another replica dispatches it.
	DefaultTakeoverAfter = time.Minute
)

// Options configure a Queue. The zero value uses the defaults.
type Options struct {
	// Timeout is how long a review stays pending before it expires, and
	// so how long a waiting caller waits (review_timeout).
	Timeout time.Duration
	// DispatchTimeout bounds a daemon dispatch of a review without a
	// CallTimeout.
	DispatchTimeout time.Duration
	// Retention is how long reviews in a final status are kept; negative
	// keeps them forever.
	Retention time.Duration
	// SweepInterval is how often the dispatcher expires overdue reviews
	// and claims approved ones nobody waits for.
	SweepInterval time.Duration
	// Concurrency is how many calls the dispatcher runs at once.
	Concurrency int
	// Logger receives the queue's events (never arguments); nil discards.
	Logger *slog.Logger

	// Replica names this process among the replicas sharing the store
	// (several utcpd on one database); "" when the store is not shared.
	// With a name, the Queue stamps it on the reviews it creates and the
	// claims it makes, and:
	//
	//   - an approved review belongs to the replica where its call was
	//     made: that replica's waiting caller (or, once the caller went
	//     away, its dispatcher) runs it. Another replica dispatches it only
	//     when it stayed approved for TakeoverAfter since its decision
	//     (its replica stopped);
	//   - a waiting caller learns of a decision taken through another
	//     replica from the store's Watcher, when it is one, and by
	//     reading its review every SweepInterval otherwise;
	//   - a review left dispatching is marked interrupted only when its
	//     claim is older than its dispatch deadline plus TakeoverAfter
	//     (another replica may be running it), not at every start.
	Replica string
	// TakeoverAfter: see Replica. Default DefaultTakeoverAfter.
	TakeoverAfter time.Duration
}

// Dispatcher runs an approved call for the daemon: the gateway's
// DispatchApproved. It reports the result, whether the call reached its
// transport, and the error.
type Dispatcher func(ctx context.Context, r *Review) (res *utcp.Result, dispatched bool, err error)

// Decision is an operator's answer to a review.
type Decision struct {
	// Approve approves the call; false denies it.
	Approve bool
	// By names who decided (kept with the review).
	By string
	// Note is the decider's comment, shown to the caller.
	Note string
}

// Queue is the guard.Approver of the daemon: it persists a Review for
// every review verdict, lets operators decide them, wakes the callers
// waiting for them, and dispatches the approved calls nobody waits for.
// Create it with NewQueue; call Start once the gateway serves (so that
// approved calls find their tools) and Close at shutdown. A Queue is safe
// for concurrent use.
type Queue struct {
	store Store
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	waiters map[string]chan struct{}

	kick      chan struct{}
	startOnce sync.Once
	closeOnce sync.Once
	loopStop  context.CancelFunc // stops claiming
	loopDone  chan struct{}
	watchDone chan struct{}   // closed when follow returns; nil without a Watcher
	runCtx    context.Context // dispatches in flight; cancelled by a hard stop
	runCancel context.CancelFunc
	runs      sync.WaitGroup
	sem       chan struct{}
}

var _ guard.Approver = (*Queue)(nil)

// NewQueue returns a Queue over store.
func NewQueue(store Store, opts Options) *Queue {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.DispatchTimeout <= 0 {
		opts.DispatchTimeout = DefaultDispatchTimeout
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.TakeoverAfter <= 0 {
		opts.TakeoverAfter = DefaultTakeoverAfter
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Queue{store: store, opts: opts, log: log, waiters: map[string]chan struct{}{},
		kick: make(chan struct{}, 1), sem: make(chan struct{}, opts.Concurrency)}
	q.runCtx, q.runCancel = context.WithCancel(context.Background())
	return q
}

// Timeout returns the review timeout.
func (q *Queue) Timeout() time.Duration { return q.opts.Timeout }

// Store returns the queue's store.
func (q *Queue) Store() Store { return q.store }

func newID() string { return "rv_" + strings.ToLower(rand.Text()[:16]) }

// Approve implements guard.Approver. It stores a pending Review of call
// and, unless the context's Ticket says not to wait, waits until it is
// decided, expires, or ctx ends:
//
//   - approved: it claims the review for dispatch in this call (the
//     Ticket's Claimed; the caller records the outcome with Complete) and
//     answers allow;
//   - denied: it answers deny, with the decider's note;
//   - expired: it returns guard.ErrReviewExpired;
//   - ctx ended: it returns ctx's error and leaves the review pending
//     (once approved, the daemon dispatches it).
//
// With Ticket.NoWait, or while the daemon dispatches an approved review
// (Ticket.Approved) and another guard asks for review, it parks the call
// and returns guard.ErrParked at once. A review asked by the guard an
// approved Ticket.Approved covers is answered allow without a new review.
func (q *Queue) Approve(ctx context.Context, call *guard.Call, v guard.Verdict) (guard.Verdict, error) {
	t := TicketFrom(ctx)
	if t != nil && t.Approved != nil && t.Approved.covers(v.Guard) {
		return guard.Verdict{Decision: guard.Allow, Guard: v.Guard, Reason: approvedReason(t.Approved)}, nil
	}
	r, err := q.newReview(call, v, t)
	if err != nil {
		return guard.Verdict{}, err
	}
	park := t != nil && (t.NoWait || t.Approved != nil)
	var wake chan struct{}
	if !park {
		// Registered before the review exists, so that no decision can
		// miss it.
		wake = make(chan struct{}, 1)
		q.mu.Lock()
		q.waiters[r.ID] = wake
		q.mu.Unlock()
		defer q.unwait(r.ID)
	}
	if err := q.store.Put(ctx, r); err != nil {
		return guard.Verdict{}, fmt.Errorf("storing the review: %w", err)
	}
	if t != nil {
		t.ID, t.State, t.Expires = r.ID, StatusPending, r.Expires
	}
	q.log.Info("call awaits review", "review_id", r.ID, "tool", r.Tool, "kind", r.Kind, "guard", r.Guard, "principal", r.Principal,
		"front", r.Front, "parked", park, "prior", r.Prior)
	if park {
		return guard.Verdict{}, fmt.Errorf("call parked for review %s: %w", r.ID, guard.ErrParked)
	}
	if tracing.On() {
		return q.tracedWait(ctx, r, wake, t)
	}
	return q.wait(ctx, r, wake, t)
}

// tracedWait is wait inside a "review" span.
func (q *Queue) tracedWait(ctx context.Context, r *Review, wake chan struct{}, t *Ticket) (guard.Verdict, error) {
	ctx, span := tracing.Start(ctx, "review", trace.SpanKindInternal,
		tracing.ReviewID.String(r.ID), tracing.Guard.String(r.Guard))
	v, err := q.wait(ctx, r, wake, t)
	if err == nil && span != nil {
		span.SetAttributes(tracing.Decision.String(string(v.Decision)))
	}
	tracing.End(span, err)
	return v, err
}

// wait waits for review r's decision on behalf of its caller.
func (q *Queue) wait(ctx context.Context, r *Review, wake chan struct{}, t *Ticket) (guard.Verdict, error) {
	timer := time.NewTimer(time.Until(r.Expires))
	defer timer.Stop()
	var poll <-chan time.Time // a shared store: read the review now and then
	if q.opts.Replica != "" {
		tick := time.NewTicker(q.opts.SweepInterval)
		defer tick.Stop()
		poll = tick.C
	}
	for {
		select {
		case <-wake:
		case <-poll:
		case <-timer.C:
		case <-ctx.Done():
			// The review stays pending; if it was approved meanwhile,
			// the dispatcher takes over now that nobody waits.
			q.unwait(r.ID)
			q.wakeDispatcher()
			return guard.Verdict{}, ctx.Err()
		}
		sctx := context.WithoutCancel(ctx)
		cur, err := q.store.Get(sctx, r.ID)
		if err != nil {
			return guard.Verdict{}, fmt.Errorf("reading review %s: %w", r.ID, err)
		}
		switch cur.Status {
		case StatusPending:
			if d := time.Until(cur.Expires); d > 0 {
				timer.Reset(d)
				continue
			}
			if err := q.expire(sctx, cur); err != nil && !errors.Is(err, ErrConflict) {
				return guard.Verdict{}, err
			}
			select { // read again at once
			case wake <- struct{}{}:
			default:
			}
		case StatusApproved:
			claimed := cur.Clone()
			claimed.Status, claimed.Dispatcher = StatusDispatching, "caller"
			claimed.ClaimedBy, claimed.Claimed = q.opts.Replica, time.Now()
			if t == nil {
				// No ticket: nobody can record the outcome later.
				claimed.Status, claimed.Finished, claimed.Message = StatusDone, time.Now(), "dispatched by its caller; outcome not recorded"
			}
			if err := q.store.Update(sctx, claimed, StatusApproved); err != nil {
				if errors.Is(err, ErrConflict) {
					select {
					case wake <- struct{}{}:
					default:
					}
					continue
				}
				return guard.Verdict{}, fmt.Errorf("claiming review %s: %w", r.ID, err)
			}
			if t != nil {
				t.State, t.Claimed = StatusDispatching, true
			}
			return guard.Verdict{Decision: guard.Allow, Guard: r.Guard, Reason: approvedReason(cur)}, nil
		case StatusDenied:
			if t != nil {
				t.State = StatusDenied
			}
			return guard.Verdict{Decision: guard.Deny, Guard: r.Guard, Reason: deniedReason(cur)}, nil
		case StatusExpired:
			if t != nil {
				t.State = StatusExpired
			}
			return guard.Verdict{}, fmt.Errorf("review %s: %w after %v", r.ID, guard.ErrReviewExpired, q.opts.Timeout)
		default:
			// Claimed by the daemon (it should not while a caller
			// waits): the caller polls for the outcome.
			if t != nil {
				t.State = StatusPending
			}
			return guard.Verdict{}, fmt.Errorf("review %s is %s by the daemon: %w", r.ID, cur.Status, guard.ErrParked)
		}
	}
}

func approvedReason(r *Review) string {
	s := "approved on review " + r.ID
	if r.DecidedBy != "" {
		s += " by " + r.DecidedBy
	}
	if r.Note != "" {
		s += ": " + r.Note
	}
	return s
}

func deniedReason(r *Review) string {
	s := "denied on review " + r.ID
	if r.DecidedBy != "" {
		s += " by " + r.DecidedBy
	}
	if r.Note != "" {
		s += ": " + r.Note
	}
	return s
}

func (q *Queue) newReview(call *guard.Call, v guard.Verdict, t *Ticket) (*Review, error) {
	if call == nil {
		return nil, errors.New("no call to review")
	}
	args := json.RawMessage("{}")
	if len(call.Arguments) > 0 {
		b, err := json.Marshal(call.Arguments)
		if err != nil {
			return nil, fmt.Errorf("encoding the arguments for review: %w", err)
		}
		args = b
	}
	now := time.Now()
	r := &Review{
		ID: newID(), Tool: call.Tool, Qualified: call.Qualified, Kind: call.Kind, Arguments: args, Principal: call.Principal,
		Guard: v.Guard, Reasons: []string{v.Reason}, Status: StatusPending, Created: now, Expires: now.Add(q.opts.Timeout),
		Replica: q.opts.Replica,
	}
	if t != nil {
		r.Front, r.CallTimeout = t.Front, t.CallTimeout
		if a := t.Approved; a != nil {
			r.Prior = a.ID
			r.Approvals = append(append(r.Approvals, a.Approvals...), a.Guard)
			r.Reasons = append(r.Reasons, "follows up approved review "+a.ID+" (guard "+a.Guard+")")
			if r.Front == "" {
				r.Front = a.Front
			}
			if r.CallTimeout == 0 {
				r.CallTimeout = a.CallTimeout
			}
		}
	}
	return r, nil
}

// expire moves a pending review past its expiry to expired.
func (q *Queue) expire(ctx context.Context, cur *Review) error {
	next := cur.Clone()
	next.Status, next.Finished = StatusExpired, time.Now()
	if err := q.store.Update(ctx, next, StatusPending); err != nil {
		return err
	}
	q.log.Info("review expired undecided; the call does not run", "review_id", cur.ID, "tool", cur.Tool)
	return nil
}

// Decide approves or denies the pending review id and wakes its waiting
// caller or, for an approval nobody waits for, the dispatcher. Deciding
// again the way it was decided returns the review unchanged (so racing
// approvals all succeed, and exactly one of them approved it); the
// opposite decision, or deciding an expired review, is an invalid_request
// error naming the review's status. An unknown id is not_found.
func (q *Queue) Decide(ctx context.Context, id string, d Decision) (*Review, error) {
	for {
		cur, err := q.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		switch {
		case cur.Status == StatusPending && !time.Now().Before(cur.Expires):
			if err := q.expire(ctx, cur); err != nil && !errors.Is(err, ErrConflict) {
				return nil, err
			}
			continue
		case cur.Status == StatusPending:
			next := cur.Clone()
			next.Status, next.Decided, next.DecidedBy, next.Note = StatusDenied, time.Now(), d.By, d.Note
			if d.Approve {
				next.Status = StatusApproved
			} else {
				next.Finished = next.Decided
			}
			if err := q.store.Update(ctx, next, StatusPending); err != nil {
				if errors.Is(err, ErrConflict) {
					continue
				}
				return nil, err
			}
			q.log.Info("review decided", "review_id", id, "tool", cur.Tool, "status", next.Status, "by", d.By)
			q.notify(id, d.Approve)
			return next, nil
		case d.Approve && cur.Status.Approved(), !d.Approve && cur.Status == StatusDenied:
			return cur, nil
		default:
			verb := "deny"
			if d.Approve {
				verb = "approve"
			}
			return nil, utcp.NewError(utcp.CodeInvalidRequest, "cannot %s review %s: it is %s", verb, id, cur.Status).
				WithDetail("review_id", id).WithDetail("status", string(cur.Status))
		}
	}
}

// notify wakes the caller waiting for review id, or the dispatcher when
// nobody waits for an approved review.
func (q *Queue) notify(id string, approved bool) {
	q.mu.Lock()
	w := q.waiters[id]
	q.mu.Unlock()
	if w != nil {
		select {
		case w <- struct{}{}:
		default:
		}
		return
	}
	if approved {
		q.wakeDispatcher()
	}
}

func (q *Queue) wakeDispatcher() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *Queue) unwait(id string) {
	q.mu.Lock()
	delete(q.waiters, id)
	q.mu.Unlock()
}

func (q *Queue) waited(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.waiters[id]
	return ok
}

// Get returns the review called id (an error wrapping ErrNotFound if
// none). An overdue pending review is reported expired.
func (q *Queue) Get(ctx context.Context, id string) (*Review, error) {
	r, err := q.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.Status == StatusPending && !time.Now().Before(r.Expires) {
		if err := q.expire(ctx, r); err == nil || errors.Is(err, ErrConflict) {
			return q.store.Get(ctx, id)
		}
	}
	return r, nil
}

// List returns the reviews in the given statuses (all when none), oldest
// first. Overdue pending reviews are left out of a list of pending ones.
func (q *Queue) List(ctx context.Context, statuses ...Status) ([]*Review, error) {
	rs, err := q.store.List(ctx, statuses...)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := rs[:0]
	for _, r := range rs {
		if r.Status == StatusPending && !now.Before(r.Expires) && len(statuses) > 0 {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// Complete records the outcome of review id, which the caller claimed
// for dispatch (Ticket.Claimed): res and err are what the call returned,
// dispatched whether it reached its transport. It runs even after ctx
// ended (bounded by 10 s).
func (q *Queue) Complete(ctx context.Context, id string, res *utcp.Result, dispatched bool, callErr error) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for {
		cur, err := q.store.Get(sctx, id)
		if err != nil {
			return err
		}
		if cur.Status != StatusDispatching {
			return fmt.Errorf("review %s is %s, not dispatching: %w", id, cur.Status, ErrConflict)
		}
		next := cur.Clone()
		next.Status, next.Finished, next.Dispatched = StatusDone, time.Now(), dispatched
		record(next, res, callErr)
		err = q.store.Update(sctx, next, StatusDispatching)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err == nil {
			q.log.Info("reviewed call finished", "review_id", id, "tool", cur.Tool, "dispatcher", cur.Dispatcher,
				"dispatched", dispatched, "outcome", outcomeLabel(next.Outcome))
		}
		return err
	}
}

// Release hands review id, which the caller claimed for dispatch but
// could not dispatch because its own context ended first (the caller went
// away), back to approved, and wakes the dispatcher to run it. It runs
// even after ctx ended (bounded by 10 s).
func (q *Queue) Release(ctx context.Context, id string) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cur, err := q.store.Get(sctx, id)
	if err != nil {
		return err
	}
	if cur.Status != StatusDispatching {
		return fmt.Errorf("review %s is %s, not dispatching: %w", id, cur.Status, ErrConflict)
	}
	next := cur.Clone()
	next.Status, next.Dispatcher, next.ClaimedBy, next.Claimed = StatusApproved, "", "", time.Time{}
	if err := q.store.Update(sctx, next, StatusDispatching); err != nil {
		return err
	}
	q.log.Info("the caller of an approved call went away before its dispatch; the daemon runs it", "review_id", id, "tool", cur.Tool)
	q.wakeDispatcher()
	return nil
}

func outcomeLabel(c utcp.Code) string {
	if c == "" {
		return "ok"
	}
	return string(c)
}

// record stores a call's outcome in r.
func record(r *Review, res *utcp.Result, callErr error) {
	var value any
	switch {
	case callErr != nil:
		r.Outcome, r.Message = utcp.CodeOf(callErr), callErr.Error()
		var te *utcp.ToolError
		if r.Outcome == utcp.CodeToolError && errors.As(callErr, &te) {
			value = te.Value
		}
		var pe *ParkedError
		if errors.As(callErr, &pe) {
			r.Next = pe.ID
		}
		if r.Outcome == utcp.CodeInternal {
			r.Message = "internal error; the daemon log has the details"
		}
	case res != nil:
		value = res.Value
	}
	if value == nil {
		return
	}
	b, err := json.Marshal(value)
	switch {
	case err != nil:
		r.Message = strings.TrimSpace(r.Message + " (result not kept: " + err.Error() + ")")
	case len(b) > MaxResultBytes:
		r.Message = strings.TrimSpace(r.Message + fmt.Sprintf(" (result of %d bytes not kept: over %d)", len(b), MaxResultBytes))
	default:
		r.Result = b
	}
}

// Start starts the dispatcher: it first marks interrupted the reviews a
// previous process claimed but did not finish, then, every
// SweepInterval and whenever a review is approved with nobody waiting,
// expires overdue pending reviews, claims each approved review nobody
// waits for and runs it through dispatch (Concurrency at a time), and
// prunes finished reviews older than Retention. Only the first call
// starts anything.
func (q *Queue) Start(dispatch Dispatcher) {
	q.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		q.loopStop = cancel
		q.loopDone = make(chan struct{})
		if w, ok := q.store.(Watcher); ok {
			q.watchDone = make(chan struct{})
			go q.follow(ctx, w)
		}
		go q.loop(ctx, dispatch)
	})
}

// follow wakes the callers and the dispatcher whose reviews another
// process changed, until ctx ends.
func (q *Queue) follow(ctx context.Context, w Watcher) {
	defer close(q.watchDone)
	for id := range w.Watch(ctx) {
		q.Changed(id)
	}
}

// Changed tells the Queue that another process sharing its store wrote
// review id ("" when any review may have changed): the caller waiting for
// it reads it again, and the dispatcher looks for approved reviews. A
// Queue over a Watcher calls it itself from Start.
func (q *Queue) Changed(id string) {
	if id == "" {
		q.mu.Lock()
		for _, w := range q.waiters {
			select {
			case w <- struct{}{}:
			default:
			}
		}
		q.mu.Unlock()
		q.wakeDispatcher()
		return
	}
	q.notify(id, true)
}

func (q *Queue) loop(ctx context.Context, dispatch Dispatcher) {
	defer close(q.loopDone)
	q.recoverInterrupted(ctx)
	tick := time.NewTicker(q.opts.SweepInterval)
	defer tick.Stop()
	var pruned time.Time
	for {
		q.sweep(ctx, dispatch)
		if q.opts.Retention > 0 && time.Since(pruned) > min(time.Hour, q.opts.Retention/4+time.Second) {
			pruned = time.Now()
			if n, err := q.store.Prune(ctx, pruned.Add(-q.opts.Retention)); err != nil {
				q.log.Warn("pruning finished reviews", "err", err)
			} else if n > 0 {
				q.log.Info("finished reviews pruned", "count", n, "retention", q.opts.Retention)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-q.kick:
		}
	}
}

// recoverInterrupted marks interrupted the reviews left dispatching by a
// previous process: they may have run, so they never run again.
func (q *Queue) recoverInterrupted(ctx context.Context) {
	rs, err := q.store.List(ctx, StatusDispatching)
	if err != nil {
		q.log.Error("listing reviews being dispatched at start", "err", err)
		return
	}
	now := time.Now()
	for _, r := range rs {
		if q.opts.Replica != "" && !q.abandoned(r, now) {
			continue // another replica may be running it
		}
		next := r.Clone()
		next.Status, next.Finished = StatusInterrupted, time.Now()
		next.Message = "the daemon stopped while the call was being dispatched; it may or may not have run, and is not run again"
		if err := q.store.Update(ctx, next, StatusDispatching); err != nil {
			q.log.Error("marking an interrupted review", "review_id", r.ID, "err", err)
			continue
		}
		q.log.Warn("review interrupted by a restart during its dispatch; not run again", "review_id", r.ID, "tool", r.Tool)
	}
}

// abandoned reports whether the dispatching review r was claimed so long
// ago that its replica must have stopped: its claim is older than its
// dispatch deadline plus TakeoverAfter.
func (q *Queue) abandoned(r *Review, now time.Time) bool {
	if r.Claimed.IsZero() {
		return true
	}
	deadline := max(r.CallTimeout, q.opts.DispatchTimeout)
	return now.Sub(r.Claimed) > deadline+q.opts.TakeoverAfter
}

// othersApproved reports whether the approved review r belongs, for now,
// to another replica (see Options.Replica).
func (q *Queue) othersApproved(r *Review, now time.Time) bool {
	if q.opts.Replica == "" || r.Replica == "" || r.Replica == q.opts.Replica {
		return false
	}
	since := r.Decided
	if since.IsZero() {
		since = r.Created
	}
	return now.Sub(since) < q.opts.TakeoverAfter
}

// sweep expires overdue pending reviews and dispatches the approved ones
// nobody waits for.
func (q *Queue) sweep(ctx context.Context, dispatch Dispatcher) {
	statuses := []Status{StatusPending, StatusApproved}
	if q.opts.Replica != "" {
		statuses = append(statuses, StatusDispatching)
	}
	rs, err := q.store.List(ctx, statuses...)
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("listing reviews", "err", err)
		}
		return
	}
	now := time.Now()
	for _, r := range rs {
		if ctx.Err() != nil {
			return
		}
		if q.waited(r.ID) {
			continue // its caller handles it
		}
		switch r.Status {
		case StatusPending:
			if !now.Before(r.Expires) {
				if err := q.expire(ctx, r); err != nil && !errors.Is(err, ErrConflict) {
					q.log.Warn("expiring a review", "review_id", r.ID, "err", err)
				}
			}
		case StatusDispatching: // a shared store only
			if q.abandoned(r, now) {
				next := r.Clone()
				next.Status, next.Finished = StatusInterrupted, time.Now()
				next.Message = "the replica dispatching the call stopped; it may or may not have run, and is not run again"
				if err := q.store.Update(ctx, next, StatusDispatching); err == nil {
					q.log.Warn("review abandoned during its dispatch by another replica; not run again", "review_id", r.ID, "claimed_by", r.ClaimedBy)
				}
			}
		case StatusApproved:
			if q.othersApproved(r, now) {
				continue // its replica runs it
			}
			select {
			case q.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			claimed := r.Clone()
			claimed.Status, claimed.Dispatcher = StatusDispatching, "daemon"
			claimed.ClaimedBy, claimed.Claimed = q.opts.Replica, time.Now()
			if err := q.store.Update(ctx, claimed, StatusApproved); err != nil {
				<-q.sem
				if !errors.Is(err, ErrConflict) {
					q.log.Warn("claiming an approved review", "review_id", r.ID, "err", err)
				}
				continue
			}
			q.runs.Add(1)
			go func() {
				defer q.runs.Done()
				defer func() { <-q.sem }()
				q.run(claimed, dispatch)
			}()
		}
	}
}

// run dispatches the claimed review r and records its outcome.
func (q *Queue) run(r *Review, dispatch Dispatcher) {
	timeout := r.CallTimeout
	if timeout <= 0 {
		timeout = q.opts.DispatchTimeout
	}
	ctx, cancel := context.WithTimeout(q.runCtx, timeout)
	defer cancel()
	q.log.Info("dispatching an approved call", "review_id", r.ID, "tool", r.Tool, "kind", r.Kind)
	var (
		res        *utcp.Result
		dispatched bool
		err        error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("dispatching review %s panicked: %v", r.ID, p)
				q.log.Error("dispatch panicked", "review_id", r.ID, "panic", fmt.Sprint(p))
			}
		}()
		res, dispatched, err = dispatch(ctx, r)
	}()
	if err := q.Complete(context.Background(), r.ID, res, dispatched, err); err != nil {
		q.log.Error("recording the outcome of an approved call", "review_id", r.ID, "err", err)
	}
}

// Close stops the dispatcher: no review is claimed any more, and the
// calls it is running may finish until ctx ends, when they are cancelled
// (their outcome is recorded either way). Waiting callers are not
// affected. Idempotent.
func (q *Queue) Close(ctx context.Context) error {
	q.closeOnce.Do(func() {
		if q.loopStop != nil {
			q.loopStop()
			<-q.loopDone
			if q.watchDone != nil {
				<-q.watchDone
			}
		}
		done := make(chan struct{})
		go func() {
			q.runs.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			q.runCancel()
			<-done
		}
		q.runCancel()
	})
	return nil
}
