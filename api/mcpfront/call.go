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
	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

// versionValidationErrorsAreResults is the first protocol revision in
// which input validation errors are tool execution errors (isError
// results, SEP-1303) rather than protocol errors.
const versionValidationErrorsAreResults = "2025-11-25"

// progressMessageMax caps the message of a progress notification.
const progressMessageMax = 200

// call serves tools/call for the tool registered as qualified; check,
// when set, is the output schema the tool is listed with.
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, qualified string, check *outputCheck) (*mcp.CallToolResult, error) {
	if tracing.On() {
		var span trace.Span
		ctx, span = startCall(ctx, req, qualified)
		defer tracing.End(span, nil)
	}
	if caps, ok := wantsInputs(req); ok {
		// A 2026-07-28 client is asked with input-required results (inputs.go).
		return s.callWithInputs(ctx, req, caps, qualified, check)
	}
	if req.Params.RequestState != "" {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidRequest,
			"requestState is unknown or expired: the call it belonged to has ended; call the tool again without it", nil)
	}
	args, err := decodeArguments(req.Params.Arguments)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidArguments, err.Error(), nil)
	}
	opts := gateway.CallOptions{Principal: s.principal(req), Front: FrontName, Timeout: s.opts.CallTimeout}
	ctx = withPeer(ctx, req) // server requests during the call go to this client (peer.go)
	if t := s.opts.Tracker; t != nil {
		t.CallStarted()
		defer t.CallFinished()
	}
	return s.callWith(ctx, req, qualified, args, opts, check)
}

// callWith makes the call of req through the Backend, ctx carrying the
// call's Peer.
func (s *Server) callWith(ctx context.Context, req *mcp.CallToolRequest, qualified string, args map[string]any, opts gateway.CallOptions, check *outputCheck) (*mcp.CallToolResult, error) {
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		return s.callStreaming(ctx, req, qualified, args, opts, token, check)
	}
	res, err := s.backend.CallTool(ctx, qualified, args, opts)
	if err != nil {
		return s.failure(req, err)
	}
	return answer(res.Value, res.MCP, check), nil
}

// callStreaming calls through the stream path. A progress event (Type
// "progress", data {"progress", "total", "message"}, as the mcp transport
// reports a backend's notifications/progress) is sent on as the backend
// sent it and is no part of the result. Every other event is a piece of
// the result, reported as progress 1, 2, 3, ... (its data, cut, as the
// message) unless it is a result event (Type "result", the mcp
// transport's last); the result collects the pieces (one: as CallTool's,
// the MCP server's own result included; several: one text block each).
func (s *Server) callStreaming(ctx context.Context, req *mcp.CallToolRequest, qualified string, args map[string]any, opts gateway.CallOptions, token any, check *outputCheck) (*mcp.CallToolResult, error) {
	st, err := s.backend.CallToolStreaming(ctx, qualified, args, opts)
	if err != nil {
		return s.failure(req, err)
	}
	defer st.Close()
	var pieces []*utcp.Event
	numbered := 0
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.failure(req, err)
		}
		// A client that went away does not stop the call here; its
		// cancellation does (ctx).
		if p, ok := progressOf(ev); ok {
			p.ProgressToken = token
			_ = req.Session.NotifyProgress(ctx, p)
			continue
		}
		pieces = append(pieces, ev)
		if ev.Type == "result" {
			continue // the result itself, not progress
		}
		numbered++
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(numbered),
			Message:       preview(ev.Data),
		})
	}
	switch {
	case len(pieces) == 1:
		return answer(pieces[0].Data, pieces[0].MCP, check), nil
	case len(pieces) == 0:
		return answer(nil, nil, check), nil
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	for _, ev := range pieces {
		if t, ok := textOf(ev.Data); ok {
			res.Content = append(res.Content, &mcp.TextContent{Text: t})
		}
	}
	if check != nil {
		return schemaMismatch(res, errors.New("the tool streamed several values, not one object")), nil
	}
	return res, nil
}

