// Package guard decides whether a tool call may run. Every call the
// gateway receives, whichever front it arrives through, is evaluated by
// one Guard (normally a Chain) before the tool is even looked up; only an
// allow verdict dispatches the call, exactly once.
//
// The contract is fail-closed:
//
//   - A guard answers allow, deny, review or error.
//   - A guard that fails (returns an error), panics or answers anything
//     else produces an error verdict, which callers treat as deny.
//   - review asks an Approver (a human, a queue) to decide; without one, or
//     when it fails or does not answer in time, the call does not run.
//
// Guard kinds (policy, holguard, webhook, ...) live in guard/<kind>/ and
// register an Info into Default from init. A guard kind imports only this
// package and utcp. guard/guardtest holds the conformance suite every
// kind passes.
package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Decision is a guard's answer.
type Decision string

// The decisions. Any other value is invalid and treated as Error.
const (
	// Allow lets the call proceed (to the next guard, then to dispatch).
	Allow Decision = "allow"
	// Deny refuses the call.
	Deny Decision = "deny"
	// Review asks an Approver to decide. As the final decision of a Chain
	// it means the approval did not arrive (timeout or cancellation): the
	// call does not run and Denied reports review_pending.
	Review Decision = "review"
	// Error means the guard could not decide; the call does not run.
	Error Decision = "error"
)

// Valid reports whether d is one of the four decisions.
func (d Decision) Valid() bool {
	switch d {
	case Allow, Deny, Review, Error:
		return true
	}
	return false
}

// Call is what a guard sees of a tool call. It is evaluated before lookup,
// so the resolved fields are empty when the name did not resolve. Guards
// must not modify it.
type Call struct {
	// Tool is the name as the caller requested it (qualified or not).
	Tool string
	// Qualified is the resolved qualified name ("manual.tool"), "" if the
	// name did not resolve.
	Qualified string
	// Manual is the resolved tool's manual, "" if unresolved.
	Manual string
	// Protocol is the resolved tool's call_template_type, "" if unresolved.
	Protocol string
	// Arguments are the call's arguments, JSON-compatible values.
	Arguments map[string]any
	// Principal names the authenticated caller, "" if anonymous.
	Principal string
	// Template is the tool's call template as raw JSON (before variable
	// substitution, so without secrets); nil if unresolved.
	Template json.RawMessage
	// Kind is what the call does: ActionTool (a tool call; "" means the
	// same), ActionResource (an MCP resources/read: Tool is the URI as
	// requested, Qualified the resource's utcpd URI, Arguments
	// {"uri": <the URI at the backend>}), or ActionPrompt (an MCP
	// prompts/get: Tool is the prompt's name as requested, Qualified
	// manual.server.prompt, Arguments the prompt's arguments). For
	// resources and prompts Manual is the backend's manual and Protocol
	// its call_template_type ("mcp").
	Kind string
}

// The kinds of action a Call is (Call.Kind).
const (
	ActionTool     = "tool"
	ActionResource = "resource"
	ActionPrompt   = "prompt"
)

// KindOf returns c.Kind, ActionTool when it is empty.
func (c *Call) KindOf() string {
	if c.Kind == "" {
		return ActionTool
	}
	return c.Kind
}

// Verdict is a guard's decision with its explanation.
type Verdict struct {
	Decision Decision
	// Reason explains the decision to the caller and the audit log. It is
	// shown to callers, so it must not contain secrets.
	Reason string
	// Guard names the guard that decided. A Chain sets it to the guard's
	// configured name (as "name/inner" when the guard itself named an
	// inner guard).
	Guard string
	// Details is optional structured context (a JSON value), such as the
	// policy rule that matched.
	Details json.RawMessage
}

// Allowed reports whether v lets the call run. Only Allow does.
func (v Verdict) Allowed() bool { return v.Decision == Allow }

// Guard evaluates calls. Implementations are safe for concurrent use,
// return promptly once ctx is done, and never return Allow because ctx
// ended. A non-nil error means the guard could not decide: callers treat
// it exactly like an Error verdict (deny).
type Guard interface {
	Evaluate(ctx context.Context, call *Call) (Verdict, error)
}

// Approver decides calls a guard sent to review: a human through the
// admin API, a queue, a chat bot. Approve returns an Allow or Deny verdict,
// or an error; it must return once ctx is done (the review deadline).
// Implementations are safe for concurrent use.
type Approver interface {
	Approve(ctx context.Context, call *Call, v Verdict) (Verdict, error)
}

// Func adapts a function to Guard.
type Func func(ctx context.Context, call *Call) (Verdict, error)

