package mcpfront

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// API-key scopes on the MCP front. The SDK server publishes every tool,
// resource, template and prompt once, for all sessions; a session opened
// with a named key sees and reaches only what its scope allows
// (gateway.Scope, the same decision the REST front makes):
//
//   - tools/list, resources/list, resources/templates/list and
//     prompts/list leave out what the scope does not allow (a page may
//     hold fewer items than the page size; none is empty unless it is the
//     last);
//   - tools/call of a tool outside the scope is the SDK's own answer for
//     a tool it does not have (-32602 "unknown tool"), prompts/get and
//     completion/complete of a prompt outside it the SDK's "unknown
//     prompt", and resources/read, resources/subscribe and completions of
//     a resource outside it the SDK's "Resource not found": byte for byte
//     what a name that does not exist gets;
//   - the scope travels in the context of every handler
//     (gateway.WithAPIKey, with the key itself), so the gateway decides the calls, reads and
//     CodeMode runs again within it.

// extraKey is the auth.TokenInfo.Extra key of the *gateway.APIKey that
// authenticated a request.
const extraKey = "utcpd/api_key"

// keyOf returns the API key that authenticated a request, nil when none.
func keyOf(extra *mcp.RequestExtra) *gateway.APIKey {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	k, _ := extra.TokenInfo.Extra[extraKey].(*gateway.APIKey)
	return k
}

// scopeMiddleware puts the request's key and scope in its context
// (gateway.WithAPIKey) and filters the listings by the scope.
func (s *Server) scopeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		k := keyOf(req.GetExtra())
		ctx = gateway.WithAPIKey(ctx, k)
		if sb, ok := s.backend.(scopedBackend); ok {
			// A toolset's server: the toolset decides what the key
			// sees (toolset.go).
			return s.scopedList(ctx, method, req, next, sb)
		}
		// The key's scope, or nothing for a key usable only through its
		// toolsets (gateway.ScopeFrom).
		sc := gateway.ScopeFrom(ctx)
		if sc.All() {
			return next(ctx, method, req)
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return listIn(ctx, method, r, next, func(res *mcp.ListToolsResult) (string, bool) {
				res.Tools = keep(res.Tools, func(t *mcp.Tool) bool { return s.toolAllowed(sc, t.Name) })
				return res.NextCursor, len(res.Tools) > 0
			}, func(c string) *mcp.ListToolsRequest {
				return &mcp.ListToolsRequest{Session: r.Session, Extra: r.Extra, Params: &mcp.ListToolsParams{Cursor: c}}
			})
		case *mcp.ListResourcesRequest:
			return listIn(ctx, method, r, next, func(res *mcp.ListResourcesResult) (string, bool) {
				res.Resources = keep(res.Resources, func(x *mcp.Resource) bool { return s.itemAllowed(sc, gateway.ItemResource, x.URI) })
				return res.NextCursor, len(res.Resources) > 0
			}, func(c string) *mcp.ListResourcesRequest {
				return &mcp.ListResourcesRequest{Session: r.Session, Extra: r.Extra, Params: &mcp.ListResourcesParams{Cursor: c}}
			})
		case *mcp.ListResourceTemplatesRequest:
			return listIn(ctx, method, r, next, func(res *mcp.ListResourceTemplatesResult) (string, bool) {
				res.ResourceTemplates = keep(res.ResourceTemplates, func(x *mcp.ResourceTemplate) bool {
					return s.itemAllowed(sc, gateway.ItemResourceTemplate, x.URITemplate)
				})
				return res.NextCursor, len(res.ResourceTemplates) > 0
			}, func(c string) *mcp.ListResourceTemplatesRequest {
				return &mcp.ListResourceTemplatesRequest{Session: r.Session, Extra: r.Extra, Params: &mcp.ListResourceTemplatesParams{Cursor: c}}
			})
		case *mcp.ListPromptsRequest:
			return listIn(ctx, method, r, next, func(res *mcp.ListPromptsResult) (string, bool) {
				res.Prompts = keep(res.Prompts, func(x *mcp.Prompt) bool { return s.itemAllowed(sc, gateway.ItemPrompt, x.Name) })
				return res.NextCursor, len(res.Prompts) > 0
			}, func(c string) *mcp.ListPromptsRequest {
				return &mcp.ListPromptsRequest{Session: r.Session, Extra: r.Extra, Params: &mcp.ListPromptsParams{Cursor: c}}
			})
		}
		return next(ctx, method, req)
	}
}

