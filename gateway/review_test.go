package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// reviewEnv is a gateway over the demo backend with a guard chain whose
// approver is a review queue, and an audit log.
type reviewEnv struct {
	f     *fixture.Fixture
	base  string
	g     *gateway.Gateway
	q     *review.Queue
	audit *audit.MemStore
	w     *audit.Writer
}

type envConfig struct {
	guards  []guard.Named
	store   review.Store
	timeout time.Duration // review timeout (default 1 min)
	base    string        // an existing backend
	f       *fixture.Fixture
	noStart bool // do not start the dispatcher
	// scopes is the gateway's PrincipalScope.
	scopes func(string) *gateway.Scope
}

// reviewWhen is a guard that asks for review of the named tools and
// allows the others.
func reviewWhen(tools ...string) guard.Guard {
	return guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		for _, t := range tools {
			if c.Qualified == t {
				return guard.Verdict{Decision: guard.Review, Reason: "money moves: " + t}, nil
			}
		}
		return guard.Verdict{Decision: guard.Allow, Reason: "fine"}, nil
	})
}

func newReviewEnv(t *testing.T, cfg envConfig) *reviewEnv {
	t.Helper()
	e := &reviewEnv{f: cfg.f, base: cfg.base}
	if e.base == "" {
		e.f, e.base = serveFixture(t)
	}
	if cfg.store == nil {
		cfg.store = review.NewMemStore()
	}
	if cfg.timeout == 0 {
		cfg.timeout = time.Minute
	}
	if cfg.guards == nil {
		cfg.guards = []guard.Named{{Name: "0:review", Guard: reviewWhen("demo.add")}}
	}
	e.q = review.NewQueue(cfg.store, review.Options{Timeout: cfg.timeout, SweepInterval: 20 * time.Millisecond})
	chain := guard.NewChain(cfg.guards, guard.WithApprover(e.q), guard.WithReviewTimeout(cfg.timeout+time.Minute),
		guard.WithGuardTimeout(2*time.Second), guard.WithBypass("demo.count"))
	e.audit = audit.NewMemStore()
	e.w = audit.NewWriter(e.audit, audit.WriterOptions{})
	e.g = newGateway(t, gateway.Options{Guard: chain, Reviews: e.q, Audit: e.w, PrincipalScope: cfg.scopes})
	t.Cleanup(func() {
		_ = e.q.Close(context.Background())
		_ = e.w.Close(context.Background())
	})
	register(t, e.g, httpManual("demo", e.base+"/utcp"))
	if !cfg.noStart {
		e.q.Start(e.g.DispatchApproved)
	}
	return e
}

