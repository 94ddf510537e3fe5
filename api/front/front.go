// Package front is utcpd's REST front: searching, describing and calling
// tools over HTTP, under /v1/.
//
// Routes (every error is the httpx envelope):
//
//	GET  /v1/tools                 list (tags, limit, cursor) or search (q) the tools, one page
//	GET  /v1/tools/{name}          one tool, with its auth metadata
//	POST /v1/tools/{name}/call     call once: {"arguments": {...}} → {"result": ..., "is_error": bool}
//	POST /v1/tools/{name}/stream   call as a stream: text/event-stream of chunk events, then end or error
//	GET  /v1/reviews/{id}          a parked call's review: its status and, once it ran, its result
//	GET  /v1/resources             MCP servers' resources and resource templates (resources.go)
//	GET  /v1/resources/read?uri=   read one
//	GET  /v1/prompts               MCP servers' prompts
//	POST /v1/prompts/{name}/get    get one: {"arguments": {"k": "v"}}
//	POST /v1/completions           MCP completion/complete of a prompt or template argument
//
// Listing pages: without q the tools come sorted by qualified name (byte
// order), at most limit (default 100, at most 1,000) a page, and
// next_cursor, when present, is the cursor of the next page. The cursor
// is opaque; it holds the last name of the page, so it stays valid while
// tools are added or removed (a page starts after that name: a tool
// added before it is not seen, one removed is not repeated). With q the
// tools are ranked by the search and a cursor holds a position in that
// ranking, tied to the same q and tags. A malformed cursor, or one of
// another query, is invalid_request.
//
// Names with "/": a tool named gh.repos/get is reached as
// /v1/tools/gh.repos/get, /v1/tools/gh.repos/get/call and
// /v1/tools/gh.repos/get/stream as well as with the slash escaped
// (gh.repos%2Fget). SlashNames does that mapping: every path segment
// between /v1/tools/ and the last one is part of the name, and the last
// segment is the action when it is "call" or "stream" (else part of the
// name too). A tool whose name itself ends in "/call" or "/stream" is
// reached with that slash escaped.
//
// A failure the tool itself reports is a completed call: 200 with
// "is_error": true and the tool's error value (or message) as the result.
// Every other failure is an envelope with the status httpx.Status gives
// its code. The call's deadline is ?timeout= (a Go duration such as
// "5s"), capped by Options.MaxTimeout, default Options.DefaultTimeout,
// counted from the moment the guard chain allowed the call (a wait for a
// human review is bounded by the review timeout instead); a caller that
// disconnects cancels the backend call.
//
// Human review: when a guard asks for review, the request waits for the
// decision (up to the review timeout: then 403 guard_review_timeout, and
// nothing ran). With ?wait=false on /call it returns 202 {"review_id"} at
// once instead; once the review is approved the daemon runs the call and
// GET /v1/reviews/{id} reports the outcome and result. A caller sees only
// the reviews of its own calls (same API key).
//
// MCP-native forms (for "utcpd mcp --connect", which serves the tools to
// an MCP client): with ?mcp=true, GET /v1/tools and /v1/tools/{name} add
// each MCP tool's "mcp" metadata (title, annotations, icons, _meta as its
// server listed them); /call adds "mcp", the result as the MCP server
// sent it, beside "result"; /stream sends each chunk's data as {"type",
// "data", "mcp"} (type and mcp when set: "progress" events of an MCP
// server and its "result"). An answer in these forms carries the header
// Utcpd-MCP: 1. Without the parameter nothing changes.
package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults for Options.
const (
	// DefaultTimeout is a call's deadline when the request sets none.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout caps ?timeout= when Options.MaxTimeout is zero.
	DefaultMaxTimeout = 5 * time.Minute
	// DefaultLimit is the number of tools GET /v1/tools returns without
	// ?limit=.
	DefaultLimit = 100
	// MaxLimit is the largest ?limit= honoured; larger values are capped.
	MaxLimit = 1000
)

// CallTracker is told when a call starts and ends (for the in-flight
// gauge). Its methods must be fast and safe for concurrent use.
type CallTracker interface {
	CallStarted()
	CallFinished()
}

