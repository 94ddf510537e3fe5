package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// ResourceBackend is implemented by a Backend that also serves the
// resources, resource templates, prompts and completions of MCP servers
// behind it (GatewayBackend does). Names are utcpd's (gateway.QualifyURI,
// gateway.QualifyPrompt); the front maps the native ones. Its methods
// must be safe for concurrent use.
type ResourceBackend interface {
	// Catalog lists every resource, template and prompt.
	Catalog(ctx context.Context) (*gateway.MCPCatalog, error)
	// ReadResource is gateway.Gateway.ReadResource.
	ReadResource(ctx context.Context, uri string, opts gateway.CallOptions) (json.RawMessage, error)
	// GetPrompt is gateway.Gateway.GetPrompt.
	GetPrompt(ctx context.Context, name string, args map[string]string, opts gateway.CallOptions) (json.RawMessage, error)
	// Complete is gateway.Gateway.Complete.
	Complete(ctx context.Context, params json.RawMessage, opts gateway.CallOptions) (json.RawMessage, error)
	// SubscribeResource and UnsubscribeResource are the gateway's.
	SubscribeResource(ctx context.Context, uri string) error
	UnsubscribeResource(ctx context.Context, uri string) error
	// WatchResources is gateway.Gateway.WatchResources.
	WatchResources(fn func(gateway.ResourceNotice)) (cancel func())
}

// SubscriptionRefuser may be implemented by a ResourceBackend that
// cannot relay resource updates ("utcpd mcp --connect"): when
// RefusesSubscriptions reports true the front does not declare
// resources.subscribe and resources/subscribe is method not found.
type SubscriptionRefuser interface {
	RefusesSubscriptions() bool
}

func (b gatewayBackend) Catalog(ctx context.Context) (*gateway.MCPCatalog, error) {
	return b.ListMCP(ctx), nil
}

var _ ResourceBackend = gatewayBackend{}

// resources is the front's state of the backends' resources and prompts.
type resources struct {
	rb          ResourceBackend
	cancelWatch func()

	mu        sync.Mutex
	resources map[string]publishedItem                 // front URI → item
	templates map[string]publishedItem                 // front URI template → item
	prompts   map[string]publishedItem                 // front name → item
	subs      map[*mcp.ServerSession]map[string]string // session → front URI → utcpd URI
}

// publishedItem is one item as the SDK server has it.
type publishedItem struct {
	item        gateway.MCPItem
	native      bool // listed under the backend's own name
	fingerprint string
}

// resourceBackend returns the Backend's ResourceBackend, nil if none.
func (s *Server) resourceBackend() ResourceBackend {
	rb, _ := s.backend.(ResourceBackend)
	return rb
}

// resourceOptions declares resources (listChanged, subscribe), prompts
// (listChanged) and completions when the Backend serves them.
func (s *Server) resourceOptions(o *mcp.ServerOptions) {
	if s.resourceBackend() == nil {
		return
	}
	sr, ok := s.resourceBackend().(SubscriptionRefuser)
	subscribe := !ok || !sr.RefusesSubscriptions()
	o.Capabilities.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: subscribe}
	o.Capabilities.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	o.CompletionHandler = s.complete
	if subscribe {
		o.SubscribeHandler = s.subscribe
		o.UnsubscribeHandler = s.unsubscribe
	}
}

// initResources publishes the catalog and follows the backends'
// notifications.
func (s *Server) initResources(ctx context.Context) {
	rb := s.resourceBackend()
	if rb == nil {
		return
	}
	s.res = &resources{rb: rb, resources: map[string]publishedItem{}, templates: map[string]publishedItem{},
		prompts: map[string]publishedItem{}, subs: map[*mcp.ServerSession]map[string]string{}}
	s.syncCatalog(ctx)
	s.res.cancelWatch = rb.WatchResources(s.resourceNotice)
}

// closeResources stops following the backends' notifications.
func (s *Server) closeResources() {
	if s.res != nil && s.res.cancelWatch != nil {
		s.res.cancelWatch()
	}
}

