package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

	// The same perimeter as /mcp: a foreign Origin and a foreign Host are
	// refused before the toolset's server runs.
	for _, h := range []map[string]string{{"Origin": "http://evil.example"}, {"Host": "evil.example"}} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+"/mcp/mini",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
			if k == "Host" {
				req.Host = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /mcp/mini with %v: %d, want 403", h, resp.StatusCode)
		}
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

// TestToolsetAdminPersisted creates, replaces and deletes toolsets over
// /admin/toolsets with the SQLite store; a created toolset serves at once
// (REST and /mcp/{toolset}), survives a daemon restart, and the config
// file's toolset is listed but read-only.
func TestToolsetAdminPersisted(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir, dataDir := t.TempDir(), filepath.Join(t.TempDir(), "data")
	d := startToolsetDaemon(t, be, `{"fixed": {"include": ["demo.echo"]}}`, daemonOpts{dir: dir, dataDir: dataDir})

	st, body := request(t, http.MethodPost, d.URL+"/admin/toolsets", "",
		`{"name": "math", "include": ["demo.add"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 1}}}`)
	if st != http.StatusCreated || !strings.Contains(string(body), `"qualified":"demo.add"`) || !strings.Contains(string(body), `"name":"plus"`) {
		t.Fatalf("POST /admin/toolsets: %d %s", st, body)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{http.MethodPost, "/admin/toolsets", `{"name": "math", "include": ["demo.add"]}`, 409, "manual_exists"},
		{http.MethodPost, "/admin/toolsets", `{"name": "x", "include": ["demo.add"], "rename": {"demo.add": "a b"}}`, 400, "invalid_request"},
		{http.MethodPost, "/admin/toolsets", `{"name": "x", "includ": ["demo.add"]}`, 400, "invalid_request"},
		{http.MethodPut, "/admin/toolsets/fixed", `{"include": ["demo.add"]}`, 409, "manual_read_only"},
		{http.MethodDelete, "/admin/toolsets/fixed", ``, 409, "manual_read_only"},
		{http.MethodGet, "/admin/toolsets/nope", ``, 404, "not_found"},
		{http.MethodDelete, "/admin/toolsets/nope", ``, 404, "not_found"},
	} {
		st, body := request(t, c.method, d.URL+c.path, "", c.body)
		if st != c.status || !strings.Contains(string(body), `"`+c.code+`"`) {
			t.Errorf("%s %s %s: %d %s, want %d %s", c.method, c.path, c.body, st, body, c.status, c.code)
		}
	}
	if st, body := request(t, http.MethodPost, d.URL+"/v1/toolsets/math/tools/plus/call", "", `{"arguments": {"a": 2}}`); st != 200 || !strings.Contains(string(body), `"sum":3`) {
		t.Errorf("calling the created toolset: %d %s", st, body)
	}
	// Replaced: b is now fixed to 40; and a second one to delete.
	if st, body := request(t, http.MethodPut, d.URL+"/admin/toolsets/math", "",
		`{"include": ["demo.add"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 40}}}`); st != 200 {
		t.Fatalf("PUT math: %d %s", st, body)
	}
	if st, body := request(t, http.MethodPut, d.URL+"/admin/toolsets/temp", "", `{"include": ["demo.*"]}`); st != 201 {
		t.Fatalf("PUT temp: %d %s", st, body)
	}
	if st, body := request(t, http.MethodDelete, d.URL+"/admin/toolsets/temp", "", ""); st != 204 {
		t.Fatalf("DELETE temp: %d %s", st, body)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	d = startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	eventually(t, 10*time.Second, "demo tools", func() bool { return toolNames(t, d)["demo.add"] })
	st, body = request(t, http.MethodGet, d.URL+"/admin/toolsets", "", "")
	var list struct {
		Toolsets []struct{ Name, Source string } `json:"toolsets"`
	}
	if st != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("GET /admin/toolsets: %d %s", st, body)
	}
	if fmt.Sprint(list.Toolsets) != "[{fixed config} {math api}]" {
		t.Errorf("toolsets after the restart: %v, want fixed (config) and math (api), not temp", list.Toolsets)
	}
	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp/math", MaxRetries: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	if names := c.toolNames(t); !slices.Equal(names, []string{"plus"}) {
		t.Errorf("/mcp/math after the restart lists %v", names)
	}
	if res, err := c.call(t, "plus", `{"a": 2}`, nil); err != nil || !strings.Contains(resultText(res), `"sum":42`) {
		t.Errorf("plus after the restart: %v %+v, want sum 42 (the replaced b)", err, res)
	}
}

