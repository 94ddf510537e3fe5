package mcpfront

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingServer is a go-sdk MCP server over Streamable HTTP asking its
// client with classic requests: "ask" elicits a name (and reports on
// canceled when its call is cancelled while it waits), "open" asks a
// URL-mode elicitation el-1 and notifies its completion before it
// answers, "open-later" asks el-2 and notifies its completion after its
// call ended, once later is closed.
func askingServer(t *testing.T) (url string, canceled chan struct{}, later chan struct{}) {
	t.Helper()
	canceled, later = make(chan struct{}, 4), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1"}, nil)
	obj := json.RawMessage(`{"type": "object"}`)
	done := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?",
			RequestedSchema: json.RawMessage(`{"type": "object", "properties": {"name": {"type": "string"}}}`)})
		if err != nil {
			// The client's refusal and the call's cancellation race; a
			// cancelled call's context ends either way.
			select {
			case <-ctx.Done():
				canceled <- struct{}{}
			case <-time.After(15 * time.Second):
			}
			return nil, err
		}
		return done(res.Action), nil
	})
	srv.AddTool(&mcp.Tool{Name: "open", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "sign in", URL: "https://auth.example/x", ElicitationID: "el-1"})
		if err != nil {
			return nil, err
		}
		if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "el-1"}); err != nil {
			return nil, err
		}
		return done(res.Action), nil
	})
	srv.AddTool(&mcp.Tool{Name: "open-later", InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "sign in", URL: "https://auth.example/y", ElicitationID: "el-2"})
		if err != nil {
			return nil, err
		}
		ss := req.Session
		go func() {
			<-later
			_ = ss.NotifyElicitationComplete(context.Background(), &mcp.ElicitationCompleteParams{ElicitationID: "el-2"})
		}()
		return done(res.Action), nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL, canceled, later
}

// TestServerRequestsCancelOverHTTP: over the Streamable HTTP front, a
// client that cancels its call while the server's elicitation waits for
// its user has that elicitation cancelled too (the notifications/cancelled
// reaches its handler, on the session's standalone stream since the
// call's stream is closed), and the backend call is cancelled; and a
// URL-mode elicitation's notifications/elicitation/complete reaches the
// client that was asked, during the call and after it ended.
func TestServerRequestsCancelOverHTTP(t *testing.T) {
	url, backendCanceled, later := askingServer(t)
	tmpl, _ := json.Marshal(map[string]any{"name": "asking", "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"url": url}}}})
	e := newEnv(t, envOptions{
		manuals:         map[string]string{"asking": string(tmpl)},
		front:           Options{NativeNames: []string{"asking.srv"}},
		transportConfig: map[string]json.RawMessage{"mcp": json.RawMessage(`{"protocol_version": "2025-11-25"}`)},
	})
	asked, handlerCanceled, quit := make(chan *mcp.ElicitParams, 4), make(chan struct{}, 4), make(chan struct{})
	completed := make(chan string, 4)
	cl := mcp.NewClient(&mcp.Implementation{Name: "canceller", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- r.Params
			if r.Params.Mode == "url" {
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			select { // the user never answers
			case <-ctx.Done():
				handlerCanceled <- struct{}{}
				return nil, ctx.Err()
			case <-quit: // the test failed
				return &mcp.ElicitResult{Action: "cancel"}, nil
			}
		},
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	})
	ss, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	defer close(quit)
	wait := func(what string, ch any) {
		t.Helper()
		var ok bool
		switch c := ch.(type) {
		case chan struct{}:
			select {
			case <-c:
				ok = true
			case <-time.After(20 * time.Second):
			}
		case chan *mcp.ElicitParams:
			select {
			case <-c:
				ok = true
			case <-time.After(20 * time.Second):
			}
		}
		if !ok {
			t.Fatal(what)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := ss.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
		errc <- err
	}()
	wait("the client was never asked", asked)
	cancel()
	wait("the pending elicitation was not cancelled at the client", handlerCanceled)
	wait("the backend call was not cancelled", backendCanceled)
	if err := <-errc; err == nil {
		t.Error("the cancelled call succeeded")
	}

	res, err := ss.CallTool(t.Context(), &mcp.CallToolParams{Name: "open", Arguments: map[string]any{}})
	if err != nil || text(res) != "accept" {
		t.Fatalf("open: %v %v", text(res), err)
	}
	select {
	case id := <-completed:
		if id != "el-1" {
			t.Errorf("completed %q, want el-1", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the completion of el-1 (during the call) did not reach the client")
	}

	res, err = ss.CallTool(t.Context(), &mcp.CallToolParams{Name: "open-later", Arguments: map[string]any{}})
	if err != nil || text(res) != "accept" {
		t.Fatalf("open-later: %v %v", text(res), err)
	}
	close(later)
	select {
	case id := <-completed:
		if id != "el-2" {
			t.Errorf("completed %q, want el-2", id)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the completion of el-2 (after the call) did not reach the client")
	}
}
