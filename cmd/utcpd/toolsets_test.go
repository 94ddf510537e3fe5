package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolsetConfig is a config file with the demo backend as manual "demo"
// and the gateway section's toolsets set to toolsets.
func toolsetConfig(be *backend, toolsets string) string {
	return fmt.Sprintf(`{
  "manual_call_templates": [%s],
  "gateway": {"toolsets": %s}
}`, be.template("demo"), toolsets)
}

// startToolsetDaemon starts the daemon with toolsetConfig in its own
// directory.
func startToolsetDaemon(t *testing.T, be *backend, toolsets string, o daemonOpts) *proc {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	writeFile(t, filepath.Join(o.dir, "utcpd.json"), toolsetConfig(be, toolsets))
	d := startDaemon(t, o)
	eventually(t, 10*time.Second, "demo tools", func() bool { return toolNames(t, d)["demo.add"] })
	return d
}

// auditRecords reads the audit log records of tool (eventually, once
// the writer flushed at least want of them).
func auditRecords(t *testing.T, d *proc, tool string, want int) []map[string]any {
	t.Helper()
	var recs []map[string]any
	eventually(t, 10*time.Second, "audit records of "+tool, func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/admin/audit?tool="+tool, "", "")
		if st != 200 {
			t.Fatalf("GET /admin/audit: %d %s", st, body)
		}
		var page struct {
			Records []map[string]any `json:"records"`
		}
		_ = json.Unmarshal(body, &page)
		recs = page.Records
		return len(recs) >= want
	})
	return recs
}

// TestToolsetMCP serves a toolset with a rename and a hidden argument at
// /mcp/{toolset} to the go-sdk client: the list shows the renamed tool
// only, without the hidden argument in its schema; a call works with the
// fixed value; a call that supplies the hidden argument is refused with
// invalid_arguments before the backend; the audit log records the real
// name and the toolset.
func TestToolsetMCP(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	d := startToolsetDaemon(t, be, `{
  "mini": {"include": ["demo.add", "demo.echo"], "rename": {"demo.add": "plus"},
           "description": {"demo.add": "Adds ten to a."}, "hidden": {"demo.add": {"b": 10}},
           "annotations": {"readOnlyHint": true}}
}`, daemonOpts{})

	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp/mini", MaxRetries: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	var plus *mcp.Tool
	var names []string
	for tool, err := range c.s.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Name == "plus" {
			plus = tool
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"demo.echo", "plus"}) {
		t.Fatalf("tools/list of /mcp/mini: %v, want [demo.echo plus]", names)
	}
	schema, _ := json.Marshal(plus.InputSchema)
	if strings.Contains(string(schema), `"b"`) || !strings.Contains(string(schema), `"a"`) {
		t.Errorf("plus's input schema %s: want a without the hidden b (also out of required)", schema)
	}
	if plus.Description != "Adds ten to a." {
		t.Errorf("plus's description %q", plus.Description)
	}
	if plus.Annotations == nil || !plus.Annotations.ReadOnlyHint {
		t.Errorf("plus's annotations %+v: want the toolset's readOnlyHint", plus.Annotations)
	}

	res, err := c.call(t, "plus", `{"a": 1}`, nil)
	if err != nil || res.IsError {
		t.Fatalf("plus(a=1): %v %+v", err, res)
	}
	if got := resultText(res); !strings.Contains(got, `"sum":11`) {
		t.Errorf("plus(a=1) = %s, want sum 11 (b fixed to 10)", got)
	}
	calls := be.F.Calls()
	res, err = c.call(t, "plus", `{"a": 1, "b": 100}`, nil)
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "invalid_arguments") {
		t.Fatalf("plus with the hidden b: %v %+v, want an invalid_arguments isError result", err, res)
	}
	if be.F.Calls() != calls {
		t.Errorf("the refused call reached the backend")
	}
	// The real name is not listed, so it is not callable.
	if res, err := c.call(t, "demo.add", `{"a": 1, "b": 2}`, nil); err == nil && !res.IsError {
		t.Errorf("demo.add through /mcp/mini: %+v, want refused (listed as plus)", res)
	}

	recs := auditRecords(t, d, "demo.add", 1)
	if recs[0]["toolset"] != "mini" || recs[0]["qualified"] != "demo.add" || recs[0]["front"] != "mcp" {
		t.Errorf("audit record of plus: %v, want qualified demo.add, toolset mini, front mcp", recs[0])
	}

	// An unknown toolset is 404 not_found.
	st, body := request(t, http.MethodPost, d.URL+"/mcp/nope", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if st != http.StatusNotFound || !strings.Contains(string(body), "not_found") {
		t.Errorf("POST /mcp/nope: %d %s, want 404 not_found", st, body)
	}
}

