package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/utcp"
)

// richServer is an MCP server (go-sdk, Streamable HTTP on 127.0.0.1:0)
// whose tool "rich" is listed with a title, annotations, icons and _meta,
// and answers content blocks with annotations and _meta, structured
// content and a result _meta, after two progress notifications with
// total and message. Its tool "broken" answers an isError result with an
// image block.
func richServer(t *testing.T) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "rich", Version: "1"}, nil)
	destructive := false
	srv.AddTool(&sdk.Tool{
		Name: "rich", Title: "Rich tool", Description: "answers every kind of block",
		InputSchema: map[string]any{"type": "object"},
		Annotations: &sdk.ToolAnnotations{Title: "Rich", ReadOnlyHint: true, DestructiveHint: &destructive},
		Icons:       []sdk.Icon{{Source: "https://example.com/rich.png", MIMEType: "image/png", Sizes: []string{"48x48"}}},
		Meta:        sdk.Meta{"vendor/key": "value"},
	}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			for i, msg := range []string{"first", "second"} {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(10 * (i + 1)), Total: 20, Message: msg})
			}
		}
		return richResult(), nil
	})
	srv.AddTool(&sdk.Tool{Name: "broken", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{
				&sdk.TextContent{Text: "it broke"},
				&sdk.ImageContent{Data: []byte{1, 2, 3}, MIMEType: "image/png"},
			}}, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// richResult is what the tool "rich" answers.
func richResult() *sdk.CallToolResult {
	return &sdk.CallToolResult{
		Meta: sdk.Meta{"vendor/result": true},
		Content: []sdk.Content{
			&sdk.TextContent{Text: "hello", Annotations: &sdk.Annotations{Audience: []sdk.Role{"user"}, Priority: 0.5}, Meta: sdk.Meta{"vendor/block": 1}},
			&sdk.ImageContent{Data: []byte{0x89, 'P', 'N', 'G'}, MIMEType: "image/png", Annotations: &sdk.Annotations{Priority: 1}},
			&sdk.AudioContent{Data: []byte{'R', 'I', 'F', 'F'}, MIMEType: "audio/wav"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "rich://doc", MIMEType: "text/plain", Text: "doc"}, Meta: sdk.Meta{"vendor/res": "x"}},
			&sdk.ResourceLink{URI: "rich://link", Name: "link", Title: "A link", MIMEType: "text/plain"},
		},
		StructuredContent: map[string]any{"n": 12345678, "list": []any{"a", "b"}},
	}
}

func richTemplate(t *testing.T, url string) *utcp.CallTemplate {
	return parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"rich": map[string]any{"url": url},
	}}}))
}

// jsonOf decodes b (or encodes and decodes v) into generic JSON for
// comparisons.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return out
}

// TestNativeMetadataAndContent: a tool's title, annotations, icons and
// _meta reach utcp.Tool.MCP as listed; a result reaches utcp.Result.MCP
// block for block (annotations and _meta kept), structured content and
// the result's _meta as sent, while Value keeps its documented shape; an
// isError result's content reaches utcp.ToolError.MCP.
func TestNativeMetadataAndContent(t *testing.T) {
	url := richServer(t) // closed after the transport
	tr := newTestTransport(t, transports.Options{})
	tmpl := richTemplate(t, url)
	m := register(t, tr, tmpl)
	var rich *utcp.Tool
	for i := range m.Tools {
		if m.Tools[i].Name == "rich.rich" {
			rich = &m.Tools[i]
		}
	}
	if rich == nil {
		t.Fatalf("rich.rich not listed: %+v", m.Tools)
	}
	wantMeta := map[string]any{
		"title":       "Rich tool",
		"annotations": map[string]any{"title": "Rich", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": false},
		"icons":       []any{map[string]any{"src": "https://example.com/rich.png", "mimeType": "image/png", "sizes": []any{"48x48"}}},
		"_meta":       map[string]any{"vendor/key": "value"},
	}
	if diff := cmp.Diff(wantMeta, jsonOf(t, rich.MCP)); diff != "" {
		t.Errorf("Tool.MCP (-want +got):\n%s", diff)
	}
	if rich.Description != "answers every kind of block" {
		t.Errorf("description = %q", rich.Description)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := &utcp.Call{Tool: "m.rich.rich", Manual: "m", Name: "rich.rich", Template: tmpl}
	res, err := tr.CallTool(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	want := jsonOf(t, richResult())
	if diff := cmp.Diff(want, jsonOf(t, res.MCP)); diff != "" {
		t.Errorf("Result.MCP (-want +got):\n%s", diff)
	}
	v, ok := res.Value.(map[string]any)
	if !ok || v["content"] == nil || v["structured"] == nil {
		t.Errorf("Value = %#v; want the documented {content, structured} shape", res.Value)
	}

	// The stream: progress as sent (progress, total, message), then the
	// result with the same MCP result.
	st, err := tr.CallToolStream(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var progress []any
	var last *utcp.Event
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "progress" {
			progress = append(progress, jsonOf(t, ev.Data))
			continue
		}
		last = ev
	}
	wantProgress := []any{
		map[string]any{"progress": 10.0, "total": 20.0, "message": "first"},
		map[string]any{"progress": 20.0, "total": 20.0, "message": "second"},
	}
	if diff := cmp.Diff(wantProgress, progress); diff != "" {
		t.Errorf("progress events (-want +got):\n%s", diff)
	}
	if last == nil || last.Type != "result" {
		t.Fatalf("last event = %+v, want the result", last)
	}
	if diff := cmp.Diff(want, jsonOf(t, last.MCP)); diff != "" {
		t.Errorf("result event MCP (-want +got):\n%s", diff)
	}

	_, err = tr.CallTool(ctx, &utcp.Call{Tool: "m.rich.broken", Manual: "m", Name: "rich.broken", Template: tmpl})
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("broken: %v, want a *utcp.ToolError", err)
	}
	wantErr := map[string]any{"isError": true, "content": []any{
		map[string]any{"type": "text", "text": "it broke"},
		map[string]any{"type": "image", "data": "AQID", "mimeType": "image/png"},
	}}
	if diff := cmp.Diff(wantErr, jsonOf(t, te.MCP)); diff != "" {
		t.Errorf("ToolError.MCP (-want +got):\n%s", diff)
	}
}
