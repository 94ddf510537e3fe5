package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSecurityServerRequestsStayWithTheirCaller replays a backend MCP
// server's request reaching someone other than the caller of the call it
// serves (docs/security.md, "Server requests"): two API keys' clients
// call server-everything's elicitation tool over a stdio backend, where
// nothing on the wire says which call a request belongs to. Ada's call is
// in flight and she is asked; Bob's call, made meanwhile, has its
// elicitation declined: it never reaches Ada's client (nor Bob's,
// since it cannot be told apart), and Ada answers only her own.
func TestSecurityServerRequestsStayWithTheirCaller(t *testing.T) {
	dir, cfg := everythingConfig(t)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})
	type asked struct {
		who     string
		message string
	}
	questions := make(chan asked, 8)
	release := make(chan struct{})
	connect := func(who, key string) *mcp.ClientSession {
		cl := mcp.NewClient(&mcp.Implementation{Name: who, Version: "1"}, &mcp.ClientOptions{
			ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				questions <- asked{who, r.Params.Message}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": who + "-secret"}}, nil
			},
		})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		s, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", HTTPClient: &http.Client{Transport: keyTransport{key}}, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	ada, bob := connect("ada", "key-ada"), connect("bob", "key-bob")
	call := func(s *mcp.ClientSession) (*mcp.CallToolResult, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		return s.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-elicitation-request", Arguments: map[string]any{}})
	}
	adaDone := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := call(ada)
		if err != nil {
			t.Errorf("ada's call: %v", err)
		}
		adaDone <- res
	}()
	select {
	case q := <-questions:
		if q.who != "ada" {
			t.Fatalf("ada's call asked %s", q.who)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ada was never asked")
	}
	res, err := call(bob)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if !res.IsError || !strings.Contains(text.String(), "elicitation/create declined: 2 tool calls are in flight") || strings.Contains(text.String(), "ada-secret") {
		t.Errorf("bob's call: isError %v %q; want the ambiguity decline", res.IsError, text.String())
	}
	select {
	case q := <-questions:
		t.Errorf("%s was asked bob's question (%q)", q.who, q.message)
	default:
	}
	close(release)
	if got := <-adaDone; got == nil || got.IsError {
		t.Errorf("ada's result: %+v", got)
	}
}
