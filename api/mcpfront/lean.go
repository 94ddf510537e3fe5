package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// The lean path: a tools/call on a JSON session (jsonSession) is served
// here, in front of the SDK's handler, decoded into a small struct
// (scanned when it is of the plain form, else with encoding/json) and
// answered with the same call code the SDK's tool handler runs
// (serveTool, through scopeMiddleware), because the SDK decodes every
// JSON-RPC value with a decoder that allocates a 32 KiB buffer. A result
// of text blocks is written by appending, byte for byte as json.Marshal
// would (appendPlainResponse). Whatever is not exactly such a call (a batch, another method,
// a progress token, per-request protocol metadata, an unknown tool, a
// body that does not decode, a header the SDK would refuse) goes to the
// SDK unchanged. A notifications/cancelled naming a call in flight here
// cancels it.

// jsonSessionInfo is a JSON session the front tracks: its SDK session,
// the principal that opened it, its idle timer (the front's, as the
// SDK's never sees the lean calls) and its lean calls in flight.
type jsonSessionInfo struct {
	ss   *mcp.ServerSession
	user string

	mu     sync.Mutex
	active int           // requests of the session being served
	timer  *time.Timer   // closes the session when idle; nil: never
	idle   time.Duration // the timer's duration

	calls leanCalls
}

// leanCalls are a session's lean calls in flight, by compact request id
// (compactID), so that a notifications/cancelled naming one cancels it.
type leanCalls struct {
	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

// add records the call key; false when one with that id is in flight
// (the SDK refuses a duplicate in-flight id).
func (c *leanCalls) add(key string, cancel context.CancelFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.calls[key]; dup {
		return false
	}
	if c.calls == nil {
		c.calls = map[string]context.CancelFunc{}
	}
	c.calls[key] = cancel
	return true
}

// done forgets the call key.
func (c *leanCalls) done(key string) {
	c.mu.Lock()
	delete(c.calls, key)
	c.mu.Unlock()
}

// cancel cancels the call key; false when none is in flight.
func (c *leanCalls) cancel(key string) bool {
	c.mu.Lock()
	cancel, ok := c.calls[key]
	c.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// cancelAll cancels every call in flight.
func (c *leanCalls) cancelAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.calls {
		cancel()
	}
}

// inFlight is how many calls are in flight (tests).
func (c *leanCalls) inFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// begin marks a request of the session as being served (the idle timer
// waits).
func (e *jsonSessionInfo) begin() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.active++
	if e.timer != nil {
		e.timer.Stop()
	}
}

// end marks a request as done; the last one restarts the idle timer.
func (e *jsonSessionInfo) end() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.active--
	if e.active == 0 && e.timer != nil {
		e.timer.Reset(e.idle)
	}
}

// cancelAll cancels the session's lean calls (the session ended).
func (e *jsonSessionInfo) cancelAll() { e.calls.cancelAll() }

// trackJSONSession records the JSON session id that r (an initialize
// request) opened.
func (s *Server) trackJSONSession(r *http.Request, id string) {
	var ss *mcp.ServerSession
	for x := range s.mcp.Sessions() {
		if x.ID() == id {
			ss = x
			break
		}
	}
	if ss == nil {
		return
	}
	e := &jsonSessionInfo{ss: ss}
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		e.user = ti.UserID
	}
	if idle := s.opts.SessionIdleTimeout; idle > 0 {
		e.idle = idle
		e.timer = time.AfterFunc(idle, func() {
			e.cancelAll()
			_ = ss.Close()
		})
	}
	s.jsonIDs.Store(id, e)
}

// leanCall is the shape of a JSON-RPC message the lean path serves.
type leanCall struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// decodeLeanCall decodes the JSON-RPC 2.0 message t, scanned when it is
// of the plain form (scanLeanCall), else with json.Unmarshal; false when
// it does not decode or is not JSON-RPC 2.0.
func decodeLeanCall(t []byte) (leanCall, bool) {
	msg, ok := scanLeanCall(t)
	if !ok && json.Unmarshal(t, &msg) != nil {
		return msg, false
	}
	return msg, msg.JSONRPC == "2.0"
}

// scanLeanCall reads the JSON-RPC message t as json.Unmarshal into a
// leanCall does, when t is valid JSON of the plain form: no key but
// jsonrpc, id, method and params, each once and spelt exactly so, and
// jsonrpc and method strings without escapes. id and params are copies,
// as json.Unmarshal's are: the stdio front reuses its line buffer while
// a call runs. False for anything else, which json.Unmarshal then reads
// (a key in other case, say, which it matches as well).
func scanLeanCall(t []byte) (leanCall, bool) {
	var msg leanCall
	if !json.Valid(t) {
		return msg, false
	}
	ok := jsonx.EachField(t, 0, func(k, v []byte) bool {
		ok := true
		switch string(k) {
		case "jsonrpc":
			msg.JSONRPC, ok = jsonx.PlainText(v)
		case "method":
			msg.Method, ok = jsonx.PlainText(v)
		case "id":
			msg.ID = bytes.Clone(v)
		case "params":
			msg.Params = bytes.Clone(v)
		default:
			return false
		}
		return ok
	})
	return msg, ok
}

