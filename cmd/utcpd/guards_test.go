package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

func TestGuardSettings(t *testing.T) {
	for _, name := range []string{envListen, envAdminToken, envAPIKeys, envDataDir, envManualsDir, envLogFormat, envLogLevel} {
		t.Setenv(name, "")
	}
	dc := loadTestConfig(t, "c.json", `{
  "gateway": {
    "guards": [{"kind": "deny_all"}],
    "bypass_tools": ["health.ping", " "],
    "guard_timeout": "3s",
    "review_timeout": "10m",
    "audit_retention": "720h"
  }
}`, true)
	s, warnings, err := effectiveSettings(newServeCmd().Flags(), &serveFlags{}, dc, true)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	if string(s.Guards) != `[{"kind": "deny_all"}]` || !cmp.Equal(s.BypassTools, []string{"health.ping"}) ||
		s.GuardTimeout != 3*time.Second || s.EffectiveReviewTimeout() != 10*time.Minute || s.EffectiveAuditRetention() != 720*time.Hour {
		t.Errorf("settings %+v", s)
	}
	var zero settings
	if zero.EffectiveReviewTimeout() != 10*time.Minute || zero.EffectiveAuditRetention() != 720*time.Hour {
		t.Errorf("defaults: %v %v", zero.EffectiveReviewTimeout(), zero.EffectiveAuditRetention())
	}
	bad := loadTestConfig(t, "bad.json", `{
  "gateway": {
    "guards": {"kind": "deny_all"},
    "bypass_tools": "health.ping",
    "review_timeout": "soon",
    "bypass_tool": ["x"]
  }
}`, false)
	_, _, err = effectiveSettings(newServeCmd().Flags(), &serveFlags{}, bad, true)
	for _, w := range []string{"bad.json:3: gateway.guards", "bad.json:4: gateway.bypass_tools", "bad.json:5: gateway.review_timeout"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	_, warnings, _ = effectiveSettings(newServeCmd().Flags(), &serveFlags{}, loadTestConfig(t, "w.json", `{"gateway": {"bypass_tool": ["x"]}}`, false), false)
	if len(warnings) != 1 || warnings[0].Suggestion != "bypass_tools" {
		t.Errorf("typo warning: %+v", warnings)
	}
}

// TestDaemonGuardChain runs the real binary with a chain of built-in
// kinds: the chain decides, bypass_tools skips it, every call is in the
// audit log, SIGHUP swaps the chain and a broken one keeps the last good
// one; a chain that does not load refuses to start.
func TestDaemonGuardChain(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "utcpd.json")
	writeConfig := func(guards string) {
		writeFile(t, cfgPath, fmt.Sprintf(`{
  "variables": {"NAME": "lockdown"},
  "manual_call_templates": [{"name": "fix", "call_template_type": "http", "http_method": "GET", "url": %q}],
  "gateway": {
    "guards": %s,
    "bypass_tools": ["fix.echo"],
    "review_timeout": "1m"
  }
}
`, be.URL+"/utcp", guards))
	}
	writeConfig(`[{"kind": "allow_all"}, {"kind": "deny_all", "name": "${NAME}"}]`)
	dataDir := filepath.Join(dir, "data")
	d := startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})

	status, res := callTool(t, d, "fix.add", `{"a": 1, "b": 2}`)
	if status != http.StatusForbidden || !strings.Contains(fmt.Sprint(res), "guard_denied") {
		t.Fatalf("fix.add under deny_all: %d %v", status, res)
	}
	if status, _ := callTool(t, d, "fix.echo", `{"message": "hi"}`); status != 200 {
		t.Fatalf("bypassed fix.echo: %d", status)
	}
	if be.F.Calls() != 1 {
		t.Fatalf("backend calls %d, want 1 (the bypassed echo)", be.F.Calls())
	}
	type page struct {
		Records []struct {
			Tool, Decision, Outcome, Front string
			Dispatched                     bool
			Steps                          []struct{ Guard, Decision string }
		} `json:"records"`
	}
	readAudit := func(q string) page {
		t.Helper()
		var p page
		eventually(t, 5*time.Second, "audit records", func() bool {
			st, body := request(t, http.MethodGet, d.URL+"/admin/audit"+q, "", "")
			if st != 200 {
				t.Fatalf("GET /admin/audit: %d %s", st, body)
			}
			p = page{}
			_ = json.Unmarshal(body, &p)
			return len(p.Records) > 0
		})
		return p
	}
	p := readAudit("?decision=deny")
	if len(p.Records) != 1 || p.Records[0].Tool != "fix.add" || p.Records[0].Dispatched || p.Records[0].Front != "rest" ||
		len(p.Records[0].Steps) != 2 || p.Records[0].Steps[1].Guard != "1:deny_all" {
		t.Errorf("audit of the denial: %+v", p)
	}

	// SIGHUP: the chain allows now.
	writeConfig(`[{"kind": "allow_all"}]`)
	d.signal(syscall.SIGHUP)
	d.waitLog("guard chain reloaded", 10*time.Second)
	if status, _ := callTool(t, d, "fix.add", `{"a": 1, "b": 2}`); status != 200 {
		t.Fatalf("fix.add after the reload: %d", status)
	}
	// A chain that does not load keeps the last good one.
	writeConfig(`[{"kind": "allow_all"}, {"kind": "no_such_kind"}]`)
	d.signal(syscall.SIGHUP)
	d.waitLog("the last good chain keeps deciding", 10*time.Second)
	if !strings.Contains(d.stderr.String(), "gateway.guards[1]") {
		t.Errorf("the reload error does not name the entry:\n%s", d.stderr.String())
	}
	if status, _ := callTool(t, d, "fix.add", `{"a": 1, "b": 2}`); status != 200 {
		t.Fatalf("fix.add after a broken reload: %d", status)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// The same broken chain refuses to start, naming the entry.
	_, errOut, code := cli(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--config", cfgPath)
	if code != 2 || !strings.Contains(errOut, "gateway.guards[1]") || !strings.Contains(errOut, "no_such_kind") {
		t.Fatalf("a broken chain at start: exit %d, stderr %q", code, errOut)
	}
	writeConfig(`[{"kind": "deny_all", "secret": "${MISSING_GUARD_SECRET}"}]`)
	_, errOut, code = cli(t, dir, nil, "serve", "--listen", "127.0.0.1:0", "--no-store", "--config", cfgPath)
	if code != 2 || !strings.Contains(errOut, "gateway.guards[0]") || !strings.Contains(errOut, "MISSING_GUARD_SECRET") {
		t.Fatalf("a missing variable at start: exit %d, stderr %q", code, errOut)
	}

	// The in-process CLI applies the chain too, and is audited in the
	// data directory's store (front cli).
	writeConfig(`[{"kind": "deny_all"}]`)
	env := []string{"UTCPD_DATA_DIR=" + dataDir}
	_, errOut, code = cli(t, dir, env, "call", "fix.add", "--config", cfgPath, "--args", `{"a": 1, "b": 2}`)
	if code != 1 || !strings.Contains(errOut, string(utcp.CodeGuardDenied)) {
		t.Fatalf("in-process call under deny_all: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := cli(t, dir, env, "call", "fix.echo", "--config", cfgPath, "--args", `{"message": "hi"}`)
	if code != 0 {
		t.Fatalf("in-process bypassed call: exit %d %s %s", code, out, errOut)
	}
	d2 := startDaemon(t, daemonOpts{dir: t.TempDir(), dataDir: dataDir})
	d = d2
	p = readAudit("?tool=fix.add")
	var fronts []string
	for _, r := range p.Records {
		fronts = append(fronts, r.Front+":"+r.Decision)
	}
	if d := cmp.Diff([]string{"cli:deny", "rest:allow", "rest:allow", "rest:deny"}, fronts); d != "" {
		t.Errorf("audit of fix.add across restarts and the CLI (-want +got):\n%s", d)
	}
}

// issueConfig is the gateway section of the issue, as written (with
// rules and command_from filled in).
const issueConfig = `{"gateway": {
  "guards": [
    {"kind": "policy", "default": "allow", "rules": [
      {"name": "no-etc", "tools": ["files.*"], "args": [{"pointer": "/path", "regex": "^/etc/"}], "decision": "deny", "reason": "system files are off limits"},
      {"tools": ["fix.add"], "decision": "review", "reason": "sums need a second pair of eyes"}
    ]},
    {"kind": "holguard", "executable": "hol-guard", "timeout": "5s", "command_from": {"shell.run": "command"}, "unmapped_decision": "allow"},
    {"kind": "webhook", "url": "https://policy.internal/check", "secret": "${GUARD_HMAC}", "timeout": "2s"}
  ],
  "bypass_tools": ["health.ping"],
  "review_timeout": "10m",
  "audit_retention": "720h"
}}`

// TestIssueConfigLoads loads the issue's configuration with the shipped
// guard kinds.
func TestIssueConfigLoads(t *testing.T) {
	for _, name := range []string{envListen, envAdminToken, envAPIKeys, envDataDir, envManualsDir, envLogFormat, envLogLevel} {
		t.Setenv(name, "")
	}
	t.Setenv("GUARD_HMAC", "hmac-from-env")
	dc := loadTestConfig(t, "utcpd.json", issueConfig, true)
	s, warnings, err := effectiveSettings(newServeCmd().Flags(), &serveFlags{}, dc, true)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	named, err := daemon.LoadGuards(guard.Default, s.Guards, dc.Vars, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range named {
		names = append(names, n.Name)
	}
	if d := cmp.Diff([]string{"0:policy", "1:holguard", "2:webhook"}, names); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	if !cmp.Equal(s.BypassTools, []string{"health.ping"}) || s.EffectiveReviewTimeout() != 10*time.Minute || s.EffectiveAuditRetention() != 720*time.Hour {
		t.Errorf("settings %+v", s)
	}
	chain := daemon.NewChain(named, &s, nil, 0)
	var tr guard.Trace
	v, _ := chain.Evaluate(guard.WithTrace(t.Context(), &tr), &guard.Call{Tool: "files.read", Qualified: "files.read", Arguments: map[string]any{"path": "/etc/shadow"}})
	if v.Decision != guard.Deny || v.Guard != "0:policy" || len(tr.Steps) != 1 {
		t.Errorf("policy denial: %+v %+v", v, tr.Steps)
	}
	// Without the variable the chain does not load.
	t.Setenv("GUARD_HMAC", "")
	dc = loadTestConfig(t, "utcpd.json", issueConfig, true)
	if _, err := daemon.LoadGuards(guard.Default, s.Guards, dc.Vars, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "gateway.guards[2]") {
		t.Errorf("a missing GUARD_HMAC: %v", err)
	}
}

// TestDaemonReviewFlow runs the real binary with a policy that sends
// fix.add to review: a waiting call approved through the admin API, a
// parked call (?wait=false) polled, and a parked call that survives a
// restart and runs once after it.
func TestDaemonReviewFlow(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), fmt.Sprintf(`{
  "manual_call_templates": [{"name": "fix", "call_template_type": "http", "http_method": "GET", "url": %q}],
  "gateway": {
    "guards": [{"kind": "policy", "default": "allow", "rules": [{"tools": ["fix.add"], "decision": "review", "reason": "check sums"}]}],
    "review_timeout": "1m"
  }
}
`, be.URL+"/utcp"))
	dataDir := filepath.Join(dir, "data")
	d := startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	pending := func(d *proc) []map[string]any {
		t.Helper()
		var list struct {
			Reviews []map[string]any `json:"reviews"`
		}
		st, body := request(t, http.MethodGet, d.URL+"/admin/reviews", "", "")
		if st != 200 || json.Unmarshal(body, &list) != nil {
			t.Fatalf("GET /admin/reviews: %d %s", st, body)
		}
		return list.Reviews
	}
	approve := func(d *proc, id string) {
		t.Helper()
		if st, body := request(t, http.MethodPost, d.URL+"/admin/reviews/"+id+"/approve", "", `{"note": "ok"}`); st != 200 {
			t.Fatalf("approve %s: %d %s", id, st, body)
		}
	}
	poll := func(d *proc, id string) map[string]any {
		t.Helper()
		var v map[string]any
		eventually(t, 10*time.Second, "review "+id+" done", func() bool {
			st, body := request(t, http.MethodGet, d.URL+"/v1/reviews/"+id, "", "")
			v = map[string]any{}
			return st == 200 && json.Unmarshal(body, &v) == nil && v["done"] == true
		})
		return v
	}

	// A waiting caller.
	type answer struct {
		status int
		body   []byte
	}
	ch := make(chan answer, 1)
	go func() {
		st, body := request(t, http.MethodPost, d.URL+"/v1/tools/fix.add/call", "", `{"arguments": {"a": 1, "b": 2}}`)
		ch <- answer{st, body}
	}()
	var list []map[string]any
	eventually(t, 10*time.Second, "a pending review", func() bool { list = pending(d); return len(list) == 1 })
	approve(d, list[0]["id"].(string))
	a := <-ch
	if a.status != 200 || !strings.Contains(string(a.body), `"sum":3`) {
		t.Fatalf("the waiting call: %d %s", a.status, a.body)
	}

	// A parked call, polled.
	st, body := request(t, http.MethodPost, d.URL+"/v1/tools/fix.add/call?wait=false", "", `{"arguments": {"a": 2, "b": 2}}`)
	var parked struct {
		ReviewID string `json:"review_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("wait=false: %d %s", st, body)
	}
	approve(d, parked.ReviewID)
	if v := poll(d, parked.ReviewID); fmt.Sprint(v["result"]) != "map[sum:4]" {
		t.Errorf("polled result: %v", v)
	}

	// A parked call across a restart.
	st, body = request(t, http.MethodPost, d.URL+"/v1/tools/fix.add/call?wait=false", "", `{"arguments": {"a": 3, "b": 3}}`)
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil {
		t.Fatalf("wait=false: %d %s", st, body)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if be.F.Calls() != 2 {
		t.Fatalf("backend calls before the restart: %d, want 2", be.F.Calls())
	}
	d = startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	if list := pending(d); len(list) != 1 || list[0]["id"] != parked.ReviewID {
		t.Fatalf("pending after the restart: %v", list)
	}
	approve(d, parked.ReviewID)
	if v := poll(d, parked.ReviewID); fmt.Sprint(v["result"]) != "map[sum:6]" || v["dispatched"] != true {
		t.Errorf("polled result after the restart: %v", v)
	}
	time.Sleep(100 * time.Millisecond)
	if n := be.F.Calls(); n != 3 {
		t.Errorf("backend calls: %d, want 3", n)
	}
}

// TestConfigValidateGuards: utcpd config validate builds the chain and
// names the entry that does not load.
func TestConfigValidateGuards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "g.json")
	writeFile(t, path, "{\n  \"gateway\": {\n    \"guards\": [{\"kind\": \"deny_all\"}, {\"kind\": \"polcy\"}]\n  }\n}\n")
	out, _, code := cli(t, dir, nil, "config", "validate", path)
	if code != 2 || !strings.Contains(out, "g.json:3: gateway.guards[1]") || !strings.Contains(out, "polcy") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	writeFile(t, path, "{\n  \"gateway\": {\n    \"guards\": [{\"kind\": \"policy\", \"default\": \"allow\"}]\n  }\n}\n")
	if out, _, code := cli(t, dir, nil, "config", "validate", path); code != 0 {
		t.Fatalf("a good chain: exit %d\n%s", code, out)
	}
}
