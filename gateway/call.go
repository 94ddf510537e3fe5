package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// toolState is the gateway's per-tool data (registry.Tool.Ext), built once
// at registration so the call path does no parsing.
type toolState struct {
	backendName string             // the tool's name at its backend
	tmpl        *utcp.CallTemplate // parsed, variables unresolved
	manualTmpl  *utcp.CallTemplate // the manual's template: allowed protocols
	hasVars     bool               // tmpl needs substitution per call
	post        bool               // a post-processor applies to the tool's calls
	schema      *schema            // argument validator, nil when any object is accepted
	policy      *netguard.Policy   // set for a tool template from a remote manual (remote.go)
	resolved    atomic.Pointer[resolvedTemplate]
}

type resolvedTemplate struct {
	gen  uint64
	tmpl *utcp.CallTemplate
}

// CallOptions carry per-call context.
type CallOptions struct {
	// Principal names the authenticated caller, "" if anonymous.
	Principal string
	// Front names where the call came in ("rest", "mcp", "cli"), for the
	// audit log and reviews.
	Front string
	// Timeout, when positive, is the call's deadline counted from the
	// moment the guard chain allowed it: it bounds lookup, dispatch and
	// post-processing but not the guards nor a wait for a human review
	// (each guard is bounded by its own timeout, a review by the review
	// timeout), so that a reviewed call is not cut by a deadline meant
	// for its tool. A deadline on ctx bounds everything.
	Timeout time.Duration
	// NoWait, with Options.Reviews, parks a call that needs review
	// instead of waiting for the decision: CallTool returns a
	// *review.ParkedError at once, and the daemon dispatches the call
	// once approved (the outcome is kept with the review). Streaming
	// calls always wait.
	NoWait bool
	// Toolset names the toolset the call came through (Toolset.CallTool
	// sets it), for the audit record; "" for none.
	Toolset string

	// approved is the review the daemon dispatches (DispatchApproved).
	approved *review.Review
}

// prepared is a call that passed every check and is ready to dispatch.
type prepared struct {
	// call and gc live inside prepared so that a call allocates once.
	call  utcp.Call
	gc    guard.Call
	tool  *registry.Tool
	state *manualState
	tr    transports.Counted
	// policy confines the connections of a remote manual's tool.
	policy *netguard.Policy
	// ticket holds the call's concurrency slots (Options.RateLimits).
	ticket ratelimit.Ticket
}

// callState is what one call allocates: its record and its prepared
// dispatch, together, so that they cost one allocation instead of two.
type callState struct {
	rec CallRecord
	p   prepared
}

// leave ends a prepared call: its manual's call count and its rate
// limit ticket.
func (p *prepared) leave() {
	p.state.calls.leave()
	p.ticket.Release()
}

// CallTool calls a tool once. In order: the name resolves within the
// caller's scope (ScopeFrom(ctx); qualified, or unqualified while
// unambiguous within the scope); the guard chain decides (a name that did
// not resolve fails after it, as tool_not_found); the manual's
// allowed_communication_protocols is checked again; arguments are
// validated against the tool's input schema; variables are substituted;
// the rate limits admit it (Options.RateLimits: a refusal is
// rate_limited, nothing dispatched); the transport carries the call exactly once; post-processors shape the
// result. A failure the tool reports is a *utcp.ToolError; every other
// failure is an error with a utcp.Code.
func (g *Gateway) CallTool(ctx context.Context, name string, args map[string]any, opts CallOptions) (*utcp.Result, error) {
	res, _, err := g.call(ctx, name, args, opts)
	return res, err
}

