package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/cli/clifixture"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/cli"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	utcpmcp "github.com/utcpd/utcpd/transports/mcp"
	utcptext "github.com/utcpd/utcpd/transports/text"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// TestMain turns the test binary into the cli fixture program when the
// cli transport re-executes it (clidemo tools stream count line by line).
func TestMain(m *testing.M) {
	if os.Getenv(clifixture.EnvVar) == "1" {
		os.Exit(clifixture.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The protocol revisions the tests run each client scenario in: the
// stateless 2026-07-28 one (the go-sdk client's default) and the two
// session-based ones.
var eras = []string{"", "2025-11-25", "2025-06-18"}

func eraName(v string) string {
	if v == "" {
		return "latest"
	}
	return v
}

// env is a gateway with the demo HTTP server registered as manual "demo"
// and the MCP front served over HTTP on 127.0.0.1.
type env struct {
	t       *testing.T
	g       *gateway.Gateway
	front   *Server
	url     string
	fix     *fixture.Fixture
	demo    string // the demo server's base URL
	mu      sync.Mutex
	records []gateway.CallRecord
}

type envOptions struct {
	front Options
	guard guard.Guard
	// cli registers the cli fixture program as manual "clidemo".
	cli bool
	// manuals are registered (name → call template) before the front is
	// created.
	manuals map[string]string
	// transportConfig is gateway.Options.TransportConfig.
	transportConfig map[string]json.RawMessage
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	e := &env{t: t, fix: fixture.New()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	demo := httpserver.NewServer("", e.fix, httpserver.Options{})
	go func() { _ = demo.Serve(ln) }()
	t.Cleanup(func() { _ = demo.Close() })
	e.demo = "http://" + ln.Addr().String()

	types := transports.NewRegistry()
	for _, info := range []transports.Info{utcphttp.Info, cli.Info, utcptext.Info, utcpmcp.Info} {
		if err := types.Register(info); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gateway.New(gateway.Options{
		Transports:      types,
		TransportConfig: eo.transportConfig,
		Guard:           eo.guard,
		OnCall: func(rec *gateway.CallRecord) {
			e.mu.Lock()
			e.records = append(e.records, *rec)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	e.g = g
	e.register("demo", e.demoManual("demo"))
	if eo.cli {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		var tmpl map[string]any
		_ = json.Unmarshal(clifixture.ManualTemplate(exe, map[string]string{clifixture.EnvVar: "1"}), &tmpl)
		tmpl["name"] = "clidemo"
		raw, _ := json.Marshal(tmpl)
		e.register("clidemo", string(raw))
	}
	for name, raw := range eo.manuals {
		e.register(name, raw)
	}

	opts := eo.front
	opts.Gateway = g
	opts.Version = "test"
	front, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	e.front = front
	mux := http.NewServeMux()
	mux.Handle(Path, front.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e.url = srv.URL + Path
	return e
}

// demoManual is a manual call template for the demo HTTP server.
func (e *env) demoManual(name string) string {
	return fmt.Sprintf(`{"name":%q,"call_template_type":"http","url":%q}`, name, e.demo+"/utcp")
}

func (e *env) register(name, raw string) {
	e.t.Helper()
	if _, err := e.g.RegisterManual(e.t.Context(), json.RawMessage(raw), gateway.RegisterOptions{Source: "config"}); err != nil {
		e.t.Fatalf("registering %s: %v", name, err)
	}
}

// lastRecord returns the last call record.
func (e *env) lastRecord() gateway.CallRecord {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.records) == 0 {
		e.t.Fatal("no call was recorded")
	}
	return e.records[len(e.records)-1]
}

// client is a go-sdk client session with its notifications.
type client struct {
	session  *mcp.ClientSession
	changed  chan struct{}
	progress chan *mcp.ProgressNotificationParams
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect opens a go-sdk client session to the front at protocol version
// pv ("" for the SDK's latest) with API key key ("" for none).
func (e *env) connect(pv, key string) (*client, error) {
	c := newClient()
	hc := &http.Client{Transport: http.DefaultTransport}
	if key != "" {
		hc.Transport = bearer{key: key, base: http.DefaultTransport}
	}
	t := &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: hc, MaxRetries: -1}
	if err := c.open(e.t, t, pv); err != nil {
		return nil, err
	}
	return c, nil
}

func newClient() *client {
	return &client{changed: make(chan struct{}, 16), progress: make(chan *mcp.ProgressNotificationParams, 64)}
}

func (c *client) open(t *testing.T, tr mcp.Transport, pv string) error {
	cl := mcp.NewClient(&mcp.Implementation{Name: "utcpd-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.progress <- r.Params
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		return err
	}
	t.Cleanup(func() { _ = s.Close() })
	c.session = s
	return nil
}

func (e *env) mustConnect(pv string) *client {
	e.t.Helper()
	c, err := e.connect(pv, "")
	if err != nil {
		e.t.Fatalf("connect (%s): %v", eraName(pv), err)
	}
	return c
}

// call calls a tool with JSON arguments.
func (c *client) call(t *testing.T, name, args string, progressToken any) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name}
	if args != "" {
		p.Arguments = json.RawMessage(args)
	}
	if progressToken != nil {
		p.SetProgressToken(progressToken)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return c.session.CallTool(ctx, p)
}

// tools lists every tool, following nextCursor.
func (c *client) tools(t *testing.T) []*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out []*mcp.Tool
	for tool, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		out = append(out, tool)
	}
	return out
}

// text joins the text blocks of a result.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// rpcCode returns the JSON-RPC error code and utcpd code of a call error.
func rpcCode(t *testing.T, err error) (int64, string) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var data struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(we.Data, &data)
	return we.Code, data.Code
}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
