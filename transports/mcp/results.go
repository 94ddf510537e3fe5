package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// callError maps a failed request to utcpd's errors.
func (s *server) callError(ctx context.Context, sess *session, tool string, err error) error {
	what := fmt.Sprintf("mcp: %s: tool %s", s.what(), tool)
	var we *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case s.ctx.Err() != nil:
		return s.errStopped()
	case sess != nil && sess.ctx.Err() != nil:
		return &utcp.TransportError{Err: fmt.Errorf("%s: the server's session ended during the call (%v)", what, err)}
	case errors.As(err, &we):
		return rpcError(what, tool, we)
	}
	var ue *utcp.Error
	if errors.As(err, &ue) {
		return err
	}
	return &utcp.TransportError{Err: fmt.Errorf("%s: %w", what, err)}
}

// rpcError maps a JSON-RPC error answer: method not found and an
// invalid-params error about the tool's name are tool_not_found, other
// invalid params invalid_arguments, protocol-level codes transport
// errors, and everything else the tool's failure.
func rpcError(what, tool string, we *jsonrpc.Error) error {
	switch {
	case we.Code == jsonrpc.CodeMethodNotFound:
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", what, we.Message, transports.ErrToolNotFound).WithDetail("tool", tool)
	case we.Code == jsonrpc.CodeInvalidParams && unknownTool(we.Message, tool):
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", what, we.Message, transports.ErrToolNotFound).WithDetail("tool", tool)
	case we.Code == jsonrpc.CodeInvalidParams:
		return utcp.NewError(utcp.CodeInvalidArguments, "%s: %s", what, we.Message).WithDetail("rpc_code", we.Code)
	case we.Code == jsonrpc.CodeParseError || we.Code == jsonrpc.CodeInvalidRequest || (we.Code <= -32000 && we.Code >= -32099):
		return &utcp.TransportError{Err: fmt.Errorf("%s: %s (JSON-RPC error %d)", what, we.Message, we.Code)}
	}
	v := map[string]any{"code": we.Code, "message": we.Message}
	if len(we.Data) > 0 {
		v["data"] = decodeJSON(we.Data, string(we.Data))
	}
	return &utcp.ToolError{Message: fmt.Sprintf("%s (JSON-RPC error %d)", we.Message, we.Code), Value: v}
}

// unknownTool reports whether msg is a server saying it does not know
// tool: "unknown tool "x"" (go-sdk), "Tool x not found" (TypeScript SDK),
// "no such tool".
func unknownTool(msg, tool string) bool {
	if !strings.Contains(msg, tool) {
		return false
	}
	l := strings.ToLower(msg)
	return strings.Contains(l, "unknown tool") || strings.Contains(l, "no such tool") ||
		(strings.Contains(l, "tool") && strings.Contains(l, "not found"))
}

// toolResult turns a tools/call result into a utcp result (Value and,
// for the MCP front, the result as the server sent it in MCP), or the
// tool's error.
func toolResult(s *server, tool string, res *sdk.CallToolResult) (*utcp.Result, error) {
	if res == nil {
		return &utcp.Result{}, nil
	}
	v := resultValue(res)
	native := nativeResult(res)
	if !res.IsError {
		return &utcp.Result{Value: v, MCP: native}, nil
	}
	msg := joinedText(res.Content)
	if unknownTool(msg, tool) {
		return nil, utcp.Errorf(utcp.CodeToolNotFound, "mcp: %s: %s: %w", s.what(), msg, transports.ErrToolNotFound).WithDetail("tool", tool)
	}
	if msg == "" {
		msg = fmt.Sprintf("mcp: %s: tool %s reported an error", s.what(), tool)
	}
	return nil, &utcp.ToolError{Message: msg, Value: v, MCP: native}
}

// nativeResult is res as MCP JSON (content blocks with their annotations
// and _meta, structuredContent, _meta, isError), nil when it does not
// encode. Protocol bookkeeping of the session it came over (resultType,
// multi-round-trip input requests) is no part of it.
func nativeResult(res *sdk.CallToolResult) json.RawMessage {
	if b, ok := plainNativeResult(res); ok {
		return b
	}
	return marshalNativeResult(res)
}

