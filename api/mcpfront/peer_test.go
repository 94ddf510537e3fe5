//lint:file-ignore SA1019 sampling, roots and logging are what MCP servers behind utcpd use; deprecated only from protocol 2026-07-28 on (SEP-2577), still served to clients on earlier revisions

package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// asker is a go-sdk client that answers the server's requests as name:
// sampling with "<name> says: <prompt>", elicitation by accepting
// {"name": name} (after hold, when set, is closed), roots with one root
// file:///home/<name>.
type asker struct {
	name     string
	session  *mcp.ClientSession
	elicited chan *mcp.ElicitParams
	logs     chan *mcp.LoggingMessageParams
	hold     chan struct{}
	canceled chan struct{} // an elicitation's context ended while held
}

func newAsker(name string) *asker {
	return &asker{name: name, elicited: make(chan *mcp.ElicitParams, 8), logs: make(chan *mcp.LoggingMessageParams, 64), canceled: make(chan struct{}, 8)}
}

// open connects the asker over tr at protocol version pv; without caps
// it declares what its handlers imply (sampling, elicitation, roots),
// with caps without sampling and elicitation it has neither handler.
func (a *asker) open(t *testing.T, tr mcp.Transport, pv string, caps *mcp.ClientCapabilities) {
	t.Helper()
	opts := &mcp.ClientOptions{
		Capabilities: caps,
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := ""
			for _, m := range r.Params.Messages {
				if tc, ok := m.Content.(*mcp.TextContent); ok {
					prompt += tc.Text
				}
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "model-" + a.name, Content: &mcp.TextContent{Text: a.name + " says: " + prompt}}, nil
		},
		ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			a.elicited <- r.Params
			if a.hold != nil {
				select {
				case <-a.hold:
				case <-ctx.Done():
					a.canceled <- struct{}{}
					return nil, ctx.Err()
				}
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": a.name}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			select {
			case a.logs <- r.Params:
			default:
			}
		},
	}
	if caps != nil && caps.Sampling == nil && caps.Elicitation == nil {
		// The handlers would declare sampling and elicitation.
		opts.CreateMessageHandler, opts.ElicitationHandler = nil, nil
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "asker-" + a.name, Version: "1"}, opts)
	cl.AddRoots(&mcp.Root{URI: "file:///home/" + a.name, Name: a.name})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a.session = s
}

func (a *asker) call(t *testing.T, tool, args string) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s as %s: %v", tool, a.name, err)
	}
	return res
}

// everythingBehind registers server-everything (kind "stdio" or "http")
// under its own names behind a front, and returns the env and the
// transport of a direct connection to the same kind of server.
func everythingBehind(t *testing.T, p everythingPeer, kind string) (*env, func() mcp.Transport) {
	t.Helper()
	var server map[string]any
	var direct func() mcp.Transport
	switch kind {
	case "stdio":
		server = map[string]any{"command": p.node, "args": []string{p.script, "stdio"}}
		direct = func() mcp.Transport { return &mcp.CommandTransport{Command: exec.Command(p.node, p.script, "stdio")} }
	case "http":
		url := p.serveHTTP(t)
		server = map[string]any{"url": url}
		direct = func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1} }
	}
	tmpl, _ := json.Marshal(map[string]any{"name": "everything", "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": server}}})
	e := newEnv(t, envOptions{manuals: map[string]string{"everything": string(tmpl)}, front: Options{NativeNames: []string{"everything.srv"}}})
	return e, direct
}

