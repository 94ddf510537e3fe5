package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

// brokenConfigs are configuration files with problems of every kind,
// each with good manuals beside the broken ones (a text manual, and an
// http manual of the demo backend at backendURL). {{DIR}} is the file's
// folder, {{BACKEND}} the backend's manual URL.
var brokenConfigs = []struct {
	name, content string
	strict        bool
	env           []string
}{
	{name: "misspelled type key", content: `{"manual_call_templates": [{{GOOD}},
  {"name": "typo", "call_template_typ": "http", "url": "https://a.example/utcp", "http_methd": "GET"},
  {"name": "alsobad", "call_template_type": "http", "url": "https://b.example/utcp", "http_method": "FETCH"}]}`},
	{name: "unknown type", content: `{"manual_call_templates": [{{GOOD}}, {"name": "htp", "call_template_type": "htp", "url": "https://a.example/utcp"}]}`},
	{name: "plain http", content: `{"manual_call_templates": [{{GOOD}}, {"name": "plain", "call_template_type": "http", "url": "http://example.com/utcp"}]}`},
	{name: "missing file", content: `{"manual_call_templates": [{{GOOD}}, {"name": "nofile", "call_template_type": "file", "file_path": "missing.json"}]}`},
	{name: "missing variable", content: `{"manual_call_templates": [{{GOOD}}, {"name": "novar", "call_template_type": "http", "url": "https://a.example/${UTCPD_TEST_NOPE}"}]}`},
	{name: "name not a string", content: `{"manual_call_templates": [{{GOOD}}, {"name": 7, "call_template_type": "http", "url": "https://a.example/utcp"}]}`},
	{name: "not an object", content: `{"manual_call_templates": [{{GOOD}}, "http://a.example/utcp"]}`},
	{name: "missing url", content: `{"manual_call_templates": [{{GOOD}}, {"name": "nourl", "call_template_type": "http"}]}`},
	{name: "bad auth", content: `{"manual_call_templates": [{{GOOD}}, {"name": "auth", "call_template_type": "http", "url": "https://a.example/utcp", "auth": {"auth_type": "api_key"}}]}`},
	{name: "bad allowed_hosts", content: `{"manual_call_templates": [{{GOOD}}, {"name": "hosts", "call_template_type": "http", "url": "https://a.example/utcp", "allowed_hosts": ["https://x/"]}]}`},
	{name: "plain websocket and grpc", content: `{"manual_call_templates": [{{GOOD}},
  {"name": "ws", "call_template_type": "websocket", "url": "ws://example.com/ws"},
  {"name": "rpc", "call_template_type": "grpc", "host": "example.com", "port": 50051}]}`},
	{name: "legacy providers", content: `{"providers": [{{GOOD}},
  {"name": "news", "provider_type": "text", "file_path": "./newsapi_manual.json", "metadata": {"category": "News"}},
  {"name": "lib", "provider_type": "htp", "url": "https://openlibrary.org/static/openapi.json", "metadata": {}}]}`},
	{name: "strict unknown field", strict: true, content: `{"manual_call_templates": [{{GOOD}}, {"name": "extra", "call_template_type": "http", "url": "https://a.example/utcp", "urll": "x"}]}`},
	{name: "many problems", content: `{"manual_call_templates": [{{GOOD}},
  {"name": "m1", "call_template_type": "htp", "url": "https://a.example/utcp"},
  {"name": "m2", "call_template_type": "http", "url": "http://example.com/utcp"},
  {"name": "m3", "call_template_type": "file", "file_path": "{{DIR}}/gone.json"},
  {"name": "m4", "call_template_type": "cli", "commands": []}]}`},
	// Problems of the file as a whole: serve refuses to start.
	{name: "duplicate names", content: `{"manual_call_templates": [{{GOOD}}, {"name": "good", "call_template_type": "text", "content": "x"}]}`},
	{name: "malformed JSON", content: `{"manual_call_templates": [{{GOOD}}, ]}`},
	{name: "bad gateway value", content: `{"manual_call_templates": [{{GOOD}}, {"name": "htp", "call_template_type": "htp"}], "gateway": {"max_timeout": "soon"}}`},
	{name: "bad guard", content: `{"manual_call_templates": [{{GOOD}}], "gateway": {"guards": [{"kind": "no_such_guard"}]}}`},
	{name: "missing dotenv", content: `{"manual_call_templates": [{{GOOD}}], "load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": "nope.env"}]}`},
	{name: "config variable unresolved", content: `{"manual_call_templates": [{{GOOD}}], "variables": {"K": "${UTCPD_TEST_NOPE}"}}`},
	{name: "strict gateway key", strict: true, content: `{"manual_call_templates": [{{GOOD}}], "gateway": {"log_formt": "json"}}`},
	{name: "bad section", content: `{"manual_call_templates": [{{GOOD}}, {"name": "plain", "call_template_type": "http", "url": "http://example.com/utcp"}], "post_processing": [{"tool_post_processor_type": "nope"}]}`},
}

