package mcpfront

import (
	"context"
	"net/http"
	"strings"
	"sync"

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

func (b toolsetBackend) Tools(context.Context) ([]*utcp.Tool, error) {
	ts, err := b.g.Toolset(b.name)
	if err != nil {
		return nil, nil
	}
	return ts.Listed(), nil
}

func (b toolsetBackend) CallTool(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error) {
	ts, err := b.g.Toolset(b.name)
	if err != nil {
		return nil, err
	}
	return ts.CallTool(ctx, name, args, opts)
}

func (b toolsetBackend) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error) {
	ts, err := b.g.Toolset(b.name)
	if err != nil {
		return nil, err
	}
	return ts.CallToolStreaming(ctx, name, args, opts)
}

func (b toolsetBackend) Subscribe(fn func()) (cancel func()) { return b.g.Subscribe(fn) }

// Toolsets serves /mcp/{toolset}: one MCP front (Server) per toolset,
// created on its first request with Base's options (Gateway replaced by
// the toolset's Backend, Name "utcpd-{toolset}", no CodeMode and no
// native names), all sharing the gateway. An unknown toolset is 404 with
// data.code not_found; a server whose toolset was removed is closed.
type Toolsets struct {
	g    *gateway.Gateway
	base Options

	mu      sync.Mutex
	servers map[string]*Server
	closed  bool
}

// NewToolsets returns the toolsets' MCP endpoints over g, each server
// configured by base (see Toolsets).
func NewToolsets(g *gateway.Gateway, base Options) *Toolsets {
	return &Toolsets{g: g, base: base, servers: map[string]*Server{}}
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
