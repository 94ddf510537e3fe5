package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsExport: utcpd tools export against a daemon (--server) and
// in-process (--config), and the daemon's tool_calls route.
func TestToolsExport(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_API_KEYS=k1", "UTCPD_ADMIN_TOKEN=admintok"}})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "admintok", be.template("fix")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	user := []string{"UTCPD_SERVER=" + d.URL, "UTCPD_API_KEY=k1"}
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s]}`, be.template("fix")))
	local := []string{"UTCPD_CONFIG=" + cfg}

	for _, mode := range []struct {
		name string
		env  []string
	}{{"server", user}, {"config", local}} {
		for _, c := range []struct {
			args []string
			want []string
		}{
			{[]string{"--format", "openai"}, []string{`"type": "function"`, `"name": "fix__add"`, `"parameters"`}},
			{[]string{"--format", "openai", "--strict", "--q", "sum numbers", "--limit", "1", "--codemode=false"}, []string{`"strict": true`, `"additionalProperties": false`, `"name": "fix__add"`}},
			{[]string{"--format", "anthropic", "--tags", "math"}, []string{`"input_schema"`, `"name": "fix__add"`}},
			{[]string{"--format", "gemini"}, []string{`"functionDeclarations"`, `"type": "OBJECT"`, `"name": "fix__sleep"`}},
		} {
			out, errOut, code := cli(t, dir, mode.env, append([]string{"tools", "export"}, c.args...)...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d\n%s%s", mode.name, c.args, code, out, errOut)
			}
			var v []any
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("%s %v: not a JSON list: %v\n%s", mode.name, c.args, err, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s %v: no %s in\n%s", mode.name, c.args, w, out)
				}
			}
		}
	}
	// --limit counts every definition, codemode__run included.
	for _, c := range []struct {
		env  []string
		args []string
		want []string
	}{
		{user, []string{"--limit", "2"}, []string{"codemode__run", "fix__echo"}},
		{user, []string{"--limit", "2", "--codemode=false"}, []string{"fix__echo", "fix__add"}},
		{user, []string{"--limit", "1"}, []string{"codemode__run"}},
		{local, []string{"--limit", "2"}, []string{"fix__echo", "fix__add"}},
	} {
		out, errOut, code := cli(t, dir, c.env, append([]string{"tools", "export", "--format", "anthropic"}, c.args...)...)
		var tools []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal([]byte(out), &tools); err != nil || code != 0 {
			t.Fatalf("export %v: exit %d %v\n%s%s", c.args, code, err, out, errOut)
		}
		var got []string
		for _, tl := range tools {
			got = append(got, tl.Name)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("export %v: %v, want %v", c.args, got, c.want)
		}
	}
	if _, _, code := cli(t, dir, user, "tools", "export", "--format", "mistral"); code != 2 {
		t.Errorf("unknown format: exit %d, want 2", code)
	}
	if _, _, code := cli(t, dir, user, "tools", "export"); code != 2 {
		t.Errorf("no format: exit %d, want 2", code)
	}

	// The daemon runs a model's tool calls.
	status, body := request(t, http.MethodPost, d.URL+"/v1/llm/openai/tool_calls", "k1",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"fix__add","arguments":"{\"a\":2,\"b\":3}"}}]}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"tool_call_id":"c1"`) || !strings.Contains(string(body), `{\"sum\":5}`) {
		t.Fatalf("tool_calls: %d %s", status, body)
	}
}
