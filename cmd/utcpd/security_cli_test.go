package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityCLIHostileTemplateRefused replays the CLI placeholder
// attacks against the real binary: a cli manual whose command puts a
// placeholder in an arithmetic or name context is refused at registration
// with invalid_template, from a configuration file and through the admin
// API, and nothing of it runs.
func TestSecurityCLIHostileTemplateRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	hostile := []string{
		`declare -i n=UTCP_ARG_n_UTCP_END; touch ` + marker,
		`f() { local -i n=UTCP_ARG_n_UTCP_END; }; f; touch ` + marker,
		`s=abc; echo ${s:UTCP_ARG_n_UTCP_END}; touch ` + marker,
		`a[UTCP_ARG_n_UTCP_END]=1; touch ` + marker,
		`printf -v UTCP_ARG_n_UTCP_END x; touch ` + marker,
	}
	var templates []string
	for i, cmd := range hostile {
		tmpl, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("evil%d", i), "call_template_type": "cli", "commands": []any{map[string]any{"command": cmd}}})
		templates = append(templates, string(tmpl))
	}
	cfg := filepath.Join(dir, "hostile.json")
	writeFile(t, cfg, "{\n  \"manual_call_templates\": [\n    "+strings.Join(templates, ",\n    ")+"\n  ]\n}\n")
	token := randomToken(t)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--no-store", "--config", cfg}, env: []string{"UTCPD_ADMIN_TOKEN=" + token}})
	d.waitLog("registered=0 failed=5", 10*time.Second)
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(line, "manual not registered") &&
			(!strings.Contains(line, "code=invalid_template") || !strings.Contains(line, "UTCP_ARG_n_UTCP_END") || !strings.Contains(line, "commands[0].command")) {
			t.Errorf("refusal does not say invalid_template, the placeholder and the command: %s", line)
		}
	}
	if n := strings.Count(d.stderr.String(), "code=invalid_template"); n != len(hostile) {
		t.Errorf("%d invalid_template refusals in the log, want %d:\n%s", n, len(hostile), d.stderr.String())
	}

	for i, cmd := range hostile {
		tmpl, _ := json.Marshal(map[string]any{"name": "evil", "call_template_type": "cli", "commands": []any{map[string]any{"command": cmd}}})
		status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", token, string(tmpl))
		if status/100 != 4 || !strings.Contains(string(body), "invalid_template") || !strings.Contains(string(body), "UTCP_ARG_n_UTCP_END") {
			t.Errorf("admin %d (%s): %d %s, want a 4xx invalid_template naming the placeholder", i, cmd, status, body)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a hostile manual's discovery ran")
	}
	// The refused configuration manuals are listed as failed (no tools,
	// invalid_template, no retry); the refused admin registrations are
	// not listed at all.
	status, body := request(t, http.MethodGet, d.URL+"/admin/manuals", token, "")
	var list struct {
		Manuals []struct {
			Name      string  `json:"name"`
			Status    string  `json:"status"`
			ToolCount int     `json:"tool_count"`
			NextRetry *string `json:"next_retry"`
			LastError *struct {
				Code string `json:"code"`
			} `json:"last_error"`
		} `json:"manuals"`
	}
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil || len(list.Manuals) != len(hostile) {
		t.Fatalf("manuals after the refused registrations: %d %s", status, body)
	}
	for i, m := range list.Manuals {
		if m.Name != fmt.Sprintf("evil%d", i) || m.Status != "failed" || m.ToolCount != 0 || m.NextRetry != nil ||
			m.LastError == nil || m.LastError.Code != "invalid_template" {
			t.Errorf("refused configuration manual %d: %+v", i, m)
		}
	}
	if strings.Contains(string(body), `"evil"`) {
		t.Errorf("a refused admin registration is listed: %s", body)
	}
	if tools := toolNames(t, d); len(tools) != 0 {
		t.Errorf("tools after the refused registrations: %v", tools)
	}
}

// TestSecurityCLIDashArgumentRefused: a sort tool given --output=... as
// its file argument answers invalid_arguments and writes no file; an
// ordinary value still sorts.
func TestSecurityCLIDashArgumentRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	input := filepath.Join(dir, "in.txt")
	writeFile(t, input, "b\na\n")
	victim := filepath.Join(dir, "victim.txt")
	writeFile(t, filepath.Join(dir, "tools.json"), `{"utcp_version": "1.1", "manual_version": "1.0.0", "tools": [{
  "name": "sort", "description": "sort the lines of a file",
  "inputs": {"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]},
  "tool_call_template": {"name": "files", "call_template_type": "cli", "commands": [{"command": "sort UTCP_ARG_file_UTCP_END"}]}
}]}`)
	manual, _ := json.Marshal(map[string]any{"name": "files", "call_template_type": "cli", "working_dir": dir,
		"commands": []any{map[string]any{"command": "cat tools.json"}}})
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, "{\n  \"manual_call_templates\": ["+string(manual)+"]\n}\n")
	token := randomToken(t)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--no-store", "--config", cfg}, env: []string{"UTCPD_ADMIN_TOKEN=" + token}})

	status, res := callTool(t, d, "files.sort", `{"file": `+cliQuote(input)+`}`)
	if status != http.StatusOK || res["result"] != "a\nb" {
		t.Fatalf("sort %s: %d %v", input, status, res)
	}
	for _, v := range []string{"--output=" + victim, "-o" + victim, "--compress-program=sh"} {
		status, res := callTool(t, d, "files.sort", `{"file": `+cliQuote(v)+`}`)
		raw, _ := json.Marshal(res)
		if status/100 != 4 || !strings.Contains(string(raw), "invalid_arguments") {
			t.Errorf("file %q: %d %s, want a 4xx invalid_arguments", v, status, raw)
		}
	}
	if _, err := os.Stat(victim); err == nil {
		t.Fatalf("sort wrote %s", victim)
	}
}

func cliQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