// serveLean serves the POST r of the tracked JSON session e on the lean
// path and reports true, or reports false, r's body put back whole, for
// the SDK to serve.
func (s *Server) serveLean(w http.ResponseWriter, r *http.Request, e *jsonSessionInfo) bool {
	if s.leanOff.Load() || r.Method != http.MethodPost || len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	if jsonOK, streamOK := acceptsBoth(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	init := e.ss.InitializeParams()
	if init == nil || r.Header.Get(headerProtocolVersion) != init.ProtocolVersion {
		return false
	}
	user := ""
	ti := auth.TokenInfoFromContext(r.Context())
	if ti != nil {
		user = ti.UserID
	}
	if user != e.user || !s.sessionLive(e.ss) {
		return false
	}
	limit := s.opts.MaxBodyBytes
	if limit <= 0 {
		limit = 4 << 20
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > limit {
		return false
	}
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' {
		return false // a batch, or not JSON: the SDK answers
	}
	msg, ok := decodeLeanCall(t)
	if !ok {
		return false
	}
	switch msg.Method {
	case "notifications/cancelled":
		return s.leanCancel(w, e, msg)
	case "tools/call":
		return s.leanToolsCall(w, r, e, msg, ti)
	}
	return false
}

// leanCancel cancels the lean call a notifications/cancelled names and
// answers 202 as the SDK does; false for any other notification.
func (s *Server) leanCancel(w http.ResponseWriter, e *jsonSessionInfo, msg leanCall) bool {
	key, ok := cancelledKey(msg)
	if !ok {
		return false
	}
	if !e.calls.cancel(key) {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// leanToolsCall serves a tools/call of a tool the front published.
func (s *Server) leanToolsCall(w http.ResponseWriter, r *http.Request, e *jsonSessionInfo, msg leanCall, ti *auth.TokenInfo) bool {
	key, ok := compactID(msg.ID)
	if !ok {
		return false
	}
	params, p, ok := s.leanParams(msg)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if !e.calls.add(key, cancel) {
		return false // the SDK's: it refuses a duplicate in-flight id
	}
	defer e.calls.done(key)
	data := s.leanRun(ctx, e.ss, msg, params, p, &mcp.RequestExtra{TokenInfo: ti, Header: r.Header})
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
	return true
}

// leanParams decodes the params of the tools/call msg for the lean path,
// with the tool they name; false when the SDK must serve it.
func (s *Server) leanParams(msg leanCall) (*mcp.CallToolParamsRaw, published, bool) {
	params, plain := scanCallParams(msg.Params)
	if !plain {
		params = &mcp.CallToolParamsRaw{}
		if len(bytes.TrimSpace(msg.Params)) == 0 || json.Unmarshal(msg.Params, params) != nil {
			return nil, published{}, false
		}
	}
	if params.Meta != nil {
		// A progress token (progress notifications need the SDK's
		// stream) or per-request protocol metadata: the SDK's.
		if _, ok := params.Meta["progressToken"]; ok {
			return nil, published{}, false
		}
		for k := range params.Meta {
			if strings.HasPrefix(k, "io.modelcontextprotocol/") {
				return nil, published{}, false
			}
		}
	}
	s.syncMu.Lock()
	p, ok := s.tools[params.Name]
	s.syncMu.Unlock()
	if !ok {
		return nil, published{}, false // codemode.run, or a tool the SDK answers as unknown
	}
	return params, p, true
}

// scanCallParams reads tools/call params as json.Unmarshal into a
// CallToolParamsRaw does, when they are a JSON object (valid: a part of
// a message json.Valid accepted) of name, a string without escapes, and
// arguments, each at most once; false for anything else (a _meta among
// them), which json.Unmarshal then reads.
func scanCallParams(raw json.RawMessage) (*mcp.CallToolParamsRaw, bool) {
	p := &mcp.CallToolParamsRaw{}
	ok := jsonx.EachField(raw, 0, func(k, v []byte) bool {
		ok := true
		switch string(k) {
		case "name":
			p.Name, ok = jsonx.PlainText(v)
		case "arguments":
			p.Arguments = json.RawMessage(v)
		default:
			return false
		}
		return ok
	})
	return p, ok
}

// leanRun runs the tools/call msg of session ss through the handler the
// SDK would run (serveTool behind scopeMiddleware) and returns its
// JSON-RPC response as the SDK writes it.
func (s *Server) leanRun(ctx context.Context, ss *mcp.ServerSession, msg leanCall, params *mcp.CallToolParamsRaw, p published, extra *mcp.RequestExtra) []byte {
	req := &mcp.CallToolRequest{Session: ss, Params: params, Extra: extra}
	h := s.scopeMiddleware(func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		res, err := s.serveTool(ctx, req.(*mcp.CallToolRequest), p.def, p.check)
		if err != nil || res == nil {
			return nil, err
		}
		if res.Content == nil {
			res2 := *res
			res2.Content = []mcp.Content{} // as the SDK: no "null"
			res = &res2
		}
		return res, nil
	})
	res, err := h(ctx, "tools/call", req)
	s.leanServed.Add(1)
	if err == nil {
		if data, ok := appendPlainResponse(make([]byte, 0, 256), msg.ID, res); ok {
			return data
		}
	}
	out := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: msg.ID}
	if err != nil {
		out.Error = wireError(err)
	} else {
		out.Result = res
	}
	data, merr := json.Marshal(out)
	if merr != nil {
		out.Result, out.Error = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}
		data, _ = json.Marshal(out)
	}
	return data
}