// pending waits until exactly n reviews are pending and returns them.
func (e *reviewEnv) pending(t *testing.T, n int) []*review.Review {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rs, err := e.q.List(t.Context(), review.StatusPending)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reviews pending, want %d", len(rs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitStatus waits until review id has status want and returns it.
func (e *reviewEnv) waitStatus(t *testing.T, id string, want review.Status) *review.Review {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := e.q.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("review %s is %s, want %s (%s)", id, r.Status, want, r.Message)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *reviewEnv) records(t *testing.T, q audit.Query) []audit.Record {
	t.Helper()
	if err := e.w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	recs, err := e.audit.Query(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

var addArgs = map[string]any{"a": 2, "b": 40}

type callResult struct {
	res *utcp.Result
	err error
}

// callAsync calls demo.add in the background.
func (e *reviewEnv) callAsync(ctx context.Context, opts gateway.CallOptions) <-chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		res, err := e.g.CallTool(ctx, "demo.add", addArgs, opts)
		ch <- callResult{res, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan callResult) callResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return")
	}
	return callResult{}
}

func sum(t *testing.T, res *utcp.Result) string {
	t.Helper()
	m, ok := res.Value.(map[string]any)
	if !ok {
		t.Fatalf("result %#v", res.Value)
	}
	return fmt.Sprint(m["sum"])
}

// TestRefusedVerdictsNeverDispatch runs every refusing verdict through a
// chain in front of the demo backend: none reaches it.
func TestRefusedVerdictsNeverDispatch(t *testing.T) {
	f, base := serveFixture(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	cases := []struct {
		name string
		g    guard.Guard
		code utcp.Code
		in   time.Duration // the answer comes within
	}{
		{"deny", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{Decision: guard.Deny, Reason: "no"}, nil
		}), utcp.CodeGuardDenied, time.Second},
		{"error_verdict", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{Decision: guard.Error, Reason: "backend down"}, nil
		}), utcp.CodeGuardError, time.Second},
		{"go_error", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{Decision: guard.Allow}, errors.New("unreachable")
		}), utcp.CodeGuardError, time.Second},
		{"invalid_decision", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{Decision: "ALLOW"}, nil
		}), utcp.CodeGuardError, time.Second},
		{"empty_decision", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			return guard.Verdict{}, nil
		}), utcp.CodeGuardError, time.Second},
		{"panic", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			panic("guard bug")
		}), utcp.CodeGuardError, time.Second},
		{"hang_ignoring_context", guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			<-hang // does not answer before the test ends, ignores its context
			return guard.Verdict{Decision: guard.Allow}, nil
		}), utcp.CodeGuardError, 2 * time.Second},
		{"review_without_approver", reviewWhen("demo.add"), utcp.CodeGuardDenied, time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chain := guard.NewChain([]guard.Named{{Name: "0:test", Guard: tc.g}}, guard.WithGuardTimeout(200*time.Millisecond))
			st := audit.NewMemStore()
			w := audit.NewWriter(st, audit.WriterOptions{})
			defer w.Close(context.Background())
			g := newGateway(t, gateway.Options{Guard: chain, Audit: w})
			register(t, g, httpManual("demo", base+"/utcp"))
			before := f.Calls()
			start := time.Now()
			_, err := g.CallTool(t.Context(), "demo.add", addArgs, gateway.CallOptions{Front: "rest"})
			if took := time.Since(start); took > tc.in {
				t.Errorf("the refusal took %v, want under %v", took, tc.in)
			}
			codeOf(t, err, tc.code)
			if n := f.Calls() - before; n != 0 {
				t.Errorf("%d calls reached the backend, want none", n)
			}
			_ = w.Flush(t.Context())
			recs, _ := st.Query(t.Context(), audit.Query{})
			if len(recs) != 1 || recs[0].Dispatched || recs[0].Outcome != string(tc.code) {
				t.Errorf("audit: %+v", recs)
			}
			// The gateway keeps serving: a bypassed call still runs.
			chain2 := guard.NewChain([]guard.Named{{Name: "0:test", Guard: tc.g}}, guard.WithGuardTimeout(200*time.Millisecond), guard.WithBypass("demo.echo"))
			g2 := newGateway(t, gateway.Options{Guard: chain2})
			register(t, g2, httpManual("demo", base+"/utcp"))
			if _, err := g2.CallTool(t.Context(), "demo.echo", map[string]any{"message": "hi"}, gateway.CallOptions{}); err != nil {
				t.Errorf("a bypassed call after the refusal: %v", err)
			}
		})
	}
}

