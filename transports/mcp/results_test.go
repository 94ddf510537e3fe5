package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

func TestResultShapes(t *testing.T) {
	text := func(s string) *sdk.TextContent { return &sdk.TextContent{Text: s} }
	cases := []struct {
		name string
		res  *sdk.CallToolResult
		want any
	}{
		{"single text", &sdk.CallToolResult{Content: []sdk.Content{text("hello")}}, "hello"},
		{"single JSON object text", &sdk.CallToolResult{Content: []sdk.Content{text(`{"a": [1, 2.5]}`)}}, map[string]any{"a": []any{1.0, 2.5}}},
		{"JSON scalar text stays text", &sdk.CallToolResult{Content: []sdk.Content{text("42")}}, "42"},
		{"broken JSON stays text", &sdk.CallToolResult{Content: []sdk.Content{text("{nope")}}, "{nope"},
		{"no content", &sdk.CallToolResult{Content: []sdk.Content{}}, nil},
		{"structured wins over its text", &sdk.CallToolResult{Content: []sdk.Content{text(`{"t":1}`)}, StructuredContent: map[string]any{"t": 1}}, map[string]any{"t": 1.0}},
		{"structured without content", &sdk.CallToolResult{StructuredContent: []any{"x"}}, []any{"x"}},
		{"several texts", &sdk.CallToolResult{Content: []sdk.Content{text("a"), text("b")}},
			map[string]any{"content": []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "text", "text": "b"}}}},
		{"structured with an image keeps both", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: []byte{1}, MIMEType: "image/png"}}, StructuredContent: map[string]any{"k": "v"}},
			map[string]any{"content": []any{map[string]any{"type": "image", "data": "AQ==", "mimeType": "image/png"}}, "structured": map[string]any{"k": "v"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := normalize(resultValue(c.res))
			if diff := cmp.Diff(normalize(c.want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// Numbers come back as json.Number, like every other utcpd value.
	if v := resultValue(&sdk.CallToolResult{StructuredContent: map[string]any{"n": 12345678901234.0}}); v.(map[string]any)["n"] != json.Number("12345678901234") {
		t.Errorf("structured number = %#v, want json.Number", v.(map[string]any)["n"])
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		name string
		err  *jsonrpc.Error
		code utcp.Code
	}{
		{"go-sdk unknown tool", &jsonrpc.Error{Code: -32602, Message: `unknown tool "nope"`}, utcp.CodeToolNotFound},
		{"method not found", &jsonrpc.Error{Code: -32601, Message: "Method not found"}, utcp.CodeToolNotFound},
		{"invalid params", &jsonrpc.Error{Code: -32602, Message: "invalid params: a must be a number"}, utcp.CodeInvalidArguments},
		{"internal error", &jsonrpc.Error{Code: -32603, Message: "boom"}, utcp.CodeToolError},
		{"application error", &jsonrpc.Error{Code: 42, Message: "quota"}, utcp.CodeToolError},
		{"server error range", &jsonrpc.Error{Code: -32000, Message: "Bad Request"}, utcp.CodeTransportError},
	}
	for _, c := range cases {
		if got := utcp.CodeOf(rpcError("x", "nope", c.err)); got != c.code {
			t.Errorf("%s: code %s, want %s", c.name, got, c.code)
		}
	}
	if !errors.Is(rpcError("x", "nope", &jsonrpc.Error{Code: -32601}), transports.ErrToolNotFound) {
		t.Errorf("-32601 does not match ErrToolNotFound")
	}
	// Only requests that provably never reached the server are retried.
	rejected := &delivery{}
	rejected.rejected.Store(true)
	for _, c := range []struct {
		err  error
		d    *delivery
		want bool
	}{
		{fmt.Errorf("calling \"tools/call\": %w", &writeFailed{syscall.EPIPE}), &delivery{}, true},
		{fmt.Errorf("%w: calling \"tools/call\": client is closing", sdk.ErrConnectionClosed), &delivery{}, true},
		{errors.New("Bad Request"), rejected, true},
		{fmt.Errorf("calling \"tools/call\": %w", io.EOF), &delivery{}, false},
		{fmt.Errorf("calling \"tools/call\": %w", os.ErrClosed), &delivery{}, false},
	} {
		if got := undelivered(c.err, c.d); got != c.want {
			t.Errorf("undelivered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for msg, want := range map[string]bool{
		"MCP error -32602: Tool nope not found": true,
		`unknown tool "nope"`:                   true,
		"no such tool: nope":                    true,
		"Tool other not found":                  false,
		"MCP error -32602: Input validation error: Invalid arguments for tool nope": false,
	} {
		if got := unknownTool(msg, "nope"); got != want {
			t.Errorf("unknownTool(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestTapsSplitAnywhere(t *testing.T) {
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"utcpd-1","progress":2,"total":5,"message":"two"}}`
	other := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"progressToken"}]}}`
	for _, c := range []struct {
		name string
		wire string
		tap  func(r io.ReadCloser, fn func([]byte)) io.Reader
	}{
		{"stdio", progress + "\n" + other + "\n", func(r io.ReadCloser, fn func([]byte)) io.Reader {
			// The stdio connection reads the messages itself: the
			// stream it passes on is the messages it read, re-encoded.
			c := newLineConn(r, nopWriteCloser{}, 0, fn)
			var out bytes.Buffer
			for {
				msg, err := c.Read(context.Background())
				if err != nil {
					break
				}
				data, _ := jsonrpc.EncodeMessage(msg)
				out.Write(append(data, '\n'))
			}
			return &out
		}},
		{"sse", "id: 1\ndata: \n\nevent: message\ndata: " + progress + "\r\n\r\nevent: message\ndata: " + other + "\n\n", func(r io.ReadCloser, fn func([]byte)) io.Reader {
			return &sseTap{rc: r, fn: fn}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []any
			ss := &session{progress: map[string]func(*utcp.Event){"utcpd-1": func(ev *utcp.Event) { got = append(got, normalize(ev)) }}}
			r := c.tap(io.NopCloser(iotestOneByte(strings.NewReader(c.wire))), ss.onMessage)
			out, err := io.ReadAll(r)
			if err != nil || string(out) != c.wire {
				t.Fatalf("the tap changed the stream: %q, %v", out, err)
			}
			want := []any{map[string]any{"type": "progress", "data": map[string]any{"progress": 2.0, "total": 5.0, "message": "two"}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// iotestOneByte reads one byte at a time, so every split point is tried.
func iotestOneByte(r io.Reader) io.Reader { return oneByte{r} }

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }

// TestPlainNativeResultIsMarshals: the native result of text blocks is
// written byte for byte as json.Marshal writes it (every escape, no
// blocks, isError), and any other result is left to json.Marshal.
func TestPlainNativeResultIsMarshals(t *testing.T) {
	for _, res := range []*sdk.CallToolResult{
		{Content: []sdk.Content{&sdk.TextContent{Text: "Echo: hi"}}},
		{Content: []sdk.Content{&sdk.TextContent{Text: "a\n\"b\" <c> & \u2028 \xfe é"}, &sdk.TextContent{}}, IsError: true},
		{Content: []sdk.Content{}},
		{},
	} {
		got, ok := plainNativeResult(res)
		if !ok {
			t.Errorf("%+v: declined", res)
			continue
		}
		if want := marshalNativeResult(res); !bytes.Equal(got, want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		if !bytes.Equal(nativeResult(res), got) {
			t.Errorf("nativeResult %s, want %s", nativeResult(res), got)
		}
	}
	for _, res := range []*sdk.CallToolResult{
		{Content: []sdk.Content{&sdk.TextContent{Text: "x"}}, Meta: sdk.Meta{"k": 1}},
		{Content: []sdk.Content{&sdk.TextContent{Text: "x"}}, StructuredContent: map[string]any{"a": 1}},
		{Content: []sdk.Content{&sdk.TextContent{Text: "x", Meta: sdk.Meta{"k": 1}}}},
		{Content: []sdk.Content{&sdk.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}},
	} {
		if got, ok := plainNativeResult(res); ok {
			t.Errorf("%+v: written %s, want declined", res, got)
		}
	}
}
