package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest"
)

// TestSecurityBrowser replays the web-page attacks of docs/security.md
// ("Web pages") in a real browser: Debian's chromium, driven by
// playwright-core (npm peer in testdata/peer). A page served from another
// loopback origin tries no-cors and CORS fetches, a CodeMode run, an MCP
// call, an admin write and a form POST to /utcp/call; a DNS-rebinding page
// (a name the browser resolves to 127.0.0.1, at the daemon's port) calls
// the tool as its own origin. None of them runs local.pwn, while the
// daemon's own origin can call local.ok — so the harness could have seen
// a call.
func TestSecurityBrowser(t *testing.T) {
	p := transporttest.NPMPeerDir(t, "playwright-core")
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("%s=1 but /usr/bin/chromium is missing (apt-get install chromium): %v", transporttest.PeerEnv, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pwned, allowed := filepath.Join(dir, "pwned"), filepath.Join(dir, "allowed")
	writeFile(t, filepath.Join(dir, "tools.json"), fmt.Sprintf(`{"utcp_version": "1.1.0", "tools": [
  {"name": "pwn", "inputs": {"type": "object", "properties": {"a": {"type": "string"}}},
   "tool_call_template": {"call_template_type": "cli", "commands": [{"command": "touch %s"}]}},
  {"name": "ok", "inputs": {"type": "object"},
   "tool_call_template": {"call_template_type": "cli", "commands": [{"command": "touch %s"}]}}]}`, pwned, allowed))
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"manual_call_templates": [{"name": "local", "call_template_type": "file", "file_path": "tools.json",
  "allowed_communication_protocols": ["file", "cli"]}]}`)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})

	// The attacker's page: another origin on loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>a page</title><body>nothing to see</body>"))
	})}
	go func() { _ = page.Serve(ln) }()
	t.Cleanup(func() { _ = page.Close() })

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "peer", "browser.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+p.Modules, "DAEMON="+d.URL, "ATTACKER=http://"+ln.Addr().String(),
		"REBIND=rebind.attacker.example")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser.js: %v\n%s", err, out)
	}
	var res struct {
		Error       string                     `json:"error"`
		CrossOrigin map[string]json.RawMessage `json:"crossOrigin"`
		RebindNav   struct{ Status int }       `json:"rebindNavigation"`
		Rebind      struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		} `json:"rebind"`
		SameOrigin struct{ Status int } `json:"sameOrigin"`
		Outside    []string             `json:"outside"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("browser.js printed %q: %v", out, err)
	}
	t.Logf("from the page's side: %s", out)
	if res.Error != "" {
		t.Fatalf("the browser script failed: %s", res.Error)
	}
	if len(res.CrossOrigin) < 7 {
		t.Errorf("not every cross-origin attempt ran: %v", res.CrossOrigin)
	}
	if res.RebindNav.Status != http.StatusForbidden || res.Rebind.Status != http.StatusForbidden {
		t.Errorf("DNS rebinding: navigation %d, same-origin call %d %s; want 403 for both", res.RebindNav.Status, res.Rebind.Status, res.Rebind.Body)
	}
	if len(res.Outside) > 0 {
		t.Errorf("the browser sent requests off loopback: %v", res.Outside)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a web page ran local.pwn")
	}
	if res.SameOrigin.Status != http.StatusOK {
		t.Errorf("a page of the daemon's own origin: %d", res.SameOrigin.Status)
	}
	if _, err := os.Stat(allowed); err != nil {
		t.Errorf("the same-origin call did not run local.ok: %v", err)
	}
	if status, _ := request(t, http.MethodGet, d.URL+"/healthz", "", ""); status != http.StatusOK {
		t.Errorf("/healthz after the attacks: %d", status)
	}
}