// call is CallTool, also reporting whether the call reached its
// transport.
func (g *Gateway) call(ctx context.Context, name string, args map[string]any, opts CallOptions) (*utcp.Result, bool, error) {
	st := &callState{rec: CallRecord{Tool: name, Principal: opts.Principal, Front: opts.Front, Toolset: opts.Toolset}}
	rec := &st.rec
	if g.recording() {
		rec.Start = time.Now()
	}
	if tracing.On() {
		ctx = startSpan(ctx, rec)
	}
	ctx, t := g.callContext(ctx, rec, opts, opts.NoWait)
	p, err := g.prepare(ctx, name, args, opts, rec, t, &st.p)
	if err != nil {
		return nil, false, g.finish(ctx, rec, t, nil, err)
	}
	dctx := netguard.WithPolicy(ctx, p.policy)
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	rec.Dispatched = true
	if rec.span != nil {
		dctx = startDispatch(dctx, rec, p)
	}
	res, err := p.tr.CallTool(dctx, &p.call)
	p.leave()
	if err != nil {
		return nil, true, g.finish(ctx, rec, t, nil, fmt.Errorf("%s: %w", p.tool.Name, err))
	}
	if p.tool.Ext.(*toolState).post {
		// The native MCP result no longer says what the result is.
		res = &utcp.Result{Value: g.postProcess(p.tool, res.Value)}
	}
	return res, true, g.finish(ctx, rec, t, res, nil)
}

// DispatchApproved dispatches the call of an approved review for the
// daemon (the review.Queue's Dispatcher): the caller who asked for it is
// not waiting, because it asked not to (CallOptions.NoWait), went away,
// or the daemon restarted since. The queue has claimed r (approved →
// dispatching) and records the outcome DispatchApproved returns, so the
// call is dispatched exactly once.
//
// The call goes through CallTool's checks again with the review's
// principal and front, and with the approval attached to its
// review.Ticket: the guard that asked for the review is answered by it
// (no new review), while every other guard of the chain decides anew,
// so a call parked with wait=false is judged by the same guards as one
// whose caller waited (those after the reviewing guard run only once it
// is approved). A review asked by another guard parks a follow-up review
// and returns its *review.ParkedError. The tool is resolved again by
// its requested name (it may have been re-registered meanwhile), within
// the scope Options.PrincipalScope gives the review's principal.
//
// The review's Kind says what is dispatched: a tool call (""), a
// resource read (guard.ActionResource: ReadResource of r.Tool, the URI
// as requested) or a prompt get (guard.ActionPrompt: GetPrompt of
// r.Tool with the stored arguments); the result of a read or a get is
// the backend's MCP result as one JSON value. Dispatched reports whether
// the call reached its transport.
func (g *Gateway) DispatchApproved(ctx context.Context, r *review.Review) (res *utcp.Result, dispatched bool, err error) {
	var args map[string]any
	if len(r.Arguments) > 0 {
		dec := json.NewDecoder(bytes.NewReader(r.Arguments))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return nil, false, utcp.Errorf(utcp.CodeInvalidArguments, "review %s: decoding the stored arguments: %w", r.ID, err)
		}
	}
	if g.opts.PrincipalScope != nil {
		ctx = WithScope(ctx, g.opts.PrincipalScope(r.Principal))
	}
	opts := CallOptions{Principal: r.Principal, Front: r.Front, approved: r}
	var raw json.RawMessage
	switch r.Kind {
	case "", guard.ActionTool:
		return g.call(ctx, r.Tool, args, opts)
	case guard.ActionResource:
		raw, dispatched, err = g.readResource(ctx, r.Tool, opts)
	case guard.ActionPrompt:
		pargs := make(map[string]string, len(args))
		for k, v := range args {
			s, ok := v.(string)
			if !ok {
				return nil, false, utcp.NewError(utcp.CodeInvalidArguments, "review %s: the stored prompt argument %q is not a string", r.ID, k)
			}
			pargs[k] = s
		}
		raw, dispatched, err = g.getPrompt(ctx, r.Tool, pargs, opts)
	default:
		return nil, false, utcp.NewError(utcp.CodeInvalidRequest, "review %s: unknown kind %q; the call is not dispatched", r.ID, r.Kind)
	}
	if err != nil {
		return nil, dispatched, err
	}
	return &utcp.Result{Value: raw}, dispatched, nil
}

// recording reports whether calls are recorded (metrics or audit).
func (g *Gateway) recording() bool { return g.opts.OnCall != nil || g.opts.Audit != nil }