// progressOf is the notification of a progress event: Type "progress"
// and data holding a numeric "progress", with "total" and "message" when
// present, the numbers as they were sent.
func progressOf(ev *utcp.Event) (*mcp.ProgressNotificationParams, bool) {
	if ev.Type != "progress" {
		return nil, false
	}
	m, ok := decodeRaw(ev.Data).(map[string]any)
	if !ok {
		return nil, false
	}
	progress, ok := number(m["progress"])
	if !ok {
		return nil, false
	}
	p := &mcp.ProgressNotificationParams{Progress: progress}
	if total, ok := number(m["total"]); ok {
		p.Total = total
	}
	if msg, ok := m["message"].(string); ok {
		p.Message = msg
	}
	return p, true
}

// number reads a JSON number (json.Number or float64).
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

// answer is the MCP result of a successful call: the backend's own MCP
// result when it sent one (native), block for block; else the value as
// Result shapes it, checked against the tool's listed output schema
// (check) when it has one: a value whose structuredContent would not
// validate is an isError result saying why, so a client never gets a
// success whose structuredContent contradicts the schema.
func answer(value any, native json.RawMessage, check *outputCheck) *mcp.CallToolResult {
	if res, ok := nativeResult(native); ok {
		res.IsError = false
		return res
	}
	res := Result(value)
	if check == nil {
		return res
	}
	if res.StructuredContent == nil {
		return schemaMismatch(res, errors.New("the result is not a JSON object"))
	}
	if err := check.check(res.StructuredContent); err != nil {
		return schemaMismatch(res, err)
	}
	return res
}

// schemaMismatch is the isError result of a value that does not match
// the output schema: what is wrong, then the value's text.
func schemaMismatch(res *mcp.CallToolResult, why error) *mcp.CallToolResult {
	out := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
		&mcp.TextContent{Text: "the tool's result does not match its output schema: " + why.Error()},
	}}
	out.Content = append(out.Content, res.Content...)
	return out
}

// nativeResult decodes a CallToolResult as an MCP server sent it
// (utcp.Result.MCP): its content blocks (annotations and _meta kept),
// its _meta and its structuredContent, which is passed on as the exact
// JSON received. False when raw is empty or not such a result.
func nativeResult(raw json.RawMessage) (*mcp.CallToolResult, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	if res, ok := plainTextResult(raw); ok {
		return res, true
	}
	res := &mcp.CallToolResult{}
	if err := json.Unmarshal(raw, res); err != nil {
		return nil, false
	}
	var structured struct {
		S json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &structured) == nil && len(structured.S) > 0 && !bytes.Equal(bytes.TrimSpace(structured.S), []byte("null")) {
		res.StructuredContent = structured.S
	} else {
		res.StructuredContent = nil
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res, true
}

// plainTextResult is nativeResult for the common result of text blocks
// alone ({"content":[{"type":"text","text":"..."}], "isError": false},
// with a structuredContent perhaps), decoded without the SDK's decoder,
// which allocates a 32 KiB buffer per value it decodes. False for any
// other shape (a block of another type, or with annotations or _meta; a
// _meta on the result; any other key), which the SDK decodes.
func plainTextResult(raw json.RawMessage) (*mcp.CallToolResult, bool) {
	if !json.Valid(raw) {
		return nil, false
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	ok := jsonx.EachField(raw, jsonx.SkipSpace(raw, 0), func(k, v []byte) bool {
		switch string(k) {
		case "content":
			if string(v) == "null" {
				return true
			}
			return jsonx.EachElement(v, 0, func(block []byte) bool {
				text, ok := jsonx.TextBlock(block)
				if ok {
					res.Content = append(res.Content, &mcp.TextContent{Text: text})
				}
				return ok
			})
		case "isError":
			switch string(v) {
			case "true":
				res.IsError = true
			case "false", "null":
			default:
				return false
			}
			return true
		case "structuredContent":
			if string(v) != "null" {
				res.StructuredContent = json.RawMessage(v)
			}
			return true
		}
		return false
	})
	return res, ok
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
	if v, ok := jsonx.DecodePlain(raw); ok {
		if args, ok := v.(map[string]any); ok {
			return args, nil
		}
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
		if res, ok := nativeResult(te.MCP); ok {
			res.IsError = true
			return res, nil
		}
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
	text := fmt.Sprintf("%s: %s", body.Code, body.Message)
	if code == utcp.CodeRateLimited {
		// "rate limited: retry after N s (...)" says it already.
		text = body.Message
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
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