// marshalNativeResult is nativeResult through encoding/json, for any
// result.
func marshalNativeResult(res *sdk.CallToolResult) json.RawMessage {
	content := res.Content
	if content == nil {
		content = []sdk.Content{}
	}
	b, err := json.Marshal(struct {
		Meta              sdk.Meta      `json:"_meta,omitempty"`
		Content           []sdk.Content `json:"content"`
		StructuredContent any           `json:"structuredContent,omitempty"`
		IsError           bool          `json:"isError,omitempty"`
	}{res.Meta, content, res.StructuredContent, res.IsError})
	if err != nil {
		return nil
	}
	return b
}

// plainNativeResult is nativeResult, written without encoding/json, for
// a result of text blocks alone (no annotations or _meta on them, no
// _meta or structuredContent on it): the result plainToolResult reads.
// False for any other.
func plainNativeResult(res *sdk.CallToolResult) (json.RawMessage, bool) {
	if res.Meta != nil || res.StructuredContent != nil {
		return nil, false
	}
	b := make([]byte, 0, 64)
	b = append(b, `{"content":[`...)
	for i, c := range res.Content {
		t, ok := c.(*sdk.TextContent)
		if !ok || t.Meta != nil || t.Annotations != nil {
			return nil, false
		}
		b = jsonx.AppendTextBlock(b, i, t.Text)
	}
	b = append(b, ']')
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, '}'), true
}

// joinedText joins the text blocks of content with newlines.
func joinedText(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultValue is the JSON shape of a tools/call result:
//
//   - structuredContent, when present and every content block is text
//     (the text then repeats it);
//   - the text of a single text block, JSON-decoded when it is a JSON
//     object or array;
//   - nil for no content at all;
//   - otherwise {"content": [blocks as MCP JSON], "structured": ...}
//     (structured only when present).
func resultValue(res *sdk.CallToolResult) any {
	allText := true
	for _, c := range res.Content {
		if _, ok := c.(*sdk.TextContent); !ok {
			allText = false
		}
	}
	var structured any
	if res.StructuredContent != nil {
		structured = renumber(res.StructuredContent)
	}
	switch {
	case structured != nil && allText:
		return structured
	case structured == nil && len(res.Content) == 0:
		return nil
	case structured == nil && len(res.Content) == 1 && allText:
		return textValue(res.Content[0].(*sdk.TextContent).Text)
	}
	blocks := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		blocks = append(blocks, renumber(c))
	}
	out := map[string]any{"content": blocks}
	if structured != nil {
		out["structured"] = structured
	}
	return out
}

// resourceValue is the JSON shape of a resources/read result: the text
// of a single text content (JSON-decoded when it is an object or array),
// else {"contents": [contents as MCP JSON]}.
func resourceValue(res *sdk.ReadResourceResult) any {
	if res == nil {
		return nil
	}
	if len(res.Contents) == 1 && res.Contents[0] != nil && res.Contents[0].Blob == nil {
		return textValue(res.Contents[0].Text)
	}
	contents := make([]any, 0, len(res.Contents))
	for _, c := range res.Contents {
		contents = append(contents, renumber(c))
	}
	return map[string]any{"contents": contents}
}

// textValue decodes text when it is a JSON object or array.
func textValue(text string) any {
	trimmed := bytes.TrimSpace([]byte(text))
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return decodeJSON(trimmed, text)
	}
	return text
}

// decodeJSON decodes b (numbers as json.Number), or returns fallback when
// b is not one JSON value.
func decodeJSON(b []byte, fallback any) any {
	if !json.Valid(b) {
		return fallback
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fallback
	}
	return v
}

// renumber re-encodes v as JSON and decodes it with numbers as
// json.Number, the representation of every other value utcpd returns.
func renumber(v any) any {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return v
	}
	return decodeJSON(buf.Bytes(), v)
}

