//lint:file-ignore SA1019 sampling, roots and logging are what MCP servers behind utcpd use; deprecated only from protocol 2026-07-28 on (SEP-2577), still served to clients on earlier revisions

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPServerRequests puts @modelcontextprotocol/server-everything
// (npm, transports/mcp/testdata/peer) behind the real binary and has its
// requests to the client answered by the calling go-sdk client: through
// /mcp of utcpd serve and through utcpd mcp, sampling, elicitation and
// roots reach the client that made the call and its answers come back;
// the same tools called over the REST front have the server's requests
// declined with the documented message.
func TestMCPServerRequests(t *testing.T) {
	dir, cfg := everythingConfig(t)
	check := func(t *testing.T, tr mcp.Transport) {
		t.Helper()
		cl := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ClientOptions{
			CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				prompt := ""
				if len(r.Params.Messages) > 0 {
					if tc, ok := r.Params.Messages[0].Content.(*mcp.TextContent); ok {
						prompt = tc.Text
					}
				}
				return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "the model read: " + prompt}}, nil
			},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
			},
		})
		cl.AddRoots(&mcp.Root{URI: "file:///home/ada/project", Name: "project"})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// server-everything adds the tools for clients that declare
		// sampling, elicitation and roots after utcpd's session with it
		// initialized, and says so with list_changed: wait for them to be
		// listed rather than race the relisting.
		eventually(t, 15*time.Second, "server-everything's sampling, elicitation and roots tools on the front", func() bool {
			res, err := s.ListTools(ctx, nil)
			if err != nil {
				return false
			}
			n := 0
			for _, tl := range res.Tools {
				switch tl.Name {
				case "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list":
					n++
				}
			}
			return n == 3
		})
		for _, c := range []struct{ tool, args, want string }{
			{"trigger-sampling-request", `{"prompt":"hello"}`, "the model read: Resource trigger-sampling-request context: hello"},
			{"trigger-elicitation-request", `{}`, "Ada Lovelace"},
			{"get-roots-list", `{}`, "file:///home/ada/project"},
		} {
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
			if err != nil {
				t.Fatalf("%s: %v", c.tool, err)
			}
			var text strings.Builder
			for _, b := range res.Content {
				if tc, ok := b.(*mcp.TextContent); ok {
					text.WriteString(tc.Text)
				}
			}
			if res.IsError || !strings.Contains(text.String(), c.want) {
				t.Errorf("%s: isError %v %q; want the client's answer %q", c.tool, res.IsError, text.String(), c.want)
			}
		}
	}

	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})
	t.Run("/mcp", func(t *testing.T) {
		check(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{"key-ada"}}, MaxRetries: -1})
	})
	t.Run("REST", func(t *testing.T) {
		for _, c := range []struct{ tool, args, method string }{
			{"trigger-sampling-request", `{"prompt":"hello"}`, "sampling/createMessage"},
			{"trigger-elicitation-request", `{}`, "elicitation/create"},
		} {
			_, body := request(t, http.MethodPost, d.URL+"/v1/tools/everything.srv."+c.tool+"/call", "key-ada", `{"arguments": `+c.args+`}`)
			want := "utcpd: " + c.method + " declined: the caller of " + c.tool + " cannot answer it"
			if !strings.Contains(string(body), `"is_error":true`) || !strings.Contains(string(body), want) {
				t.Errorf("REST %s: %s; want the tool's failure (is_error) holding %q", c.tool, body, want)
			}
		}
	})
	t.Run("utcpd mcp", func(t *testing.T) {
		check(t, mcpCommand(dir, nil, "--config", cfg, "--native-names", "everything.srv"))
	})
}

// everythingConfig gates a test on server-everything and writes a config
// with it as manual "everything", server "srv" (stdio), listed under its
// own names; it returns the directory and the config's path.
func everythingConfig(t *testing.T) (dir, cfg string) {
	t.Helper()
	const install = "npm ci --prefix transports/mcp/testdata/peer"
	if os.Getenv("UTCPD_NPM_PEERS") != "1" {
		t.Skip("the npm peers run with UTCPD_NPM_PEERS=1; install server-everything with: " + install)
	}
	peer, err := filepath.Abs(filepath.Join("..", "..", "transports", "mcp", "testdata", "peer"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(peer, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("UTCPD_NPM_PEERS=1 but server-everything is not installed (%v); install it with: %s", err, install)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("UTCPD_NPM_PEERS=1 but node is not installed: %v", err)
	}
	dir = t.TempDir()
	cfg = filepath.Join(dir, "utcpd.json")
	tmpl, _ := json.Marshal(map[string]any{"name": "everything", "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"command": node, "args": []string{script, "stdio"}}}}})
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"api_keys": ["key-ada", "key-bob"], "mcp": {"native_names": ["everything.srv"]}}}`, tmpl))
	return dir, cfg
}