// TestToolsetREST reaches a toolset through /v1/toolsets/{toolset}/...:
// the list and the description show listed names and schemas, a call and
// a stream work with the fixed value; a tool outside the toolset, or a
// renamed member's real name, is tool_not_found and never reaches the
// backend; an unknown toolset is not_found.
func TestToolsetREST(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	d := startToolsetDaemon(t, be, `{
  "mini": {"include": ["demo.*"], "exclude": ["demo.fail", "demo.sleep"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 10}}}
}`, daemonOpts{})
	base := d.URL + "/v1/toolsets/mini/tools"

	st, body := request(t, http.MethodGet, base, "", "")
	var list struct {
		Tools []struct {
			Name   string          `json:"name"`
			Inputs json.RawMessage `json:"inputs"`
		} `json:"tools"`
	}
	if st != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET %s: %d %s", base, st, body)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "plus" && strings.Contains(string(tl.Inputs), `"b"`) {
			t.Errorf("plus lists the hidden b: %s", tl.Inputs)
		}
	}
	if !slices.Equal(names, []string{"demo.count", "demo.echo", "plus"}) {
		t.Errorf("toolset tools %v, want [demo.count demo.echo plus]", names)
	}
	if st, body := request(t, http.MethodGet, base+"/plus", "", ""); st != 200 || !strings.Contains(string(body), `"name":"plus"`) {
		t.Errorf("GET plus: %d %s", st, body)
	}
	st, body = request(t, http.MethodPost, base+"/plus/call", "", `{"arguments": {"a": 5}}`)
	if st != 200 || !strings.Contains(string(body), `"sum":15`) {
		t.Errorf("call plus(a=5): %d %s, want sum 15", st, body)
	}
	st, body = request(t, http.MethodPost, base+"/plus/stream", "", `{"arguments": {"a": 2}}`)
	if st != 200 || !strings.Contains(string(body), `"sum":12`) || !strings.Contains(string(body), "event: end") {
		t.Errorf("stream plus(a=2): %d %s", st, body)
	}
	st, body = request(t, http.MethodPost, base+"/plus/call", "", `{"arguments": {"a": 5, "b": 1}}`)
	if st != 400 || !strings.Contains(string(body), `"invalid_arguments"`) {
		t.Errorf("call plus with the hidden b: %d %s, want 400 invalid_arguments", st, body)
	}

	// Replay: reach a tool outside the toolset, or a member by its real
	// name, through the toolset's routes.
	calls := be.F.Calls()
	for _, path := range []string{"/demo.fail/call", "/demo.sleep/call", "/demo.add/call", "/demo.fail/stream", "/..%2Fdemo.fail/call"} {
		st, body := request(t, http.MethodPost, base+path, "", `{"arguments": {"message": "x", "ms": 1, "a": 1, "b": 2}}`)
		if st != 404 || !strings.Contains(string(body), `"tool_not_found"`) {
			t.Errorf("POST %s: %d %s, want 404 tool_not_found", path, st, body)
		}
	}
	if st, body := request(t, http.MethodGet, base+"/demo.fail", "", ""); st != 404 {
		t.Errorf("GET demo.fail through the toolset: %d %s", st, body)
	}
	if be.F.Calls() != calls {
		t.Errorf("a refused call reached the backend (%d calls, want %d)", be.F.Calls(), calls)
	}
	st, body = request(t, http.MethodGet, d.URL+"/v1/toolsets/nope/tools", "", "")
	if st != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Errorf("unknown toolset: %d %s, want 404 not_found", st, body)
	}
}

// TestToolsetConfigRefused checks the load-time validation: a rename
// collision, a bad name and a glob-less toolset are refused by utcpd
// config validate with a clear message naming the toolset.
func TestToolsetConfigRefused(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	for _, c := range []struct{ toolsets, want string }{
		{`{"mini": {"include": ["demo.add", "demo.echo"], "rename": {"demo.add": "x", "demo.echo": "x"}}}`, "both renamed"},
		{`{"mini": {"include": ["demo.add", "demo.echo"], "rename": {"demo.add": "demo.echo"}}}`, "another member's name"},
		{`{"bad name": {"include": ["demo.add"]}}`, "toolset name"},
		{`{"mini": {"exclude": ["demo.add"]}}`, "selects no tools"},
		{`{"mini": {"include": ["demo.add"], "hidden": {"demo.echo": {"x": 1}}}}`, "not in the toolset"},
	} {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "utcpd.json"), toolsetConfig(be, c.toolsets))
		out, errOut, code := cli(t, dir, nil, "config", "validate", filepath.Join(dir, "utcpd.json"))
		if code == 0 || !strings.Contains(out+errOut, c.want) || !strings.Contains(out+errOut, "gateway.toolsets") {
			t.Errorf("config validate %s: exit %d\n%s%s\nwant a refusal saying %q", c.toolsets, code, out, errOut, c.want)
		}
	}
}