// TestReviewApprovedDispatchesOnce: the caller waits, an operator
// approves, the call runs once in the caller's request and its outcome is
// kept with the review.
func TestReviewApprovedDispatchesOnce(t *testing.T) {
	e := newReviewEnv(t, envConfig{})
	ch := e.callAsync(t.Context(), gateway.CallOptions{Principal: "key:ops", Front: "rest"})
	rs := e.pending(t, 1)
	r := rs[0]
	if r.Tool != "demo.add" || r.Principal != "key:ops" || r.Front != "rest" || r.Guard != "0:review" ||
		!strings.Contains(r.Reasons[0], "money moves") || string(r.Arguments) != `{"a":2,"b":40}` {
		t.Errorf("review %+v", r)
	}
	if e.f.Calls() != 0 {
		t.Fatal("the call ran before the approval")
	}
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true, By: "alice", Note: "ok"}); err != nil {
		t.Fatal(err)
	}
	got := wait(t, ch)
	if got.err != nil {
		t.Fatalf("approved call: %v", got.err)
	}
	if s := sum(t, got.res); s != "42" {
		t.Errorf("sum %s", s)
	}
	if n := e.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
	done := e.waitStatus(t, r.ID, review.StatusDone)
	if done.Dispatcher != "caller" || !done.Dispatched || done.Outcome != "" || string(done.Result) != `{"sum":42}` ||
		done.DecidedBy != "alice" || done.Note != "ok" {
		t.Errorf("finished review %+v", done)
	}
	recs := e.records(t, audit.Query{})
	if len(recs) != 1 {
		t.Fatalf("audit records: %+v", recs)
	}
	rec := recs[0]
	wantSteps := []audit.Step{
		{Guard: "0:review", Decision: "review", Reason: "money moves: demo.add"},
		{Guard: "0:review", Decision: "allow", Reason: "approved on review " + r.ID + " by alice: ok", Review: true},
	}
	if d := cmp.Diff(wantSteps, rec.Steps); d != "" {
		t.Errorf("audit steps (-want +got):\n%s", d)
	}
	if rec.Decision != "allow" || !rec.Dispatched || rec.Outcome != "ok" || rec.ReviewID != r.ID || rec.Front != "rest" || rec.Principal != "key:ops" {
		t.Errorf("audit record %+v", rec)
	}
	// Another approval changes nothing and dispatches nothing.
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); err != nil {
		t.Errorf("approving again: %v", err)
	}
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: false}); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("denying an approved review: %v, want invalid_request", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := e.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
}

func TestReviewDenied(t *testing.T) {
	e := newReviewEnv(t, envConfig{})
	ch := e.callAsync(t.Context(), gateway.CallOptions{})
	r := e.pending(t, 1)[0]
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: false, By: "bob", Note: "not today"}); err != nil {
		t.Fatal(err)
	}
	got := wait(t, ch)
	ue := codeOf(t, got.err, utcp.CodeGuardDenied)
	if !strings.Contains(ue.Message, "not today") || ue.Details["review_id"] != r.ID {
		t.Errorf("denial %q %v", ue.Message, ue.Details)
	}
	if e.f.Calls() != 0 {
		t.Error("a denied call ran")
	}
	e.waitStatus(t, r.ID, review.StatusDenied)
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("approving a denied review: %v", err)
	}
	recs := e.records(t, audit.Query{Decision: "deny"})
	if len(recs) != 1 || recs[0].ReviewID != r.ID || recs[0].Dispatched || len(recs[0].Steps) != 2 {
		t.Errorf("audit: %+v", recs)
	}
}