// resourceNotice relays one backend notification: list changes resync
// the catalog (the SDK then sends list_changed when it changed), an
// update goes to the sessions subscribed to the resource.
func (s *Server) resourceNotice(n gateway.ResourceNotice) {
	switch n.Kind {
	case transports.ResourceUpdated:
		uri := n.URI
		if s.isNative(n.Manual, n.Server) {
			uri = n.Native
		}
		ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
		defer cancel()
		_ = s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	default:
		s.markDirty()
	}
}

// isNative reports whether the server of manual is listed under its own
// names (Options.NativeNames).
func (s *Server) isNative(manual, server string) bool {
	for _, p := range s.opts.NativeNames {
		if p == manual+"."+server {
			return true
		}
	}
	return false
}

// syncCatalog publishes the backends' resources, templates and prompts
// to the SDK server, under native names for the servers of
// Options.NativeNames (the first item keeps a name two want) and utcpd's
// names otherwise.
func (s *Server) syncCatalog(ctx context.Context) {
	if s.res == nil {
		return
	}
	cat, err := s.res.rb.Catalog(ctx)
	if err != nil {
		s.log.Warn("MCP front: listing the resources and prompts failed; the last list keeps serving", "err", err)
		return
	}
	r := s.res
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resources = s.publish(cat.Resources, r.resources,
		func(name string, it gateway.MCPItem, native bool) error {
			var res mcp.Resource
			if err := json.Unmarshal(it.Renamed(name), &res); err != nil {
				return err
			}
			s.mcp.AddResource(&res, s.readHandler(it, native))
			return nil
		}, s.mcp.RemoveResources)
	r.templates = s.publish(cat.ResourceTemplates, r.templates,
		func(name string, it gateway.MCPItem, native bool) error {
			var rt mcp.ResourceTemplate
			if err := json.Unmarshal(it.Renamed(name), &rt); err != nil {
				return err
			}
			s.mcp.AddResourceTemplate(&rt, s.readHandler(it, native))
			return nil
		}, s.mcp.RemoveResourceTemplates)
	r.prompts = s.publish(cat.Prompts, r.prompts,
		func(name string, it gateway.MCPItem, native bool) error {
			var p mcp.Prompt
			if err := json.Unmarshal(it.Renamed(name), &p); err != nil {
				return err
			}
			s.mcp.AddPrompt(&p, s.promptHandler(it, native))
			return nil
		}, s.mcp.RemovePrompts)
}

// publish adds the items that are new or changed, removes the ones gone,
// and returns the new map. The SDK sends list_changed for each change.
func (s *Server) publish(items []gateway.MCPItem, old map[string]publishedItem,
	add func(name string, it gateway.MCPItem, native bool) error, remove func(...string)) map[string]publishedItem {
	next := make(map[string]publishedItem, len(items))
	for _, it := range items {
		native := s.isNative(it.Manual, it.Server)
		name := it.Name
		if native {
			name = it.Native
		}
		if _, dup := next[name]; dup {
			s.log.Warn("MCP front: two backends list the same native name; the first keeps it", "name", name, "manual", it.Manual, "server", it.Server)
			continue
		}
		pub := publishedItem{item: it, native: native, fingerprint: string(it.Object)}
		if o, ok := old[name]; ok && o.item.Name == it.Name && o.fingerprint == pub.fingerprint {
			next[name] = o
			continue
		}
		if err := safeAdd(func() error { return add(name, it, native) }); err != nil {
			s.log.Warn("MCP front: item left out", "kind", it.Kind, "name", it.Name, "err", err)
			continue
		}
		next[name] = pub
	}
	var gone []string
	for name := range old {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		remove(gone...)
	}
	return next
}

// safeAdd runs add, turning the SDK's panic on an invalid URI or URI
// template into an error (a backend's listing never stops the front).
func safeAdd(add func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return add()
}

