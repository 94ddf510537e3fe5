package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCodeModeFronts runs CodeMode through every front that offers it:
// POST /v1/codemode, the codemode.run tool of the MCP front (asked for
// with MCPCodeMode), and the LLM export and tool-call routes.
func TestCodeModeFronts(t *testing.T) {
	be := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{MCPCodeMode: true}})
	e.register(be.manual("demo"), "test")
	prog := `local r = call_tool("demo.add", {a = 2, b = 3}) print("sum", r.sum) return r.sum * 2`

	t.Run("rest", func(t *testing.T) {
		body, _ := json.Marshal(map[string]any{"code": prog})
		r := e.do(req{method: "POST", path: "/v1/codemode", body: string(body)})
		m := r.json(t)
		if r.status != 200 || m["result"].(json.Number).String() != "10" {
			t.Fatalf("%s", r)
		}
		r = e.do(req{method: "GET", path: "/v1/codemode/interfaces?q=sum"})
		if r.status != 200 || !strings.Contains(string(r.body), `call_tool(\"demo.add\", args)`) {
			t.Fatalf("%s", r)
		}
	})

	t.Run("mcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		found := false
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			found = found || tool.Name == "codemode.run"
		}
		if !found {
			t.Fatal("codemode.run is not listed")
		}
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "codemode.run", Arguments: map[string]any{"code": prog}})
		if err != nil || res.IsError {
			t.Fatalf("%v %+v", err, res)
		}
		txt := res.Content[0].(*mcp.TextContent).Text
		if !strings.Contains(txt, `"result":10`) || !strings.Contains(txt, `"logs":["sum\t5"]`) {
			t.Fatalf("%s", txt)
		}
		res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "codemode.run", Arguments: map[string]any{"code": "while true do end", "timeout_ms": 100}})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"type":"timeout"`) {
			t.Fatalf("%v %+v", err, res)
		}
	})

	t.Run("llm", func(t *testing.T) {
		r := e.do(req{method: "GET", path: "/v1/export/openai"})
		if r.status != 200 || !strings.HasPrefix(string(r.body), `[{"type":"function","function":{"name":"codemode__run"`) {
			t.Fatalf("%s", r)
		}
		r = e.do(req{method: "GET", path: "/v1/export/anthropic?codemode=false"})
		if r.status != 200 || strings.Contains(string(r.body), "codemode__run") {
			t.Fatalf("%s", r)
		}
		// limit counts codemode.run: the export has exactly limit tools.
		for limit, want := range map[int][]string{1: {"codemode__run"}, 2: {"codemode__run", "demo__echo"}, 3: {"codemode__run", "demo__echo", "demo__add"}} {
			r = e.do(req{method: "GET", path: fmt.Sprintf("/v1/export/anthropic?limit=%d", limit)})
			var tools []struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(r.body, &tools); err != nil || r.status != 200 {
				t.Fatalf("limit=%d: %s", limit, r)
			}
			var got []string
			for _, tl := range tools {
				got = append(got, tl.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("limit=%d: %v, want %v", limit, got, want)
			}
		}
		args, _ := json.Marshal(map[string]any{"code": prog})
		body, _ := json.Marshal(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
			"id": "call_1", "type": "function", "function": map[string]any{"name": "codemode__run", "arguments": string(args)}}}})
		r = e.do(req{method: "POST", path: "/v1/llm/openai/tool_calls", body: string(body)})
		if r.status != 200 || !strings.Contains(string(r.body), `\"result\":10`) {
			t.Fatalf("%s", r)
		}
	})
}