// TestToolsetDiscovery: a toolset with discovery "search" lists only the
// three meta-tools; search_tools finds a member, describe_tool gives its
// schema (without the hidden argument), call_tool calls it. Replay: a
// call_tool (or describe_tool) of a real tool outside the toolset, or of
// a renamed member's real name, is tool_not_found and reaches no backend.
func TestToolsetDiscovery(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	d := startToolsetDaemon(t, be, `{
  "find": {"include": ["demo.add", "demo.echo"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 100}}, "discovery": "search"}
}`, daemonOpts{})
	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp/find", MaxRetries: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	if names := c.toolNames(t); !slices.Equal(names, []string{"call_tool", "describe_tool", "search_tools"}) {
		t.Fatalf("/mcp/find lists %v, want the three meta-tools", names)
	}
	structured := func(res *mcp.CallToolResult) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(resultText(res)), &m); err != nil {
			t.Fatalf("result %q: %v", resultText(res), err)
		}
		return m
	}
	res, err := c.call(t, "search_tools", `{"query": "sum numbers"}`, nil)
	if err != nil || res.IsError {
		t.Fatalf("search_tools: %v %+v", err, res)
	}
	found := structured(res)["tools"].([]any)
	if len(found) != 1 || found[0].(map[string]any)["name"] != "plus" {
		t.Fatalf("search_tools(sum numbers) = %v, want plus only", found)
	}
	res, err = c.call(t, "describe_tool", `{"name": "plus"}`, nil)
	if err != nil || res.IsError {
		t.Fatalf("describe_tool: %v %+v", err, res)
	}
	schema, _ := json.Marshal(structured(res)["input_schema"])
	if !strings.Contains(string(schema), `"a"`) || strings.Contains(string(schema), `"b"`) {
		t.Errorf("describe_tool(plus) schema %s: want a, not the hidden b", schema)
	}
	res, err = c.call(t, "call_tool", `{"name": "plus", "arguments": {"a": 1}}`, nil)
	if err != nil || res.IsError || !strings.Contains(resultText(res), `"sum":101`) {
		t.Fatalf("call_tool(plus, a=1): %v %+v, want sum 101", err, res)
	}
	recs := auditRecords(t, d, "demo.add", 1)
	if recs[0]["toolset"] != "find" || recs[0]["qualified"] != "demo.add" {
		t.Errorf("audit record of call_tool(plus): %v", recs[0])
	}

	calls := be.F.Calls()
	for _, args := range []string{
		`{"name": "demo.fail", "arguments": {"message": "x"}}`,
		`{"name": "demo.add", "arguments": {"a": 1, "b": 2}}`,
		`{"name": "fail", "arguments": {"message": "x"}}`,
		`{"name": "plus", "arguments": {"a": 1, "b": 2}}`,
	} {
		res, err := c.call(t, "call_tool", args, nil)
		if err == nil && !res.IsError {
			t.Errorf("call_tool %s: %+v, want refused", args, res)
		}
		if err == nil && !strings.Contains(resultText(res), "tool_not_found") && !strings.Contains(resultText(res), "invalid_arguments") {
			t.Errorf("call_tool %s: %s", args, resultText(res))
		}
	}
	if res, err := c.call(t, "describe_tool", `{"name": "demo.fail"}`, nil); err == nil && !res.IsError {
		t.Errorf("describe_tool(demo.fail) outside the toolset: %+v", res)
	}
	if res, err := c.call(t, "search_tools", `{"query": "fail"}`, nil); err != nil || len(structured(res)["tools"].([]any)) != 0 {
		t.Errorf("search_tools(fail) finds a tool outside the toolset: %v %+v", err, res)
	}
	if be.F.Calls() != calls {
		t.Errorf("a refused call reached the backend")
	}
}

