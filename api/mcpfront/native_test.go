package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// backendServer is an MCP server (go-sdk, Streamable HTTP on
// 127.0.0.1:0) standing for a third-party server behind utcpd. Its tool
// "rich" is listed with a title, annotations, icons and _meta and answers
// every kind of content block (annotations and _meta on them),
// structuredContent and a result _meta, after two progress notifications
// with total and message; "echo" answers its argument; "broken" answers
// an isError result with an image.
func backendServer(t *testing.T, name string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	no := false
	srv.AddTool(&mcp.Tool{
		Name: "rich", Title: "Rich tool", Description: "answers every kind of block",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"list":{"type":"array"}},"required":["n"]}`),
		Annotations:  &mcp.ToolAnnotations{Title: "Rich", ReadOnlyHint: true, DestructiveHint: &no, OpenWorldHint: &no},
		Icons:        []mcp.Icon{{Source: "https://example.com/rich.png", MIMEType: "image/png", Sizes: []string{"48x48"}}},
		Meta:         mcp.Meta{"vendor/key": "value"},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i, msg := range []string{"first half", "second half"} {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(5 * (i + 1)), Total: 10, Message: msg})
			}
		}
		size := int64(3)
		return &mcp.CallToolResult{
			Meta: mcp.Meta{"vendor/result": true},
			Content: []mcp.Content{
				&mcp.TextContent{Text: "hello", Annotations: &mcp.Annotations{Audience: []mcp.Role{"user"}, Priority: 0.5}, Meta: mcp.Meta{"vendor/block": 1}},
				&mcp.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png", Annotations: &mcp.Annotations{Priority: 1}},
				&mcp.AudioContent{Data: []byte{'R', 'I', 'F', 'F'}, MIMEType: "audio/wav"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "rich://doc", MIMEType: "text/plain", Text: "doc"}, Meta: mcp.Meta{"vendor/res": "x"}},
				&mcp.ResourceLink{URI: "rich://link", Name: "link", Title: "A link", MIMEType: "text/plain", Size: &size},
			},
			StructuredContent: json.RawMessage(`{"n":12345678901,"list":["a","b"]}`),
		}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + string(req.Params.Arguments)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "broken", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "it broke"},
				&mcp.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"},
			}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// mcpManual is an mcp manual template with one HTTP server per name.
func mcpManual(manual string, servers map[string]string) string {
	cfg := map[string]any{}
	for name, url := range servers {
		cfg[name] = map[string]any{"url": url}
	}
	b, _ := json.Marshal(map[string]any{"name": manual, "call_template_type": "mcp", "config": map[string]any{"mcpServers": cfg}})
	return string(b)
}

// connectTo opens a go-sdk client session to an MCP endpoint.
func connectTo(t *testing.T, url, pv string) *client {
	t.Helper()
	c := newClient()
	if err := c.open(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, pv); err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	return c
}

// wire is v as generic JSON, for comparisons.
func wire(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// toolNamed finds a listed tool.
func toolNamed(t *testing.T, tools []*mcp.Tool, name string) *mcp.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("tool %s not listed", name)
	return nil
}

// drain collects the progress notifications received so far.
func drain(c *client) []*mcp.ProgressNotificationParams {
	var out []*mcp.ProgressNotificationParams
	for {
		select {
		case p := <-c.progress:
			out = append(out, p)
		case <-time.After(200 * time.Millisecond):
			return out
		}
	}
}

// TestBackendFidelity: an MCP server behind utcpd looks, to a go-sdk
// client of the front, as it does directly: the tool's title,
// annotations, icons, _meta (plus utcpd's keys), description and
// schemas; the result block for block with structuredContent as sent
// and the result's _meta;
// progress with the server's progress, total and message and nothing of
// it in the result; an isError result with its image.
func TestBackendFidelity(t *testing.T) {
	url := backendServer(t, "rich")
	e := newEnv(t, envOptions{manuals: map[string]string{"be": mcpManual("be", map[string]string{"rich": url})}})
	// Both in the same revision, so that neither side adds what another
	// revision puts in every result (resultType, serverInfo in _meta).
	const pv = "2025-11-25"
	direct := connectTo(t, url, pv)
	front := e.mustConnect(pv)

	want := toolNamed(t, direct.tools(t), "rich")
	got := toolNamed(t, front.tools(t), "be.rich.rich")
	if got.Title != want.Title || got.Description != want.Description {
		t.Errorf("title/description %q/%q, want %q/%q", got.Title, got.Description, want.Title, want.Description)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"annotations", got.Annotations, want.Annotations},
		{"icons", got.Icons, want.Icons},
		{"inputSchema", got.InputSchema, want.InputSchema},
		{"outputSchema", got.OutputSchema, want.OutputSchema},
	} {
		if diff := cmp.Diff(wire(t, c.want), wire(t, c.got)); diff != "" {
			t.Errorf("%s (-direct +utcpd):\n%s", c.what, diff)
		}
	}
	if got.Meta["vendor/key"] != "value" || got.Meta[MetaQualifiedName] != "be.rich.rich" {
		t.Errorf("_meta = %v, want the server's and utcpd's keys", got.Meta)
	}

	for _, token := range []any{nil, "tok"} {
		t.Run(fmt.Sprintf("progress token %v", token), func(t *testing.T) {
			wantRes, err := direct.call(t, "rich", `{"n":1}`, token)
			if err != nil {
				t.Fatal(err)
			}
			wantProgress := drain(direct)
			gotRes, err := front.call(t, "be.rich.rich", `{"n":1}`, token)
			if err != nil {
				t.Fatal(err)
			}
			gotProgress := drain(front)
			if diff := cmp.Diff(wire(t, wantRes), wire(t, gotRes)); diff != "" {
				t.Errorf("result (-direct +utcpd):\n%s", diff)
			}
			if sc, _ := json.Marshal(gotRes.StructuredContent); !strings.Contains(string(sc), `"n":12345678901`) {
				t.Errorf("structuredContent %s lost the integer", sc)
			}
			if diff := cmp.Diff(wire(t, wantProgress), wire(t, gotProgress)); diff != "" {
				t.Errorf("progress (-direct +utcpd):\n%s", diff)
			}
			if token != nil && len(gotProgress) != 2 {
				t.Errorf("%d progress notifications, want the server's 2", len(gotProgress))
			}
		})
	}

	wantErr, err := direct.call(t, "broken", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	gotErr, err := front.call(t, "be.rich.broken", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wire(t, wantErr), wire(t, gotErr)); diff != "" {
		t.Errorf("isError result (-direct +utcpd):\n%s", diff)
	}
}

// TestNativeNames: Options.NativeNames lists one backend's tools exactly
// as it names them, beside the other tools; a configuration under which
// two backends' tools would share a name is refused by New.
func TestNativeNames(t *testing.T) {
	one, two := backendServer(t, "one"), backendServer(t, "two")
	e := newEnv(t, envOptions{
		manuals: map[string]string{"be": mcpManual("be", map[string]string{"one": one, "two": two})},
		front:   Options{NativeNames: []string{"be.one"}},
	})
	c := e.mustConnect("")
	names := map[string]bool{}
	for _, tool := range c.tools(t) {
		names[tool.Name] = true
	}
	for _, n := range []string{"rich", "echo", "broken", "be.two.echo", "demo.add"} {
		if !names[n] {
			t.Errorf("%s not listed; listed: %v", n, names)
		}
	}
	if names["be.one.echo"] {
		t.Error("be.one.echo is listed under its qualified name too")
	}
	res, err := c.call(t, "echo", `{"x":1}`, nil)
	if err != nil || text(res) != `one:{"x":1}` {
		t.Errorf("echo = %v, %v; want server one's answer", res, err)
	}

	_, err = New(t.Context(), Options{Gateway: e.g, NativeNames: []string{"be.one", "be.two"}})
	if err == nil || !strings.Contains(err.Error(), "collide") || !strings.Contains(err.Error(), "be.two.echo") {
		t.Errorf("New with colliding native names: %v, want a refusal naming the tools", err)
	}
	for _, bad := range [][]string{{"be"}, {"be.one", "be.one"}, {"be.one", "be.one.x"}} {
		if _, err := New(t.Context(), Options{Gateway: e.g, NativeNames: bad}); err == nil {
			t.Errorf("New with NativeNames %q: no error", bad)
		}
	}
}

// outputsManual is a text manual whose tools share an object outputs
// schema: "good" answers a matching object, "text" a string, "wrong" an
// object the schema refuses.
var outputsManual = func() string {
	tool := func(name, content string) map[string]any {
		return map[string]any{"name": name, "description": "d",
			"outputs":            map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"}},
			"tool_call_template": map[string]any{"call_template_type": "text", "content": content}}
	}
	manual, _ := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": []any{
		tool("good", `{"n": 1}`), tool("text", "just words"), tool("wrong", `{"n": "one"}`)}})
	tmpl, _ := json.Marshal(map[string]any{"name": "outs", "call_template_type": "text", "content": string(manual)})
	return string(tmpl)
}()

// TestOutputSchemaKept: a tool listed with an output schema answers
// structuredContent that validates, or an isError result saying what
// does not match; never a success without it.
func TestOutputSchemaKept(t *testing.T) {
	e := newEnv(t, envOptions{manuals: map[string]string{"outs": outputsManual}})
	c := e.mustConnect("")
	for _, tool := range []string{"outs.good", "outs.text", "outs.wrong"} {
		if toolNamed(t, c.tools(t), tool).OutputSchema == nil {
			t.Fatalf("%s listed without its output schema", tool)
		}
	}
	res, err := c.call(t, "outs.good", "", nil)
	if err != nil || res.IsError || res.StructuredContent == nil {
		t.Fatalf("good = %+v, %v; want structuredContent", res, err)
	}
	for _, tool := range []string{"outs.text", "outs.wrong"} {
		for _, token := range []any{nil, "p"} {
			res, err := c.call(t, tool, "", token)
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			if !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), "does not match its output schema") {
				t.Errorf("%s (token %v) = isError %v, structured %v, text %q; want an isError result naming the mismatch",
					tool, token, res.IsError, res.StructuredContent, text(res))
			}
		}
	}
}