// Evaluate calls f.
func (f Func) Evaluate(ctx context.Context, call *Call) (Verdict, error) { return f(ctx, call) }

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, call *Call, v Verdict) (Verdict, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, call *Call, v Verdict) (Verdict, error) {
	return f(ctx, call, v)
}

// AllowAll allows every call. It is the default guard when none is
// configured.
var AllowAll Guard = Func(func(context.Context, *Call) (Verdict, error) {
	return Verdict{Decision: Allow, Reason: "no guard configured", Guard: KindAllowAll}, nil
})

// DenyAll denies every call: a lockdown switch that, in a Chain, still
// lets bypass_tools through.
var DenyAll Guard = Func(func(context.Context, *Call) (Verdict, error) {
	return Verdict{Decision: Deny, Reason: "all calls are denied", Guard: KindDenyAll}, nil
})

// Named is a guard with the name it has in the configuration, used in
// verdicts and logs.
type Named struct {
	Name  string
	Guard Guard
}

// Option configures a Chain.
type Option func(*Chain)

// WithBypass lists tools that skip the chain entirely (bypass_tools). A
// call bypasses only when its resolved qualified name (Call.Qualified,
// "manual.tool") is exactly one of tools: no globs, no prefixes,
// case-sensitive. The name as the caller typed it never counts, so a name
// that does not resolve, or resolves to another manual's tool whose short
// name happens to look like an entry ("nosuch.ping" resolving to
// "evil.nosuch.ping"), runs the chain. An entry that is not a qualified
// name therefore matches nothing. Only tool calls bypass: an MCP
// resource read or prompt (Call.Kind resource or prompt) always runs the
// chain, even when a prompt's name (manual.server.prompt) equals an
// entry.
func WithBypass(tools ...string) Option {
	return func(c *Chain) {
		for _, t := range tools {
			if t != "" {
				c.bypass[t] = struct{}{}
			}
		}
	}
}

// WithApprover sets the Approver that decides review verdicts. Without
// one, review means deny.
func WithApprover(a Approver) Option { return func(c *Chain) { c.approver = a } }

// WithReviewTimeout bounds how long the chain waits for an approval; 0
// (the default) waits as long as the call's context allows.
func WithReviewTimeout(d time.Duration) Option { return func(c *Chain) { c.reviewTimeout = d } }

// WithGuardTimeout bounds each guard's evaluation (not the wait for an
// approval). A guard gets a context with that deadline and, should it
// ignore its context and hang, the chain stops waiting for it at the
// deadline and answers an error verdict naming it; the guard's goroutine
// is abandoned. 0 (the default) runs guards inline, bounded only by the
// call's context.
func WithGuardTimeout(d time.Duration) Option { return func(c *Chain) { c.guardTimeout = d } }

// Chain runs guards in order. It is itself a Guard, safe for concurrent
// use and immutable after NewChain.
//
//   - A call whose resolved qualified name is in bypass_tools is allowed
//     without running any guard (the requested name never bypasses).
//   - An empty chain allows.
//   - Each guard runs in turn: allow continues with the next guard; deny
//     and error stop the chain with that verdict; review asks the Approver,
//     whose allow continues and whose deny stops the chain.
//   - A guard that returns an error, panics, is nil or answers an invalid
//     decision stops the chain with an error verdict naming it.
//   - A review with no approver is a deny ("review required but no
//     approver"). An approver that fails, panics or answers neither allow
//     nor deny gives an error verdict. One that does not answer before the
//     review deadline or the call's context ends gives a Review verdict
//     (approval pending), which does not run the call either.
//   - An approver that parks the call (ErrParked) or whose review expired
//     (ErrReviewExpired) gives a Review verdict as well.
//   - With WithGuardTimeout, a guard that does not answer in time gives an
//     error verdict naming it.
//   - A context that ends before a guard runs gives an error verdict.
//   - When every guard allows, the verdict is the last guard's allow.
//
// When the context carries a Trace (WithTrace), every guard's verdict and
// every approver's answer is appended to it, in order.
type Chain struct {
	guards        []Named
	bypass        map[string]struct{}
	approver      Approver
	reviewTimeout time.Duration
	guardTimeout  time.Duration
}

var _ Guard = (*Chain)(nil)