// TestToolsetStdio serves one toolset with "utcpd mcp --toolset", both
// in-process (--config) and bridged to a daemon (--connect): the renamed
// tool only, called with the fixed argument; a hidden argument given is
// refused; an unknown toolset is a usage error.
func TestToolsetStdio(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	toolsets := `{"mini": {"include": ["demo.add"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 10}}}}`
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, toolsetConfig(be, toolsets))
	d := startToolsetDaemon(t, be, toolsets, daemonOpts{})
	for name, tr := range map[string]mcp.Transport{
		"config":  mcpCommand(dir, nil, "--config", cfg, "--toolset", "mini"),
		"connect": mcpCommand(dir, nil, "--connect", d.URL, "--toolset", "mini"),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := connectMCP(t, tr, "")
			if err != nil {
				t.Fatal(err)
			}
			if names := c.toolNames(t); !slices.Equal(names, []string{"plus"}) {
				t.Errorf("tools/list: %v, want [plus]", names)
			}
			res, err := c.call(t, "plus", `{"a": 5}`, nil)
			if err != nil || res.IsError || !strings.Contains(resultText(res), `"sum":15`) {
				t.Errorf("plus(a=5): %v %+v, want sum 15", err, res)
			}
			res, err = c.call(t, "plus", `{"a": 5, "b": 1}`, nil)
			if err != nil || !res.IsError || !strings.Contains(resultText(res), "invalid_arguments") {
				t.Errorf("plus with the hidden b: %v %+v, want an invalid_arguments isError result", err, res)
			}
		})
	}
	if _, errOut, code := cli(t, dir, nil, "mcp", "--config", cfg, "--toolset", "nope"); code != 2 || !strings.Contains(errOut, "nope") {
		t.Errorf("mcp --toolset nope: exit %d %s, want 2", code, errOut)
	}
}

// TestToolsetSecurity replays, on every other front of a toolset (the
// UTCP manual at /utcp/{toolset}, the LLM export and tool_calls with
// ?toolset=), the attempts to leave it: a tool outside the toolset by its
// real name, a renamed member by its real name, and a hidden argument
// given by the caller. Each is refused and reaches no backend; the
// toolset's own tool works with the fixed value.
func TestToolsetSecurity(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	d := startToolsetDaemon(t, be, `{"mini": {"include": ["demo.add"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 10}}}}`, daemonOpts{})

	st, body := request(t, http.MethodGet, d.URL+"/utcp/mini", "", "")
	if st != 200 || !strings.Contains(string(body), `"name":"plus"`) || strings.Contains(string(body), "demo.") ||
		!strings.Contains(string(body), "/utcp/mini/call/plus") {
		t.Fatalf("GET /utcp/mini: %d %s", st, body)
	}
	if st, body := request(t, http.MethodPost, d.URL+"/utcp/mini/call/plus?a=1", "", ""); st != 200 || !strings.Contains(string(body), `"sum":11`) {
		t.Errorf("POST /utcp/mini/call/plus?a=1: %d %s, want sum 11", st, body)
	}
	st, body = request(t, http.MethodGet, d.URL+"/v1/export/openai?toolset=mini", "", "")
	if st != 200 || !strings.Contains(string(body), `"plus"`) || strings.Contains(string(body), "demo") {
		t.Errorf("export of mini: %d %s, want plus only", st, body)
	}
	if st, _ := request(t, http.MethodGet, d.URL+"/v1/export/openai?toolset=nope", "", ""); st != 404 {
		t.Errorf("export of an unknown toolset: %d, want 404", st)
	}
	st, body = request(t, http.MethodPost, d.URL+"/v1/llm/openai/tool_calls?toolset=mini", "",
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"plus","arguments":"{\"a\":2}"}}]}`)
	if st != 200 || !strings.Contains(string(body), `{\"sum\":12}`) {
		t.Errorf("tool_calls through mini: %d %s, want sum 12", st, body)
	}

	calls := be.F.Calls()
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodPost, "/utcp/mini/call/demo.fail", `{"message": "x"}`, "tool_not_found"},
		{http.MethodPost, "/utcp/mini/call/demo.add?a=1&b=2", "", "tool_not_found"},
		{http.MethodPost, "/utcp/mini/call/plus?a=1&b=2", "", "invalid_arguments"},
		{http.MethodPost, "/v1/llm/openai/tool_calls?toolset=mini",
			`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"demo__fail","arguments":"{}"}},` +
				`{"id":"c2","type":"function","function":{"name":"demo__add","arguments":"{\"a\":1,\"b\":2}"}},` +
				`{"id":"c3","type":"function","function":{"name":"plus","arguments":"{\"a\":1,\"b\":2}"}}]}`, "invalid_arguments"},
	} {
		st, body := request(t, c.method, d.URL+c.path, "", c.body)
		if !strings.Contains(string(body), c.want) || strings.Contains(string(body), "sum") {
			t.Errorf("%s %s %s: %d %s, want %s", c.method, c.path, c.body, st, body, c.want)
		}
	}
	if be.F.Calls() != calls {
		t.Errorf("a refused call reached the backend (%d calls, want %d)", be.F.Calls(), calls)
	}
}

