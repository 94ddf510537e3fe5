package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDaemonLifecycle: register through the admin API, list, call,
// restart (the manual is still there, from the store), delete, restart
// (it stays deleted).
func TestDaemonLifecycle(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	data := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, daemonOpts{dataDir: data})

	status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", be.template("fix"))
	if status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	if tools := toolNames(t, d); !tools["fix.add"] || !tools["fix.sleep"] {
		t.Fatalf("tools after register: %v", tools)
	}
	status, res := callTool(t, d, "fix.add", `{"a": 2, "b": 3}`)
	if status != http.StatusOK || fmt.Sprint(res["result"]) != "map[sum:5]" || res["is_error"] != false {
		t.Fatalf("call fix.add: %d %v", status, res)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM: exit code %d", code)
	}

	d = startDaemon(t, daemonOpts{dataDir: data})
	if got := manualNames(t, d); got["fix"] != "api" {
		t.Fatalf("after restart: manuals %v, want fix from the store", got)
	}
	if status, res := callTool(t, d, "fix.add", `{"a": 20, "b": 22}`); status != http.StatusOK || fmt.Sprint(res["result"]) != "map[sum:42]" {
		t.Fatalf("call after restart: %d %v", status, res)
	}
	// A stored manual is discovered again in the background after a
	// restart. Let that finish before the delete: a refresh still
	// discovering when the manual is deleted registers it again
	// (gateway.RefreshManual does not check that the manual it refreshes
	// is still registered; reported to the gateway's owner).
	eventually(t, 10*time.Second, "the background rediscovery", func() bool { return be.Discoveries.Load() >= 2 })
	time.Sleep(300 * time.Millisecond)
	if status, body := request(t, http.MethodDelete, d.URL+"/admin/manuals/fix", "", ""); status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", status, body)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM: exit code %d", code)
	}

	d = startDaemon(t, daemonOpts{dataDir: data})
	if got := manualNames(t, d); len(got) != 0 {
		t.Fatalf("after delete and restart: manuals %v, want none", got)
	}
	if status, _ := request(t, http.MethodGet, d.URL+"/healthz", "", ""); status != http.StatusOK {
		t.Fatalf("/healthz: %d", status)
	}
}