// callContext attaches the call's guard trace (when audited) and review
// ticket (with a review queue) to ctx.
func (g *Gateway) callContext(ctx context.Context, rec *CallRecord, opts CallOptions, noWait bool) (context.Context, *review.Ticket) {
	if g.opts.Audit != nil {
		ctx = guard.WithTrace(ctx, &rec.trace)
	}
	if g.opts.Reviews == nil {
		return ctx, nil
	}
	t := &review.Ticket{Front: opts.Front, NoWait: noWait, CallTimeout: opts.Timeout, Approved: opts.approved}
	return review.WithTicket(ctx, t), t
}

// CallToolStreaming calls a tool once as a stream. A transport that cannot
// stream yields its single result as one event. The same checks as
// CallTool run before dispatch. Close the stream when done.
func (g *Gateway) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts CallOptions) (transports.Stream, error) {
	st := &callState{rec: CallRecord{Tool: name, Principal: opts.Principal, Stream: true, Front: opts.Front, Toolset: opts.Toolset}}
	rec := &st.rec
	if g.recording() {
		rec.Start = time.Now()
	}
	if tracing.On() {
		ctx = startSpan(ctx, rec)
	}
	ctx, t := g.callContext(ctx, rec, opts, false)
	p, err := g.prepare(ctx, name, args, opts, rec, t, &st.p)
	if err != nil {
		return nil, g.finish(ctx, rec, t, nil, err)
	}
	cancel := context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	ctx = netguard.WithPolicy(ctx, p.policy)
	rec.Dispatched = true
	if rec.span != nil {
		ctx = startDispatch(ctx, rec, p)
	}
	var stream transports.Stream
	if st, ok := p.tr.(transports.Streamer); ok {
		stream, err = st.CallToolStream(ctx, &p.call)
	} else {
		var res *utcp.Result
		res, err = p.tr.CallTool(ctx, &p.call)
		if err == nil {
			stream = transports.SingleEvent(&utcp.Event{Data: res.Value, MCP: res.MCP})
		}
	}
	if err != nil {
		cancel()
		p.leave()
		return nil, g.finish(ctx, rec, t, nil, fmt.Errorf("%s: %w", p.tool.Name, err))
	}
	return &gatewayStream{g: g, p: p, inner: stream, rec: rec, ticket: t, cancel: cancel}, nil
}

// prepare fills p (zero) for the call, or fails.
func (g *Gateway) prepare(ctx context.Context, name string, args map[string]any, opts CallOptions, rec *CallRecord, t *review.Ticket, p *prepared) (*prepared, error) {
	// The name resolves within the caller's scope, before the guard: a
	// tool outside it is tool_not_found, as one that does not exist, and
	// the guard is shown exactly what it would be shown for such a name.
	tool, resolveErr := g.reg.ResolveIn(ScopeFrom(ctx).registry(), name)
	gc := &p.gc
	gc.Tool, gc.Arguments, gc.Principal = name, args, opts.Principal
	var ts *toolState
	if resolveErr == nil {
		ts = tool.Ext.(*toolState)
		gc.Qualified = tool.Name
		gc.Manual = tool.Manual
		gc.Protocol = ts.tmpl.Type
		gc.Template = ts.tmpl.Raw
		rec.Qualified, rec.Protocol = tool.Name, ts.tmpl.Type
	}
	gctx, gspan := ctx, trace.Span(nil)
	if rec.span != nil {
		gctx, gspan = tracing.Start(ctx, "guard", trace.SpanKindInternal)
	}
	v, err := g.guard.Evaluate(gctx, gc)
	if err != nil {
		v = guard.Verdict{Decision: guard.Error, Reason: err.Error()}
	}
	if gspan != nil {
		endGuard(gspan, v)
	}
	rec.Verdict = v
	rec.Steps = rec.trace.Steps
	if v.Decision != guard.Allow {
		return nil, t.Denied(v)
	}
	if resolveErr != nil {
		return nil, resolveErr
	}
	if !ts.manualTmpl.Allows(ts.tmpl.Type) {
		return nil, utcp.NewError(utcp.CodeProtocolNotAllowed,
			"tool %q uses communication protocol %q which is not allowed by manual %q (allowed: %v)",
			tool.Name, ts.tmpl.Type, tool.Manual, ts.manualTmpl.AllowedProtocols()).
			WithDetail("protocol", ts.tmpl.Type).WithDetail("allowed_protocols", ts.manualTmpl.AllowedProtocols())
	}
	if ts.schema != nil {
		if err := ts.schema.validate(tool.Name, args); err != nil {
			return nil, err
		}
	}
	tmpl, err := g.templateFor(tool, ts)
	if err != nil {
		return nil, err
	}
	m, ok := g.reg.Manual(tool.Manual)
	if !ok {
		return nil, utcp.NewError(utcp.CodeToolNotFound, "tool %q was removed", tool.Name)
	}
	state := m.Ext.(*manualState)
	tr := state.tr
	if tmpl.Type != state.tmpl.Type {
		if tr, err = g.transport(tmpl.Type); err != nil {
			return nil, err
		}
	}
	// Rate limits and concurrency caps: after every check, so that
	// a refused call spends no token; before dispatch.
	if p.ticket, err = g.opts.RateLimits.Acquire(ctx, opts.Principal, tool.Manual, tool.Name); err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]any{}
	}
	p.call = utcp.Call{Tool: tool.Name, Manual: tool.Manual, Name: ts.backendName, Template: tmpl, Arguments: args, Principal: opts.Principal}
	p.tool, p.state, p.tr, p.policy = tool, state, tr, ts.policy
	state.calls.enter()
	return p, nil
}

