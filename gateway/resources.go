package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Resources, resource templates, prompts and completions of MCP backends
// (transports.Resourcer), under names that never collide across backends:
//
//   - a resource's utcpd URI is "utcpd://<manual>.<server>/" followed by
//     its URI at the backend, unchanged ("utcpd://everything.srv/test://static/1");
//   - a resource template's likewise, from its uriTemplate, so that a URI
//     the template matches at utcpd is a URI it matches at the backend
//     behind the same prefix;
//   - a prompt's name is "<manual>.<server>.<name>", as a tool's.
//
// Manual names hold no dot, so the first dot of the namespace ends the
// manual's name; the rest up to the first '/' is the server's.
//
// Every listing, read, prompt, completion and subscription is decided
// within the caller's scope (ScopeFrom(ctx), Scope.AllowsServer): a
// server outside it is answered exactly as a server that does not exist.

// URIScheme is the scheme of utcpd URIs of backend resources.
const URIScheme = "utcpd"

// The kinds of MCPItem.
const (
	ItemResource         = "resource"
	ItemResourceTemplate = "resource_template"
	ItemPrompt           = "prompt"
)

// QualifyURI returns the utcpd URI of uri, a resource URI (or URI
// template) of the server of manual.
func QualifyURI(manual, server, uri string) string {
	return URIScheme + "://" + manual + "." + server + "/" + uri
}

// QualifyPrompt returns the utcpd name of the prompt name of the server
// of manual.
func QualifyPrompt(manual, server, name string) string {
	return manual + "." + server + "." + name
}

// MCPItem is one resource, resource template or prompt of an MCP backend.
type MCPItem struct {
	// Kind is ItemResource, ItemResourceTemplate or ItemPrompt.
	Kind string
	// Name is the utcpd URI (resources), URI template (templates) or
	// prompt name (prompts).
	Name string
	// Native is the same at the backend: its own URI, URI template or
	// prompt name.
	Native string
	// Manual and Server name the backend.
	Manual, Server string
	// Object is the MCP object as the backend listed it (its own names).
	Object json.RawMessage
}