// TestCLI: utcpd manuals add/list/rm and utcpd call/tools against a
// daemon, and utcpd call in-process from a configuration file.
func TestCLI(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_API_KEYS=k1,k2", "UTCPD_ADMIN_TOKEN=admintok"}})
	admin := []string{"UTCPD_SERVER=" + d.URL, "UTCPD_ADMIN_TOKEN=admintok"}
	user := []string{"UTCPD_SERVER=" + d.URL, "UTCPD_API_KEY=k2"}

	// manuals add FILE (a template without a name: named after the file).
	tmpl := filepath.Join(dir, "fix.json")
	writeFile(t, tmpl, fmt.Sprintf(`{"call_template_type": "http", "http_method": "GET", "url": %q}`, be.URL+"/utcp"))
	out, errOut, code := cli(t, dir, admin, "manuals", "add", tmpl)
	if code != 0 || !strings.Contains(out, "registered manual fix with 5 tools") {
		t.Fatalf("manuals add FILE: exit %d\n%s%s", code, out, errOut)
	}
	// manuals add URL --name.
	out, errOut, code = cli(t, dir, admin, "manuals", "add", be.URL+"/utcp", "--name", "byurl")
	if code != 0 || !strings.Contains(out, "byurl.echo") {
		t.Fatalf("manuals add URL: exit %d\n%s%s", code, out, errOut)
	}
	// manuals add MANUAL-FILE: sent inline as a text template.
	manual := filepath.Join(dir, "inline.json")
	writeFile(t, manual, `{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [
		{"name": "hello", "description": "Says hello.", "inputs": {"type": "object"},
		 "tool_call_template": {"call_template_type": "text", "content": "\"hello\""}}]}`)
	if out, errOut, code = cli(t, dir, admin, "manuals", "add", manual); code != 0 || !strings.Contains(out, "inline.hello") {
		t.Fatalf("manuals add MANUAL: exit %d\n%s%s", code, out, errOut)
	}
	// A second add of the same name is manual_exists, exit 1.
	if _, errOut, code = cli(t, dir, admin, "manuals", "add", tmpl); code != 1 || !strings.Contains(errOut, "manual_exists") {
		t.Fatalf("manuals add twice: exit %d, stderr %q", code, errOut)
	}
	// Without the admin token: unauthorized, exit 1.
	if _, errOut, code = cli(t, dir, []string{"UTCPD_SERVER=" + d.URL}, "manuals", "list"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("manuals list without token: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code = cli(t, dir, admin, "manuals", "list")
	if code != 0 || !strings.Contains(out, "fix") || !strings.Contains(out, "byurl") || !strings.Contains(out, "api") {
		t.Fatalf("manuals list: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code = cli(t, dir, admin, "manuals", "refresh", "fix"); code != 0 || !strings.Contains(out, "refreshed manual fix") {
		t.Fatalf("manuals refresh: exit %d\n%s%s", code, out, errOut)
	}

	// call --server with the API key.
	out, errOut, code = cli(t, dir, user, "call", "fix.add", "--args", `{"a": 2, "b": 3}`)
	if code != 0 || !strings.Contains(out, `"sum": 5`) {
		t.Fatalf("call --server: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(t, dir, user, "call", "inline.hello")
	if code != 0 || !strings.Contains(out, `"hello"`) {
		t.Fatalf("call inline.hello: exit %d\n%s", code, out)
	}
	// A tool error exits 3 and prints the result.
	out, _, code = cli(t, dir, user, "call", "--server", d.URL, "fix.fail", "--args", `{"message": "boom"}`)
	if code != 3 || !strings.Contains(out, "boom") || !strings.Contains(out, `"is_error": true`) {
		t.Fatalf("call fix.fail: exit %d\n%s", code, out)
	}
	// An unknown tool exits 1 with the envelope's code and a suggestion.
	if _, errOut, code = cli(t, dir, user, "call", "fix.ad"); code != 1 || !strings.Contains(errOut, "tool_not_found") || !strings.Contains(errOut, "fix.add") {
		t.Fatalf("call fix.ad: exit %d, stderr %q", code, errOut)
	}
	// Without the API key: unauthorized.
	if _, errOut, code = cli(t, dir, nil, "call", "--server", d.URL, "fix.add"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("call without key: exit %d, stderr %q", code, errOut)
	}
	// Bad --args is a usage error.
	if _, _, code = cli(t, dir, user, "call", "fix.add", "--args", `[1]`); code != 2 {
		t.Fatalf("call with bad --args: exit %d, want 2", code)
	}
	out, _, code = cli(t, dir, user, "tools", "list")
	if code != 0 || !strings.Contains(out, "fix.echo") || !strings.Contains(out, "byurl.count") {
		t.Fatalf("tools list --server: exit %d\n%s", code, out)
	}
	out, _, code = cli(t, dir, user, "tools", "search", "sum of two numbers", "--limit", "1", "--json")
	if code != 0 || !strings.Contains(out, `.add"`) {
		t.Fatalf("tools search --server: exit %d\n%s", code, out)
	}
	out, _, code = cli(t, dir, user, "tools", "show", "fix.sleep")
	if code != 0 || !strings.Contains(out, `"name": "fix.sleep"`) {
		t.Fatalf("tools show --server: exit %d\n%s", code, out)
	}

	// manuals rm.
	if out, errOut, code = cli(t, dir, admin, "manuals", "rm", "byurl"); code != 0 {
		t.Fatalf("manuals rm: exit %d\n%s%s", code, out, errOut)
	}
	if got := manualNamesWithToken(t, d, "admintok"); got["byurl"] != "" || got["fix"] != "api" {
		t.Fatalf("after rm: %v", got)
	}
	if _, errOut, code = cli(t, dir, admin, "manuals", "rm", "byurl"); code != 1 || !strings.Contains(errOut, "manual_not_found") {
		t.Fatalf("manuals rm twice: exit %d, stderr %q", code, errOut)
	}

	// In-process: --config, no daemon.
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s]}`, be.template("local")))
	out, errOut, code = cli(t, dir, nil, "call", "local.add", "--config", cfg, "--args", `{"a": 1, "b": 2}`)
	if code != 0 || !strings.Contains(out, `"sum": 3`) {
		t.Fatalf("call --config: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = cli(t, dir, []string{"UTCPD_CONFIG=" + cfg}, "tools", "list")
	if code != 0 || !strings.Contains(out, "local.count") {
		t.Fatalf("tools list in-process: exit %d\n%s", code, out)
	}
	if _, _, code = cli(t, dir, nil, "call", "local.add", "--config", cfg, "--server", d.URL); code != 2 {
		t.Fatalf("--config with --server: exit %d, want 2", code)
	}
}

func manualNamesWithToken(t *testing.T, p *proc, token string) map[string]string {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/admin/manuals", token, "")
	if status != http.StatusOK {
		t.Fatalf("GET /admin/manuals: %d %s", status, body)
	}
	var list struct {
		Manuals []struct{ Name, Source string } `json:"manuals"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Manuals {
		out[m.Name] = m.Source
	}
	return out
}

// textTemplate is a text manual call template named name with one tool:
// no network is needed to register it.
func textTemplate(name string) string {
	manual := `{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [{"name": "hello", "description": "Says hello.", "tags": ["greeting"], "inputs": {"type": "object"}}]}`
	b, _ := json.Marshal(map[string]any{"name": name, "call_template_type": "text", "content": manual})
	return string(b)
}

// TestKill9KeepsAcknowledgedManuals: registrations run concurrently; the
// daemon is killed with SIGKILL at a random moment; after a restart every
// manual whose registration was acknowledged (201) is there.
func TestKill9KeepsAcknowledgedManuals(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	d := startDaemon(t, daemonOpts{dataDir: data})

	var (
		mu    sync.Mutex
		acked []string
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("m%04d", next.Add(1))
				req, _ := http.NewRequest(http.MethodPost, d.URL+"/admin/manuals", strings.NewReader(textTemplate(name)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tokenFor(d.URL))
				resp, err := client.Do(req)
				if err != nil {
					return // the daemon is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusCreated {
					mu.Lock()
					acked = append(acked, name)
					mu.Unlock()
				}
			}
		})
	}
	// Kill at a random moment once registrations are flowing.
	eventually(t, 20*time.Second, "20 acknowledged registrations", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20
	})
	time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
	d.signal(syscall.SIGKILL)
	d.wait(10 * time.Second)
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no registration was acknowledged before the kill")
	}

	d = startDaemon(t, daemonOpts{dataDir: data})
	got := manualNames(t, d)
	var lost []string
	for _, name := range acked {
		if got[name] != "api" {
			lost = append(lost, name)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged manuals lost after kill -9: %v", len(lost), len(acked), lost)
	}
	t.Logf("%d acknowledged registrations, %d manuals after restart", len(acked), len(got))
}

