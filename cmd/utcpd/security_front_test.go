package main

// The attacks of docs/security.md ("Web pages", "The admin API", "Bounded
// input") replayed against the real binary on loopback.

import (
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
	"testing"
	"time"
)

// cliToolConfig writes a configuration whose only tool, local.pwn, runs
// `touch <dir>/pwned` through the cli transport: if any request below
// ran it, the file would exist.
func cliToolConfig(t *testing.T, dir string) (cfg, marker string) {
	t.Helper()
	marker = filepath.Join(dir, "pwned")
	tools := fmt.Sprintf(`{"utcp_version": "1.1.0", "tools": [{"name": "pwn", "description": "creates a file",
  "inputs": {"type": "object", "properties": {"a": {"type": "string"}}},
  "tool_call_template": {"call_template_type": "cli", "commands": [{"command": "touch %s"}]}}]}`, marker)
	writeFile(t, filepath.Join(dir, "tools.json"), tools)
	cfg = filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"manual_call_templates": [{"name": "local", "call_template_type": "file", "file_path": "tools.json",
  "allowed_communication_protocols": ["file", "cli"]}]}`)
	return cfg, marker
}

// TestSecurityWebPageCannotCallTools replays what a page in the user's
// browser can send to a daemon on 127.0.0.1: cross-origin fetch POSTs
// (JSON and empty), a form POST to /utcp/call, a CodeMode run, the LLM
// tool-call route, and a DNS-rebinding Host. None runs the CLI tool;
// the same call from a client that sends no Origin does.
func TestSecurityWebPageCannotCallTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, marker := cliToolConfig(t, dir)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})

	send := func(method, path, ctype, origin, host, body string) int {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, d.URL+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	const evil = "https://evil.example"
	codemode := `{"code": "return call_tool('local.pwn', {})"}`
	llm := `{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "local__pwn", "arguments": "{}"}}]}`
	attacks := []struct {
		name                              string
		method, path, ctype, origin, host string
		body                              string
		want                              int
	}{
		{"fetch JSON cross-origin", "POST", "/v1/tools/local.pwn/call", "application/json", evil, "", `{"arguments": {}}`, 403},
		{"fetch no-cors text/plain", "POST", "/v1/tools/local.pwn/call", "text/plain", evil, "", `{"arguments": {}}`, 403},
		{"fetch empty body", "POST", "/v1/tools/local.pwn/call", "", evil, "", "", 403},
		{"empty body without Origin or type", "POST", "/v1/tools/local.pwn/call", "", "", "", "", 415},
		{"form post to /utcp/call", "POST", "/utcp/call/local.pwn?a=1", "application/x-www-form-urlencoded", evil, "", "a=1", 403},
		{"form post from no origin", "POST", "/utcp/call/local.pwn?a=1", "application/x-www-form-urlencoded", "", "", "a=1", 415},
		{"stream", "POST", "/v1/tools/local.pwn/stream", "application/json", evil, "", `{"arguments": {}}`, 403},
		{"codemode", "POST", "/v1/codemode", "application/json", evil, "", codemode, 403},
		{"codemode text/plain", "POST", "/v1/codemode", "text/plain", "", "", codemode, 415},
		{"llm tool calls", "POST", "/v1/llm/openai/tool_calls", "application/json", evil, "", llm, 403},
		{"mcp", "POST", "/mcp", "application/json", evil, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"local.pwn","arguments":{}}}`, 403},
		{"dns rebinding", "POST", "/v1/tools/local.pwn/call", "application/json", "", "rebind.attacker.example:" + portOf(t, d.URL), `{"arguments": {}}`, 403},
		{"dns rebinding, same origin", "POST", "/v1/tools/local.pwn/call", "application/json", "http://rebind.attacker.example:" + portOf(t, d.URL), "rebind.attacker.example:" + portOf(t, d.URL), `{"arguments": {}}`, 403},
		{"rebinding reads the admin API", "GET", "/admin/manuals", "", "", "rebind.attacker.example", "", 403},
		{"another local page", "POST", "/v1/tools/local.pwn/call", "application/json", "http://127.0.0.1:3000", "", `{"arguments": {}}`, 403},
	}
	for _, a := range attacks {
		if got := send(a.method, a.path, a.ctype, a.origin, a.host, a.body); got != a.want {
			t.Errorf("%s: %s %s answered %d, want %d", a.name, a.method, a.path, got, a.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a refused request ran the CLI tool")
	}
	if status, _ := request(t, http.MethodGet, d.URL+"/healthz", "", ""); status != http.StatusOK {
		t.Fatalf("/healthz after the attacks: %d", status)
	}
	// The daemon's own origin (a page it serves) and clients without
	// an Origin are served.
	if got := send("POST", "/v1/tools/local.pwn/call", "application/json", d.URL, "", `{"arguments": {}}`); got != 200 {
		t.Fatalf("a same-origin call answered %d", got)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the allowed call did not run the tool: %v", err)
	}
}

func portOf(t *testing.T, u string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// TestSecurityAdminAlwaysNeedsAToken: a daemon started without an admin
// token refuses its admin API to loopback clients without the token it
// created in its data dir (0600, kept across restarts), and utcpd
// manuals finds that token there on its own.
func TestSecurityAdminAlwaysNeedsAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The default data dir of a daemon whose XDG_STATE_HOME is dir/state
	// (cleanEnv), so that the CLI finds the token as a user's would.
	data := filepath.Join(dir, "state", "utcpd")
	d := startDaemon(t, daemonOpts{dir: dir, dataDir: data})
	for _, auth := range []string{"", "wrong"} {
		if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", auth+"x", `{"call_template_type": "text", "name": "x", "content": "{}"}`); status != http.StatusUnauthorized {
			t.Errorf("admin with token %q: %d %s", auth+"x", status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/admin/manuals", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /admin/manuals from loopback without a token: %d", resp.StatusCode)
	}
	path := filepath.Join(data, adminTokenFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no admin token file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin token file mode %v, want 0600", st.Mode().Perm())
	}
	first, _ := os.ReadFile(path)
	if strings.Contains(d.stderr.String(), strings.TrimSpace(string(first))) {
		t.Errorf("the admin token is in the daemon's log")
	}

	// The CLI reads the token from the default data dir: no flag, no
	// environment variable.
	cmd := exec.Command(binPath, "manuals", "list", "--server", d.URL)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("utcpd manuals list with the stored token: %v\n%s", err, out)
	}

	// A restart keeps the token.
	d.stop()
	d2 := startDaemon(t, daemonOpts{dir: dir, dataDir: data})
	second, _ := os.ReadFile(path)
	if string(first) != string(second) {
		t.Errorf("the admin token changed across a restart")
	}
	if status, body := request(t, http.MethodGet, d2.URL+"/admin/manuals", strings.TrimSpace(string(first)), ""); status != http.StatusOK {
		t.Errorf("the kept token after a restart: %d %s", status, body)
	}
}