// cancelledKey is the compact id of the request the notification
// notifications/cancelled msg names; false when it is not such a
// notification or names no request.
func cancelledKey(msg leanCall) (string, bool) {
	if len(msg.ID) > 0 {
		return "", false
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(msg.Params, &p) != nil {
		return "", false
	}
	return compactID(p.RequestID)
}

// wireError is err as the SDK's JSON-RPC layer writes it: a JSON-RPC
// error as it is, anything else its message with the code of a JSON-RPC
// error it wraps.
func wireError(err error) *jsonrpc.Error {
	if je, ok := err.(*jsonrpc.Error); ok {
		return je
	}
	out := &jsonrpc.Error{Message: err.Error()}
	var wrapped *jsonrpc.Error
	if errors.As(err, &wrapped) {
		out.Code = wrapped.Code
	}
	return out
}

// compactID is a JSON-RPC request id (a string or a number) as a map
// key; false for anything else (null, absent, an object).
func compactID(raw json.RawMessage) (string, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "", false
	}
	if n, ok := plainInteger(t); ok {
		return "n:" + n, true
	}
	if text, ok := jsonx.PlainText(t); ok {
		return "s:" + text, true
	}
	var v any
	if json.Unmarshal(t, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return "s:" + v, true
	case float64:
		return "n:" + string(t), true
	}
	return "", false
}

// sessionLive reports whether ss is still among the server's sessions.
func (s *Server) sessionLive(ss *mcp.ServerSession) bool {
	for x := range s.mcp.Sessions() {
		if x == ss {
			return true
		}
	}
	return false
}

// acceptsBoth reports whether the Accept values name application/json
// and text/event-stream (or wildcards), as the SDK requires of a POST.
func acceptsBoth(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, raw := range strings.Split(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return
}

// plainInteger is t when it is a JSON integer of at most 18 digits,
// without a sign or a leading zero: json.Unmarshal reads every such
// integer into a float64 without error, so compactID keys it as it would
// through json.Unmarshal, and json.Marshal writes it as it is.
func plainInteger(t []byte) (string, bool) {
	if len(t) == 0 || len(t) > 18 || (t[0] == '0' && len(t) > 1) {
		return "", false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return string(t), true
}

// appendPlainResponse appends to b the JSON-RPC response of id with the
// tools/call result res exactly as json.Marshal writes leanRun's
// response, when both are of the plain form the calls of most tools
// answer: an id that is an integer or a string encoding/json writes as it
// is, and a result of text blocks alone (no _meta, annotations or
// input requests), with a structuredContent as raw JSON perhaps. False
// for anything else, which json.Marshal then writes.
func appendPlainResponse(b []byte, id json.RawMessage, result any) ([]byte, bool) {
	res, ok := result.(*mcp.CallToolResult)
	if !ok || res == nil || res.Meta != nil || res.InputRequests != nil || res.RequestState != "" {
		return nil, false
	}
	if _, ok := plainInteger(id); !ok {
		text, plain := jsonx.PlainString(id)
		if !plain || !jsonx.Unescaped(string(text), true) {
			return nil, false
		}
	}
	var structured json.RawMessage
	switch sc := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if sc == nil {
			return nil, false // json.Marshal writes it as null
		}
		structured = sc
	default:
		return nil, false
	}
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":{"content":[`...)
	for i, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok || t.Meta != nil || t.Annotations != nil {
			return nil, false
		}
		b = jsonx.AppendTextBlock(b, i, t.Text)
	}
	b = append(b, ']')
	if structured != nil {
		b = append(b, `,"structuredContent":`...)
		if b, ok = jsonx.AppendMarshaledRaw(b, structured); !ok {
			return nil, false
		}
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	return append(b, "}}"...), true
}