// listIn runs a list request and filters its page; a page left empty
// with more to come is followed by the next one, so that only the last
// page may be empty.
func listIn[Req mcp.Request, Res mcp.Result](ctx context.Context, method string, req Req, next mcp.MethodHandler,
	filter func(Res) (cursor string, any bool), again func(cursor string) Req) (mcp.Result, error) {
	for {
		out, err := next(ctx, method, req)
		if err != nil {
			return out, err
		}
		res, ok := out.(Res)
		if !ok {
			return out, nil
		}
		cursor, any := filter(res)
		if any || cursor == "" {
			return res, nil
		}
		req = again(cursor)
	}
}

// keep returns the elements of list for which ok holds, in order.
func keep[T any](list []T, ok func(T) bool) []T {
	out := make([]T, 0, len(list))
	for _, x := range list {
		if ok(x) {
			out = append(out, x)
		}
	}
	return out
}

// toolAllowed reports whether sc allows the tool the front lists as
// name; a name the front did not publish from the backend (codemode.run)
// is not the scope's to decide.
func (s *Server) toolAllowed(sc *gateway.Scope, name string) bool {
	s.syncMu.Lock()
	p, ok := s.tools[name]
	s.syncMu.Unlock()
	return !ok || sc.Allows(p.def)
}

// itemAllowed reports whether sc allows the resource, template or prompt
// the front lists as name.
func (s *Server) itemAllowed(sc *gateway.Scope, kind, name string) bool {
	if s.res == nil {
		return true
	}
	r := s.res
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.prompts
	switch kind {
	case gateway.ItemResource:
		m = r.resources
	case gateway.ItemResourceTemplate:
		m = r.templates
	}
	p, ok := m[name]
	return !ok || sc.AllowsServer(p.item.Manual, p.item.Server)
}

// unknownTool is the SDK's answer to tools/call of a tool it does not
// have, which a tool outside the caller's scope gets too.
func unknownTool(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

// unknownPrompt is the SDK's answer to prompts/get of a prompt it does
// not have.
func unknownPrompt(name string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
}

// inScope reports whether the caller's scope (in ctx) allows def.
func inScope(ctx context.Context, def *utcp.Tool) bool { return gateway.ScopeFrom(ctx).Allows(def) }

// allowed reports whether the caller in ctx may call def as the backend
// listed it: the backend decides when it is a scopedBackend, else the
// caller's scope.
func (s *Server) allowed(ctx context.Context, def *utcp.Tool) bool {
	if sb, ok := s.backend.(scopedBackend); ok {
		return sb.Visible(ctx, def)
	}
	return inScope(ctx, def)
}

// itemInScope reports whether the caller's scope (in ctx) allows the
// server of it.
func itemInScope(ctx context.Context, it gateway.MCPItem) bool {
	return gateway.ScopeFrom(ctx).AllowsServer(it.Manual, it.Server)
}

// uriInScope reports whether the caller's scope (in ctx) allows the
// server of the utcpd URI q (gateway.QualifyURI's shape); a URI of no
// server is left to the gateway, which does not find it.
func (s *Server) uriInScope(ctx context.Context, q string) bool {
	sc := gateway.ScopeFrom(ctx)
	if sc.All() {
		return true
	}
	rest, ok := strings.CutPrefix(q, gateway.URIScheme+"://")
	ns, _, _ := strings.Cut(rest, "/")
	manual, server, ok2 := strings.Cut(ns, ".")
	return ok && ok2 && sc.AllowsServer(manual, server)
}