// TestCodeModeShadowing registers a manual "codemode" with a tool "run":
// the built-in codemode.run keeps its name on the MCP front and in the
// exports, and the registered tool stays reachable by the REST front.
func TestCodeModeShadowing(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"utcp_version":"1.1.0","manual_version":"1.0.0","tools":[{"name":"run","description":"A tool that shadows CodeMode.",`+
			`"inputs":{"type":"object"},"tool_call_template":{"call_template_type":"http","url":%q,"http_method":"POST"}}]}`, srv.URL+"/run")
	})
	mux.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"shadow":true}`)
	})
	e := newEnv(t, envOptions{api: Options{MCPCodeMode: true}})
	e.register(fmt.Sprintf(`{"name":"codemode","call_template_type":"http","url":%q}`, srv.URL+"/utcp"), "test")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name == "codemode.run" {
			n++
			if strings.Contains(tool.Description, "shadows") {
				t.Errorf("the registered tool took the name: %q", tool.Description)
			}
		}
	}
	if n != 1 {
		t.Fatalf("codemode.run listed %d times", n)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "codemode.run", Arguments: map[string]any{"code": "return 7"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"result":7`) {
		t.Fatalf("%v %+v", err, res)
	}

	r := e.do(req{method: "GET", path: "/v1/export/openai"})
	if strings.Count(string(r.body), `"codemode__run"`) != 1 || strings.Contains(string(r.body), "shadows") {
		t.Fatalf("%s", r)
	}
	r = e.do(req{method: "POST", path: "/v1/tools/codemode.run/call", body: `{"arguments":{}}`})
	if r.status != 200 || !strings.Contains(string(r.body), `"shadow":true`) {
		t.Fatalf("%s", r)
	}
	// Inside a program, call_tool reaches the registered tool.
	r = e.do(req{method: "POST", path: "/v1/codemode", body: `{"code":"return call_tool(\"codemode.run\", {}).shadow"}`})
	if r.status != 200 || !strings.Contains(string(r.body), `"result":true`) {
		t.Fatalf("%s", r)
	}
}

// TestCodeModeDisabled: with DisableCodeMode no front offers CodeMode: the
// routes are gone, the MCP front does not list codemode.run and the
// exports leave codemode__run out, while the tools themselves stay.
func TestCodeModeDisabled(t *testing.T) {
	be := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{DisableCodeMode: true}})
	e.register(be.manual("demo"), "test")
	if r := e.do(req{method: "POST", path: "/v1/codemode", body: `{"code": "return 1"}`}); r.status != http.StatusNotFound {
		t.Errorf("POST /v1/codemode: %s, want 404", r)
	}
	if r := e.do(req{method: "GET", path: "/v1/codemode/interfaces"}); r.status != http.StatusNotFound {
		t.Errorf("GET /v1/codemode/interfaces: %s, want 404", r)
	}
	r := e.do(req{method: "GET", path: "/v1/export/openai"})
	if r.status != 200 || strings.Contains(string(r.body), "codemode__run") || !strings.Contains(string(r.body), "demo__add") {
		t.Errorf("export: %s", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The MCP front follows the tool set in the background: wait until it
	// has all five demo tools, then check nothing else is listed.
	var names []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		names = names[:0]
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		if len(names) >= 5 || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(names) != "[demo.add demo.count demo.echo demo.fail demo.sleep]" {
		t.Errorf("MCP tools %v, want the demo tools only", names)
	}
}

// TestCodeModeNotOnMCPUnlessAsked: by default the MCP front lists the
// tools behind the gateway and not codemode.run, while POST /v1/codemode
// still runs.
func TestCodeModeNotOnMCPUnlessAsked(t *testing.T) {
	be := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(be.manual("demo"), "test")
	if r := e.do(req{method: "POST", path: "/v1/codemode", body: `{"code": "return 1"}`}); r.status != http.StatusOK {
		t.Errorf("POST /v1/codemode: %s", r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.srv.URL + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var names []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		names = names[:0]
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		if slices.Contains(names, "demo.add") || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Contains(names, "demo.add") || slices.Contains(names, "codemode.run") {
		t.Errorf("MCP tools %v: want the demo tools and no codemode.run", names)
	}
}