// TestSecurityStalledBodies opens 500 connections that each announce a
// 4 MB JSON body and send one byte. The daemon's memory grows by far less
// than the announced 2 GB, it cuts every connection off near its read
// timeout, and /healthz answers meanwhile.
func TestSecurityStalledBodies(t *testing.T) {
	t.Parallel()
	const conns = 500
	d := startDaemon(t, daemonOpts{args: []string{"--read-timeout", "3s", "--no-store"}})
	addr := strings.TrimPrefix(d.URL, "http://")
	before := procStatusKB(t, d.cmd.Process.Pid, "VmRSS") << 10

	var wg sync.WaitGroup
	cut := make(chan time.Duration, conns)
	start := time.Now()
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "POST /v1/tools/x/call HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(4<<20)+"\r\n\r\n{")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, _ = io.Copy(io.Discard, c) // until the server closes it
			cut <- time.Since(start)
		})
	}
	// Every connection is being served (the daemon holds 500 bodies).
	time.Sleep(time.Second)
	during := procStatusKB(t, d.cmd.Process.Pid, "VmRSS") << 10
	if status, _ := request(t, http.MethodGet, d.URL+"/healthz", "", ""); status != http.StatusOK {
		t.Errorf("/healthz while 500 bodies stall: %d", status)
	}
	wg.Wait()
	close(cut)
	var last time.Duration
	for c := range cut {
		last = max(last, c)
	}
	growth := during - before
	t.Logf("RSS before %d MiB, with %d stalled 4 MB bodies %d MiB (+%d MiB); last connection cut after %v",
		before>>20, conns, during>>20, growth>>20, last.Round(time.Millisecond))
	if growth > 200<<20 {
		t.Errorf("%d stalled bodies grew the daemon by %d MiB (limit 200 MiB)", conns, growth>>20)
	}
	if last > 15*time.Second {
		t.Errorf("stalled connections were held %v with a 3 s read timeout", last)
	}
	if status, _ := request(t, http.MethodGet, d.URL+"/healthz", "", ""); status != http.StatusOK {
		t.Errorf("/healthz after the stalled bodies: %d", status)
	}
}
