package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func TestStdioRestartAfterKill(t *testing.T) {
	changed := make(chan string, 10)
	tr := newTestTransport(t, transports.Options{OnToolsChanged: func(m string) { changed <- m }})
	tmpl := parse(t, StdioFixtureTemplate(t, fixture.New(), nil))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2})
	pid := pidOf(t, s)

	// A call in flight when the server dies fails; the next one waits
	// for the restart and succeeds.
	inflight := make(chan error, 1)
	go func() {
		_, err := callTool(t, tr, tmpl, "demo.sleep", map[string]any{"ms": 5000})
		inflight <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-inflight; err == nil {
		t.Errorf("the call in flight survived its server's death")
	} else if code := utcp.CodeOf(err); code != utcp.CodeTransportError {
		t.Errorf("in-flight call: code %s (%v), want transport_error", code, err)
	}
	got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 2, "b": 3})
	if diff := cmp.Diff(map[string]any{"sum": 5.0}, normalize(got)); diff != "" {
		t.Errorf("add after restart (-want +got):\n%s", diff)
	}
	if n := s.spawns.Load(); n != 2 {
		t.Errorf("spawns = %d, want 2", n)
	}
	if newPid := pidOf(t, s); newPid == pid {
		t.Errorf("same pid after restart")
	}
	if st, _ := transporttest.ProcState(pid); st != "" {
		t.Errorf("the killed server %d is still in /proc (state %s): not reaped", pid, st)
	}
	select {
	case <-changed: // tools may differ after a restart
	case <-time.After(5 * time.Second):
		t.Errorf("no OnToolsChanged after the restart")
	}
}

func TestStdioUnresponsiveRestarted(t *testing.T) {
	tr := newTestTransport(t, transports.Options{Config: json.RawMessage(`{"ping_interval_ms":100,"ping_timeout_ms":200,"ping_failures":2,"shutdown_grace_ms":200}`)})
	tmpl := parse(t, StdioFixtureTemplate(t, fixture.New(), nil))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	pid := pidOf(t, s)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	transporttest.WaitUntil(t, 10*time.Second, "a restart of the stopped server", func() bool { return s.restarts.Load() >= 1 })
	mustCall(t, tr, tmpl, "demo.echo", map[string]any{"ok": true})
	if st, _ := transporttest.ProcState(pid); st != "" {
		t.Errorf("the stopped server %d is still in /proc (state %s)", pid, st)
	}
}

func TestCrashLoopBacksOff(t *testing.T) {
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{exitAfter: 300 * time.Millisecond}.config(t)}}}))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	time.Sleep(3 * time.Second)
	// Each process lives 300 ms; restarts wait 100, 200, 400, 800 ms...:
	// about 5 processes in 3 s, against 10 without backoff.
	if n := s.spawns.Load(); n < 2 || n > 6 {
		t.Errorf("%d processes started in 3 s, want 2..6 (exponential backoff)", n)
	}
}

func TestStatelessHTTP(t *testing.T) {
	f := fixture.New()
	srv := mcpserver.New(f, mcpserver.Options{})
	ts := httptest.NewServer(srv.Handler(mcpserver.HTTPOptions{Stateless: true}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"url": ts.URL}}}}))
	register(t, tr, tmpl)
	if v := serverOf(t, tr, tmpl, "demo").cur.cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Errorf("negotiated %s with a stateless server, want 2026-07-28 or later", v)
	}
	if diff := cmp.Diff(map[string]any{"sum": 3.0}, normalize(mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2}))); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		ev, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Recv: %v", err)
			}
			break
		}
		types = append(types, ev.Type)
	}
	if diff := cmp.Diff([]string{"progress", "progress", "progress", "result"}, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	if _, err := tr.CallTool(ctx2, &utcp.Call{Manual: "m", Name: "demo.sleep", Template: tmpl, Arguments: map[string]any{"ms": 10000}}); utcp.CodeOf(err) != utcp.CodeTimeout {
		t.Errorf("sleep with a deadline: %v", err)
	}
	transporttest.WaitUntil(t, 3*time.Second, "the server to see the cancellation", func() bool { return f.Canceled() > 0 })
}

func TestConcurrentCallsShareOneProcess(t *testing.T) {
	marker := newMarker()
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{marker: marker}.config(t)}}}))
	register(t, tr, tmpl)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			v, err := callTool(t, tr, tmpl, "demo.add", map[string]any{"a": i, "b": 1000})
			if err != nil {
				errs <- err
				return
			}
			if !cmp.Equal(map[string]any{"sum": float64(i + 1000)}, normalize(v)) {
				errs <- fmt.Errorf("call %d: %v", i, v)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := serverOf(t, tr, tmpl, "demo").spawns.Load(); n != 1 {
		t.Errorf("spawns = %d, want 1", n)
	}
	if pids := markedProcesses(t, marker); len(pids) != 1 {
		t.Errorf("%d server processes in /proc (%v), want 1", len(pids), pids)
	}
}