// Renamed returns the item's MCP object with its uri (resources),
// uriTemplate (templates) or name (prompts) replaced by name.
func (it MCPItem) Renamed(name string) json.RawMessage {
	key := "name"
	switch it.Kind {
	case ItemResource:
		key = "uri"
	case ItemResourceTemplate:
		key = "uriTemplate"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(it.Object, &m); err != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	b, _ := json.Marshal(name)
	m[key] = b
	out, err := json.Marshal(m)
	if err != nil {
		return it.Object
	}
	return out
}

// MCPCatalog is every MCP backend's resources, templates and prompts.
type MCPCatalog struct {
	Resources, ResourceTemplates, Prompts []MCPItem
}

// resourceBackend is one manual whose transport serves resources.
type resourceBackend struct {
	manual string
	state  *manualState
	tmpl   *utcp.CallTemplate // as registered (variables resolved)
	r      transports.Resourcer
}

// resourceBackends lists the manuals whose transport is a Resourcer.
func (g *Gateway) resourceBackends() []resourceBackend {
	var out []resourceBackend
	for _, m := range g.reg.Manuals() {
		if b, ok := g.resourceBackend(m.Name); ok {
			out = append(out, b)
		}
	}
	return out
}

func (g *Gateway) resourceBackend(manual string) (resourceBackend, bool) {
	m, ok := g.reg.Manual(manual)
	if !ok {
		return resourceBackend{}, false
	}
	st, ok := m.Ext.(*manualState)
	if !ok || st.placeholder || st.tr == nil {
		return resourceBackend{}, false
	}
	r, ok := transports.ResourcerOf(st.tr)
	if !ok {
		return resourceBackend{}, false
	}
	tmpl := st.resolved
	if tmpl == nil {
		tmpl = st.tmpl
	}
	return resourceBackend{manual: m.Name, state: st, tmpl: tmpl, r: r}, true
}

// ListMCP returns the resources, resource templates and prompts of every
// MCP backend, ordered by manual, then server, then as the backend
// listed them, within the caller's scope (ScopeFrom(ctx),
// Scope.AllowsServer). A backend that cannot be listed is left out (and
// logged).
func (g *Gateway) ListMCP(ctx context.Context) *MCPCatalog {
	scope := ScopeFrom(ctx)
	backends := g.resourceBackends()
	cats := make([][]transports.Catalog, len(backends))
	var wg sync.WaitGroup
	for i, b := range backends {
		wg.Go(func() {
			c, err := b.r.Catalog(ctx, b.tmpl)
			if err != nil {
				g.log.Warn("listing the resources and prompts of a manual failed", "manual", b.manual, "err", err)
				return
			}
			cats[i] = c
		})
	}
	wg.Wait()
	out := &MCPCatalog{Resources: []MCPItem{}, ResourceTemplates: []MCPItem{}, Prompts: []MCPItem{}}
	for i, b := range backends {
		for _, c := range cats[i] {
			if !scope.AllowsServer(b.manual, c.Server) {
				continue
			}
			for _, o := range c.Resources {
				if n := member(o, "uri"); n != "" {
					out.Resources = append(out.Resources, MCPItem{Kind: ItemResource, Name: QualifyURI(b.manual, c.Server, n), Native: n, Manual: b.manual, Server: c.Server, Object: o})
				}
			}
			for _, o := range c.ResourceTemplates {
				if n := member(o, "uriTemplate"); n != "" {
					out.ResourceTemplates = append(out.ResourceTemplates, MCPItem{Kind: ItemResourceTemplate, Name: QualifyURI(b.manual, c.Server, n), Native: n, Manual: b.manual, Server: c.Server, Object: o})
				}
			}
			for _, o := range c.Prompts {
				if n := member(o, "name"); n != "" {
					out.Prompts = append(out.Prompts, MCPItem{Kind: ItemPrompt, Name: QualifyPrompt(b.manual, c.Server, n), Native: n, Manual: b.manual, Server: c.Server, Object: o})
				}
			}
		}
	}
	return out
}

// member returns the string member key of the JSON object o.
func member(o json.RawMessage, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(o, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

// target is a resolved resource URI or prompt name.
type target struct {
	b      resourceBackend
	server string
	native string
}

// resolveURI finds the backend of a utcpd URI, within the scope in ctx:
// a server outside it is answered as one that does not exist.
func (g *Gateway) resolveURI(ctx context.Context, uri string) (target, error) {
	rest, ok := strings.CutPrefix(uri, URIScheme+"://")
	ns, native, ok2 := strings.Cut(rest, "/")
	manual, server, ok3 := strings.Cut(ns, ".")
	if !ok || !ok2 || !ok3 || native == "" {
		return target{}, utcp.NewError(utcp.CodeNotFound, "resource %q not found: a utcpd resource URI is %s://<manual>.<server>/<the backend's URI>", uri, URIScheme).WithDetail("uri", uri)
	}
	b, ok := g.resourceBackend(manual)
	if !ok || !contains(b.r.Servers(b.tmpl), server) || !ScopeFrom(ctx).AllowsServer(manual, server) {
		return target{}, utcp.NewError(utcp.CodeNotFound, "resource %q not found: no MCP server %s.%s", uri, manual, server).WithDetail("uri", uri)
	}
	return target{b: b, server: server, native: native}, nil
}

// resolvePrompt finds the backend of a utcpd prompt name, within the
// scope in ctx: a server outside it is answered as one that does not
// exist.
func (g *Gateway) resolvePrompt(ctx context.Context, name string) (target, error) {
	scope := ScopeFrom(ctx)
	manual, rest, ok := strings.Cut(name, ".")
	if ok {
		if b, found := g.resourceBackend(manual); found {
			servers := b.r.Servers(b.tmpl)
			sort.SliceStable(servers, func(i, j int) bool { return len(servers[i]) > len(servers[j]) })
			for _, s := range servers {
				if !scope.AllowsServer(manual, s) {
					continue
				}
				if p, cut := strings.CutPrefix(rest, s+"."); cut && p != "" {
					return target{b: b, server: s, native: p}, nil
				}
			}
		}
	}
	return target{}, utcp.NewError(utcp.CodeNotFound, "prompt %q not found: a utcpd prompt name is <manual>.<server>.<prompt>", name).WithDetail("prompt", name)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ReadResource reads a resource by its utcpd URI (resources/read): the
// guard chain decides it as a guard.Call of Kind guard.ActionResource,
// the manual's allowed_communication_protocols must allow its type, the
// backend answers, and the read is audited (Kind "resource"). The
// answer is the backend's ReadResourceResult, its contents' URIs the
// backend's own. Failures carry a utcp.Code (not_found for a URI no
// backend serves; a backend's JSON-RPC error keeps its code in the
// details rpc_code and rpc_message).
//
// With opts.NoWait and a review queue, a read that needs review is
// parked (a *review.ParkedError) and the daemon reads it once approved,
// keeping the ReadResourceResult with the review (DispatchApproved).
func (g *Gateway) ReadResource(ctx context.Context, uri string, opts CallOptions) (json.RawMessage, error) {
	res, _, err := g.readResource(ctx, uri, opts)
	return res, err
}

func (g *Gateway) readResource(ctx context.Context, uri string, opts CallOptions) (json.RawMessage, bool, error) {
	return g.mcpAction(ctx, guard.ActionResource, uri, nil, opts, g.resolveURI,
		func(ctx context.Context, tg target) (json.RawMessage, error) {
			return tg.b.r.ReadResource(ctx, tg.b.tmpl, tg.server, tg.native)
		})
}

// GetPrompt gets a prompt by its utcpd name (prompts/get), with the same
// guard chain (Kind guard.ActionPrompt, the arguments as the call's),
// protocol check and audit as ReadResource. The answer is the backend's
// GetPromptResult. opts.NoWait parks a prompt get that needs review, as
// for ReadResource.
func (g *Gateway) GetPrompt(ctx context.Context, name string, args map[string]string, opts CallOptions) (json.RawMessage, error) {
	res, _, err := g.getPrompt(ctx, name, args, opts)
	return res, err
}

func (g *Gateway) getPrompt(ctx context.Context, name string, args map[string]string, opts CallOptions) (json.RawMessage, bool, error) {
	return g.mcpAction(ctx, guard.ActionPrompt, name, args, opts, g.resolvePrompt,
		func(ctx context.Context, tg target) (json.RawMessage, error) {
			return tg.b.r.GetPrompt(ctx, tg.b.tmpl, tg.server, tg.native, args)
		})
}

// mcpAction runs one guarded, audited resources/read or prompts/get,
// also reporting whether it reached the backend.
func (g *Gateway) mcpAction(ctx context.Context, kind, name string, args map[string]string, opts CallOptions,
	resolve func(context.Context, string) (target, error), do func(context.Context, target) (json.RawMessage, error)) (json.RawMessage, bool, error) {
	rec := CallRecord{Tool: name, Principal: opts.Principal, Front: opts.Front, Kind: kind}
	if g.recording() {
		rec.Start = time.Now()
	}
	ctx, t := g.callContext(ctx, &rec, opts, opts.NoWait)
	tg, resolveErr := resolve(ctx, name)
	gc := &guard.Call{Tool: name, Principal: opts.Principal, Kind: kind, Arguments: map[string]any{}}
	for k, v := range args {
		gc.Arguments[k] = v
	}
	if resolveErr == nil {
		gc.Qualified, gc.Manual, gc.Protocol, gc.Template = name, tg.b.manual, tg.b.state.tmpl.Type, tg.b.state.tmpl.Raw
		if kind == guard.ActionResource {
			gc.Arguments["uri"] = tg.native
		}
		rec.Qualified, rec.Protocol = name, gc.Protocol
	}
	v, err := g.guard.Evaluate(ctx, gc)
	if err != nil {
		v = guard.Verdict{Decision: guard.Error, Reason: err.Error()}
	}
	rec.Verdict = v
	rec.Steps = rec.trace.Steps
	if v.Decision != guard.Allow {
		return nil, false, g.finish(ctx, &rec, t, nil, t.Denied(v))
	}
	if resolveErr != nil {
		return nil, false, g.finish(ctx, &rec, t, nil, resolveErr)
	}
	mt := tg.b.state.tmpl
	if !mt.Allows(mt.Type) {
		return nil, false, g.finish(ctx, &rec, t, nil, utcp.NewError(utcp.CodeProtocolNotAllowed,
			"%s %q uses communication protocol %q which is not allowed by manual %q (allowed: %v)", kind, name, mt.Type, tg.b.manual, mt.AllowedProtocols()).
			WithDetail("protocol", mt.Type).WithDetail("allowed_protocols", mt.AllowedProtocols()))
	}
	dctx := ctx
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	tg.b.state.calls.enter()
	rec.Dispatched = true
	res, err := do(dctx, tg)
	tg.b.state.calls.leave()
	if err != nil {
		return nil, true, g.finish(ctx, &rec, t, nil, fmt.Errorf("%s: %w", name, err))
	}
	// The result is kept with the review this call claimed, if any.
	return res, true, g.finish(ctx, &rec, t, &utcp.Result{Value: res}, nil)
}

// Complete answers an MCP completion/complete request (a CompleteParams
// whose ref names a prompt by its utcpd name, or a resource template by
// its utcpd URI template) by forwarding it, renamed, to the backend that
// owns the prompt or template. Completions suggest argument values; they
// are not guarded or audited.
func (g *Gateway) Complete(ctx context.Context, params json.RawMessage, opts CallOptions) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil || p == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "completion/complete: the parameters are not a JSON object")
	}
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name,omitempty"`
		URI  string `json:"uri,omitempty"`
	}
	if err := json.Unmarshal(p["ref"], &ref); err != nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "completion/complete: ref is missing or not an object")
	}
	var tg target
	var err error
	switch ref.Type {
	case "ref/prompt":
		tg, err = g.resolvePrompt(ctx, ref.Name)
		ref.Name = tg.native
	case "ref/resource":
		tg, err = g.resolveURI(ctx, ref.URI)
		ref.URI = tg.native
	default:
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "completion/complete: ref.type %q is neither ref/prompt nor ref/resource", ref.Type)
	}
	if err != nil {
		return nil, err
	}
	p["ref"], _ = json.Marshal(ref)
	body, err := json.Marshal(p)
	if err != nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "completion/complete: %v", err)
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	tg.b.state.calls.enter()
	defer tg.b.state.calls.leave()
	return tg.b.r.Complete(ctx, tg.b.tmpl, tg.server, body)
}

