package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/sse/sseserver"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// TestConsoleBrowser drives the web console (/ui/) in a real browser:
// Debian's chromium, driven by playwright-core (npm peer in
// testdata/peer). It logs in with the admin token, registers the demo
// HTTP manual through the form, finds add by search and calls it through
// the form generated from its schema (and sees the sum), streams count
// event by event, has a policy send echo to review and approves it from
// the Reviews page (the waiting call then completes), finds the calls in
// Audit and watches Traffic update live; then a page of another origin
// tries to register, call and delete through the console, and nothing
// happens. It fails on any console error of the console's pages and on
// any request the browser sends off loopback. Screenshots of every page
// go to $UTCPD_CONSOLE_SCREENSHOTS (default a temporary folder, kept and
// logged), never into the tree.
func TestConsoleBrowser(t *testing.T) {
	p := transporttest.NPMPeerDir(t, "playwright-core")
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("%s=1 but /usr/bin/chromium is missing (apt-get install chromium): %v", transporttest.PeerEnv, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	be := startBackend(t)
	sse := startSSEBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"gateway": {
  "guards": [{"kind": "policy", "default": "allow", "rules": [{"tools": ["demo.echo"], "decision": "review", "reason": "echoes need a look"}]}],
  "review_timeout": "2m"}}`)
	token := randomToken(t)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}, env: []string{"UTCPD_ADMIN_TOKEN=" + token}})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><title>a page</title><link rel=icon href=data:,><body>nothing to see</body>"))
	})}
	go func() { _ = page.Serve(ln) }()
	t.Cleanup(func() { _ = page.Close() })

	out := os.Getenv("UTCPD_CONSOLE_SCREENSHOTS")
	if out == "" {
		if out, err = os.MkdirTemp("", "utcpd-console-screenshots-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "peer", "console.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+p.Modules, "DAEMON="+d.URL, "TOKEN="+token, "BACKEND="+be.URL, "SSE="+sse,
		"ATTACKER=http://"+ln.Addr().String(), "OUT="+out)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("console.js: %v\n%s", err, stdout)
	}
	t.Logf("screenshots: %s", out)
	var res struct {
		Error          string                     `json:"error"`
		Steps          []string                   `json:"steps"`
		Seen           map[string]json.RawMessage `json:"seen"`
		ConsoleErrors  []string                   `json:"consoleErrors"`
		AttackerErrors []string                   `json:"attackerErrors"`
		Outside        []string                   `json:"outside"`
	}
	if err := json.Unmarshal(stdout, &res); err != nil {
		t.Fatalf("console.js printed %q: %v", stdout, err)
	}
	for _, s := range res.Steps {
		t.Logf("%s: %s", s, res.Seen[s])
	}
	if res.Error != "" {
		t.Fatalf("the browser script failed: %s", res.Error)
	}
	if len(res.ConsoleErrors) > 0 {
		t.Errorf("console errors on the console's pages:\n%s", strings.Join(res.ConsoleErrors, "\n"))
	}
	if len(res.Outside) > 0 {
		t.Errorf("the browser sent requests off loopback: %v", res.Outside)
	}
	seen := func(name string, v any) {
		t.Helper()
		raw, ok := res.Seen[name]
		if !ok {
			t.Fatalf("step %q did not run", name)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("step %q: %s: %v", name, raw, err)
		}
	}

	var login string
	seen("root redirects to the login page", &login)
	if !strings.HasPrefix(login, "/ui/login") {
		t.Errorf("GET / in a browser landed on %s", login)
	}
	var reg struct{ Flash, Row string }
	seen("register the demo HTTP manual through the form", &reg)
	if !strings.Contains(reg.Flash, "registered manual demo with 5 tools") ||
		!strings.Contains(reg.Row, "ready") || !strings.Contains(reg.Row, "api") || !strings.Contains(reg.Row, "http") {
		t.Errorf("registration: %+v", reg)
	}
	var search struct{ First string }
	seen("find add by search", &search)
	if search.First != "demo.add" {
		t.Errorf("the best match of the search is %q, want demo.add", search.First)
	}
	var call struct {
		Required []string
		Result   string
	}
	seen("call add through the generated form", &call)
	if len(call.Required) != 2 || !strings.Contains(call.Result, "sum: 5") {
		t.Errorf("add through the form: %+v", call)
	}
	var form struct {
		Sent   map[string]any
		Result string
	}
	seen("a form generated from a rich schema sends what was typed", &form)
	wantSent := map[string]any{"title": "Quarterly report", "count": 3.0, "loud": true, "mode": "slow", "tags": []any{"a", "b"},
		"points": []any{map[string]any{"x": 1.5, "y": -2.0}}, "owner": map[string]any{"name": "ann"}}
	if diff := cmp.Diff(wantSent, form.Sent); diff != "" || !strings.Contains(form.Result, "Quarterly report") {
		t.Errorf("the generated form sent (-want +got):\n%s\nresult %s", diff, form.Result)
	}
	var pasted struct{ Flash string }
	seen("register the demo SSE manual by pasting its template", &pasted)
	if !strings.Contains(pasted.Flash, "registered manual live with 5 tools") {
		t.Errorf("the pasted template: %+v", pasted)
	}
	var stream struct {
		Events []string
		Status string
	}
	seen("stream count event by event", &stream)
	if !slices.Equal(stream.Events, []string{"1", "2", "3"}) || !strings.Contains(stream.Status, "stream ended after 3 events") {
		t.Errorf("streamed count: %+v", stream)
	}
	var mcp struct {
		Images []struct {
			W   int
			Src string
		}
		Text    []string
		Scripts int
	}
	seen("MCP content blocks render as an image and text", &mcp)
	if len(mcp.Images) != 1 || mcp.Images[0].W != 1 || mcp.Images[0].Src != "data:image/png;base64," ||
		!slices.Equal(mcp.Text, []string{"a caption\non two lines"}) || mcp.Scripts != 0 {
		t.Errorf("content blocks: %+v (want one 1×1 png image, the text, and the two malformed image blocks as plain values)", mcp)
	}
	var rv struct{ Card, Flash, History, Result string }
	seen("a policy sends echo to review; approve it from the Reviews page", &rv)
	if !strings.Contains(rv.Card, "echoes need a look") || !strings.Contains(rv.Card, "[redacted]") || strings.Contains(rv.Card, "console-secret") {
		t.Errorf("the pending review: %q", rv.Card)
	}
	if !strings.Contains(rv.Flash, "approved review") || !strings.Contains(rv.History, "looks fine") || !strings.Contains(rv.Result, "hello from the console") {
		t.Errorf("approval: %+v", rv)
	}
	var au struct {
		Rows []struct{ Tool, Outcome, Text string }
	}
	seen("the calls in Audit", &au)
	tools := map[string]bool{}
	for _, r := range au.Rows {
		if !strings.Contains(r.Text, "via console") {
			t.Errorf("audit row not from the console: %+v", r)
		}
		tools[r.Tool+" "+r.Outcome] = true
	}
	for _, want := range []string{"demo.add ok", "demo.echo ok"} {
		if !tools[want] {
			t.Errorf("audit has no %s: %+v", want, au.Rows)
		}
	}
	var tr struct {
		Before, After, Made, Charts int
		Tools                       []string
		Errors                      string
	}
	seen("Traffic, live", &tr)
	if tr.Before != 5 || tr.After != 29 || tr.Made != 24 || tr.Charts != 3 || len(tr.Tools) != 6 || tr.Errors != "3" {
		t.Errorf("traffic: %+v", tr)
	}
	var after struct{ Demo, Evil bool }
	seen("the console still works after the attempts", &after)
	if !after.Demo || after.Evil {
		t.Errorf("after the other origin's attempts: %+v", after)
	}

	// The daemon's side: the other origin's call was not run, the
	// manuals are the console's (source api), and the audit names the
	// console and the admin principal.
	if n := be.F.Calls(); n != 27 {
		t.Errorf("the demo HTTP server saw %d calls, want 27 (add, the form's report, the approved echo, 24 from the Traffic page)", n)
	}
	st, body := request(t, http.MethodGet, d.URL+"/admin/audit?tool=demo.add&limit=1000", token, "")
	var page1 struct {
		Records []struct {
			Front, Principal, Outcome string
		} `json:"records"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &page1) != nil {
		t.Fatalf("audit: %d %s", st, body)
	}
	if len(page1.Records) != 22 {
		t.Errorf("audit of demo.add: %d records, want 22", len(page1.Records))
	}
	for _, r := range page1.Records {
		if r.Front != "console" || r.Principal != "utcpd-admin" || r.Outcome != "ok" {
			t.Errorf("audit of demo.add: %+v", r)
		}
	}
	st, body = request(t, http.MethodGet, d.URL+"/admin/manuals", token, "")
	var list struct {
		Manuals []struct{ Name, Source string } `json:"manuals"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Manuals) != 3 ||
		list.Manuals[0].Name != "demo" || list.Manuals[0].Source != "api" || list.Manuals[1].Name != "forms" || list.Manuals[2].Name != "live" {
		t.Errorf("manuals after the test: %d %s", st, body)
	}
	t.Logf("the other origin's page saw: %s (its own console errors: %d)", res.Seen["a page of another origin cannot drive the console"], len(res.AttackerErrors))
}

// startSSEBackend serves the demo SSE server of the fixture tools on
// 127.0.0.1:0 and returns its base URL.
func startSSEBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := sseserver.NewServer(ln.Addr().String(), fixture.New(), sseserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}
