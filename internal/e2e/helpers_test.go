// Package e2e holds end-to-end tests and benchmarks that run utcpd's
// gateway and its HTTP fronts against real third-party MCP peers from npm
// (pinned in testdata/peer). They run when UTCPD_NPM_PEERS=1 (.ci/run sets
// it after installing every testdata/peer folder) and fail when the peers
// are missing; without the variable they are skipped.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/all" // the mcp transport, among others
	"github.com/utcpd/utcpd/transports/transporttest"
)

const (
	manualName = "ev"
	serverName = "everything"
	toolPrefix = manualName + "." + serverName + "."
)

// peers are the installed npm peers.
type peers struct {
	node         string // node on PATH
	everything   string // @modelcontextprotocol/server-everything's entry point
	supergateway string // supergateway's entry point
	preload      string // loopback.cjs: listen(port) binds 127.0.0.1
}

// requirePeers skips without UTCPD_NPM_PEERS=1 and fails when it is set
// but the peers or node are missing.
func requirePeers(t testing.TB) peers {
	t.Helper()
	peer := transporttest.NPMPeer(t, "@modelcontextprotocol/server-everything", "supergateway")
	return peers{
		node:         peer.Node,
		everything:   filepath.Join(peer.Modules, "@modelcontextprotocol", "server-everything", "dist", "index.js"),
		supergateway: filepath.Join(peer.Modules, "supergateway", "dist", "index.js"),
		preload:      filepath.Join(peer.Dir, "loopback.cjs"),
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNode runs node with args (and the loopback preload) in its own
// process group, waits until 127.0.0.1:port accepts connections and
// returns a stop function (also run at cleanup) that kills the group.
func startNode(t testing.TB, p peers, port int, env []string, args ...string) func() {
	t.Helper()
	cmd := exec.Command(p.node, args...)
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=--require "+p.preload)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr transporttest.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("node %v did not listen on %s within 30 s; stderr:\n%s", args, addr, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// everythingHTTP runs server-everything in Streamable HTTP mode on a free
// loopback port and returns its endpoint.
func everythingHTTP(t testing.TB, p peers) string {
	t.Helper()
	port := freePort(t)
	startNode(t, p, port, []string{"PORT=" + strconv.Itoa(port)}, p.everything, "streamableHttp")
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// stdioServer is the mcp manual's server entry for server-everything
// over stdio.
func (p peers) stdioServer() map[string]any {
	return map[string]any{"command": p.node, "args": []string{p.everything, "stdio"}}
}

// stack is a gateway with server-everything registered as manual "ev"
// and api.New served on 127.0.0.1.
type stack struct {
	g    *gateway.Gateway
	base string // http://127.0.0.1:port
}

func newStack(t testing.TB, server map[string]any) *stack {
	t.Helper()
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	manual, err := json.Marshal(map[string]any{
		"name": manualName, "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{serverName: server}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := g.RegisterManual(ctx, manual, gateway.RegisterOptions{Source: "config"}); err != nil {
		t.Fatalf("registering server-everything: %v", err)
	}
	h, err := api.New(api.Options{Gateway: g, Version: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &stack{g: g, base: "http://" + ln.Addr().String()}
}

// restClient is shared by the REST calls; its pool is large enough for
// the concurrent ones.
var restClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

// restCall posts {"arguments": args} to /v1/tools/{tool}/call and returns
// the status and the decoded body.
func (s *stack) restCall(ctx context.Context, tool string, args any) (int, map[string]any, error) {
	body, err := json.Marshal(map[string]any{"arguments": args})
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/tools/"+tool+"/call", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := restClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("decoding %q: %w", raw, err)
	}
	return resp.StatusCode, out, nil
}

// sseEvent is one server-sent event of /stream.
type sseEvent struct {
	name string
	data string
}

// restStream posts to /v1/tools/{tool}/stream and collects its events.
func (s *stack) restStream(ctx context.Context, tool string, args any) ([]sseEvent, error) {
	body, err := json.Marshal(map[string]any{"arguments": args})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/v1/tools/"+tool+"/stream", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := restClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil, fmt.Errorf("stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), raw)
	}
	var events []sseEvent
	for block := range strings.SplitSeq(string(raw), "\n\n") {
		var ev sseEvent
		for line := range strings.SplitSeq(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		if ev.name != "" {
			events = append(events, ev)
		}
	}
	return events, nil
}

// mcpSession connects a go-sdk client to endpoint at protocol version pv
// ("" for the SDK's latest); progress notifications go to progress when
// it is not nil.
func mcpSession(t testing.TB, endpoint, pv string, progress chan<- *mcp.ProgressNotificationParams) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params:
			default:
			}
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "utcpd-e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}, MaxRetries: -1}
	s, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatalf("connecting to %s: %v", endpoint, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stdioSession starts server-everything over stdio with a go-sdk client.
func stdioSession(t testing.TB, p peers) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "utcpd-e2e-direct", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(p.node, p.everything, "stdio")}, nil)
	if err != nil {
		t.Fatalf("starting server-everything over stdio: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// textOf joins the text blocks of a result.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// everythingChildren lists the live server-everything stdio processes
// that are children of this test process.
func everythingChildren(t testing.TB, p peers) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("/proc: %v", err)
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid := transporttest.ProcState(pid)
		if ppid != self || state == "" || state == "Z" || state == "X" {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) >= 3 && args[len(args)-2] == p.everything && args[len(args)-1] == "stdio" {
			pids = append(pids, pid)
		}
	}
	return pids
}