// SubscribeResource asks the backend of a utcpd URI for
// notifications/resources/updated of it, which WatchResources reports.
// Subscriptions are counted per URI: the backend is subscribed on the
// first and unsubscribed on the last UnsubscribeResource, so every front
// session that subscribes calls each once.
func (g *Gateway) SubscribeResource(ctx context.Context, uri string) error {
	tg, err := g.resolveURI(ctx, uri)
	if err != nil {
		return err
	}
	w := &g.resWatch
	w.subMu.Lock()
	defer w.subMu.Unlock()
	if w.subs[uri] > 0 {
		w.subs[uri]++
		return nil
	}
	if err := tg.b.r.Subscribe(ctx, tg.b.tmpl, tg.server, tg.native); err != nil {
		return err
	}
	if w.subs == nil {
		w.subs = map[string]int{}
	}
	w.subs[uri] = 1
	return nil
}

// UnsubscribeResource balances one SubscribeResource; the last
// unsubscribes the backend. An URI not subscribed is no error.
func (g *Gateway) UnsubscribeResource(ctx context.Context, uri string) error {
	w := &g.resWatch
	w.subMu.Lock()
	defer w.subMu.Unlock()
	if w.subs[uri] == 0 {
		return nil
	}
	if w.subs[uri]--; w.subs[uri] > 0 {
		return nil
	}
	delete(w.subs, uri)
	tg, err := g.resolveURI(WithScope(ctx, nil), uri) // subscribed within a scope already
	if err != nil {
		return nil // the backend is gone, and its subscription with it
	}
	return tg.b.r.Unsubscribe(ctx, tg.b.tmpl, tg.server, tg.native)
}

