package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/utcp"
)

// peerScript returns node and the server-everything entry point. Without
// UTCPD_NPM_PEERS=1 the test is skipped; with it, a missing peer fails.
func peerScript(t testing.TB) (node, script string) {
	t.Helper()
	peer := transporttest.NPMPeer(t, "@modelcontextprotocol/server-everything")
	return peer.Node, filepath.Join(peer.Modules, "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// peerHTTP runs server-everything in mode ("streamableHttp" or "sse") on
// port (0: a free one), bound to 127.0.0.1, and returns its endpoint URL
// and a stop function (also run at cleanup).
func peerHTTP(t testing.TB, node, script, mode string, port int) (string, int, func()) {
	t.Helper()
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	preload, _ := filepath.Abs(filepath.Join("testdata", "peer", "loopback.cjs"))
	cmd := exec.Command(node, script, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "NODE_OPTIONS=--require "+preload)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	transporttest.WaitUntil(t, 20*time.Second, "server-everything to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	path := "/mcp"
	if mode == "sse" {
		path = "/sse"
	}
	return "http://" + addr + path, port, stop
}

func TestServerEverything(t *testing.T) {
	node, script := peerScript(t)
	for _, kind := range []string{"stdio", "http", "legacy-sse"} {
		t.Run(kind, func(t *testing.T) {
			var server map[string]any
			var restart func()
			switch kind {
			case "stdio":
				t.Setenv("UTCPD_TEST_SECRET", "must-not-leak")
				server = map[string]any{"command": node, "args": []string{script, "stdio"}, "env": map[string]string{"FROM_TEMPLATE": "yes"}}
			case "http":
				url, port, stop := peerHTTP(t, node, script, "streamableHttp", 0)
				server = map[string]any{"url": url}
				restart = func() {
					stop()
					peerHTTP(t, node, script, "streamableHttp", port)
				}
			case "legacy-sse":
				// No transport given: Streamable HTTP is refused and the
				// legacy HTTP+SSE transport is used.
				url, _, _ := peerHTTP(t, node, script, "sse", 0)
				server = map[string]any{"url": url}
			}
			tr := newTestTransport(t, transports.Options{Logger: peerLogger(t)})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"everything": server}}}))
			m := register(t, tr, tmpl)
			if kind == "legacy-sse" {
				if k := serverOf(t, tr, tmpl, "everything").cur.kind; k != "sse" {
					t.Errorf("session kind %s, want sse", k)
				}
			}
			var names []string
			for _, tool := range m.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"everything.echo", "everything.get-sum", "everything.get-structured-content", "everything.get-tiny-image", "everything.trigger-long-running-operation"} {
				if !slices.Contains(names, want) {
					t.Errorf("tool %s not discovered (got %v)", want, names)
				}
			}

			if got := mustCall(t, tr, tmpl, "everything.echo", map[string]any{"message": "héllo"}); got != "Echo: héllo" {
				t.Errorf("echo = %#v", got)
			}
			if got := mustCall(t, tr, tmpl, "everything.get-sum", map[string]any{"a": 2, "b": 40}); got != "The sum of 2 and 40 is 42." {
				t.Errorf("get-sum = %#v", got)
			}
			weather, ok := mustCall(t, tr, tmpl, "everything.get-structured-content", map[string]any{"location": "New York"}).(map[string]any)
			if !ok || weather["conditions"] == nil || weather["temperature"] == nil || weather["humidity"] == nil {
				t.Errorf("get-structured-content = %#v, want the structured weather object", weather)
			}
			img, _ := mustCall(t, tr, tmpl, "everything.get-tiny-image", nil).(map[string]any)
			found := false
			for _, b := range img["content"].([]any) {
				block := b.(map[string]any)
				if block["type"] == "image" && block["mimeType"] == "image/png" {
					data, err := base64.StdEncoding.DecodeString(block["data"].(string))
					found = err == nil && bytes.HasPrefix(data, []byte("\x89PNG"))
				}
			}
			if !found {
				t.Errorf("get-tiny-image has no PNG image block: %.300v", img)
			}
			_, err := callTool(t, tr, tmpl, "everything.get-sum", map[string]any{"a": "x", "b": 1})
			var te *utcp.ToolError
			if !errors.As(err, &te) || !strings.Contains(te.Message, "Input validation error") {
				t.Errorf("get-sum with a bad argument: err = %v, want a ToolError", err)
			}
			if _, err := callTool(t, tr, tmpl, "everything.nope", nil); !errors.Is(err, transports.ErrToolNotFound) {
				t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
			}

			// A long-running operation streams its progress, then its result.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "everything.trigger-long-running-operation", Template: tmpl,
				Arguments: map[string]any{"duration": 1, "steps": 3}})
			if err != nil {
				t.Fatal(err)
			}
			var events []any
			for {
				ev, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				events = append(events, normalize(ev))
			}
			_ = st.Close()
			if len(events) != 4 {
				t.Fatalf("events %v, want 3 progress and the result", events)
			}
			for i, ev := range events[:3] {
				data := ev.(map[string]any)["data"].(map[string]any)
				if data["progress"] != float64(i+1) || data["total"] != 3.0 {
					t.Errorf("progress event %d = %v", i, ev)
				}
			}
			if last := events[3].(map[string]any); last["type"] != "result" || !strings.Contains(fmt.Sprint(last["data"]), "Long running operation completed") {
				t.Errorf("last event = %v", last)
			}
			// Cancelling a long operation returns at once.
			start := time.Now()
			ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
			_, err = tr.CallTool(ctx2, &utcp.Call{Manual: "m", Name: "everything.trigger-long-running-operation", Template: tmpl, Arguments: map[string]any{"duration": 10, "steps": 2}})
			cancel2()
			if utcp.CodeOf(err) != utcp.CodeTimeout || time.Since(start) > 2*time.Second {
				t.Errorf("cancelled call: %v after %v", err, time.Since(start))
			}

			switch kind {
			case "stdio":
				env := fmt.Sprint(mustCall(t, tr, tmpl, "everything.get-env", nil))
				if !strings.Contains(env, "FROM_TEMPLATE") || strings.Contains(env, "must-not-leak") {
					t.Errorf("server environment: template env missing or a non-allowlisted variable leaked: %.500s", env)
				}
			case "http":
				// A restarted server forgets the session and answers 400
				// ("No valid session ID"): the transport re-initialises and
				// retries the call once.
				restart()
				if got := mustCall(t, tr, tmpl, "everything.echo", map[string]any{"message": "again"}); got != "Echo: again" {
					t.Errorf("echo after the server restarted = %#v", got)
				}
			}
		})
	}
}

// peerLogger logs to the test log when UTCPD_MCP_TEST_LOG is set.
func peerLogger(t testing.TB) *slog.Logger {
	if os.Getenv("UTCPD_MCP_TEST_LOG") == "" {
		return discard()
	}
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