// TestManualsDirReload: the folder is polled; new files register, changed
// ones replace, removed ones deregister, a broken one keeps its last good
// version serving; SIGHUP re-reads files whose change the poll cannot see.
func TestManualsDirReload(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	mdir := t.TempDir()
	writeFile(t, filepath.Join(mdir, "fix.json"), be.template("fix"))
	helloManual := func(tool string) string {
		return fmt.Sprintf(`{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [
			{"name": %q, "description": "Says hello.", "inputs": {"type": "object"},
			 "tool_call_template": {"call_template_type": "text", "content": "\"hello\""}}]}`, tool)
	}
	writeFile(t, filepath.Join(mdir, "greet-ings.json"), helloManual("hello"))
	writeFile(t, filepath.Join(mdir, "notes.txt"), "not a manual")
	d := startDaemon(t, daemonOpts{args: []string{"--manuals-dir", mdir}})

	got := manualNames(t, d)
	if got["fix"] != "dir" || got["greet_ings"] != "dir" || len(got) != 2 {
		t.Fatalf("manuals at start: %v", got)
	}
	if status, res := callTool(t, d, "greet_ings.hello", `{}`); status != 200 || res["result"] != "hello" {
		t.Fatalf("call greet_ings.hello: %d %v", status, res)
	}

	// A broken file keeps its last good version serving.
	writeFile(t, filepath.Join(mdir, "fix.json"), `{"name": "fix", "call_template_type": "http", `)
	d.waitLog("file is broken; its last good version keeps serving", 10*time.Second)
	if status, res := callTool(t, d, "fix.add", `{"a": 1, "b": 1}`); status != 200 || fmt.Sprint(res["result"]) != "map[sum:2]" {
		t.Fatalf("call fix.add with a broken file: %d %v", status, res)
	}
	// A file whose manual fails discovery keeps the old version too.
	writeFile(t, filepath.Join(mdir, "fix.json"), `{"name": "fix", "call_template_type": "http", "url": "http://127.0.0.1:1/utcp"}`)
	d.waitLog("manual not replaced; its last good version keeps serving", 10*time.Second)
	if tools := toolNames(t, d); !tools["fix.add"] {
		t.Fatalf("fix tools gone after a failed replacement: %v", tools)
	}

	// A folder that cannot be read keeps every manual.
	if err := os.Rename(mdir, mdir+".away"); err != nil {
		t.Fatal(err)
	}
	d.waitLog("reading the manuals folder; its manuals stay as they are", 10*time.Second)
	if got := manualNames(t, d); got["fix"] != "dir" || got["greet_ings"] != "dir" {
		t.Fatalf("manuals while the folder is away: %v", got)
	}
	if err := os.Rename(mdir+".away", mdir); err != nil {
		t.Fatal(err)
	}
	d.waitLog("manuals folder readable again", 10*time.Second)

	// Changed, added and removed files.
	writeFile(t, filepath.Join(mdir, "greet-ings.json"), helloManual("hi"))
	writeFile(t, filepath.Join(mdir, "extra.json"), textTemplate("extra"))
	eventually(t, 10*time.Second, "greet_ings.hi and extra.hello", func() bool {
		tools := toolNames(t, d)
		return tools["greet_ings.hi"] && !tools["greet_ings.hello"] && tools["extra.hello"]
	})
	if err := os.Remove(filepath.Join(mdir, "extra.json")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "extra removed", func() bool { return manualNames(t, d)["extra"] == "" })

	// SIGHUP: a change with the same size and modification time, which
	// the poll does not see.
	path := filepath.Join(mdir, "greet-ings.json")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "next.json")
	writeFile(t, tmp, helloManual("yo")) // "yo" is as long as "hi"
	if err := os.Chtimes(tmp, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic for the poll
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // two polls: nothing changes
	if tools := toolNames(t, d); !tools["greet_ings.hi"] {
		t.Fatalf("the poll saw a change it should not see: %v", tools)
	}
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "greet_ings.yo after SIGHUP", func() bool {
		tools := toolNames(t, d)
		return tools["greet_ings.yo"] && !tools["greet_ings.hi"]
	})
	// The admin API cannot remove a folder manual.
	if status, body := request(t, http.MethodDelete, d.URL+"/admin/manuals/greet_ings", "", ""); status != http.StatusConflict {
		t.Fatalf("DELETE a dir manual: %d %s", status, body)
	}
}