// TestServerRequestsThroughFront: server-everything's tools that ask
// the client (sampling, elicitation, roots) are listed through utcpd and
// answer through it as they answer directly, the front's client
// answering; over stdio and over Streamable HTTP.
func TestServerRequestsThroughFront(t *testing.T) {
	p := everything(t)
	const pv = "2025-11-25"
	for _, kind := range []string{"stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			e, direct := everythingBehind(t, p, kind)
			d := newAsker("ada")
			d.open(t, direct(), pv, nil)
			f := newAsker("ada")
			f.open(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, pv, nil)

			listed := map[string]bool{}
			for tool, err := range f.session.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				listed[tool.Name] = true
			}
			for _, name := range []string{"trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation", "get-roots-list"} {
				if !listed[name] {
					t.Errorf("%s is not listed through utcpd (the backend session declares no capability?)", name)
				}
			}
			for _, c := range []struct{ tool, args, want string }{
				{"trigger-sampling-request", `{"prompt":"hello"}`, "ada says: Resource trigger-sampling-request context: hello"},
				{"trigger-elicitation-request", `{}`, "ada"},
				{"get-roots-list", `{}`, "file:///home/ada"},
			} {
				want := d.call(t, c.tool, c.args)
				got := f.call(t, c.tool, c.args)
				if !strings.Contains(text(got), c.want) || got.IsError {
					t.Errorf("%s through utcpd: %q (isError %v), want it to hold %q", c.tool, text(got), got.IsError, c.want)
				}
				if diff := cmp.Diff(comparable(t, want), comparable(t, got)); diff != "" {
					t.Errorf("%s (-direct +utcpd):\n%s", c.tool, diff)
				}
			}
			select {
			case ep := <-f.elicited:
				if !strings.Contains(string(mustJSON(t, ep.RequestedSchema)), "firstLine") {
					t.Errorf("the elicitation reached the client without its schema: %s", mustJSON(t, ep))
				}
				if _, stamped := ep.Meta["utcpd/call"]; stamped {
					t.Errorf("utcpd's routing stamp reached the client: %v", ep.Meta)
				}
			default:
				t.Error("the front's client was never asked")
			}

			// A call through the gateway without an MCP caller (as the
			// REST front makes it) has the server's request declined.
			_, err := e.g.CallTool(t.Context(), "everything.srv.trigger-sampling-request", map[string]any{"prompt": "x"}, gateway.CallOptions{Front: "rest"})
			var te *utcp.ToolError
			if !errors.As(err, &te) || !strings.Contains(te.Message, "sampling/createMessage declined") || !strings.Contains(te.Message, "cannot answer it") {
				t.Errorf("a REST-like call: %v; want a tool error saying the sampling request was declined", err)
			}
		})
	}
}

// TestServerRequestsCapabilities: a client that did not declare a
// capability is not asked; the server's request is declined saying so.
// A client on 2026-07-28 (no server-to-client requests) is asked with
// input-required results instead (inputs.go), and answers them as an
// older client does.
func TestServerRequestsCapabilities(t *testing.T) {
	p := everything(t)
	e, _ := everythingBehind(t, p, "http")
	none := newAsker("none")
	none.open(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, "2025-11-25", &mcp.ClientCapabilities{})
	for _, c := range []struct{ tool, args, want string }{
		{"trigger-sampling-request", `{"prompt":"hello"}`, "did not declare the sampling capability"},
		{"trigger-elicitation-request", `{}`, "did not declare the elicitation capability"},
	} {
		res := none.call(t, c.tool, c.args)
		if !res.IsError || !strings.Contains(text(res), c.want) {
			t.Errorf("%s for a client without capabilities: isError %v %q; want %q", c.tool, res.IsError, text(res), c.want)
		}
	}
	select {
	case <-none.elicited:
		t.Error("a client without the elicitation capability was asked")
	default:
	}
	late := newAsker("late")
	late.open(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, "2026-07-28", nil)
	res := late.call(t, "trigger-sampling-request", `{"prompt":"hello"}`)
	if res.IsError || !strings.Contains(text(res), "late says: ") || !strings.Contains(text(res), "hello") {
		t.Errorf("a 2026-07-28 client: isError %v %q; want its own answer", res.IsError, text(res))
	}
	res = late.call(t, "trigger-elicitation-request", `{}`)
	if res.IsError || !strings.Contains(text(res), "late") {
		t.Errorf("a 2026-07-28 client's elicitation: isError %v %q; want its own answer", res.IsError, text(res))
	}
}