// utcpdURI maps a front URI of it's backend to its utcpd URI.
func utcpdURI(it gateway.MCPItem, native bool, uri string) string {
	if native {
		return gateway.QualifyURI(it.Manual, it.Server, uri)
	}
	return uri
}

// frontURI maps a URI at the backend to what the front's client sees.
func frontURI(it gateway.MCPItem, native bool, uri string) string {
	if native || uri == "" {
		return uri
	}
	return gateway.QualifyURI(it.Manual, it.Server, uri)
}

func (s *Server) callOptions(extra *mcp.RequestExtra) gateway.CallOptions {
	p := s.opts.Principal
	if extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" {
		p = extra.TokenInfo.UserID
	}
	return gateway.CallOptions{Principal: p, Front: FrontName, Timeout: s.opts.CallTimeout}
}

// readHandler reads a resource (or a URI of a template) of it's backend.
func (s *Server) readHandler(it gateway.MCPItem, native bool) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		if !itemInScope(ctx, it) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		raw, err := s.res.rb.ReadResource(ctx, utcpdURI(it, native, uri), s.callOptions(req.Extra))
		if err != nil {
			return nil, s.resourceFailure("resources/read", uri, err)
		}
		var res mcp.ReadResourceResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, s.resourceFailure("resources/read", uri, utcp.Errorf(utcp.CodeTransportError, "the backend's answer does not decode: %w", err))
		}
		for _, c := range res.Contents {
			if c != nil {
				c.URI = frontURI(it, native, c.URI)
			}
		}
		if res.Contents == nil {
			res.Contents = []*mcp.ResourceContents{}
		}
		return &res, nil
	}
}

// promptHandler gets a prompt of it's backend.
func (s *Server) promptHandler(it gateway.MCPItem, _ bool) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if !itemInScope(ctx, it) {
			return nil, unknownPrompt(req.Params.Name)
		}
		raw, err := s.res.rb.GetPrompt(ctx, it.Name, req.Params.Arguments, s.callOptions(req.Extra))
		if err != nil {
			return nil, s.resourceFailure("prompts/get", req.Params.Name, err)
		}
		var res mcp.GetPromptResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, s.resourceFailure("prompts/get", req.Params.Name, utcp.Errorf(utcp.CodeTransportError, "the backend's answer does not decode: %w", err))
		}
		if res.Messages == nil {
			res.Messages = []*mcp.PromptMessage{}
		}
		return &res, nil
	}
}

// resolveFront maps a front URI to its utcpd URI for subscriptions and
// completions: a listed resource or template URI, a utcpd URI, or (with
// one native server) a URI of that server.
func (s *Server) resolveFront(uri string, templates bool) (string, bool) {
	r := s.res
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.resources
	if templates {
		m = r.templates
	}
	if p, ok := m[uri]; ok {
		return p.item.Name, true
	}
	if strings.HasPrefix(uri, gateway.URIScheme+"://") {
		return uri, true
	}
	if len(s.opts.NativeNames) == 1 {
		manual, server, _ := strings.Cut(s.opts.NativeNames[0], ".")
		return gateway.QualifyURI(manual, server, uri), true
	}
	return "", false
}

func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	q, ok := s.resolveFront(uri, false)
	if !ok || !s.uriInScope(ctx, q) {
		return mcp.ResourceNotFoundError(uri)
	}
	r := s.res
	r.mu.Lock()
	_, dup := r.subs[req.Session][uri]
	r.mu.Unlock()
	if dup {
		return nil
	}
	if err := r.rb.SubscribeResource(ctx, q); err != nil {
		return s.resourceFailure("resources/subscribe", uri, err)
	}
	r.mu.Lock()
	first := r.subs[req.Session] == nil
	if first {
		r.subs[req.Session] = map[string]string{}
	}
	r.subs[req.Session][uri] = q
	r.mu.Unlock()
	if first && req.Session != nil {
		// The session's subscriptions end with it.
		ss := req.Session
		go func() {
			_ = ss.Wait()
			r.mu.Lock()
			left := r.subs[ss]
			delete(r.subs, ss)
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, q := range left {
				_ = r.rb.UnsubscribeResource(ctx, q)
			}
		}()
	}
	return nil
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	r := s.res
	r.mu.Lock()
	q, ok := r.subs[req.Session][uri]
	delete(r.subs[req.Session], uri)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	if err := r.rb.UnsubscribeResource(ctx, q); err != nil {
		return s.resourceFailure("resources/unsubscribe", uri, err)
	}
	return nil
}