// TestValidateAndServeAgree feeds the same broken files to utcpd config
// validate and to utcpd serve (the real binary): serve refuses to start
// exactly when validate reports a problem of the file as a whole, and
// names the same problems; otherwise serve starts, and the manuals it
// reports as failed, with their codes, are the manuals validate reports
// (errors, and variables that do not resolve), while it registers every
// other one.
func TestValidateAndServeAgree(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	good := fmt.Sprintf(`{"name": "good", "call_template_type": "http", "url": %q}, %s`, be.URL+"/utcp", textTemplate("good_text"))
	for _, c := range brokenConfigs {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := t.TempDir()
			content := strings.NewReplacer("{{GOOD}}", good, "{{DIR}}", dir).Replace(c.content)
			path := filepath.Join(dir, "utcpd.json")
			writeFile(t, path, content)
			flags := []string{}
			if c.strict {
				flags = append(flags, "--strict")
			}

			// config validate --json.
			out, errOut, code := cli(t, dir, c.env, append([]string{"config", "validate", "--json"}, append(flags, path)...)...)
			var res validateResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("validate output: %v\n%s%s", err, out, errOut)
			}
			if (code == 2) != (res.Errors > 0) || code != 0 && code != 2 {
				t.Fatalf("validate: exit %d with %d errors\n%s", code, res.Errors, out)
			}
			var fileLevel []string
			bad := map[string]utcp.Code{} // manual → code of its first problem
			for _, p := range res.Problems {
				switch {
				case p.Severity == "error" && p.Manual == "":
					fileLevel = append(fileLevel, p.String())
				case p.Manual != "" && (p.Severity == "error" || p.Code == utcp.CodeVariableNotFound):
					if _, ok := bad[p.Manual]; !ok {
						bad[p.Manual] = p.Code
					}
				}
			}

			if len(fileLevel) == 0 && len(bad) == 0 {
				t.Fatalf("validate found no problem in a broken file:\n%s", out)
			}

			// serve, with the same file and flags.
			s := startServe(t, dir, append([]string{"--config", path, "--no-store", "--log-format", "json"}, flags...), c.env)
			if len(fileLevel) > 0 {
				if s.code != 2 {
					t.Fatalf("validate reports problems of the file, serve did not refuse to start (exit %d):\n%s\nvalidate:\n%s", s.code, s.log, out)
				}
				for _, line := range fileLevel {
					if !strings.Contains(s.log, line) {
						t.Errorf("serve's refusal does not name %q:\n%s", line, s.log)
					}
				}
				return
			}
			if s.code != -1 {
				t.Fatalf("serve exited with %d although validate found only problems of single manuals:\n%s\nvalidate:\n%s", s.code, s.log, out)
			}
			if diff := cmp.Diff(bad, s.failed); diff != "" {
				t.Errorf("failed manuals: validate (-) and serve (+) disagree:\n%s\nvalidate:\n%s\nserve:\n%s", diff, out, s.log)
			}
			all := append(slices.Clone(res.Manuals), res.Rejected...)
			var want []string
			for _, m := range all {
				if _, isBad := bad[m]; !isBad {
					want = append(want, m)
				}
			}
			slices.Sort(want)
			if got := slices.Sorted(maps.Keys(s.registered)); !cmp.Equal(want, got) {
				t.Errorf("registered manuals: serve %v, want the manuals validate passes %v", got, want)
			}
			if !slices.Contains(want, "good") || !slices.Contains(want, "good_text") {
				t.Errorf("the good manuals are not all registered: %v", want)
			}
		})
	}
}

// serveRun is what startServe saw.
type serveRun struct {
	code       int // exit code; -1 while still running (it was ready)
	log        string
	failed     map[string]utcp.Code // "manual not registered": manual → code
	registered map[string]bool      // "manual registered"
}

// startServe runs utcpd serve on 127.0.0.1:0 until it is ready (then
// stops it) or exits, and reads its JSON log.
func startServe(t *testing.T, dir string, args, env []string) serveRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := serveRun{code: -1, failed: map[string]utcp.Code{}, registered: map[string]bool{}}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		var rec struct {
			Msg, Manual string
			Code        utcp.Code
		}
		if ready || json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "manual not registered":
			run.failed[rec.Manual] = rec.Code
		case "manual registered":
			run.registered[rec.Manual] = true
		case "ready":
			ready = true
			_ = cmd.Process.Signal(os.Interrupt) // read on until it has stopped
		}
	}
	err = cmd.Wait()
	if !ready {
		run.code = cmd.ProcessState.ExitCode()
		if err != nil && run.code < 0 {
			t.Fatalf("serve: %v\n%s", err, log.String())
		}
	}
	run.log = log.String()
	if strings.Contains(run.log, "WARNING: DATA RACE") {
		t.Errorf("data race in serve:\n%s", run.log)
	}
	return run
}

