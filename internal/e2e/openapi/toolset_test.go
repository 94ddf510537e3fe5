package openapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
)

// TestToolsetGitHubDiscovery serves GitHub's REST API (every operation
// of its real description, servers moved to a local recorder) through a
// toolset with progressive discovery over /mcp/{toolset} to the go-sdk
// client: the client sees three meta-tools, search_tools finds "List
// organization repositories" among the repos tools, describe_tool gives
// its schema without the hidden org, and call_tool calls it, reaching
// /orgs/acme/repos with the fixed org. A tool outside the toolset is not
// found by search_tools nor called by call_tool.
func TestToolsetGitHubDiscovery(t *testing.T) {
	data := githubDescription(t)
	var mu sync.Mutex
	var paths []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"name": "widgets", "full_name": "acme/widgets"}]`))
	}))
	t.Cleanup(api.Close)
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["servers"] = []any{map[string]any{"url": api.URL}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, "github", data)
	if err := s.g.SetToolsets(map[string]gateway.ToolsetSpec{"gh": {
		Include:   []string{"github.repos/*"},
		Hidden:    map[string]map[string]any{"github.repos/list-for-org": {"org": "acme"}},
		Discovery: gateway.DiscoverySearch,
	}}, nil); err != nil {
		t.Fatal(err)
	}
	ts, _ := s.g.Toolset("gh")
	if n := len(ts.Tools(t.Context())); n < 50 || n > 1000 {
		t.Fatalf("the toolset has %d of GitHub's repos tools", n)
	}

	cl := mcp.NewClient(&mcp.Implementation{Name: "utcpd-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sess, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp/gh", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var names []string
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"call_tool", "describe_tool", "search_tools"}) {
		t.Fatalf("/mcp/gh lists %v", names)
	}
	call := func(name, args string) map[string]any {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s %s: %v", name, args, err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if res.IsError {
			return map[string]any{"error": text}
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			var list []any
			if json.Unmarshal([]byte(text), &list) == nil {
				return map[string]any{"list": list}
			}
			t.Fatalf("%s: %q: %v", name, text, err)
		}
		return out
	}

	found := call("search_tools", `{"query": "list organization repositories", "limit": 5}`)["tools"].([]any)
	var hit bool
	for _, f := range found {
		n := f.(map[string]any)["name"].(string)
		if !strings.HasPrefix(n, "github.repos/") {
			t.Errorf("search_tools found %s, outside the toolset", n)
		}
		hit = hit || n == "github.repos/list-for-org"
	}
	if !hit {
		t.Fatalf("search_tools(list organization repositories) = %v, want github.repos/list-for-org", found)
	}
	desc := call("describe_tool", `{"name": "github.repos/list-for-org"}`)
	schema, _ := json.Marshal(desc["input_schema"])
	if strings.Contains(string(schema), `"org"`) || !strings.Contains(string(schema), `"per_page"`) {
		t.Errorf("describe_tool schema %s: want per_page and not the hidden org", schema)
	}
	out := call("call_tool", `{"name": "github.repos/list-for-org", "arguments": {"per_page": 1}}`)
	if out["error"] != nil {
		t.Fatalf("call_tool(list-for-org): %v", out["error"])
	}
	mu.Lock()
	got := slices.Clone(paths)
	mu.Unlock()
	if !slices.Equal(got, []string{"/orgs/acme/repos"}) {
		t.Errorf("GitHub saw %v, want [/orgs/acme/repos] (the fixed org)", got)
	}

	// Outside the toolset: an issues tool is neither found nor called.
	if found := call("search_tools", `{"query": "list organization issues assigned"}`)["tools"].([]any); len(found) > 0 {
		for _, f := range found {
			if n := f.(map[string]any)["name"].(string); !strings.HasPrefix(n, "github.repos/") {
				t.Errorf("search_tools found %s", n)
			}
		}
	}
	if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool",
		Arguments: json.RawMessage(`{"name": "github.issues/list-for-org", "arguments": {"org": "acme"}}`)}); err == nil && !res.IsError {
		t.Errorf("call_tool of an issues tool outside the toolset: %+v", res)
	}
	if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool",
		Arguments: json.RawMessage(`{"name": "github.repos/list-for-org", "arguments": {"org": "evil"}}`)}); err == nil && !res.IsError {
		t.Errorf("call_tool overriding the hidden org: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 {
		t.Errorf("GitHub saw %v after the refused calls", paths)
	}
}