// ResourceNotice is a backend's notification about its resources or
// prompts, as WatchResources reports it.
type ResourceNotice struct {
	// Kind is transports.ResourcesChanged, transports.PromptsChanged or
	// transports.ResourceUpdated.
	Kind string
	// Manual and Server name the backend.
	Manual, Server string
	// URI is the updated resource's utcpd URI (ResourceUpdated), Native
	// its URI at the backend.
	URI, Native string
}

// resWatchers holds WatchResources's functions and the subscription
// counts.
type resWatchers struct {
	watchers[ResourceNotice]

	subMu sync.Mutex
	subs  map[string]int // utcpd URI → subscribers
}

// WatchResources registers fn for every notification a backend sends
// about its resources and prompts (list changes, updates of subscribed
// resources). fn runs on a transport's goroutine and must not block.
// cancel stops further calls; it is idempotent.
func (g *Gateway) WatchResources(fn func(ResourceNotice)) (cancel func()) {
	return g.resWatch.add(fn)
}

// resourceEvent is the transports' OnResourceEvent callback.
func (g *Gateway) resourceEvent(ev transports.ResourceEvent) {
	n := ResourceNotice{Kind: ev.Kind, Manual: ev.Manual, Server: ev.Server, Native: ev.URI}
	if ev.Kind == transports.ResourceUpdated {
		n.URI = QualifyURI(ev.Manual, ev.Server, ev.URI)
	}
	g.resWatch.notify(n)

}
