package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// reviewDaemon starts a daemon whose guard parks every call of fix.echo
// for review.
func reviewDaemon(t *testing.T) (*proc, *backend, string) {
	t.Helper()
	be := startBackend(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), fmt.Sprintf(`{
  "manual_call_templates": [{"name": "fix", "call_template_type": "http", "http_method": "GET", "url": %q}],
  "gateway": {
    "guards": [{"kind": "policy", "default": "allow", "rules": [{"tools": ["fix.echo"], "decision": "review", "reason": "echoes need a look"}]}],
    "review_timeout": "1m"
  }
}
`, be.URL+"/utcp"))
	return startDaemon(t, daemonOpts{dir: dir}), be, dir
}

// park makes a call that waits for review and returns its review id.
func park(t *testing.T, d *proc, args string) string {
	t.Helper()
	st, body := request(t, http.MethodPost, d.URL+"/v1/tools/fix.echo/call?wait=false", "", `{"arguments": `+args+`}`)
	var parked struct {
		ReviewID string `json:"review_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("wait=false: %d %s", st, body)
	}
	return parked.ReviewID
}

// TestReviewsCLI: utcpd reviews list, show, approve and deny against the
// real binary; an approved call runs once and its result reaches the
// caller's poll, a denied one never runs.
func TestReviewsCLI(t *testing.T) {
	t.Parallel()
	d, be, dir := reviewDaemon(t)
	env := []string{"UTCPD_SERVER=" + d.URL}
	id1 := park(t, d, `{"x": "first", "api_key": "sk-secret-123"}`)
	id2 := park(t, d, `{"x": "second"}`)

	out, errOut, code := cli(t, dir, env, "reviews", "list")
	if code != 0 || !strings.Contains(out, id1) || !strings.Contains(out, id2) || !strings.Contains(out, "pending") ||
		!strings.Contains(out, "fix.echo") || !strings.Contains(out, "echoes need a look") || !strings.HasPrefix(out, "ID") {
		t.Fatalf("reviews list: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "sk-secret-123") {
		t.Errorf("reviews list shows an argument: %s", out)
	}
	out, _, code = cli(t, dir, env, "reviews", "list", "--json")
	var list struct {
		Reviews []struct {
			ID        string          `json:"id"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"reviews"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || len(list.Reviews) != 2 {
		t.Fatalf("reviews list --json: exit %d %v\n%s", code, err, out)
	}
	if strings.Contains(out, "sk-secret-123") {
		t.Errorf("reviews list --json shows a secret: %s", out)
	}
	out, errOut, code = cli(t, dir, env, "reviews", "show", id1)
	if code != 0 || !strings.Contains(out, `"id": "`+id1+`"`) || !strings.Contains(out, `"first"`) || strings.Contains(out, "sk-secret-123") {
		t.Errorf("reviews show: exit %d\n%s%s", code, out, errOut)
	}

	out, errOut, code = cli(t, dir, env, "reviews", "approve", id1, "--note", "looks fine")
	if code != 0 || !strings.Contains(out, "approved review "+id1+" (fix.echo)") {
		t.Fatalf("reviews approve: exit %d\n%s%s", code, out, errOut)
	}
	eventually(t, 10*time.Second, "the approved call's result", func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/v1/reviews/"+id1, "", "")
		return st == 200 && strings.Contains(string(body), `"done":true`) && strings.Contains(string(body), `"x":"first"`)
	})
	out, errOut, code = cli(t, dir, env, "reviews", "deny", id2, "--note", "no")
	if code != 0 || !strings.Contains(out, "denied review "+id2) || !strings.Contains(out, "now denied") {
		t.Fatalf("reviews deny: exit %d\n%s%s", code, out, errOut)
	}
	// The same decision again is fine; the opposite one is refused.
	if _, errOut, code = cli(t, dir, env, "reviews", "deny", id2); code != 0 {
		t.Errorf("deny twice: exit %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, dir, env, "reviews", "approve", id2); code != 1 || !strings.Contains(errOut, "invalid_request") {
		t.Errorf("approve a denied review: exit %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, dir, env, "reviews", "show", "nosuch"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Errorf("show an unknown review: exit %d %s", code, errOut)
	}
	if out, _, code = cli(t, dir, env, "reviews", "list"); code != 0 || strings.Contains(out, id1) || strings.Contains(out, id2) {
		t.Errorf("pending after the decisions: exit %d\n%s", code, out)
	}
	if out, _, code = cli(t, dir, env, "reviews", "list", "--status", "all"); code != 0 || !strings.Contains(out, id1) || !strings.Contains(out, "denied") {
		t.Errorf("reviews list --status all: exit %d\n%s", code, out)
	}
	if _, errOut, code = cli(t, dir, env, "reviews", "list", "--status", "bogus"); code != 1 || !strings.Contains(errOut, "invalid_request") {
		t.Errorf("--status bogus: exit %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, dir, []string{"UTCPD_SERVER=" + d.URL, "UTCPD_ADMIN_TOKEN=wrong"}, "reviews", "list"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Errorf("a wrong admin token: exit %d %s", code, errOut)
	}
	if n := be.F.Calls(); n != 1 {
		t.Errorf("backend calls: %d, want 1 (the approved one)", n)
	}
}

// TestAuditCLI: utcpd audit reads the log of the real binary with its
// filters, and pages past 1000 records.
func TestAuditCLI(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", be.template("fix")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	env := []string{"UTCPD_SERVER=" + d.URL}
	callTool(t, d, "fix.fail", `{"message": "broken"}`)
	// 1004 calls of fix.add, 4 at a time, so that the log holds more
	// than one page of 1000.
	const adds = 1004
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				// Not callTool: it may call t.Fatal, which must not run
				// outside the test's goroutine.
				resp, err := http.Post(d.URL+"/v1/tools/fix.add/call", "application/json", strings.NewReader(fmt.Sprintf(`{"arguments": {"a": %d, "b": 1}}`, i)))
				if err != nil {
					t.Errorf("call %d: %v", i, err)
					continue
				}
				_ = resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("call %d: %d", i, resp.StatusCode)
				}
			}
		})
	}
	for i := range adds {
		work <- i
	}
	close(work)
	wg.Wait()
	records := func(args ...string) []map[string]any {
		t.Helper()
		out, errOut, code := cli(t, dir, env, append([]string{"audit", "--json"}, args...)...)
		var v struct {
			Records []map[string]any `json:"records"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
			t.Fatalf("audit %v: exit %d %v\n%.300s%s", args, code, err, out, errOut)
		}
		return v.Records
	}
	// Records are written in the background.
	eventually(t, 20*time.Second, "every call in the audit log", func() bool { return len(records("--limit", "0")) == adds+1 })

	if got := records(); len(got) != 100 {
		t.Errorf("audit: %d records, want the default 100", len(got))
	}
	if got := records("--limit", "1002"); len(got) != 1002 {
		t.Errorf("audit --limit 1002: %d records", len(got))
	}
	all := records("--limit", "0")
	seen := map[float64]bool{}
	for i, r := range all {
		id := r["id"].(float64)
		if seen[id] || (i > 0 && id >= all[i-1]["id"].(float64)) {
			t.Fatalf("record %d: id %v repeated or not newest first", i, id)
		}
		seen[id] = true
	}
	fails := records("--outcome", "tool_error")
	if len(fails) != 1 || fails[0]["qualified"] != "fix.fail" {
		t.Errorf("audit --outcome tool_error: %v", fails)
	}
	if got := records("--tool", "fix.fail", "--since", "1h"); len(got) != 1 {
		t.Errorf("audit --tool fix.fail --since 1h: %d records", len(got))
	}
	if got := records("--tool", "fix.add", "--decision", "allow", "--limit", "3"); len(got) != 3 || got[0]["qualified"] != "fix.add" {
		t.Errorf("audit --tool fix.add --limit 3: %v", got)
	}
	if got := records("--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(got) != 0 {
		t.Errorf("audit --since the future: %d records", len(got))
	}

	out, errOut, code := cli(t, dir, env, "audit", "--limit", "2", "--outcome", "tool_error")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[1], "fix.fail") || !strings.Contains(lines[1], "tool_error") {
		t.Errorf("audit table: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = cli(t, dir, env, "audit", "--since", "yesterday"); code != 1 || !strings.Contains(errOut, "invalid_request") {
		t.Errorf("audit --since yesterday: exit %d %s", code, errOut)
	}
	if _, _, code = cli(t, dir, env, "audit", "--limit", "-1"); code != 2 {
		t.Errorf("audit --limit -1: exit %d, want 2", code)
	}
}

// TestStreamCLI: utcpd stream prints each event as the daemon relays it
// (the backend sends the next event only once the test has read the
// previous line from the CLI), exits 3 on a tool error, and runs
// in-process too.
func TestStreamCLI(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/utcp":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [
			  {"name": "ticks", "description": "Three ticks, one at a time.", "inputs": {"type": "object"},
			   "tool_call_template": {"call_template_type": "sse", "url": %q}},
			  {"name": "broken", "description": "Fails.", "inputs": {"type": "object"},
			   "tool_call_template": {"call_template_type": "sse", "url": %q}}]}`, srv.URL+"/ticks", srv.URL+"/broken")
		case "/ticks":
			w.Header().Set("Content-Type", "text/event-stream")
			for i := 1; i <= 3; i++ {
				if i > 1 {
					select {
					case <-next:
					case <-r.Context().Done():
						return
					case <-time.After(30 * time.Second):
						return
					}
				}
				fmt.Fprintf(w, "id: %d\ndata: {\"tick\": %d}\n\n", i, i)
				w.(http.Flusher).Flush()
			}
		case "/broken":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"error": "no ticks today"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", fmt.Sprintf(`{"name": "gated", "call_template_type": "sse", "url": %q}`, srv.URL+"/utcp")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}

	cmd := exec.Command(binPath, "stream", "gated.ticks", "--server", d.URL)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for i := 1; i <= 3; i++ {
		// The backend holds tick i+1 until this line was read: only a
		// CLI that prints each event as it comes gets past tick 1.
		if !lines.Scan() {
			t.Fatalf("tick %d: no line (%v)\n%s", i, lines.Err(), stderr.String())
		}
		if want := fmt.Sprintf(`{"tick":%d}`, i); lines.Text() != want {
			t.Fatalf("line %d: %q, want %q", i, lines.Text(), want)
		}
		if i < 3 {
			next <- struct{}{}
		}
	}
	if lines.Scan() {
		t.Errorf("more output: %q", lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("utcpd stream: %v\n%s", err, stderr.String())
	}

	env := []string{"UTCPD_SERVER=" + d.URL}
	out, errOut, code := cli(t, dir, env, "stream", "gated.broken")
	if code != exitToolError || out != "" || !strings.Contains(errOut, "tool_error") {
		t.Errorf("stream of a failing tool: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = cli(t, dir, env, "stream", "gated.nope"); code != exitFailure || !strings.Contains(errOut, "tool_not_found") {
		t.Errorf("stream of an unknown tool: exit %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, dir, env, "stream", "gated.ticks", "--args", "[1]"); code != exitUsage || !strings.Contains(errOut, "got an array") {
		t.Errorf("stream --args [1]: exit %d %s", code, errOut)
	}

	// A tool that does not stream gives one event; in-process too.
	be := startBackend(t)
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", be.template("fix")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	if out, errOut, code = cli(t, dir, env, "stream", "fix.add", "--args", `{"a": 2, "b": 3}`); code != 0 || out != "{\"sum\":5}\n" {
		t.Errorf("stream fix.add: exit %d %q %s", code, out, errOut)
	}
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s]}`, be.template("local")))
	if out, errOut, code = cli(t, dir, nil, "stream", "local.add", "--config", cfg, "--args", `{"a": 1, "b": 1}`); code != 0 || out != "{\"sum\":2}\n" {
		t.Errorf("stream in-process: exit %d %q %s", code, out, errOut)
	}
}

// TestVersionAndHelp: --version prints what utcpd version prints; serve
// --help is short, groups its flags and points at docs/cli.md.
func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v1, _, code1 := cli(t, dir, nil, "version")
	v2, _, code2 := cli(t, dir, nil, "--version")
	if code1 != 0 || code2 != 0 || v1 != v2 || !strings.HasPrefix(v1, "utcpd ") || !strings.Contains(v1, "transports: ") {
		t.Errorf("version %d %q, --version %d %q", code1, v1, code2, v2)
	}
	out, errOut, code := cli(t, dir, nil, "serve", "--help")
	if code != 0 {
		t.Fatalf("serve --help: exit %d %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n > 60 {
		t.Errorf("serve --help has %d lines, want at most 60", n)
	}
	for _, want := range []string{"docs/cli.md", "Usage:\n  utcpd serve [flags]", "Listener and access:\n", "Manuals and storage:\n", "Limits and timeouts:\n", "Logging and profiling:\n", "--listen", "--store", "--help"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out)
		}
	}
	// Every flag is listed exactly once.
	_, flags, _ := strings.Cut(out, "Usage:")
	for _, f := range []string{"--config", "--strict", "--listen", "--admin-token", "--api-keys", "--data-dir", "--store", "--no-store", "--manuals-dir",
		"--max-body-bytes", "--default-timeout", "--max-timeout", "--read-timeout", "--shutdown-timeout", "--max-connections", "--log-format", "--log-level"} {
		n := 0
		for _, l := range strings.Split(flags, "\n") {
			l = strings.TrimSpace(l)
			if len(l) > 4 && l[0] == '-' && l[1] != '-' && l[3] == ' ' {
				l = l[4:] // "-c, --config ..."
			}
			if strings.HasPrefix(l, f+" ") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("serve --help lists %s %d times", f, n)
		}
	}
	out, _, code = cli(t, dir, nil, "--help")
	for _, want := range []string{"reviews", "audit", "stream", "--version"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("utcpd --help lacks %q", want)
		}
	}
}