// complete forwards completion/complete to the backend owning the
// prompt or resource template its ref names.
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := *req.Params
	ref := *p.Ref
	switch ref.Type {
	case "ref/prompt":
		s.res.mu.Lock()
		it, ok := s.res.prompts[ref.Name]
		s.res.mu.Unlock()
		if !ok || !itemInScope(ctx, it.item) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", ref.Name)}
		}
		ref.Name = it.item.Name
	case "ref/resource":
		q, ok := s.resolveFront(ref.URI, true)
		if !ok || !s.uriInScope(ctx, q) {
			return nil, mcp.ResourceNotFoundError(ref.URI)
		}
		ref.URI = q
	}
	p.Ref = &ref
	body, err := json.Marshal(&p)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	raw, err := s.res.rb.Complete(ctx, body, s.callOptions(req.Extra))
	if err != nil {
		return nil, s.resourceFailure("completion/complete", ref.Type, err)
	}
	var res mcp.CompleteResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, s.resourceFailure("completion/complete", ref.Type, utcp.Errorf(utcp.CodeTransportError, "the backend's answer does not decode: %w", err))
	}
	if res.Completion.Values == nil {
		res.Completion.Values = []string{}
	}
	return &res, nil
}

// resourceFailure maps the failure of a resources, prompts or completion
// request to a JSON-RPC error (these methods have no isError results):
// a backend's own JSON-RPC error is answered as the backend sent it
// (code and message); not_found is the SDK's resource-not-found error
// (-32602 since SEP-2164) for resources and -32602 otherwise; invalid_arguments and invalid_request
// -32602; internal and canceled -32603; guard refusals and every other
// code -32000 "<code>: <message>". data is {"code", "details"} as for
// tool calls.
func (s *Server) resourceFailure(method, name string, err error) error {
	_, env := httpx.Problem(err)
	body := env.Error
	if c, ok := body.Details["rpc_code"]; ok {
		code, _ := c.(int64)
		if code == 0 {
			if f, ok := c.(float64); ok {
				code = int64(f)
			}
			if i, ok := c.(int); ok {
				code = int64(i)
			}
		}
		msg, _ := body.Details["rpc_message"].(string)
		if code != 0 && msg != "" {
			return rpcError(code, body.Code, msg, body.Details)
		}
	}
	switch body.Code {
	case utcp.CodeNotFound:
		if strings.HasPrefix(method, "resources/") {
			return rpcError(jsonrpc.CodeInvalidParams, body.Code, "Resource not found: "+name, body.Details)
		}
		return rpcError(jsonrpc.CodeInvalidParams, body.Code, body.Message, body.Details)
	case utcp.CodeInvalidArguments, utcp.CodeInvalidRequest:
		return rpcError(jsonrpc.CodeInvalidParams, body.Code, body.Message, body.Details)
	case utcp.CodeInternal:
		s.log.Error("MCP front: internal error", "method", method, "name", name, "err", err)
		return rpcError(jsonrpc.CodeInternalError, body.Code, "internal error", nil)
	case utcp.CodeCanceled:
		return rpcError(jsonrpc.CodeInternalError, body.Code, body.Message, nil)
	}
	return rpcError(codeServerError, body.Code, fmt.Sprintf("%s: %s", body.Code, body.Message), body.Details)
}

// codeServerError is the JSON-RPC code of refused resource reads and prompts.
const codeServerError = -32000