// templateFor returns the tool's template with variables substituted,
// cached until the variables change.
func (g *Gateway) templateFor(tool *registry.Tool, ts *toolState) (*utcp.CallTemplate, error) {
	if !ts.hasVars {
		return ts.tmpl, nil
	}
	gen := g.varsGen.Load()
	if r := ts.resolved.Load(); r != nil && r.gen == gen {
		return r.tmpl, nil
	}
	tmpl, err := g.resolve(ts.tmpl, tool.Manual)
	if err != nil {
		return nil, err
	}
	if ts.policy != nil {
		if err := confine(ts.policy, tmpl); err != nil {
			return nil, forbiddenTemplate(tool.Name, ts.policy, err)
		}
	}
	ts.resolved.Store(&resolvedTemplate{gen: gen, tmpl: tmpl})
	return tmpl, nil
}

func (g *Gateway) postProcess(tool *registry.Tool, v any) any {
	for _, p := range g.post {
		v = p.Process(tool.Name, tool.Manual, v)
	}
	return v
}

// finish records a finished call: the outcome of the review it claimed,
// the audit record and the OnCall record. It returns err.
func (g *Gateway) finish(ctx context.Context, rec *CallRecord, t *review.Ticket, res *utcp.Result, err error) error {
	if rec.span != nil {
		endSpan(rec, t, err)
	}
	if t != nil && t.Claimed {
		var cerr error
		if !rec.Dispatched && ctx.Err() != nil {
			// The caller went away between the approval and the
			// dispatch: the daemon runs the approved call instead.
			cerr = g.opts.Reviews.Release(ctx, t.ID)
		} else {
			cerr = g.opts.Reviews.Complete(ctx, t.ID, res, rec.Dispatched, err)
		}
		if cerr != nil {
			g.log.Error("recording the outcome of a reviewed call", "review_id", t.ID, "err", cerr)
		}
	}
	if !g.recording() {
		return err
	}
	rec.Err = err
	rec.Code = utcp.CodeOf(err)
	rec.Duration = time.Since(rec.Start)
	rec.ReviewID = t.ReviewID()
	if g.opts.Audit != nil {
		g.opts.Audit.Append(auditRecord(rec))
	}
	if g.opts.OnCall != nil {
		g.opts.OnCall(rec)
	}
	return err
}