// Options configure the REST front. Gateway is required.
type Options struct {
	// Gateway carries the calls.
	Gateway *gateway.Gateway
	// MaxBodyBytes caps request bodies (default httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// DefaultTimeout is a call's deadline without ?timeout= (default
	// DefaultTimeout); MaxTimeout caps both (default DefaultMaxTimeout).
	DefaultTimeout, MaxTimeout time.Duration
	// Tracker, when set, counts calls in flight.
	Tracker CallTracker
	// Reviews, when set, serves GET /v1/reviews/{id}; without it that
	// route answers not_found.
	Reviews *review.Queue
	// Heartbeat is how often a stream with no event to send writes an SSE
	// comment line, so proxies keep the connection and a caller that went
	// away is noticed (default DefaultHeartbeat).
	Heartbeat time.Duration
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
}

// DefaultHeartbeat is the interval of the comment heartbeats on streams.
const DefaultHeartbeat = 15 * time.Second

// Handler serves the REST front. Create it with New and mount it with
// Register.
type Handler struct {
	g          *gateway.Gateway
	maxBody    int64
	defTimeout time.Duration
	maxTimeout time.Duration
	tracker    CallTracker
	reviews    *review.Queue
	heartbeat  time.Duration
	log        *slog.Logger

	// gen counts changes of the tool set; byName is the sorted
	// listing, rebuilt when gen moved.
	gen    atomic.Uint64
	byName sortedTools
}

// New returns the REST front for opts.
func New(opts Options) *Handler {
	h := &Handler{g: opts.Gateway, maxBody: opts.MaxBodyBytes, defTimeout: opts.DefaultTimeout,
		maxTimeout: opts.MaxTimeout, tracker: opts.Tracker, reviews: opts.Reviews, heartbeat: opts.Heartbeat, log: opts.Logger}
	if h.heartbeat <= 0 {
		h.heartbeat = DefaultHeartbeat
	}
	if h.maxBody <= 0 {
		h.maxBody = httpx.DefaultMaxBodyBytes
	}
	if h.maxTimeout <= 0 {
		h.maxTimeout = DefaultMaxTimeout
	}
	if h.defTimeout <= 0 {
		h.defTimeout = DefaultTimeout
	}
	h.defTimeout = min(h.defTimeout, h.maxTimeout)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.g != nil {
		// For the life of the gateway: the front has no Close, and a
		// subscription costs one map entry.
		h.g.Subscribe(func() { h.gen.Add(1) })
	}
	return h
}

// Register mounts the front's routes on rt, each wrapped by wrap (the
// API-key middleware; nil for none).
func (h *Handler) Register(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(next http.Handler) http.Handler { return next }
	}
	handle := func(pattern string, f http.HandlerFunc) { rt.Handle(pattern, wrap(f)) }
	handle("GET /v1/tools", h.list)
	handle("GET /v1/tools/{name}", h.tool)
	handle("POST /v1/tools/{name}/call", h.call)
	handle("POST /v1/tools/{name}/stream", h.stream)
	handle("GET /v1/reviews/{id}", h.review)
	h.registerResources(handle)
	h.registerToolsets(handle)
}

