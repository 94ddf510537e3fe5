package main

import (
	"net/http"
	"strings"
	"testing"
)

func TestParseArgsFlag(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`[1,2]`, "got an array"},
		{`"x"`, "got a string"},
		{`3`, "got a number"},
		{`true`, "got a boolean"},
		{``, "it is empty"},
		{`{"a":`, "not valid JSON"},
		{`{a: 1}`, "not valid JSON"},
		{`{} {}`, "more after the first JSON value"},
	} {
		_, err := parseArgsFlag(c.in)
		ee, ok := err.(*exitError)
		if !ok || ee.code != exitUsage || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--args must be a JSON object") ||
			strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "map[string]") {
			t.Errorf("--args %q: %v, want a usage error saying %q", c.in, err, c.want)
		}
	}
	for _, in := range []string{`{}`, `{"a": 1.50}`, ` {"a": {"b": [1]}} `, `null`} {
		if _, err := parseArgsFlag(in); err != nil {
			t.Errorf("--args %q: %v", in, err)
		}
	}
	args, _ := parseArgsFlag(`{"n": 12345678901234567890}`)
	if n, ok := args["n"].(interface{ String() string }); !ok || n.String() != "12345678901234567890" {
		t.Errorf("a big number is not kept as written: %#v", args["n"])
	}
}

// TestCallErrorsAreClear: against the real binary, --args that is not an
// object is a clear usage error (exit 2); invalid_arguments names every
// problem with its JSON path (CLI and REST); a REST body holding the
// arguments without their wrapper answers with a hint.
func TestCallErrorsAreClear(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startDaemon(t, daemonOpts{})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", be.template("fix")); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	env := []string{"UTCPD_SERVER=" + d.URL}

	_, errOut, code := cli(t, dir, env, "call", "fix.add", "--args", "[1,2]")
	if code != exitUsage || !strings.Contains(errOut, "--args must be a JSON object") || !strings.Contains(errOut, "got an array") || strings.Contains(errOut, "Go value") {
		t.Errorf("--args '[1,2]': exit %d, stderr %q", code, errOut)
	}

	// fix.add needs numbers a and b: two problems, both named.
	_, errOut, code = cli(t, dir, env, "call", "fix.add", "--args", `{"a": "two"}`)
	if code != exitFailure || !strings.Contains(errOut, "invalid_arguments") || !strings.Contains(errOut, "/a: got string, want number") ||
		!strings.Contains(errOut, "/b: required but missing") {
		t.Errorf("call with two bad arguments: exit %d, stderr %q", code, errOut)
	}
	status, body := request(t, http.MethodPost, d.URL+"/v1/tools/fix.add/call", "", `{"arguments": {"a": "two"}}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"instance_path":"/a"`) || !strings.Contains(string(body), `"instance_path":"/b"`) {
		t.Errorf("REST invalid_arguments: %d %s", status, body)
	}

	status, body = request(t, http.MethodPost, d.URL+"/v1/tools/fix.add/call", "", `{"a": 1, "b": 2}`)
	if status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_request"`) ||
		!strings.Contains(string(body), `wrap the arguments: {\"arguments\": {...}}`) {
		t.Errorf("bare arguments: %d %s", status, body)
	}
	if status, body := callTool(t, d, "fix.add", `{"a": 1, "b": 2}`); status != http.StatusOK || body["is_error"] != false {
		t.Errorf("after the errors: %d %v", status, body)
	}
}