// TestSIGHUPReloadsConfig: SIGHUP re-reads the configuration: changed
// variables re-discover the manuals that use them, new templates
// register, removed ones deregister; a broken file keeps the last good
// configuration.
func TestSIGHUPReloadsConfig(t *testing.T) {
	t.Parallel()
	be1, be2 := startBackend(t), startBackend(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "utcpd.json")
	writeConfig := func(base string, extra bool) {
		templates := `{"name": "fix", "call_template_type": "http", "http_method": "GET", "url": "${BASE}/utcp"}`
		if extra {
			templates += `, ` + textTemplate("extra")
		}
		writeFile(t, cfgPath, fmt.Sprintf(`{
  "variables": {"fix_BASE": %q},
  "manual_call_templates": [%s]
}
`, base, templates))
	}
	writeConfig(be1.URL, false)
	// utcpd.json in the working directory is the default configuration.
	d := startDaemon(t, daemonOpts{dir: dir})
	if got := manualNames(t, d); got["fix"] != "config" {
		t.Fatalf("manuals at start: %v", got)
	}
	if status, _ := callTool(t, d, "fix.echo", `{"x": 1}`); status != 200 || be1.F.Calls() != 1 || be2.F.Calls() != 0 {
		t.Fatalf("call before reload: %d, backend calls %d and %d", status, be1.F.Calls(), be2.F.Calls())
	}

	writeConfig(be2.URL, true)
	d.signal(syscall.SIGHUP)
	d.waitLog("configuration reloaded", 10*time.Second)
	if got := manualNames(t, d); got["extra"] != "config" {
		t.Fatalf("manuals after reload: %v", got)
	}
	if status, _ := callTool(t, d, "fix.echo", `{"x": 2}`); status != 200 || be2.F.Calls() != 1 || be1.F.Calls() != 1 {
		t.Fatalf("call after reload: %d, backend calls %d and %d (want the new variable's backend)", status, be1.F.Calls(), be2.F.Calls())
	}

	// A broken configuration keeps the last good one.
	writeFile(t, cfgPath, "{\n  \"manual_call_templates\": [\n    {\"name\": 3}\n  ]\n}\n")
	d.signal(syscall.SIGHUP)
	d.waitLog("the last good configuration keeps serving", 10*time.Second)
	if got := manualNames(t, d); got["fix"] != "config" || got["extra"] != "config" {
		t.Fatalf("manuals after a broken reload: %v", got)
	}

	writeConfig(be2.URL, false)
	d.signal(syscall.SIGHUP)
	eventually(t, 10*time.Second, "extra removed", func() bool { return manualNames(t, d)["extra"] == "" })
}