func TestDeregisterLeavesNoProcess(t *testing.T) {
	for _, how := range []string{"deregister", "close"} {
		t.Run(how, func(t *testing.T) {
			marker := newMarker()
			tr := counted(newTestTransport(t, transports.Options{}))
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"a": fixtureServer{marker: marker, grandchild: true}.config(t),
				"b": fixtureServer{marker: marker}.config(t),
			}}}))
			register(t, tr, tmpl)
			mustCall(t, tr, tmpl, "a.echo", nil)
			transporttest.WaitUntil(t, 5*time.Second, "the grandchild to start", func() bool { return len(markedProcesses(t, marker)) == 3 })
			pids := markedProcesses(t, marker)
			start := time.Now()
			if how == "close" {
				_ = tr.Close()
			} else if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s took %v", how, time.Since(start))
			if left := markedProcesses(t, marker); len(left) != 0 {
				t.Errorf("processes left after %s: %v", how, left)
			}
			for _, pid := range pids {
				transporttest.WaitUntil(t, 5*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool {
					st, ppid := transporttest.ProcState(pid)
					if st == "Z" && ppid == os.Getpid() {
						t.Fatalf("process %d is our unreaped zombie", pid)
					}
					return st == ""
				})
			}
			if _, err := callTool(t, tr, tmpl, "a.echo", nil); err == nil {
				t.Errorf("call after %s succeeded", how)
			}
		})
	}
}

func TestStderrCappedAndRateLimited(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr := counted(newTestTransport(t, transports.Options{Logger: log, Config: json.RawMessage(`{"max_stderr_line_bytes":100,"stderr_lines_per_second":5}`)}))
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{stderr: 500}.config(t)}}}))
	register(t, tr, tmpl)
	if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines("mcp: server stderr\"")
	if len(lines) == 0 || len(lines) > 12 {
		t.Fatalf("%d stderr lines logged, want 1..12 (burst 10 + refill)", len(lines))
	}
	if !strings.Contains(lines[0], strings.Repeat("x", 100)+" …[truncated]") || strings.Contains(lines[0], strings.Repeat("x", 101)) {
		t.Errorf("the long line was not capped at 100 bytes: %.200s", lines[0])
	}
	dropped := logs.lines("stderr lines dropped")
	if len(dropped) == 0 {
		t.Fatalf("no report of dropped stderr lines")
	}
	if !strings.Contains(logs.String(), "manual=m server=demo") {
		t.Errorf("stderr records lack the manual and server")
	}
}

func TestReplaceGetsItsOwnSession(t *testing.T) {
	marker := newMarker()
	tr := counted(newTestTransport(t, transports.Options{}))
	tmplFor := func(version string) *utcp.CallTemplate {
		cfg := fixtureServer{marker: marker}.config(t)
		cfg["env"].(map[string]string)["VERSION"] = version
		return parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"demo": cfg}}}))
	}
	old, repl := tmplFor("1"), tmplFor("2")
	register(t, tr, old)
	register(t, tr, repl) // Replace: new template, same manual name
	if n := len(markedProcesses(t, marker)); n != 2 {
		t.Fatalf("%d processes, want one per template", n)
	}
	if err := tr.DeregisterManual(t.Context(), old); err != nil { // the gateway retires the old one
		t.Fatal(err)
	}
	mustCall(t, tr, repl, "demo.echo", nil)
	if n := len(markedProcesses(t, marker)); n != 1 {
		t.Errorf("%d processes after retiring the old template, want 1", n)
	}
	// A call carrying the old template (variables re-resolved, say) falls
	// back to the manual's newest registration.
	mustCall(t, tr, old, "demo.echo", nil)
	if err := tr.DeregisterManual(t.Context(), repl); err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(t, tr, repl, "demo.echo", nil); !errors.Is(err, transports.ErrNotRegistered) {
		t.Errorf("after the last deregistration: err = %v, want ErrNotRegistered", err)
	}
}

func TestRegisterFailures(t *testing.T) {
	tr := newTestTransport(t, transports.Options{})
	for name, server := range map[string]map[string]any{
		"missing command":   {"command": "/nonexistent/mcp-server"},
		"exits at once":     {"command": "/bin/sh", "args": []string{"-c", "echo broken config >&2; exit 3"}},
		"not an MCP server": {"command": "/bin/sh", "args": []string{"-c", "echo hello; sleep 30"}, "timeout": 1},
		"refused URL":       {"url": "http://127.0.0.1:1/mcp", "timeout": 2},
		"insecure URL":      {"url": "http://example.com/mcp"},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"x": server}}}))
			start := time.Now()
			_, err := tr.RegisterManual(t.Context(), tmpl)
			if err == nil {
				t.Fatalf("RegisterManual succeeded")
			}
			if code := utcp.CodeOf(err); code != utcp.CodeDiscoveryFailed {
				t.Errorf("code %s (%v), want discovery_failed", code, err)
			}
			if name == "exits at once" && !strings.Contains(err.Error(), "broken config") {
				t.Errorf("error %q lacks the server's stderr", err)
			}
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("took %v", took)
			}
			t.Logf("%v", err)
		})
	}
}
