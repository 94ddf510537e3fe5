package mcpfront

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// ToolsetPrefix is where the daemon mounts the toolsets' Streamable HTTP
// endpoints: /mcp/{toolset}.
const ToolsetPrefix = Path + "/"

// ToolsetBackend returns the Backend of the toolset called name
// (gateway.Toolset): it lists what the toolset lists (its members under
// their listed names, or the meta-tools of a search toolset) and calls
// through it, so that calls carry the real qualified name and the
// toolset. The toolset is looked up on every use, so a replaced toolset
// applies at once and a removed one lists nothing and calls nothing
// (not_found).
func ToolsetBackend(g *gateway.Gateway, name string) Backend { return toolsetBackend{g, name} }

type toolsetBackend struct {
	g    *gateway.Gateway
	name string
}

// Tools lists every member (no caller's key): the front publishes them
// once and each session sees what Visible allows.
func (b toolsetBackend) Tools(context.Context) ([]*utcp.Tool, error) {
	ts, err := b.g.Toolset(b.name)
	if err != nil {
		return nil, nil
	}
	return ts.Listed(context.Background()), nil
}

// Visible reports whether the caller in ctx (its API key: scope and
// toolsets) sees the tool the toolset listed as def.
func (b toolsetBackend) Visible(ctx context.Context, def *utcp.Tool) bool {
	ts, err := b.g.ToolsetFor(ctx, b.name)
	if err != nil || def == nil {
		return false
	}
	if ts.Search() {
		return slices.ContainsFunc(ts.Listed(ctx), func(t *utcp.Tool) bool { return t.Name == def.Name })
	}
	_, err = ts.Tool(ctx, def.Name)
	return err == nil
}

func (b toolsetBackend) CallTool(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error) {
	ts, err := b.g.ToolsetFor(ctx, b.name)
	if err != nil {
		return nil, err
	}
	return ts.CallTool(ctx, name, args, opts)
}

func (b toolsetBackend) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error) {
	ts, err := b.g.ToolsetFor(ctx, b.name)
	if err != nil {
		return nil, err
	}
	return ts.CallToolStreaming(ctx, name, args, opts)
}

func (b toolsetBackend) Subscribe(fn func()) (cancel func()) { return b.g.Subscribe(fn) }

// scopedBackend is a Backend that decides what a caller sees and calls
// itself (a toolset's: by the members' real names and the key's
// toolsets), instead of the caller's scope over the listed names.
type scopedBackend interface {
	Backend
	// Visible reports whether the caller in ctx sees and may call the
	// tool the backend listed as def.
	Visible(ctx context.Context, def *utcp.Tool) bool
}

// scopedList runs req, leaving out of a tools/list page what sb does not
// show the caller in ctx.
func (s *Server) scopedList(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler, sb scopedBackend) (mcp.Result, error) {
	r, ok := req.(*mcp.ListToolsRequest)
	if !ok {
		return next(ctx, method, req)
	}
	return listIn(ctx, method, r, next, func(res *mcp.ListToolsResult) (string, bool) {
		res.Tools = keep(res.Tools, func(t *mcp.Tool) bool {
			s.syncMu.Lock()
			p, ok := s.tools[t.Name]
			s.syncMu.Unlock()
			return ok && sb.Visible(ctx, p.def)
		})
		return res.NextCursor, len(res.Tools) > 0
	}, func(c string) *mcp.ListToolsRequest {
		return &mcp.ListToolsRequest{Session: r.Session, Extra: r.Extra, Params: &mcp.ListToolsParams{Cursor: c}}
	})
}

// Toolsets serves /mcp/{toolset}: one MCP front (Server) per toolset,
// created on its first request with Base's options (Gateway replaced by
// the toolset's Backend, Name "utcpd-{toolset}", no CodeMode and no
// native names), all sharing the gateway. An unknown toolset is 404 with
// data.code not_found; a server whose toolset was removed is closed.
type Toolsets struct {
	g    *gateway.Gateway
	base Options
	keys *httpx.Keys

	mu      sync.Mutex
	servers map[string]*Server
	closed  bool
}

// NewToolsets returns the toolsets' MCP endpoints over g, each server
// configured by base (see Toolsets).
func NewToolsets(g *gateway.Gateway, base Options) *Toolsets {
	keys, err := httpx.NewAPIKeys(base.APIKeys, base.Keys)
	if err != nil {
		keys = httpx.NewKeys(nil) // New refuses them when a toolset is first served
	}
	return &Toolsets{g: g, base: base, keys: keys, servers: map[string]*Server{}}
}

// ServeHTTP serves /mcp/{toolset}.
func (t *Toolsets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, ToolsetPrefix)
	if !ok || name == "" || strings.Contains(name, "/") {
		writeHTTPError(w, http.StatusNotFound, utcp.CodeNotFound, "Not Found: an MCP toolset endpoint is /mcp/{toolset}")
		return
	}
	s, err := t.server(r.Context(), name)
	if err != nil {
		code := utcp.CodeOf(err)
		status := http.StatusNotFound
		if code != utcp.CodeNotFound {
			status, code = http.StatusInternalServerError, utcp.CodeInternal
		}
		writeHTTPError(w, status, code, err.Error())
		return
	}
	if tok, ok := httpx.BearerToken(r); ok {
		// A key usable only through its toolsets (APIKey.Toolsets) finds
		// the others as toolsets that do not exist (the server checks
		// the key itself).
		if k, ok := t.keys.MatchKey(tok); ok {
			if _, err := t.g.ToolsetFor(gateway.WithAPIKey(r.Context(), k), name); err != nil {
				writeHTTPError(w, http.StatusNotFound, utcp.CodeNotFound, err.Error())
				return
			}
		}
	}
	s.Handler().ServeHTTP(w, r)
}

// server returns the toolset's Server, creating it on first use.
func (t *Toolsets) server(ctx context.Context, name string) (*Server, error) {
	_, err := t.g.Toolset(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if s, ok := t.servers[name]; ok {
			delete(t.servers, name)
			go s.Close()
		}
		return nil, err
	}
	if s, ok := t.servers[name]; ok {
		return s, nil
	}
	if t.closed {
		return nil, utcp.NewError(utcp.CodeUnavailable, "closed")
	}
	o := t.base
	o.Gateway, o.Backend = nil, ToolsetBackend(t.g, name)
	o.Name = DefaultServerName + "-" + name
	o.CodeMode, o.NativeNames, o.ShortNames = nil, nil, false
	s, err := New(context.WithoutCancel(ctx), o)
	if err != nil {
		return nil, err
	}
	t.servers[name] = s
	return s, nil
}

// Close closes every toolset's server. Idempotent.
func (t *Toolsets) Close() error {
	t.mu.Lock()
	servers := t.servers
	t.servers, t.closed = map[string]*Server{}, true
	t.mu.Unlock()
	for _, s := range servers {
		_ = s.Close()
	}
	return nil
}