// TestServerRequestsConcurrentCallers: two clients calling the
// elicitation tool at once, over a Streamable HTTP backend, each get
// their own elicitation and their own answer back. Over stdio, where
// nothing ties a request to a call, the second one is declined while the
// first is in flight.
func TestServerRequestsConcurrentCallers(t *testing.T) {
	p := everything(t)
	t.Run("http", func(t *testing.T) {
		e, _ := everythingBehind(t, p, "http")
		hold := make(chan struct{})
		a, b := newAsker("ada"), newAsker("bob")
		a.hold, b.hold = hold, hold
		for _, c := range []*asker{a, b} {
			c.open(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, "2025-11-25", nil)
		}
		results := map[string]*mcp.CallToolResult{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range []*asker{a, b} {
			wg.Go(func() {
				res := c.call(t, "trigger-elicitation-request", `{}`)
				mu.Lock()
				results[c.name] = res
				mu.Unlock()
			})
		}
		// Both are asked while both calls are in flight.
		for _, c := range []*asker{a, b} {
			select {
			case <-c.elicited:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s was never asked", c.name)
			}
		}
		close(hold)
		wg.Wait()
		for name, other := range map[string]string{"ada": "bob", "bob": "ada"} {
			got := text(results[name])
			if results[name].IsError || !strings.Contains(got, name) || strings.Contains(got, other) {
				t.Errorf("%s's result: isError %v %q; want %s's answer only", name, results[name].IsError, got, name)
			}
		}
	})
	t.Run("stdio", func(t *testing.T) {
		e, _ := everythingBehind(t, p, "stdio")
		a, b := newAsker("ada"), newAsker("bob")
		a.hold = make(chan struct{})
		for _, c := range []*asker{a, b} {
			c.open(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, "2025-11-25", nil)
		}
		done := make(chan *mcp.CallToolResult, 1)
		go func() { done <- a.call(t, "trigger-elicitation-request", `{}`) }()
		select {
		case <-a.elicited:
		case <-time.After(20 * time.Second):
			t.Fatal("ada was never asked")
		}
		res := b.call(t, "trigger-elicitation-request", `{}`)
		if !res.IsError || !strings.Contains(text(res), "2 tool calls are in flight on this stdio session") {
			t.Errorf("bob's call while ada's is in flight: isError %v %q; want the ambiguity decline", res.IsError, text(res))
		}
		select {
		case <-b.elicited:
			t.Error("bob was asked ada's question")
		default:
		}
		close(a.hold)
		if got := <-done; got.IsError || !strings.Contains(text(got), "ada") {
			t.Errorf("ada's result: isError %v %q", got.IsError, text(got))
		}
	})
}

// TestServerRequestsCancellation: a client that cancels its call while
// the server's elicitation waits for its user has that elicitation
// cancelled too (notifications/cancelled reaches its handler), the call
// ends, and the backend session keeps serving. The client is connected
// as to "utcpd mcp", over one connection (in memory): over Streamable
// HTTP the SDK sends the cancellation on the cancelled call's own event
// stream, which the client has already closed (as directly with a go-sdk
// server).
func TestServerRequestsCancellation(t *testing.T) {
	p := everything(t)
	for _, kind := range []string{"stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			e, _ := everythingBehind(t, p, kind)
			a := newAsker("ada")
			a.hold = make(chan struct{})
			defer close(a.hold)
			ct, st := mcp.NewInMemoryTransports()
			runCtx, stop := context.WithCancel(t.Context())
			ran := make(chan error, 1)
			go func() { ran <- e.front.Run(runCtx, st) }()
			defer func() { stop(); <-ran }()
			a.open(t, ct, "2025-11-25", nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-elicitation-request", Arguments: map[string]any{}})
				done <- err
			}()
			select {
			case <-a.elicited:
			case <-time.After(20 * time.Second):
				t.Fatal("never asked")
			}
			cancel()
			select {
			case <-a.canceled:
			case <-time.After(20 * time.Second):
				t.Fatal("the elicitation was not cancelled with the call")
			}
			if err := <-done; err == nil {
				t.Error("the cancelled call succeeded")
			}
			if res := a.call(t, "echo", `{"message":"still here"}`); res.IsError || !strings.Contains(text(res), "still here") {
				t.Errorf("after the cancellation: %q", text(res))
			}
		})
	}
}
