package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// versionValidationErrorsAreResults is the first protocol revision in
// which input validation errors are tool execution errors (isError
// results, SEP-1303) rather than protocol errors.
const versionValidationErrorsAreResults = "2025-11-25"

// progressMessageMax caps the message of a progress notification.
const progressMessageMax = 200

// call serves tools/call for the tool registered as qualified.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, qualified string) (*mcp.CallToolResult, error) {
	args, err := decodeArguments(req.Params.Arguments)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidArguments, err.Error(), nil)
	}
	opts := gateway.CallOptions{Principal: s.principal(req), Front: FrontName, Timeout: s.opts.CallTimeout}
	if t := s.opts.Tracker; t != nil {
		t.CallStarted()
		defer t.CallFinished()
	}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		return s.callStreaming(ctx, req, qualified, args, opts, token)
	}
	res, err := s.backend.CallTool(ctx, qualified, args, opts)
	if err != nil {
		return s.failure(req, err)
	}
	return Result(res.Value), nil
}

// callStreaming calls through the stream path, reporting each event as
// progress, and returns the collected events as the result.
func (s *Server) callStreaming(ctx context.Context, req *mcp.CallToolRequest, qualified string, args map[string]any, opts gateway.CallOptions, token any) (*mcp.CallToolResult, error) {
	st, err := s.backend.CallToolStreaming(ctx, qualified, args, opts)
	if err != nil {
		return s.failure(req, err)
	}
	defer st.Close()
	var values []any
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.failure(req, err)
		}
		values = append(values, ev.Data)
		// A client that went away does not stop the call here; its
		// cancellation does (ctx).
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(len(values)),
			Message:       preview(ev.Data),
		})
	}
	if len(values) == 1 {
		return Result(values[0]), nil
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	for _, v := range values {
		if t, ok := textOf(v); ok {
			res.Content = append(res.Content, &mcp.TextContent{Text: t})
		}
	}
	return res, nil
}

// principal names the caller: the API key's principal over HTTP, else
// Options.Principal.
func (s *Server) principal(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil && req.Extra.TokenInfo.UserID != "" {
		return req.Extra.TokenInfo.UserID
	}
	return s.opts.Principal
}

// decodeArguments reads tools/call arguments: absent or null is none, an
// object is the arguments (numbers as json.Number), anything else is an
// error.
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return args, nil
}

// Result turns a tool's result value into an MCP result: a JSON object
// is structuredContent plus a text block with its JSON, a string a text
// block, null no content, and any other value a text block with its
// JSON. A json.RawMessage is decoded first.
func Result(v any) *mcp.CallToolResult {
	v = decodeRaw(v)
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	if v == nil {
		return res
	}
	if t, ok := textOf(v); ok {
		res.Content = append(res.Content, &mcp.TextContent{Text: t})
	}
	if m, ok := v.(map[string]any); ok {
		res.StructuredContent = m
	}
	return res
}

// decodeRaw decodes a json.RawMessage value (numbers as json.Number);
// other values are returned as they are.
func decodeRaw(v any) any {
	raw, ok := v.(json.RawMessage)
	if !ok {
		return v
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	if dec.Decode(&out) != nil {
		return string(raw)
	}
	return out
}

// textOf is a value as text: a string as it is, anything else as JSON.
func textOf(v any) (string, bool) {
	v = decodeRaw(v)
	if s, ok := v.(string); ok {
		return s, true
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v), true
	}
	return string(bytes.TrimRight(b.Bytes(), "\n")), true
}

// preview is an event's data as a progress message, cut to
// progressMessageMax bytes on a rune boundary.
func preview(v any) string {
	t, _ := textOf(v)
	if len(t) <= progressMessageMax {
		return t
	}
	t = t[:progressMessageMax]
	for len(t) > 0 && !utf8.ValidString(t) {
		t = t[:len(t)-1]
	}
	return t + "…"
}

// failure maps a failed call to an isError result or a JSON-RPC error
// (see the package documentation).
func (s *Server) failure(req *mcp.CallToolRequest, err error) (*mcp.CallToolResult, error) {
	var te *utcp.ToolError
	code := utcp.CodeOf(err)
	if code == utcp.CodeToolError && errors.As(err, &te) {
		return toolErrorResult(te), nil
	}
	_, env := httpx.Problem(err)
	body := env.Error
	switch code {
	case utcp.CodeToolNotFound, utcp.CodeAmbiguousTool, utcp.CodeInvalidRequest:
		return nil, rpcError(jsonrpc.CodeInvalidParams, body.Code, body.Message, body.Details)
	case utcp.CodeInvalidArguments:
		if v := req.ProtocolVersion(); v != "" && v < versionValidationErrorsAreResults {
			return nil, rpcError(jsonrpc.CodeInvalidParams, body.Code, body.Message, body.Details)
		}
	case utcp.CodeInternal:
		s.log.Error("MCP front: internal error", "tool", req.Params.Name, "err", err)
		return nil, rpcError(jsonrpc.CodeInternalError, body.Code, body.Message, nil)
	case utcp.CodeCanceled:
		return nil, rpcError(jsonrpc.CodeInternalError, body.Code, body.Message, nil)
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		&mcp.TextContent{Text: fmt.Sprintf("%s: %s", body.Code, body.Message)},
	}}
	return res, nil
}

// toolErrorResult is the isError result of a failure the tool reported:
// its message, then its own error value when it sent one that says more.
func toolErrorResult(te *utcp.ToolError) *mcp.CallToolResult {
	msg := te.Error()
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if te.Value != nil {
		if t, ok := textOf(te.Value); ok && t != msg && t != "null" {
			res.Content = append(res.Content, &mcp.TextContent{Text: t})
		}
	}
	return res
}

// rpcError is a JSON-RPC error whose data names the utcpd code.
func rpcError(rpcCode int64, code utcp.Code, message string, details map[string]any) error {
	if details == nil {
		details = map[string]any{}
	}
	data, err := json.Marshal(map[string]any{"code": code, "details": details})
	if err != nil {
		data, _ = json.Marshal(map[string]any{"code": code, "details": map[string]any{}})
	}
	return &jsonrpc.Error{Code: rpcCode, Message: message, Data: data}
}
