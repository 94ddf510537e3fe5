package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/guard"
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
	schema      *schema            // argument validator, nil when any object is accepted
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
}

// prepared is a call that passed every check and is ready to dispatch.
type prepared struct {
	// call and gc live inside prepared so that a call allocates once.
	call  utcp.Call
	gc    guard.Call
	tool  *registry.Tool
	state *manualState
	tr    transports.Transport
}

// CallTool calls a tool once. In order: the guard chain decides; the name
// resolves (qualified, or unqualified while unambiguous); the manual's
// allowed_communication_protocols is checked again; arguments are
// validated against the tool's input schema; variables are substituted;
// the transport carries the call exactly once; post-processors shape the
// result. A failure the tool reports is a *utcp.ToolError; every other
// failure is an error with a utcp.Code.
func (g *Gateway) CallTool(ctx context.Context, name string, args map[string]any, opts CallOptions) (*utcp.Result, error) {
	rec := CallRecord{Tool: name, Principal: opts.Principal}
	if g.opts.OnCall != nil {
		rec.Start = time.Now()
	}
	p, err := g.prepare(ctx, name, args, opts, &rec)
	if err != nil {
		return nil, g.finish(&rec, err)
	}
	res, err := p.tr.CallTool(ctx, &p.call)
	p.state.calls.RUnlock()
	if err != nil {
		return nil, g.finish(&rec, fmt.Errorf("%s: %w", p.tool.Name, err))
	}
	if len(g.post) > 0 {
		res = &utcp.Result{Value: g.postProcess(p.tool, res.Value)}
	}
	return res, g.finish(&rec, nil)
}

// CallToolStreaming calls a tool once as a stream. A transport that cannot
// stream yields its single result as one event. The same checks as
// CallTool run before dispatch. Close the stream when done.
func (g *Gateway) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts CallOptions) (transports.Stream, error) {
	rec := CallRecord{Tool: name, Principal: opts.Principal, Stream: true}
	if g.opts.OnCall != nil {
		rec.Start = time.Now()
	}
	p, err := g.prepare(ctx, name, args, opts, &rec)
	if err != nil {
		return nil, g.finish(&rec, err)
	}
	var stream transports.Stream
	if st, ok := p.tr.(transports.Streamer); ok {
		stream, err = st.CallToolStream(ctx, &p.call)
	} else {
		var res *utcp.Result
		res, err = p.tr.CallTool(ctx, &p.call)
		if err == nil {
			stream = transports.SingleEvent(&utcp.Event{Data: res.Value})
		}
	}
	if err != nil {
		p.state.calls.RUnlock()
		return nil, g.finish(&rec, fmt.Errorf("%s: %w", p.tool.Name, err))
	}
	return &gatewayStream{g: g, p: p, inner: stream, rec: rec}, nil
}

func (g *Gateway) prepare(ctx context.Context, name string, args map[string]any, opts CallOptions, rec *CallRecord) (*prepared, error) {
	tool, resolveErr := g.reg.Resolve(name)
	p := &prepared{}
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
	v, err := g.guard.Evaluate(ctx, gc)
	if err != nil {
		v = guard.Verdict{Decision: guard.Error, Reason: err.Error()}
	}
	rec.Verdict = v
	if v.Decision != guard.Allow {
		return nil, guard.Denied(v)
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
	if args == nil {
		args = map[string]any{}
	}
	p.call = utcp.Call{Tool: tool.Name, Manual: tool.Manual, Name: ts.backendName, Template: tmpl, Arguments: args, Principal: opts.Principal}
	p.tool, p.state, p.tr = tool, state, tr
	state.calls.RLock()
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
	ts.resolved.Store(&resolvedTemplate{gen: gen, tmpl: tmpl})
	return tmpl, nil
}

func (g *Gateway) postProcess(tool *registry.Tool, v any) any {
	for _, p := range g.post {
		v = p.Process(tool.Name, tool.Manual, v)
	}
	return v
}

func (g *Gateway) finish(rec *CallRecord, err error) error {
	if g.opts.OnCall != nil {
		rec.Err = err
		rec.Code = utcp.CodeOf(err)
		rec.Duration = time.Since(rec.Start)
		g.opts.OnCall(rec)
	}
	return err
}

// gatewayStream applies post-processing to each event, records the call
// when the stream ends, and releases the manual when closed.
type gatewayStream struct {
	g     *Gateway
	p     *prepared
	inner transports.Stream
	rec   CallRecord
	done  atomic.Bool
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
	if len(s.g.post) > 0 {
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
	s.p.state.calls.RUnlock()
	_ = s.g.finish(&s.rec, err)
}

// SearchTools returns up to limit tools matching query, scored by tags and
// description words (search_tools); tags, when given, filter to tools with
// at least one of them. limit <= 0 means no limit.
func (g *Gateway) SearchTools(query string, limit int, tags []string) []*utcp.Tool {
	return defs(g.reg.Search(query, limit, tags))
}

// ListTools returns every registered tool, ordered by manual then
// discovery order.
func (g *Gateway) ListTools() []*utcp.Tool { return defs(g.reg.Tools()) }

// Tool returns one tool's definition by qualified or unambiguous name.
func (g *Gateway) Tool(name string) (*utcp.Tool, error) {
	t, err := g.reg.Resolve(name)
	if err != nil {
		return nil, err
	}
	return t.Def, nil
}

// AuthMetadata returns the lifecycle metadata of a tool's effective auth:
// the tool template's auth, else its manual's.
func (g *Gateway) AuthMetadata(name string) (utcp.AuthMetadata, error) {
	t, err := g.reg.Resolve(name)
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
