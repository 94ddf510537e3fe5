package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestSlashToolNames: an OpenAPI document whose operationIds contain "/"
// (as GitHub's do: repos/get) gives tools such as gh.repos/get, which the
// real binary describes, calls and streams at /v1/tools/gh.repos/get...
// with plain slashes and with %2F, and which utcpd call and tools show
// reach.
func TestSlashToolNames(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{})
	doc := fmt.Sprintf(`{"openapi": "3.0.3", "info": {"title": "gh", "version": "1"}, "servers": [{"url": %q}],
	  "paths": {
	    "/tools/echo": {"get": {"operationId": "repos/get", "summary": "Get a repository",
	      "parameters": [{"name": "owner", "in": "query", "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}},
	    "/tools/add": {"get": {"operationId": "actions/add/numbers", "summary": "Add",
	      "parameters": [{"name": "a", "in": "query", "schema": {"type": "number"}}, {"name": "b", "in": "query", "schema": {"type": "number"}}],
	      "responses": {"200": {"description": "ok"}}}}}}`, be.URL)
	file := filepath.Join(dir, "gh.json")
	writeFile(t, file, doc)
	env := []string{"UTCPD_SERVER=" + d.URL}
	if out, errOut, code := cli(t, dir, env, "manuals", "add", file); code != 0 || !strings.Contains(out, "gh.repos/get") {
		t.Fatalf("manuals add: exit %d\n%s%s", code, out, errOut)
	}

	for _, path := range []string{"/v1/tools/gh.repos/get", "/v1/tools/gh.repos%2Fget"} {
		status, body := request(t, http.MethodGet, d.URL+path, "", "")
		if status != http.StatusOK || !strings.Contains(string(body), `"name":"gh.repos/get"`) {
			t.Errorf("GET %s: %d %s", path, status, body)
		}
	}
	for _, c := range []struct{ path, args, want string }{
		{"/v1/tools/gh.repos/get/call", `{"owner": "octo"}`, `"owner":"octo"`},
		{"/v1/tools/gh.repos%2Fget/call", `{"owner": "cat"}`, `"owner":"cat"`},
		{"/v1/tools/gh.actions/add/numbers/call", `{"a": 2, "b": 5}`, `"sum":7`},
	} {
		status, body := request(t, http.MethodPost, d.URL+c.path, "", `{"arguments": `+c.args+`}`)
		if status != http.StatusOK || !strings.Contains(string(body), c.want) {
			t.Errorf("POST %s: %d %s, want %s", c.path, status, body, c.want)
		}
	}
	status, body := request(t, http.MethodPost, d.URL+"/v1/tools/gh.repos/get/stream", "", `{"arguments": {"owner": "s"}}`)
	if status != http.StatusOK || !strings.Contains(string(body), "event: chunk") || !strings.Contains(string(body), `"owner":"s"`) {
		t.Errorf("stream: %d %s", status, body)
	}
	status, body = request(t, http.MethodGet, d.URL+"/v1/tools/gh.repos/get/call", "", "")
	if status != http.StatusMethodNotAllowed {
		t.Errorf("GET .../call: %d %s, want 405", status, body)
	}

	out, errOut, code := cli(t, dir, env, "call", "gh.repos/get", "--args", `{"owner": "cli"}`)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || fmt.Sprint(res["result"]) != "map[owner:cli]" {
		t.Errorf("utcpd call gh.repos/get: exit %d %v\n%s%s", code, err, out, errOut)
	}
	if out, errOut, code := cli(t, dir, env, "tools", "show", "gh.actions/add/numbers"); code != 0 || !strings.Contains(out, `"name": "gh.actions/add/numbers"`) {
		t.Errorf("tools show: exit %d\n%s%s", code, out, errOut)
	}
}