// TestConcurrentApprovals has 32 goroutines approve one review, with the
// caller waiting and with the call parked: it runs exactly once.
func TestConcurrentApprovals(t *testing.T) {
	for _, noWait := range []bool{false, true} {
		t.Run(fmt.Sprintf("nowait=%v", noWait), func(t *testing.T) {
			e := newReviewEnv(t, envConfig{})
			ch := e.callAsync(t.Context(), gateway.CallOptions{NoWait: noWait})
			if noWait {
				got := wait(t, ch)
				var pe *review.ParkedError
				if !errors.As(got.err, &pe) || utcp.CodeOf(got.err) != utcp.CodeReviewPending {
					t.Fatalf("parked call: %v", got.err)
				}
			}
			r := e.pending(t, 1)[0]
			var wg sync.WaitGroup
			var approved atomic.Int32
			start := make(chan struct{})
			for range 32 {
				wg.Go(func() {
					<-start
					got, err := e.q.Decide(context.Background(), r.ID, review.Decision{Approve: true, By: "racer"})
					if err != nil {
						t.Errorf("Decide: %v", err)
						return
					}
					if got.Status.Approved() {
						approved.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if approved.Load() != 32 {
				t.Errorf("%d of 32 approvals saw the review approved", approved.Load())
			}
			if !noWait {
				if got := wait(t, ch); got.err != nil {
					t.Fatalf("the waiting call: %v", got.err)
				}
			}
			e.waitStatus(t, r.ID, review.StatusDone)
			time.Sleep(100 * time.Millisecond) // a second dispatch would show now
			if n := e.f.Calls(); n != 1 {
				t.Errorf("the backend saw %d calls, want exactly 1", n)
			}
		})
	}
}

// TestNoWaitAndPoll parks the call, approves it, and finds the daemon's
// result with the review.
func TestNoWaitAndPoll(t *testing.T) {
	e := newReviewEnv(t, envConfig{})
	_, err := e.g.CallTool(t.Context(), "demo.add", addArgs, gateway.CallOptions{NoWait: true, Principal: "key:a", Front: "rest", Timeout: 5 * time.Second})
	var pe *review.ParkedError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *review.ParkedError, got %v", err)
	}
	if pe.Expires.Before(time.Now()) {
		t.Errorf("expires %v", pe.Expires)
	}
	r := e.pending(t, 1)[0]
	if r.ID != pe.ID || r.CallTimeout != 5*time.Second {
		t.Errorf("review %+v, parked %+v", r, pe)
	}
	// Allowed calls do not park.
	if _, err := e.g.CallTool(t.Context(), "demo.echo", map[string]any{"message": "x"}, gateway.CallOptions{NoWait: true}); err != nil {
		t.Errorf("an allowed call with NoWait: %v", err)
	}
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(t, r.ID, review.StatusDone)
	if done.Dispatcher != "daemon" || !done.Dispatched || string(done.Result) != `{"sum":42}` || done.Outcome != "" {
		t.Errorf("finished review %+v", done)
	}
	if n := e.f.Calls(); n != 2 {
		t.Errorf("backend saw %d calls, want 2 (echo and the approved add)", n)
	}
	recs := e.records(t, audit.Query{Tool: "demo.add"})
	if len(recs) != 2 {
		t.Fatalf("audit records of demo.add: %+v", recs)
	}
	// Newest first: the daemon's dispatch, then the parked call.
	if recs[0].Decision != "allow" || !recs[0].Dispatched || recs[0].ReviewID != r.ID || recs[0].Principal != "key:a" || recs[0].Front != "rest" {
		t.Errorf("dispatch record %+v", recs[0])
	}
	if recs[1].Decision != "review" || recs[1].Dispatched || recs[1].Outcome != string(utcp.CodeReviewPending) || recs[1].ReviewID != r.ID {
		t.Errorf("parked record %+v", recs[1])
	}
}

// TestReviewTimeout: nobody decides; the caller gets guard_review_timeout
// and nothing runs, then or later.
func TestReviewTimeout(t *testing.T) {
	e := newReviewEnv(t, envConfig{timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := e.g.CallTool(t.Context(), "demo.add", addArgs, gateway.CallOptions{})
	ue := codeOf(t, err, utcp.CodeGuardReviewTimeout)
	if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
		t.Errorf("the timeout came after %v", took)
	}
	id, _ := ue.Details["review_id"].(string)
	r := e.waitStatus(t, id, review.StatusExpired)
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("approving an expired review: %v", err)
	}
	// A parked call expires too, swept by the dispatcher.
	_, err = e.g.CallTool(t.Context(), "demo.add", addArgs, gateway.CallOptions{NoWait: true})
	var pe *review.ParkedError
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	e.waitStatus(t, pe.ID, review.StatusExpired)
	time.Sleep(50 * time.Millisecond)
	if e.f.Calls() != 0 {
		t.Errorf("an expired review ran %d times", e.f.Calls())
	}
	recs := e.records(t, audit.Query{Outcome: string(utcp.CodeGuardReviewTimeout)})
	if len(recs) != 1 || recs[0].Decision != "review" {
		t.Errorf("audit: %+v", recs)
	}
}

// TestCallerGoneDaemonDispatches: the caller's deadline passes before the
// decision; it gets review_pending with the review id; the approval that
// comes later is dispatched by the daemon.
func TestCallerGoneDaemonDispatches(t *testing.T) {
	e := newReviewEnv(t, envConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Millisecond)
	defer cancel()
	_, err := e.g.CallTool(ctx, "demo.add", addArgs, gateway.CallOptions{})
	ue := codeOf(t, err, utcp.CodeReviewPending)
	id, _ := ue.Details["review_id"].(string)
	if id == "" || !strings.Contains(ue.Message, "/v1/reviews/"+id) {
		t.Fatalf("review_pending without a review to poll: %v %v", ue.Message, ue.Details)
	}
	if _, err := e.q.Decide(t.Context(), id, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(t, id, review.StatusDone)
	if done.Dispatcher != "daemon" || e.f.Calls() != 1 {
		t.Errorf("dispatcher %q, %d calls", done.Dispatcher, e.f.Calls())
	}
}

// TestLaterGuardsStillDecide: the guards after the reviewing one run
// after the approval, whether the caller waited or the daemon dispatches.
func TestLaterGuardsStillDecide(t *testing.T) {
	var deny atomic.Bool
	later := guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
		if deny.Load() {
			return guard.Verdict{Decision: guard.Deny, Reason: "later says no"}, nil
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	e := newReviewEnv(t, envConfig{guards: []guard.Named{{Name: "0:review", Guard: reviewWhen("demo.add")}, {Name: "1:later", Guard: later}}})
	for _, noWait := range []bool{false, true} {
		deny.Store(true)
		ch := e.callAsync(t.Context(), gateway.CallOptions{NoWait: noWait})
		r := e.pending(t, 1)[0]
		if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); err != nil {
			t.Fatal(err)
		}
		got := wait(t, ch)
		if !noWait {
			codeOf(t, got.err, utcp.CodeGuardDenied)
		}
		done := e.waitStatus(t, r.ID, review.StatusDone)
		if done.Dispatched || done.Outcome != utcp.CodeGuardDenied {
			t.Errorf("nowait=%v: review %+v", noWait, done)
		}
	}
	if e.f.Calls() != 0 {
		t.Errorf("%d calls ran past a denying guard", e.f.Calls())
	}
}

// TestFollowUpReview: while the daemon dispatches an approved call,
// another guard asks for review: a follow-up review is parked, and its
// approval runs the call once without asking the first guard's reviewer
// again.
func TestFollowUpReview(t *testing.T) {
	e := newReviewEnv(t, envConfig{guards: []guard.Named{
		{Name: "0:first", Guard: reviewWhen("demo.add")}, {Name: "1:second", Guard: reviewWhen("demo.add")}}})
	_, err := e.g.CallTool(t.Context(), "demo.add", addArgs, gateway.CallOptions{NoWait: true})
	var pe *review.ParkedError
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	if _, err := e.q.Decide(t.Context(), pe.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	first := e.waitStatus(t, pe.ID, review.StatusDone)
	if first.Outcome != utcp.CodeReviewPending || first.Next == "" || first.Dispatched {
		t.Fatalf("first review %+v", first)
	}
	second := e.pending(t, 1)[0]
	if second.ID != first.Next || second.Guard != "1:second" || second.Prior != first.ID || !cmp.Equal(second.Approvals, []string{"0:first"}) {
		t.Errorf("follow-up %+v", second)
	}
	if _, err := e.q.Decide(t.Context(), second.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(t, second.ID, review.StatusDone)
	if !done.Dispatched || done.Outcome != "" || e.f.Calls() != 1 {
		t.Errorf("follow-up done %+v, %d calls", done, e.f.Calls())
	}
}

// TestRestartKeepsReviews uses a real SQLite store: a pending review
// survives a restart and, approved after it, is dispatched once by the
// new daemon; an approved review the old daemon never dispatched is
// dispatched once after the restart; one it was dispatching is marked
// interrupted and never run again.
func TestRestartKeepsReviews(t *testing.T) {
	dir := t.TempDir()
	f, base := serveFixture(t)
	open := func() *sqlite.Store {
		st, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	// First life: three parked calls. One is approved but the dispatcher
	// never runs; one is claimed (dispatching) when the daemon "crashes".
	st1 := open()
	e1 := newReviewEnv(t, envConfig{store: st1.Reviews(), base: base, f: f, noStart: true})
	var ids []string
	for i := range 3 {
		_, err := e1.g.CallTool(t.Context(), "demo.add", map[string]any{"a": i, "b": 100}, gateway.CallOptions{NoWait: true, Principal: "key:p", Front: "rest"})
		var pe *review.ParkedError
		if !errors.As(err, &pe) {
			t.Fatal(err)
		}
		ids = append(ids, pe.ID)
	}
	pendingID, approvedID, crashedID := ids[0], ids[1], ids[2]
	for _, id := range []string{approvedID, crashedID} {
		if _, err := e1.q.Decide(t.Context(), id, review.Decision{Approve: true}); err != nil {
			t.Fatal(err)
		}
	}
	crashed, _ := st1.Reviews().Get(t.Context(), crashedID)
	crashed.Status, crashed.Dispatcher = review.StatusDispatching, "daemon"
	if err := st1.Reviews().Update(t.Context(), crashed, review.StatusApproved); err != nil {
		t.Fatal(err)
	}
	_ = e1.q.Close(t.Context())
	_ = e1.g.Close()
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Calls() != 0 {
		t.Fatalf("%d calls before the restart", f.Calls())
	}

	// Second life.
	st2 := open()
	defer st2.Close()
	e2 := newReviewEnv(t, envConfig{store: st2.Reviews(), base: base, f: f})
	e2.waitStatus(t, approvedID, review.StatusDone)
	e2.waitStatus(t, crashedID, review.StatusInterrupted)
	rs := e2.pending(t, 1)
	if rs[0].ID != pendingID || rs[0].Principal != "key:p" {
		t.Fatalf("pending after restart: %+v", rs[0])
	}
	if _, err := e2.q.Decide(t.Context(), pendingID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	done := e2.waitStatus(t, pendingID, review.StatusDone)
	if string(done.Result) != `{"sum":100}` || done.Dispatcher != "daemon" {
		t.Errorf("pending review after restart: %+v", done)
	}
	time.Sleep(100 * time.Millisecond)
	if n := f.Calls(); n != 2 {
		t.Errorf("the backend saw %d calls, want exactly 2 (approved before and after the restart; not the interrupted one)", n)
	}
	appr, _ := e2.q.Get(t.Context(), approvedID)
	if string(appr.Result) != `{"sum":101}` {
		t.Errorf("approved-before-restart result %s", appr.Result)
	}
}

// TestAuditRecordsAndFilters covers allowed, denied, bypassed and
// reviewed calls in the audit log.
func TestAuditRecordsAndFilters(t *testing.T) {
	denyFail := guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		if c.Tool == "demo.fail" {
			return guard.Verdict{Decision: guard.Deny, Reason: "failing is forbidden"}, nil
		}
		return guard.Verdict{Decision: guard.Allow, Reason: "ok"}, nil
	})
	e := newReviewEnv(t, envConfig{timeout: 200 * time.Millisecond,
		guards: []guard.Named{{Name: "0:deny", Guard: denyFail}, {Name: "1:review", Guard: reviewWhen("demo.add")}}})
	ctx := t.Context()
	opts := gateway.CallOptions{Principal: "key:x", Front: "mcp"}
	if _, err := e.g.CallTool(ctx, "demo.echo", map[string]any{"message": "s3cr3t-arg"}, opts); err != nil {
		t.Fatal(err)
	}
	_, _ = e.g.CallTool(ctx, "demo.fail", map[string]any{"message": "x"}, opts)
	_, _ = e.g.CallTool(ctx, "demo.count", map[string]any{"n": 2}, opts) // bypass_tools
	_, _ = e.g.CallTool(ctx, "demo.add", addArgs, opts)
	_, _ = e.g.CallTool(ctx, "nope.nothing", nil, opts)
	recs := e.records(t, audit.Query{})
	type row struct {
		Tool, Decision, Outcome string
		Dispatched              bool
		Steps                   int
	}
	var got []row
	for _, r := range recs {
		got = append(got, row{r.Tool, r.Decision, r.Outcome, r.Dispatched, len(r.Steps)})
		if r.Front != "mcp" || r.Principal != "key:x" || r.Time.IsZero() {
			t.Errorf("record %+v", r)
		}
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), "s3cr3t-arg") {
			t.Errorf("an audit record holds an argument: %s", b)
		}
	}
	want := []row{
		{"nope.nothing", "allow", string(utcp.CodeToolNotFound), false, 2},
		{"demo.add", "review", string(utcp.CodeGuardReviewTimeout), false, 3},
		{"demo.count", "allow", "ok", true, 0},
		{"demo.fail", "deny", string(utcp.CodeGuardDenied), false, 1},
		{"demo.echo", "allow", "ok", true, 2},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("audit (-want +got):\n%s", d)
	}
	if recs[0].Qualified != "" || recs[4].Qualified != "demo.echo" || recs[4].Protocol != "http" || recs[4].Duration <= 0 {
		t.Errorf("resolution fields: %+v / %+v", recs[0], recs[4])
	}
	if recs[3].Guard != "0:deny" || recs[3].Reason != "failing is forbidden" {
		t.Errorf("denial record %+v", recs[3])
	}
	for _, tc := range []struct {
		q    audit.Query
		want int
	}{
		{audit.Query{Tool: "demo.add"}, 1},
		{audit.Query{Tool: "add"}, 0},
		{audit.Query{Decision: "deny"}, 1},
		{audit.Query{Decision: "allow"}, 3},
		{audit.Query{Since: time.Now().Add(time.Minute)}, 0},
		{audit.Query{Limit: 2}, 2},
		{audit.Query{Before: recs[2].ID}, 2},
	} {
		if n := len(e.records(t, tc.q)); n != tc.want {
			t.Errorf("query %+v: %d records, want %d", tc.q, n, tc.want)
		}
	}
}

// TestCallerGoneAfterApproval: the caller's context ends between the
// approval (which it claimed) and the dispatch: the claim is released and
// the daemon runs the call once.
func TestCallerGoneAfterApproval(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var gone atomic.Bool
	leaver := guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
		if gone.CompareAndSwap(false, true) {
			cancel() // the caller goes away while the next guard decides
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	e := newReviewEnv(t, envConfig{guards: []guard.Named{{Name: "0:review", Guard: reviewWhen("demo.add")}, {Name: "1:leaver", Guard: leaver}}})
	ch := e.callAsync(ctx, gateway.CallOptions{})
	r := e.pending(t, 1)[0]
	if _, err := e.q.Decide(t.Context(), r.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, ch); got.err == nil {
		t.Fatal("the call of a caller that went away succeeded")
	}
	done := e.waitStatus(t, r.ID, review.StatusDone)
	if done.Dispatcher != "daemon" || !done.Dispatched || string(done.Result) != `{"sum":42}` {
		t.Errorf("review %+v", done)
	}
	time.Sleep(50 * time.Millisecond)
	if n := e.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
}

// TestNamedKeyApprovedReviewKeepsScope: a call parked for review
// (NoWait) by a guard that reviews a name as typed, for a tool outside
// the caller's scope, is dispatched by the daemon after approval within
// the scope of the review's principal (Options.PrincipalScope): it fails
// as tool_not_found and never reaches the backend. The same call by the
// caller that waited fails the same way.
func TestNamedKeyApprovedReviewKeepsScope(t *testing.T) {
	narrow, err := gateway.NewScope([]string{"demo.echo"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		if c.Tool == "demo.add" {
			return guard.Verdict{Decision: guard.Review, Reason: "asked by name"}, nil
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	e := newReviewEnv(t, envConfig{guards: []guard.Named{{Name: "0:byname", Guard: byName}},
		scopes: func(p string) *gateway.Scope {
			if p == "narrow" {
				return narrow
			}
			return nil
		}})
	ctx := gateway.WithScope(t.Context(), narrow)
	_, err = e.g.CallTool(ctx, "demo.add", addArgs, gateway.CallOptions{NoWait: true, Principal: "narrow", Front: "rest"})
	var pe *review.ParkedError
	if !errors.As(err, &pe) {
		t.Fatalf("want a *review.ParkedError, got %v", err)
	}
	if _, err := e.q.Decide(t.Context(), pe.ID, review.Decision{Approve: true}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(t, pe.ID, review.StatusDone)
	if done.Dispatched || done.Outcome != utcp.CodeToolNotFound {
		t.Errorf("the approved call outside the scope: %+v", done)
	}
	if n := e.f.Calls(); n != 0 {
		t.Errorf("backend saw %d calls, want none", n)
	}
	// Inside the scope the same key calls.
	if _, err := e.g.CallTool(ctx, "demo.echo", map[string]any{"message": "x"}, gateway.CallOptions{Principal: "narrow"}); err != nil {
		t.Errorf("demo.echo within the scope: %v", err)
	}
}