// NewChain returns a chain of guards, run in the given order.
func NewChain(guards []Named, opts ...Option) *Chain {
	c := &Chain{guards: append([]Named(nil), guards...), bypass: map[string]struct{}{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Names returns the names of the chain's guards, in order.
func (c *Chain) Names() []string {
	out := make([]string, len(c.guards))
	for i, g := range c.guards {
		out[i] = g.Name
	}
	return out
}

// Evaluate runs the chain on call. The error is always nil: every failure
// is an Error (or, for a missing approval, Review) verdict with a Reason,
// so a caller cannot mistake a failure for an allow by ignoring an error.
func (c *Chain) Evaluate(ctx context.Context, call *Call) (Verdict, error) {
	if call == nil {
		return Verdict{Decision: Error, Reason: "no call to evaluate"}, nil
	}
	if c.bypasses(call) {
		return Verdict{Decision: Allow, Reason: "tool is in bypass_tools"}, nil
	}
	if len(c.guards) == 0 {
		return Verdict{Decision: Allow, Reason: "no guards configured"}, nil
	}
	var last Verdict
	tr := TraceFrom(ctx)
	for _, g := range c.guards {
		if err := ctx.Err(); err != nil {
			return Verdict{Decision: Error, Guard: g.Name,
				Reason: fmt.Sprintf("call abandoned before guard %q ran: %v", g.Name, err)}, nil
		}
		v := c.run(ctx, g, call)
		tr.add(v, false)
		switch v.Decision {
		case Allow:
			last = v
			continue
		case Review:
			v = c.review(ctx, call, v)
			tr.add(v, true)
			if v.Decision == Allow {
				last = v
				continue
			}
		}
		return v, nil
	}
	return last, nil
}

func (c *Chain) bypasses(call *Call) bool {
	if len(c.bypass) == 0 || call.Qualified == "" || call.KindOf() != ActionTool {
		return false
	}
	_, ok := c.bypass[call.Qualified]
	return ok
}

// run evaluates one guard, inline or, with a guard timeout, in a
// goroutine the chain stops waiting for at the deadline.
func (c *Chain) run(ctx context.Context, g Named, call *Call) Verdict {
	if c.guardTimeout <= 0 {
		return runGuard(ctx, g, call)
	}
	gctx, cancel := context.WithTimeout(ctx, c.guardTimeout)
	defer cancel()
	done := make(chan Verdict, 1)
	go func() { done <- runGuard(gctx, g, call) }()
	select {
	case v := <-done:
		return v
	case <-gctx.Done():
	}
	select {
	case v := <-done: // it answered just in time (never Allow: runGuard checks)
		return v
	default:
	}
	if err := ctx.Err(); err != nil {
		return Verdict{Decision: Error, Guard: g.Name,
			Reason: fmt.Sprintf("call abandoned while guard %q ran: %v", g.Name, err)}
	}
	return Verdict{Decision: Error, Guard: g.Name,
		Reason: fmt.Sprintf("guard %q did not answer within %v", g.Name, c.guardTimeout)}
}

// runGuard evaluates one guard, turning its failures into error verdicts
// and naming it in the verdict.
func runGuard(ctx context.Context, g Named, call *Call) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			v = Verdict{Decision: Error, Guard: g.Name, Reason: fmt.Sprintf("guard %q panicked: %v", g.Name, p)}
		}
	}()
	if g.Guard == nil {
		return Verdict{Decision: Error, Guard: g.Name, Reason: fmt.Sprintf("guard %q is not configured", g.Name)}
	}
	v, err := g.Guard.Evaluate(ctx, call)
	switch {
	case err != nil:
		return Verdict{Decision: Error, Guard: g.Name, Reason: fmt.Sprintf("guard %q failed: %v", g.Name, err)}
	case !v.Decision.Valid():
		return Verdict{Decision: Error, Guard: g.Name,
			Reason: fmt.Sprintf("guard %q returned an invalid decision %q", g.Name, v.Decision)}
	case v.Decision == Allow && ctx.Err() != nil:
		// A guard must not allow because its context ended; be safe anyway.
		return Verdict{Decision: Error, Guard: g.Name,
			Reason: fmt.Sprintf("call abandoned while guard %q ran: %v", g.Name, ctx.Err())}
	}
	v.Guard = qualify(g.Name, v.Guard)
	if v.Reason == "" {
		switch v.Decision {
		case Deny:
			v.Reason = fmt.Sprintf("denied by guard %q", g.Name)
		case Error:
			v.Reason = fmt.Sprintf("guard %q could not decide", g.Name)
		case Review:
			v.Reason = fmt.Sprintf("guard %q requires review", g.Name)
		}
	}
	return v
}

func qualify(name, inner string) string {
	switch {
	case inner == "" || inner == name || strings.HasSuffix(name, ":"+inner):
		// The daemon names guards "<index>:<kind>"; a guard naming
		// itself by its kind adds nothing.
		return name
	case name == "":
		return inner
	}
	return name + "/" + inner
}