// Tool is a tool as the front shows it. Inputs and Outputs are JSON
// Schemas ({} when the tool gave none). Auth is set by GET
// /v1/tools/{name} only: the lifecycle metadata of the tool's effective
// auth, never credentials.
type Tool struct {
	// Name is the qualified name (manual.tool).
	Name string `json:"name"`
	// Description and Tags are the tool's, as its manual gave them.
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	// Inputs and Outputs are JSON Schemas.
	Inputs  json.RawMessage `json:"inputs"`
	Outputs json.RawMessage `json:"outputs"`
	// Auth is the effective auth's metadata (GET /v1/tools/{name} only).
	Auth *utcp.AuthMetadata `json:"auth,omitempty"`
	// MCP is the tool's utcp.Tool.MCP (with ?mcp=true only).
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// ToolList is the answer to GET /v1/tools: one page.
type ToolList struct {
	// Tools are the page's tools: sorted by qualified name when the
	// request has no q, else the matches best first.
	Tools []Tool `json:"tools"`
	// NextCursor is the ?cursor= of the next page; absent on the last
	// page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// CallRequest is the body of a call or stream request. An empty body is
// a call without arguments.
type CallRequest struct {
	// Arguments are the tool's arguments (numbers kept as json.Number).
	Arguments map[string]any `json:"arguments"`
}

// CallResponse is the answer to a completed call. IsError is true when
// the tool itself reported a failure; Result is then its error value, or
// its message when it gave none.
type CallResponse struct {
	// Result is the tool's result, or its error value or message.
	Result any `json:"result"`
	// IsError reports a failure the tool itself reported.
	IsError bool `json:"is_error"`
	// MCP is the result as an MCP server sent it (utcp.Result.MCP,
	// utcp.ToolError.MCP), with ?mcp=true only.
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// StreamEvent is the data of a /stream chunk event with ?mcp=true.
type StreamEvent struct {
	// Type is the event's type ("progress", "result"), "" when none.
	Type string `json:"type,omitempty"`
	// Data is the event's data, as a chunk carries it without ?mcp=true.
	Data any `json:"data"`
	// MCP is the result as an MCP server sent it (utcp.Event.MCP).
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// HeaderMCP marks an answer in the MCP-native forms (?mcp=true).
const HeaderMCP = "Utcpd-MCP"

// mcpParam reads ?mcp=.
func mcpParam(r *http.Request) (bool, error) {
	if r.URL.RawQuery == "" {
		return false, nil
	}
	s := r.URL.Query().Get("mcp")
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, httpx.Errorf(utcp.CodeInvalidRequest, "mcp must be true or false, got %q", s).WithDetail("parameter", "mcp")
	}
	return b, nil
}

var emptySchema = json.RawMessage("{}")

func toTool(t *utcp.Tool) Tool {
	out := Tool{Name: t.Name, Description: t.Description, Tags: t.Tags, Inputs: t.Inputs, Outputs: t.Outputs}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	if len(out.Inputs) == 0 {
		out.Inputs = emptySchema
	}
	if len(out.Outputs) == 0 {
		out.Outputs = emptySchema
	}
	return out
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpx.Logged(h.log, w, r, err)
}

func (h *Handler) tool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	t, err := h.g.Tool(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	native, err := mcpParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := toTool(t)
	auth, err := h.g.AuthMetadata(r.Context(), t.Name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out.Auth = &auth
	if native {
		out.MCP = t.MCP
		w.Header().Set(HeaderMCP, "1")
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// timeout returns the call's deadline from ?timeout=, capped.
func (h *Handler) timeout(r *http.Request) (time.Duration, error) {
	if r.URL.RawQuery == "" {
		return h.defTimeout, nil
	}
	s := r.URL.Query().Get("timeout")
	if s == "" {
		return h.defTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, httpx.Errorf(utcp.CodeInvalidRequest, "timeout must be a positive Go duration such as 5s or 250ms, got %q", s).
			WithDetail("parameter", "timeout")
	}
	return min(d, h.maxTimeout), nil
}

// prepare reads a call request: its deadline and arguments.
func (h *Handler) prepare(w http.ResponseWriter, r *http.Request) (time.Duration, map[string]any, error) {
	d, err := h.timeout(r)
	if err != nil {
		return 0, nil, err
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		return 0, nil, err
	}
	if buf.Len() == 0 {
		return d, nil, nil
	}
	if args, ok := decodeArguments(buf.Bytes()); ok {
		return d, args, nil
	}
	var req CallRequest
	if err := httpx.DecodeStrict(buf.Bytes(), &req); err != nil {
		return 0, nil, unwrappedHint(buf.Bytes(), err)
	}
	return d, req.Arguments, nil
}

// wrapHint is the hint of a call body that holds the arguments without
// their wrapper.
const wrapHint = `wrap the arguments: {"arguments": {...}}`

// unwrappedHint returns err, or for a body that is a JSON object without
// an "arguments" field (the tool's arguments sent bare, {"a": 1}) an
// invalid_request saying to wrap them.
func unwrappedHint(body []byte, err error) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || len(top) == 0 {
		return err
	}
	if _, ok := top["arguments"]; ok {
		return err
	}
	fields := make([]string, 0, len(top))
	for k := range top {
		if len(k) > 64 {
			k = strings.ToValidUTF8(k[:64], "") + "..."
		}
		fields = append(fields, k)
	}
	slices.Sort(fields)
	shown := fields
	if len(shown) > 5 {
		shown = shown[:5]
	}
	return httpx.Errorf(utcp.CodeInvalidRequest, "the body has no \"arguments\" field but %s: a call body is {\"arguments\": {...}}; %s",
		strings.Join(quoted(shown), ", "), wrapHint).WithDetail("field", fields[0]).WithDetail("hint", wrapHint)
}

// quoted returns every string of ss in Go quotes.
func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	h.callWith(w, r, h.g.CallTool)
}

// callFunc carries one call (gateway.Gateway.CallTool, or a toolset's).
type callFunc func(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error)

// streamFunc carries one streaming call.
type streamFunc func(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error)

// callWith serves POST .../{name}/call through callTool.
func (h *Handler) callWith(w http.ResponseWriter, r *http.Request, callTool callFunc) {
	wait, err := waitParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	native, err := mcpParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if native {
		w.Header().Set(HeaderMCP, "1")
	}
	d, args, err := h.prepare(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.tracker != nil {
		h.tracker.CallStarted()
		defer h.tracker.CallFinished()
	}
	ctx := r.Context()
	if tracing.On() {
		var span trace.Span
		ctx, span = startSpan(r, routeCall)
		defer func() { tracing.End(span, err) }()
	}
	res, err := callTool(ctx, r.PathValue("name"), args,
		gateway.CallOptions{Principal: httpx.Principal(r.Context()), Front: FrontName, Timeout: d, NoWait: !wait})
	if err != nil {
		var parked *review.ParkedError
		if !wait && errors.As(err, &parked) {
			writeParked(w, parked)
			return
		}
		if te := toolError(err); te != nil {
			writeResult(w, toolErrorValue(te), true, nativeOnly(native, te.MCP))
			return
		}
		h.fail(w, r, err)
		return
	}
	writeResult(w, res.Value, false, nativeOnly(native, res.MCP))
}

// nativeOnly is raw when the caller asked for the MCP-native forms.
func nativeOnly(native bool, raw json.RawMessage) json.RawMessage {
	if !native {
		return nil
	}
	return raw
}

// toolError returns the failure the tool itself reported, if err is one.
func toolError(err error) *utcp.ToolError {
	var te *utcp.ToolError
	if utcp.CodeOf(err) == utcp.CodeToolError && errors.As(err, &te) {
		return te
	}
	return nil
}

func toolErrorValue(te *utcp.ToolError) any {
	if te.Value != nil {
		return te.Value
	}
	return te.Error()
}

// writeResult writes a CallResponse without going through reflection for
// the envelope itself; native, when set, is its MCP member.
func writeResult(w http.ResponseWriter, v any, isError bool, native json.RawMessage) {
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	buf.WriteString(`{"result":`)
	if err := appendJSON(buf, v, 0); err != nil {
		httpx.WriteError(w, httpx.Errorf(utcp.CodeInternal, "encoding the result: %w", err))
		return
	}
	if isError {
		buf.WriteString(`,"is_error":true`)
	} else {
		buf.WriteString(`,"is_error":false`)
	}
	if len(native) > 0 && json.Valid(native) {
		buf.WriteString(`,"mcp":`)
		buf.Write(native)
	}
	buf.WriteString("}\n")
	httpx.WriteRaw(w, http.StatusOK, "application/json", buf.Bytes())
}

// The server-sent events of /stream.
const (
	eventChunk = "chunk"
	eventEnd   = "end"
	eventError = "error"
)

func (h *Handler) stream(w http.ResponseWriter, r *http.Request) {
	h.streamWith(w, r, h.g.CallToolStreaming)
}

// streamWith serves POST .../{name}/stream through callStream.
func (h *Handler) streamWith(w http.ResponseWriter, r *http.Request, callStream streamFunc) {
	native, err := mcpParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if native {
		w.Header().Set(HeaderMCP, "1")
	}
	d, args, err := h.prepare(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if h.tracker != nil {
		h.tracker.CallStarted()
		defer h.tracker.CallFinished()
	}
	ctx := r.Context()
	if tracing.On() {
		var span trace.Span
		ctx, span = startSpan(r, routeStream)
		defer func() { tracing.End(span, err) }()
	}
	st, err := callStream(ctx, r.PathValue("name"), args,
		gateway.CallOptions{Principal: httpx.Principal(r.Context()), Front: FrontName, Timeout: d})
	if err != nil && toolError(err) == nil {
		// Refused or not carried before anything streamed: a plain
		// envelope with its status.
		h.fail(w, r, err)
		return
	}
	// The call's deadline started when the guard chain allowed it.
	sse := newSSE(w, time.Now().Add(d))
	if err != nil {
		h.streamError(sse, r, err)
		return
	}
	defer st.Close()
	// A pump goroutine receives events one at a time and hands each over
	// unbuffered, so a slow caller holds the backend back (backpressure)
	// while this loop still writes heartbeats and notices the caller
	// leaving.
	type item struct {
		ev  *utcp.Event
		err error
	}
	items := make(chan item)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			ev, err := st.Recv()
			select {
			case items <- item{ev, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	for {
		var it item
		select {
		case it = <-items:
		case <-tick.C:
			if !sse.comment("heartbeat") {
				return // the client went away; Close cancels the call
			}
			continue
		case <-r.Context().Done():
			return // the client went away; Close cancels the call
		}
		if errors.Is(it.err, io.EOF) {
			sse.event(eventEnd, "", []byte("{}"))
			return
		}
		if it.err != nil {
			h.streamError(sse, r, it.err)
			return
		}
		var data []byte
		if native {
			data, err = json.Marshal(StreamEvent{Type: it.ev.Type, Data: it.ev.Data, MCP: it.ev.MCP})
		} else {
			data, err = json.Marshal(it.ev.Data)
		}
		if err != nil {
			h.streamError(sse, r, fmt.Errorf("encoding an event: %w", err))
			return
		}
		if !sse.event(eventChunk, it.ev.ID, data) {
			return // the client went away; Close cancels the call
		}
	}
}

// sseWriter writes server-sent events, flushing each.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	err error
}

// newSSE starts the event stream. The connection's write deadline (a
// server WriteTimeout) is moved to shortly after the call's deadline, so a
// long stream is not cut by a timeout meant for ordinary answers.
func newSSE(w http.ResponseWriter, deadline time.Time) *sseWriter {
	rc := http.NewResponseController(w)
	if !deadline.IsZero() {
		_ = rc.SetWriteDeadline(deadline.Add(10 * time.Second))
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: rc}
	_ = s.rc.Flush()
	return s
}

// event writes one event (data must be one line of JSON) and flushes it.
// It reports false once writing has failed.
func (s *sseWriter) event(name, id string, data []byte) bool {
	if s.err != nil {
		return false
	}
	b := s.buf[:0]
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, '\n')
	if id != "" && !strings.ContainsAny(id, "\r\n\x00") {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	s.buf = b
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return false
	}
	return true
}

// comment writes an SSE comment line (": text") and flushes it. It reports
// false once writing has failed.
func (s *sseWriter) comment(text string) bool {
	if s.err != nil {
		return false
	}
	if _, err := io.WriteString(s.w, ": "+text+"\n\n"); err != nil {
		s.err = err
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
		return false
	}
	return true
}

// streamError logs an internal error and writes err as an error event.
func (h *Handler) streamError(s *sseWriter, r *http.Request, err error) {
	if utcp.CodeOf(err) == utcp.CodeInternal {
		h.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.errorEvent(err)
}

// errorEvent writes err as an error event carrying the envelope.
func (s *sseWriter) errorEvent(err error) {
	_, env := httpx.Problem(err)
	data, merr := json.Marshal(env)
	if merr != nil {
		data = []byte(`{"error":{"code":"internal","message":"internal error","details":{}}}`)
	}
	s.event(eventError, "", data)
}