// TestToolsetReload: on SIGHUP the config file's toolsets apply again (a
// rename changes the listing; a removed toolset is not_found), while a
// toolset stored through the admin API keeps serving.
func TestToolsetReload(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	d := startToolsetDaemon(t, be, `{"mini": {"include": ["demo.add"]}}`, daemonOpts{dir: dir})
	if st, body := request(t, http.MethodPut, d.URL+"/admin/toolsets/stored", "", `{"include": ["demo.echo"]}`); st != 201 {
		t.Fatalf("PUT stored: %d %s", st, body)
	}
	list := func(ts string) string {
		st, body := request(t, http.MethodGet, d.URL+"/v1/toolsets/"+ts+"/tools", "", "")
		if st != 200 {
			return fmt.Sprint(st)
		}
		var l struct{ Tools []struct{ Name string } }
		_ = json.Unmarshal(body, &l)
		return fmt.Sprint(l.Tools)
	}
	if got := list("mini"); got != "[{demo.add}]" {
		t.Fatalf("mini before the reload: %s", got)
	}
	writeFile(t, filepath.Join(dir, "utcpd.json"), toolsetConfig(be, `{"mini2": {"include": ["demo.add"], "rename": {"demo.add": "plus"}}}`))
	d.signal(syscall.SIGHUP)
	d.waitLog("toolsets reloaded", 10*time.Second)
	if got := list("mini2"); got != "[{plus}]" {
		t.Errorf("mini2 after the reload: %s", got)
	}
	if got := list("mini"); got != "404" {
		t.Errorf("mini after the reload: %s, want 404", got)
	}
	if got := list("stored"); got != "[{demo.echo}]" {
		t.Errorf("the stored toolset after the reload: %s", got)
	}
}