// TestExposedListenerRefused: a non-loopback address needs an admin token
// and API keys.
func TestExposedListenerRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, errOut, code := cli(t, dir, nil, "serve", "--listen", "0.0.0.0:0", "--no-store")
	if code != 2 || !strings.Contains(errOut, "without an admin token") {
		t.Fatalf("no admin token: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = cli(t, dir, []string{"UTCPD_ADMIN_TOKEN=secret-token"}, "serve", "--listen", "0.0.0.0:0", "--no-store")
	if code != 2 || !strings.Contains(errOut, "without API keys") {
		t.Fatalf("no API keys: exit %d, stderr %q", code, errOut)
	}
	if strings.Contains(errOut, "secret-token") {
		t.Fatalf("the admin token shows in the output: %q", errOut)
	}
}

// TestConfigErrorAtStart: a configuration error names the file and line
// and exits 2.
func TestConfigErrorAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name, content string
		args          []string
		want          []string
	}{
		{"bad gateway value", "{\n  \"gateway\": {\n    \"listen\": \"127.0.0.1:0\",\n    \"default_timeout\": \"soon\"\n  }\n}\n", nil,
			[]string{"bad-gateway-value.json:4: gateway.default_timeout"}},
		{"unknown gateway key strict", "{\n  \"gateway\": {\n    \"admin_tokn\": \"x\"\n  }\n}\n", []string{"--strict"},
			[]string{"unknown-gateway-key-strict.json:3: gateway.admin_tokn", `did you mean "admin_token"`}},
		{"malformed json", "{\n  \"manual_call_templates\": [\n    {\"name\": \"a\",}\n  ]\n}\n", nil,
			[]string{"malformed-json.json:3"}},
		{"bad template", "{\n  \"manual_call_templates\": [\n    {\"name\": \"a\"}\n  ]\n}\n", nil,
			[]string{"bad-template.json:3", "call_template_type"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
			writeFile(t, path, c.content)
			args := append([]string{"serve", "--no-store", "--listen", "127.0.0.1:0", "--config", path}, c.args...)
			_, errOut, code := cli(t, dir, nil, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}
	// A missing explicit configuration is a usage error too.
	if _, errOut, code := cli(t, dir, []string{"UTCPD_CONFIG=" + filepath.Join(dir, "nope.json")}, "serve", "--no-store"); code != 2 || !strings.Contains(errOut, "nope.json") {
		t.Fatalf("missing config: exit %d, stderr %q", code, errOut)
	}
	// An unknown gateway key without --strict is a warning with a hint.
	path := filepath.Join(dir, "warn.json")
	writeFile(t, path, "{\n  \"gateway\": {\"log_levl\": \"debug\"}\n}\n")
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", path}})
	d.waitLog(`gateway.log_levl: unknown field \"log_levl\" in the gateway section; ignored (did you mean \"log_level\"?)`, 5*time.Second)
}

// TestGracefulShutdown: SIGTERM lets a call in flight finish.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	d := startDaemon(t, daemonOpts{args: []string{"--no-store", "--shutdown-timeout", "20s"}})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", be.template("fix")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	type answer struct {
		status int
		res    map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		resp, err := http.Post(d.URL+"/v1/tools/fix.sleep/call", "application/json", strings.NewReader(`{"arguments": {"ms": 1500}}`))
		if err == nil {
			a.status = resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&a.res)
			resp.Body.Close()
		}
		done <- a
	}()
	eventually(t, 10*time.Second, "the sleep call in flight", func() bool { return be.F.InFlight() == 1 })
	start := time.Now()
	d.signal(syscall.SIGTERM)
	a := <-done
	if a.status != http.StatusOK || fmt.Sprint(a.res["result"]) != "map[slept_ms:1500]" {
		t.Fatalf("in-flight call: %d %v", a.status, a.res)
	}
	if code := d.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if be.F.Canceled() != 0 {
		t.Fatalf("the backend saw %d cancelled calls", be.F.Canceled())
	}
	t.Logf("shutdown took %v with a call in flight", time.Since(start).Round(time.Millisecond))
}

