//lint:file-ignore SA1019 sampling is what the MCP servers behind utcpd ask; deprecated only from protocol 2026-07-28 on (SEP-2577), where it is asked as an input request

package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// TestMCPInputRequired: the real binary, with the conformance fixture (a
// go-sdk MCP server over Streamable HTTP) behind it, serves a go-sdk
// client on protocol 2026-07-28 — which has no server-to-client requests
// — the fixture's elicitation and sampling as input-required results,
// through /mcp of utcpd serve and through utcpd mcp (stdio); the client
// fulfils them from its handlers and gets the tools' results with its
// answers.
func TestMCPInputRequired(t *testing.T) {
	t.Parallel()
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(conf.Close)
	dir := t.TempDir()
	manual := fmt.Sprintf(`{"name": "conf", "call_template_type": "mcp", "config": {"mcpServers": {"srv": {"url": %q}}}}`, conf.URL)
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"mcp": {"native_names": ["conf.srv"], "input_timeout": "1m", "max_input_calls": 4}}}`, manual))
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})
	check := func(t *testing.T, tr mcp.Transport) {
		t.Helper()
		asked := make(chan string, 4)
		cl := mcp.NewClient(&mcp.Implementation{Name: "ada", Version: "1"}, &mcp.ClientOptions{
			CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				tc, _ := r.Params.Messages[0].Content.(*mcp.TextContent)
				asked <- "sampling"
				return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "ada read: " + tc.Text}}, nil
			},
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- "elicitation"
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		s, err := cl.Connect(ctx, tr, nil) // the SDK's latest revision: 2026-07-28
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, c := range []struct {
			tool, arg, value, want, handler string
		}{
			{confserver.ToolElicitation, "message", "who are you?", `"username":"ada"`, "elicitation"},
			{confserver.ToolSampling, "prompt", "hello", "ada read: hello", "sampling"},
		} {
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{c.arg: c.value}})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			var got strings.Builder
			for _, b := range res.Content {
				if tc, ok := b.(*mcp.TextContent); ok {
					got.WriteString(tc.Text)
				}
			}
			if res.IsError || !strings.Contains(got.String(), c.want) {
				t.Errorf("%s: isError %v %q, want %q", c.tool, res.IsError, got.String(), c.want)
			}
			select {
			case h := <-asked:
				if h != c.handler {
					t.Errorf("%s asked the %s handler", c.tool, h)
				}
			default:
				t.Errorf("%s: the client's %s handler was not asked", c.tool, c.handler)
			}
		}
	}
	t.Run("serve /mcp", func(t *testing.T) {
		check(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", MaxRetries: -1})
	})
	t.Run("utcpd mcp", func(t *testing.T) {
		check(t, mcpCommand(dir, nil, "--config", cfg, "--native-names", "conf.srv"))
	})
}