// maxQueuedEvents bounds the progress events a stream buffers for a slow
// reader; past it, the newest progress replaces the one before it.
const maxQueuedEvents = 1024

// stream is the transports.Stream of one CallToolStream.
type stream struct {
	cancel context.CancelFunc
	signal chan struct{} // one pending wake-up for Recv
	done   chan struct{} // closed when the call's goroutine returned

	mu       sync.Mutex
	queue    []*utcp.Event
	finished bool
	final    error
	closed   bool
	once     sync.Once
}

// errStreamClosed ends a stream the caller closed.
var errStreamClosed = utcp.NewError(utcp.CodeCanceled, "mcp: stream closed")

// push queues one event. It never blocks: past maxQueuedEvents the newest
// progress event replaces the one queued before it.
func (st *stream) push(ev *utcp.Event) {
	st.mu.Lock()
	switch {
	case st.closed || st.finished:
	case len(st.queue) >= maxQueuedEvents && ev.Type == "progress" && st.queue[len(st.queue)-1].Type == "progress":
		st.queue[len(st.queue)-1] = ev
	default:
		st.queue = append(st.queue, ev)
	}
	st.mu.Unlock()
	st.wake()
}

func (st *stream) wake() {
	select {
	case st.signal <- struct{}{}:
	default:
	}
}

// finish records the stream's end (io.EOF or the call's error).
func (st *stream) finish(err error) {
	st.mu.Lock()
	if !st.finished {
		st.finished, st.final = true, err
	}
	st.mu.Unlock()
	st.wake()
}

// Recv returns the next event, io.EOF after the result, or the call's
// error.
func (st *stream) Recv() (*utcp.Event, error) {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return nil, errStreamClosed
		}
		if len(st.queue) > 0 {
			ev := st.queue[0]
			st.queue[0] = nil
			st.queue = st.queue[1:]
			st.mu.Unlock()
			return ev, nil
		}
		if st.finished {
			err := st.final
			st.mu.Unlock()
			return nil, err
		}
		st.mu.Unlock()
		<-st.signal
	}
}

// Close cancels the call if it still runs (the server is sent
// notifications/cancelled) and waits for it to return. It is idempotent.
func (st *stream) Close() error {
	st.once.Do(func() {
		st.mu.Lock()
		st.closed = true
		st.queue = nil
		st.mu.Unlock()
		st.cancel()
		st.wake()
	})
	<-st.done
	return nil
}

// decodeCallToolResult decodes a tools/call result as the SDK's session
// does. The usual result, text blocks alone and perhaps isError, is
// decoded with encoding/json (the SDK's decoder allocates a 32 KiB
// buffer per value); any other shape (another block type, annotations,
// _meta, structuredContent, any other key) by the SDK's own decoder.
func decodeCallToolResult(raw json.RawMessage) (*sdk.CallToolResult, error) {
	if res, ok := plainToolResult(raw); ok {
		return res, nil
	}
	res := &sdk.CallToolResult{}
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, err
	}
	return res, nil
}

// plainToolResult decodes a result of text blocks alone with
// jsonx's scanner: false for any other shape.
func plainToolResult(raw json.RawMessage) (*sdk.CallToolResult, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	res := &sdk.CallToolResult{}
	ok := jsonx.EachField(raw, jsonx.SkipSpace(raw, 0), func(key, v []byte) bool {
		switch string(key) {
		case "content":
			res.Content = []sdk.Content{}
			return jsonx.EachElement(v, 0, func(block []byte) bool {
				t, ok := jsonx.TextBlock(block)
				if ok {
					res.Content = append(res.Content, &sdk.TextContent{Text: t})
				}
				return ok
			})
		case "isError":
			switch string(v) {
			case "true":
				res.IsError = true
			case "false":
				res.IsError = false
			default:
				return false
			}
			return true
		}
		return false
	})
	return res, ok && res.Content != nil
}