// TestExamples: the example configurations validate, and the daemon
// example starts with its manuals folder (the demo server it names is not
// running here: that manual fails to register, which is not fatal).
func TestExamples(t *testing.T) {
	t.Parallel()
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples", "manuals"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"quickstart.json", "daemon.json"} {
		if out, errOut, code := cli(t, dir, nil, "config", "validate", "--strict", filepath.Join(examples, name)); code != 0 {
			t.Errorf("config validate %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", filepath.Join(examples, "daemon.json")}})
	if got := manualNames(t, d); got["greetings"] != "dir" {
		t.Fatalf("manuals: %v", got)
	}
	if status, res := callTool(t, d, "greetings.hello", `{}`); status != http.StatusOK || fmt.Sprint(res["result"]) != "map[greeting:hello from the manuals folder]" {
		t.Fatalf("call greetings.hello: %d %v", status, res)
	}
	// The demo server the template names may or may not run on this
	// machine: either it registers, or the daemon answers discovery_failed.
	out, errOut, code := cli(t, dir, []string{"UTCPD_SERVER=" + d.URL}, "manuals", "add", filepath.Join(examples, "fixture-template.json"))
	if !(code == 0 && strings.Contains(out, "registered manual fixture")) && !(code == 1 && strings.Contains(errOut, "discovery_failed")) {
		t.Fatalf("manuals add fixture-template.json: exit %d\n%s%s", code, out, errOut)
	}
}

// TestNoSecretsInLogs: the admin token, the API keys and variable values
// never show in the daemon's log, even at debug level and on errors.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	const (
		adminToken = "admin-9f8e7d6c5b4a"
		apiKey     = "key-0a1b2c3d4e5f"
		varSecret  = "var-secret-77aa88bb"
	)
	writeFile(t, filepath.Join(dir, ".env"), "UTCPD_ADMIN_TOKEN="+adminToken+"\n")
	cfg := fmt.Sprintf(`{
  "variables": {"fix_KEY": %q, "down_KEY": %q},
  "manual_call_templates": [
    {"name": "fix", "call_template_type": "http", "http_method": "GET", "url": %q, "headers": {"X-Api-Key": "${KEY}"}},
    {"name": "down", "call_template_type": "http", "http_method": "GET", "url": "http://127.0.0.1:1/utcp", "headers": {"X-Api-Key": "${KEY}"}}
  ],
  "gateway": {"api_keys": [%q], "log_format": "json", "log_level": "debug"}
}`, varSecret, varSecret, be.URL+"/utcp", apiKey)
	writeFile(t, filepath.Join(dir, "utcpd.json"), cfg)
	d := startDaemon(t, daemonOpts{dir: dir})

	// The admin token came from .env: the admin API needs it.
	if status, _ := request(t, http.MethodGet, d.URL+"/admin/manuals", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("admin API without the token from .env: %d", status)
	}
	if status, _ := request(t, http.MethodGet, d.URL+"/admin/manuals", adminToken, ""); status != http.StatusOK {
		t.Fatalf("admin API with the token from .env: %d", status)
	}
	call := func(tool, token string) int {
		status, _ := request(t, http.MethodPost, d.URL+"/v1/tools/"+tool+"/call", token, `{"arguments": {"a": 1, "b": 2}}`)
		return status
	}
	if call("fix.add", apiKey) != http.StatusOK || call("fix.add", "wrong-"+apiKey) != http.StatusUnauthorized || call("nope.add", apiKey) != http.StatusNotFound {
		t.Fatal("unexpected call statuses")
	}
	request(t, http.MethodPost, d.URL+"/admin/manuals", adminToken, `{"name": "lit", "call_template_type": "http", "url": "http://127.0.0.1:1/x", "headers": {"Authorization": "Bearer `+varSecret+`"}}`)
	d.signal(syscall.SIGHUP)
	d.waitLog("configuration reloaded", 10*time.Second)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	log := d.stderr.String()
	for _, secret := range []string{adminToken, apiKey, varSecret} {
		if strings.Contains(log, secret) {
			t.Errorf("the log shows %q:\n%s", secret, log)
		}
	}
	if !strings.Contains(log, `"msg":"manual not registered"`) {
		t.Errorf("no JSON log line for the manual that failed:\n%s", log)
	}
}