// auditRecord converts rec to its audit record.
func auditRecord(rec *CallRecord) audit.Record {
	r := audit.Record{
		Time: rec.Start, Front: rec.Front, Principal: rec.Principal,
		Tool: rec.Tool, Qualified: rec.Qualified, Protocol: rec.Protocol,
		Decision: string(rec.Verdict.Decision), Guard: rec.Verdict.Guard, Reason: rec.Verdict.Reason,
		Dispatched: rec.Dispatched, Outcome: "ok", Duration: rec.Duration, ReviewID: rec.ReviewID, Stream: rec.Stream, Kind: rec.Kind, Toolset: rec.Toolset,
		Steps: make([]audit.Step, len(rec.Steps)),
	}
	if rec.Code != "" {
		r.Outcome = string(rec.Code)
	}
	for i, s := range rec.Steps {
		r.Steps[i] = audit.Step{Guard: s.Guard, Decision: string(s.Decision), Reason: s.Reason, Review: s.Review}
	}
	return r
}

// gatewayStream applies post-processing to each event (dropping its
// native MCP result, which no longer says what the event holds), records the call
// when the stream ends, and releases the manual when closed.
type gatewayStream struct {
	g      *Gateway
	p      *prepared
	inner  transports.Stream
	rec    *CallRecord
	ticket *review.Ticket
	cancel context.CancelFunc
	done   atomic.Bool
}

func (s *gatewayStream) Recv() (*utcp.Event, error) {
	ev, err := s.inner.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			s.end(nil)
			return nil, io.EOF
		}
		err = fmt.Errorf("%s: %w", s.p.tool.Name, err)
		s.end(err)
		return nil, err
	}
	if s.p.tool.Ext.(*toolState).post {
		ev = &utcp.Event{Type: ev.Type, ID: ev.ID, Data: s.g.postProcess(s.p.tool, ev.Data)}
	}
	return ev, nil
}

func (s *gatewayStream) Close() error {
	err := s.inner.Close()
	s.end(nil)
	return err
}

func (s *gatewayStream) end(err error) {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	s.p.leave()
	s.cancel()
	_ = s.g.finish(context.Background(), s.rec, s.ticket, nil, err)
}

// SearchTools returns up to limit tools matching query, scored by tags and
// description words (search_tools); tags, when given, filter to tools with
// at least one of them. limit <= 0 means no limit. Only the tools the
// caller's scope (ScopeFrom(ctx)) allows are considered.
func (g *Gateway) SearchTools(ctx context.Context, query string, limit int, tags []string) []*utcp.Tool {
	return defs(g.reg.SearchIn(ScopeFrom(ctx).registry(), query, limit, tags))
}

// ListTools returns every tool the caller's scope (ScopeFrom(ctx))
// allows, ordered by manual then discovery order.
func (g *Gateway) ListTools(ctx context.Context) []*utcp.Tool {
	return defs(g.reg.ToolsIn(ScopeFrom(ctx).registry()))
}

// Tool returns one tool's definition by qualified or unambiguous name,
// resolved within the caller's scope (registry.ResolveIn): a tool outside
// it is tool_not_found, as a tool that does not exist.
func (g *Gateway) Tool(ctx context.Context, name string) (*utcp.Tool, error) {
	t, err := g.reg.ResolveIn(ScopeFrom(ctx).registry(), name)
	if err != nil {
		return nil, err
	}
	return t.Def, nil
}

// AuthMetadata returns the lifecycle metadata of a tool's effective auth:
// the tool template's auth, else its manual's. The name resolves as Tool's.
func (g *Gateway) AuthMetadata(ctx context.Context, name string) (utcp.AuthMetadata, error) {
	t, err := g.reg.ResolveIn(ScopeFrom(ctx).registry(), name)
	if err != nil {
		return utcp.AuthMetadata{}, err
	}
	ts := t.Ext.(*toolState)
	return utcp.EffectiveAuth(ts.manualTmpl, ts.tmpl).Metadata(), nil
}

func defs(tools []*registry.Tool) []*utcp.Tool {
	out := make([]*utcp.Tool, len(tools))
	for i, t := range tools {
		out[i] = t.Def
	}
	return out
}