// TestValidatePublicRegistry: the public UTCP registry (240 legacy
// providers, manuals/testdata) validates with a handful of summarised
// warnings, none about metadata; the one manual whose file is not there
// is its one error, until the file exists.
func TestValidatePublicRegistry(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "manuals", "testdata", "utcp-public-registry-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "registry.json")
	writeFile(t, path, string(data))
	out, _, code := cli(t, dir, nil, "config", "validate", "--strict", path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 2 || len(lines) != 5 || !strings.Contains(out, "manual newsapi: file: "+filepath.Join(dir, "newsapi_manual.json")+": no such file or directory") {
		t.Fatalf("exit %d, %d lines:\n%s", code, len(lines), out)
	}
	if !strings.Contains(out, "[*].provider_type: 240 providers: legacy field provider_type renamed to call_template_type") || strings.Contains(out, "metadata") {
		t.Errorf("warnings not summarised:\n%s", out)
	}
	writeFile(t, filepath.Join(dir, "newsapi_manual.json"), `{"utcp_version": "1.1.0", "tools": []}`)
	out, _, code = cli(t, dir, nil, "config", "validate", "--strict", path)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "OK (240 manual call templates, 4 warnings)") {
		t.Errorf("with the file: exit %d\n%s", code, out)
	}
}

// TestReloadKeepsRejectedManual: a SIGHUP reload of a file in which one
// manual call template broke keeps that manual's last good version
// serving and applies the rest; a file that broke as a whole keeps the
// last good configuration.
func TestReloadKeepsRejectedManual(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "utcpd.json")
	writeFile(t, path, `{"manual_call_templates": [`+textTemplate("a")+`, `+textTemplate("b")+`]}`)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", path}})
	if got := manualNames(t, d); len(got) != 2 {
		t.Fatalf("manuals: %v", got)
	}
	// a breaks (unknown type), b goes, c comes.
	writeFile(t, path, `{"manual_call_templates": [{"name": "a", "call_template_type": "txet", "content": "x"}, `+textTemplate("c")+`]}`)
	d.signal(syscall.SIGHUP)
	d.waitLog("configuration reloaded", 10*time.Second)
	if !strings.Contains(d.stderr.String(), "manual not replaced; its last good version keeps serving") || !strings.Contains(d.stderr.String(), `did you mean \"text\"?`) {
		t.Errorf("no rejection logged:\n%s", d.stderr.String())
	}
	if got := manualNames(t, d); !cmp.Equal(got, map[string]string{"a": "config", "c": "config"}) {
		t.Errorf("after the reload: %v", got)
	}
	if status, res := callTool(t, d, "a.hello", `{}`); status != 200 {
		t.Errorf("a.hello after a rejected reload: %d %v", status, res)
	}
	// The whole file breaks: nothing changes.
	writeFile(t, path, `{"manual_call_templates": [`+textTemplate("d")+`], "gateway": {"max_timeout": "soon"}}`)
	d.signal(syscall.SIGHUP)
	d.waitLog("the last good configuration keeps serving", 10*time.Second)
	if got := manualNames(t, d); !cmp.Equal(got, map[string]string{"a": "config", "c": "config"}) {
		t.Errorf("after a broken reload: %v", got)
	}
}

// TestAdminManualWithoutToolsWarns: POST /admin/manuals of a manual that
// yields no tool answers 201 with a warning saying so, and the log has
// it; an OpenAPI document whose operations have no operationId gives one
// tool per operation.
func TestAdminManualWithoutToolsWarns(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	empty, _ := json.Marshal(map[string]any{"name": "empty", "call_template_type": "text",
		"content": `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example.com"}], "paths": {}}`})
	status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", string(empty))
	if status != http.StatusCreated || !strings.Contains(string(body), `lists no tools`) {
		t.Fatalf("POST /admin/manuals: %d %s", status, body)
	}
	d.waitLog("lists no tools", 10*time.Second)
	doc := `{"openapi": "3.0.3", "info": {"title": "pets", "version": "1"}, "servers": [{"url": "https://api.example.com"}], "paths": {
  "/pets": {"get": {"responses": {"200": {"description": "ok"}}}, "post": {"responses": {"201": {"description": "ok"}}}},
  "/pets/{petId}": {"get": {"parameters": [{"name": "petId", "in": "path", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}}}}`
	pets, _ := json.Marshal(map[string]any{"name": "pets", "call_template_type": "text", "content": doc, "allowed_communication_protocols": []string{"text", "http"}})
	status, body = request(t, http.MethodPost, d.URL+"/admin/manuals", "", string(pets))
	var res struct{ Tools, Warnings []string }
	if err := json.Unmarshal(body, &res); err != nil || status != http.StatusCreated {
		t.Fatalf("POST /admin/manuals: %d %s", status, body)
	}
	if want := []string{"pets.get_pets", "pets.post_pets", "pets.get_pets_petId"}; !cmp.Equal(want, res.Tools) {
		t.Errorf("tools %v, want %v", res.Tools, want)
	}
	d.waitLog("3 of 3 operations have no operationId", 10*time.Second)
}