// TestToolsetKeys: API keys meet toolsets. A scoped key (tools
// ["demo.add", "demo.echo"]) sees inside a toolset only the members its
// scope allows, judged by their real names (plus is demo.add); a key with
// "toolsets": ["mini"] reaches its tools through mini only (REST, MCP and
// the UTCP manual), sees nothing on the plain routes, and finds the
// other toolset not_found; a plain key sees everything.
func TestToolsetKeys(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), `{"manual_call_templates": [`+be.template("demo")+`],
  "gateway": {
    "api_keys": [
      {"name": "scoped", "key_env": "SCOPED_KEY", "tools": ["demo.add", "demo.echo"]},
      {"name": "boxed", "key_env": "BOXED_KEY", "toolsets": ["mini"]},
      "plain-secret"],
    "toolsets": {
      "mini": {"include": ["demo.add", "demo.fail"], "rename": {"demo.add": "plus"}, "hidden": {"demo.add": {"b": 1}}},
      "other": {"include": ["demo.echo"]}}}}`)
	d := startDaemon(t, daemonOpts{dir: dir, env: []string{"SCOPED_KEY=scoped-secret", "BOXED_KEY=boxed-secret"}})
	eventually(t, 10*time.Second, "demo tools", func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/v1/tools", "plain-secret", "")
		return st == 200 && strings.Contains(string(body), "demo.add")
	})
	names := func(key, path string) string {
		t.Helper()
		st, body := request(t, http.MethodGet, d.URL+path, key, "")
		if st != 200 {
			return fmt.Sprint(st)
		}
		var l struct{ Tools []struct{ Name string } }
		_ = json.Unmarshal(body, &l)
		var out []string
		for _, tl := range l.Tools {
			out = append(out, tl.Name)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	for _, c := range []struct{ key, path, want string }{
		{"plain-secret", "/v1/toolsets/mini/tools", "demo.fail,plus"},
		{"scoped-secret", "/v1/toolsets/mini/tools", "plus"},
		{"scoped-secret", "/v1/toolsets/mini/tools?q=fail", ""},
		{"boxed-secret", "/v1/toolsets/mini/tools", "demo.fail,plus"},
		{"boxed-secret", "/v1/toolsets/other/tools", "404"},
		{"boxed-secret", "/v1/tools", ""},
		{"boxed-secret", "/v1/toolsets/nope/tools", "404"},
	} {
		if got := names(c.key, c.path); got != c.want {
			t.Errorf("GET %s as %s: %q, want %q", c.path, c.key, got, c.want)
		}
	}
	calls := be.F.Calls()
	for _, c := range []struct{ key, path, want string }{
		{"scoped-secret", "/v1/toolsets/mini/tools/demo.fail/call", "tool_not_found"},
		{"boxed-secret", "/v1/tools/demo.add/call", "tool_not_found"},
		{"boxed-secret", "/v1/toolsets/other/tools/demo.echo/call", "not_found"},
		{"boxed-secret", "/utcp/call/demo.add", "tool_not_found"},
	} {
		st, body := request(t, http.MethodPost, d.URL+c.path, c.key, `{"arguments": {"a": 1, "b": 2, "message": "x"}}`)
		if st != 404 || !strings.Contains(string(body), `"`+c.want+`"`) {
			t.Errorf("POST %s as %s: %d %s, want 404 %s", c.path, c.key, st, body, c.want)
		}
	}
	if be.F.Calls() != calls {
		t.Errorf("a refused call reached the backend")
	}
	for _, key := range []string{"scoped-secret", "boxed-secret"} {
		st, body := request(t, http.MethodPost, d.URL+"/v1/toolsets/mini/tools/plus/call", key, `{"arguments": {"a": 1}}`)
		if st != 200 || !strings.Contains(string(body), `"sum":2`) {
			t.Errorf("plus as %s: %d %s", key, st, body)
		}
	}
	if st, body := request(t, http.MethodGet, d.URL+"/utcp", "boxed-secret", ""); st != 200 || strings.Contains(string(body), "demo.") {
		t.Errorf("GET /utcp as boxed: %d %s, want no tools", st, body)
	}

	// MCP: the boxed key lists mini's tools on /mcp/mini, nothing on /mcp,
	// and /mcp/other is 404; the scoped key sees plus only on /mcp/mini.
	mcpNames := func(key, path string) (string, error) {
		c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + path, HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1}, "")
		if err != nil {
			return "", err
		}
		defer c.s.Close()
		return strings.Join(c.toolNames(t), ","), nil
	}
	for _, c := range []struct{ key, path, want string }{
		{"boxed-secret", "/mcp/mini", "demo.fail,plus"},
		{"boxed-secret", "/mcp", ""},
		{"scoped-secret", "/mcp/mini", "plus"},
	} {
		if got, err := mcpNames(c.key, c.path); err != nil || got != c.want {
			t.Errorf("%s as %s lists %q (%v), want %q", c.path, c.key, got, err, c.want)
		}
	}
	if _, err := mcpNames("boxed-secret", "/mcp/other"); err == nil {
		t.Errorf("/mcp/other as boxed: connected, want 404")
	}
	st, _ := request(t, http.MethodPost, d.URL+"/mcp/other", "boxed-secret", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if st != 404 {
		t.Errorf("POST /mcp/other as boxed: %d, want 404", st)
	}
}