// review asks the approver to decide v. The result is Allow, Deny, Error
// or Review (no answer in time).
func (c *Chain) review(ctx context.Context, call *Call, v Verdict) Verdict {
	if c.approver == nil {
		return Verdict{Decision: Deny, Guard: v.Guard, Details: v.Details,
			Reason: "review required but no approver (" + v.Reason + ")"}
	}
	rctx := ctx
	if c.reviewTimeout > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, c.reviewTimeout)
		defer cancel()
	}
	av, err := approve(rctx, c.approver, call, v)
	if err != nil && (errors.Is(err, ErrParked) || errors.Is(err, ErrReviewExpired)) {
		return Verdict{Decision: Review, Guard: v.Guard, Details: v.Details, Reason: err.Error() + " (" + v.Reason + ")"}
	}
	if cerr := rctx.Err(); cerr != nil {
		// Late or missing answer: never act on it.
		reason := "review not decided in time"
		if errors.Is(cerr, context.Canceled) {
			reason = "review abandoned: the call was canceled"
		}
		return Verdict{Decision: Review, Guard: v.Guard, Details: v.Details, Reason: reason + " (" + v.Reason + ")"}
	}
	switch {
	case err != nil:
		return Verdict{Decision: Error, Guard: v.Guard, Reason: fmt.Sprintf("approver failed: %v", err)}
	case av.Decision != Allow && av.Decision != Deny:
		return Verdict{Decision: Error, Guard: v.Guard,
			Reason: fmt.Sprintf("approver returned %q; only allow or deny are valid", av.Decision)}
	}
	if av.Guard == "" {
		av.Guard = v.Guard
	}
	if av.Reason == "" {
		if av.Decision == Allow {
			av.Reason = "approved on review"
		} else {
			av.Reason = "rejected on review"
		}
	}
	if av.Details == nil {
		av.Details = v.Details
	}
	return av
}

func approve(ctx context.Context, a Approver, call *Call, v Verdict) (av Verdict, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("approver panicked: %v", p)
		}
	}()
	return a.Approve(ctx, call, v)
}

// ErrParked is the error an Approver returns, wrapped, when it parked the
// call to be decided later instead of waiting (an asynchronous review):
// the chain stops with a Review verdict whose reason is the error's text,
// so the approver should name the review in it.
var ErrParked = errors.New("call parked for review")

// ErrReviewExpired is the error an Approver returns, wrapped, when the
// review expired without a decision: the chain stops with a Review
// verdict whose reason is the error's text.
var ErrReviewExpired = errors.New("review expired undecided")

// Step is one decision taken while a Chain evaluated a call: a guard's
// verdict or, with Review set, an approver's answer to the review the
// step before asked for (as the chain judged it: allow, deny, error, or
// review when no answer came).
type Step struct {
	// Guard names the guard (as in Verdict.Guard).
	Guard string
	// Decision is the guard's or the approver's decision.
	Decision Decision
	// Reason is the verdict's reason; it never holds secrets.
	Reason string
	// Review marks an approver's answer.
	Review bool
}

// Trace collects the Steps of the evaluations of one call. Attach it to a
// context with WithTrace; a Chain appends to the Trace it finds there. A
// Trace is not safe for concurrent use: give each call its own.
type Trace struct {
	// Steps are the decisions in the order they were taken.
	Steps []Step
}

func (t *Trace) add(v Verdict, review bool) {
	if t != nil {
		t.Steps = append(t.Steps, Step{Guard: v.Guard, Decision: v.Decision, Reason: v.Reason, Review: review})
	}
}

type traceKey struct{}

// WithTrace returns a copy of ctx carrying t, for the Chain evaluating a
// call to record its steps in.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceFrom returns the Trace ctx carries, nil if none. Its methods are
// nil-safe where the Chain uses them.
func TraceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// Denied returns the error a caller reports for a verdict that does not
// allow the call, and nil for Allow. The *utcp.Error has code
// guard_denied for Deny, review_pending for Review (the approval did not
// arrive) and guard_error for Error or an invalid decision; its message
// carries the reason, and Details "guard", "reason", "decision" and, when
// the verdict has valid JSON details, "details".
func Denied(v Verdict) error {
	var code utcp.Code
	var what string
	switch v.Decision {
	case Allow:
		return nil
	case Deny:
		code, what = utcp.CodeGuardDenied, "call denied"
	case Review:
		code, what = utcp.CodeReviewPending, "call awaits review"
	default:
		code, what = utcp.CodeGuardError, "call refused: guard error"
	}
	msg := what
	if v.Guard != "" {
		msg += fmt.Sprintf(" by guard %q", v.Guard)
	}
	if v.Reason != "" {
		msg += ": " + v.Reason
	}
	e := utcp.NewError(code, "%s", msg).
		WithDetail("guard", v.Guard).
		WithDetail("reason", v.Reason).
		WithDetail("decision", string(v.Decision))
	if len(v.Details) > 0 && json.Valid(v.Details) {
		e.WithDetail("details", v.Details)
	}
	return e
}
