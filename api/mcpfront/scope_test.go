package mcpfront

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
	"github.com/utcpd/utcpd/gateway"
)

// scopedKey is a named key for tests, its key the name with "-key".
func scopedKey(t *testing.T, name string, tools ...string) gateway.APIKey {
	t.Helper()
	sc, err := gateway.NewScope(tools, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return gateway.APIKey{Name: name, Key: name + "-key", Scope: sc}
}

// TestNamedKeyMCPResourcesAndPrompts: an MCP server's resources,
// templates and prompts are listed to a key whose scope allows the
// server ("conf.*"), and to no key whose scope does not (a key limited
// to demo.*, even one that names a single tool of the server): their
// reads, prompts, completions and subscriptions then answer as the SDK
// answers for what it does not have. Listing and calling tools follow
// the same scopes.
func TestNamedKeyMCPResourcesAndPrompts(t *testing.T) {
	conf := confserver.New()
	hs := httptest.NewServer(conf.Handler())
	t.Cleanup(hs.Close)
	tmpl := fmt.Sprintf(`{"name":"conf","call_template_type":"mcp","config":{"mcpServers":{"srv":{"url":%q}}}}`, hs.URL)
	e := newEnv(t, envOptions{manuals: map[string]string{"conf": tmpl}, front: Options{Keys: []gateway.APIKey{
		scopedKey(t, "wide", "conf.*"), scopedKey(t, "narrow", "demo.*", "conf.srv.test_simple_text"),
	}}})
	open := func(key string) *resClient {
		t.Helper()
		return openResClient(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}}})
	}
	wide, narrow := open("wide-key"), open("narrow-key")
	if n := len(wide.resources(t)); n != 3 {
		t.Errorf("wide: %d resources, want the fixture's 3", n)
	}
	if len(wide.templates(t)) == 0 || len(wide.prompts(t)) == 0 {
		t.Error("wide: no templates or prompts")
	}
	if r, tp, p := narrow.resources(t), narrow.templates(t), narrow.prompts(t); len(r)+len(tp)+len(p) > 0 {
		t.Errorf("narrow sees resources %d, templates %d, prompts %d", len(r), len(tp), len(p))
	}
	toolNames := func(rc *resClient) []string {
		var out []string
		for tl, err := range rc.s.Tools(rc.ctx(t), nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tl.Name)
		}
		return out
	}
	if w, n := toolNames(wide), toolNames(narrow); slices.ContainsFunc(w, func(s string) bool { return !strings.HasPrefix(s, "conf.") }) ||
		len(w) == 0 || !slices.Contains(n, "demo.add") || !slices.Contains(n, "conf.srv.test_simple_text") || slices.Contains(n, "conf.srv.test_error_handling") {
		t.Errorf("tools: wide %v, narrow %v", w, n)
	}

	// What narrow does not see answers as what does not exist.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	same := func(what string, hidden, ghost error, hiddenName, ghostName string) {
		t.Helper()
		if hidden == nil || ghost == nil {
			t.Errorf("%s: hidden %v, ghost %v", what, hidden, ghost)
			return
		}
		if h, g := hidden.Error(), strings.ReplaceAll(ghost.Error(), ghostName, hiddenName); h != g {
			t.Errorf("%s:\n hidden %s\n  ghost %s", what, h, g)
		}
	}
	uri, ghostURI := "utcpd://conf.srv/"+confserver.ResourceStaticText, "utcpd://cong.srv/"+confserver.ResourceStaticText
	if _, err := wide.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil {
		t.Fatalf("wide reads %s: %v", uri, err)
	}
	_, h := narrow.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	_, g := narrow.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: ghostURI})
	same("resources/read", h, g, uri, ghostURI)
	h = narrow.s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	g = narrow.s.Subscribe(ctx, &mcp.SubscribeParams{URI: ghostURI})
	same("resources/subscribe", h, g, uri, ghostURI)
	prompt, ghostPrompt := "conf.srv."+confserver.PromptSimple, "cong.srv."+confserver.PromptSimple
	if _, err := wide.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt}); err != nil {
		t.Fatalf("wide gets %s: %v", prompt, err)
	}
	_, h = narrow.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt})
	_, g = narrow.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: ghostPrompt})
	same("prompts/get", h, g, prompt, ghostPrompt)
	_, h = narrow.s.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: prompt}, Argument: mcp.CompleteParamsArgument{Name: "x"}})
	_, g = narrow.s.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: ghostPrompt}, Argument: mcp.CompleteParamsArgument{Name: "x"}})
	same("completion/complete", h, g, prompt, ghostPrompt)
	tool, ghostTool := "conf.srv.test_error_handling", "conf.srv.test_error_handlinx"
	_, h = narrow.s.CallTool(ctx, &mcp.CallToolParams{Name: tool})
	_, g = narrow.s.CallTool(ctx, &mcp.CallToolParams{Name: ghostTool})
	same("tools/call", h, g, tool, ghostTool)
}
