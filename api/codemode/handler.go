package codemode

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// MarshalJSON writes a success as {"result", "logs", "tool_calls"} and a
// failure as {"error": {"stage", "type", "message", "logs"},
// "tool_calls"}.
func (r *Response) MarshalJSON() ([]byte, error) {
	calls := r.ToolCalls
	if calls == nil {
		calls = []ToolCall{}
	}
	if r.Error != nil {
		e := *r.Error
		if e.Logs == nil {
			e.Logs = []string{}
		}
		return json.Marshal(struct {
			Error     *Error     `json:"error"`
			ToolCalls []ToolCall `json:"tool_calls"`
		}{&e, calls})
	}
	logs := r.Logs
	if logs == nil {
		logs = []string{}
	}
	return json.Marshal(struct {
		Result    any        `json:"result"`
		Logs      []string   `json:"logs"`
		ToolCalls []ToolCall `json:"tool_calls"`
	}{r.Result, logs, calls})
}

// Handler serves CodeMode over HTTP. Create it with NewHandler and mount
// it with Register.
type Handler struct {
	r       *Runner
	maxBody int64
	log     *slog.Logger
}

// NewHandler returns the HTTP handler of r. maxBody caps request bodies
// (0: httpx.DefaultMaxBodyBytes); log receives internal errors (nil
// discards them).
func NewHandler(r *Runner, maxBody int64, log *slog.Logger) *Handler {
	if maxBody <= 0 {
		maxBody = httpx.DefaultMaxBodyBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{r: r, maxBody: maxBody, log: log}
}

// Register mounts POST /v1/codemode and GET /v1/codemode/interfaces on
// rt, each wrapped by wrap (the API-key middleware; nil for none).
//
// POST /v1/codemode answers 200 with the Response (a program's failure
// included: see Response.MarshalJSON); a request that cannot run is the
// error envelope (invalid_request 400, payload_too_large 413, canceled,
// timeout). GET /v1/codemode/interfaces answers Interfaces for the tools
// matching q and tags (search_tools), at most limit (default all).
func (h *Handler) Register(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(next http.Handler) http.Handler { return next }
	}
	rt.Handle("POST /v1/codemode", wrap(http.HandlerFunc(h.run)))
	rt.Handle("GET /v1/codemode/interfaces", wrap(http.HandlerFunc(h.interfaces)))
}

func (h *Handler) run(w http.ResponseWriter, r *http.Request) {
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	var req Request
	if buf.Len() == 0 {
		httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "the body is empty: send {\"code\": \"...\"}"))
		return
	}
	if err := httpx.DecodeStrict(buf.Bytes(), &req); err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	res, err := h.r.Run(r.Context(), Caller{Principal: httpx.Principal(r.Context())}, req)
	if err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

func (h *Handler) interfaces(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "limit must be a non-negative integer, got %q", s).WithDetail("parameter", "limit"))
			return
		}
		limit = n
	}
	var tags []string
	for _, v := range q["tags"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	httpx.WriteJSON(w, http.StatusOK, BuildInterfaces(h.r.SelectTools(r.Context(), q.Get("q"), limit, tags)))
}

// SelectTools returns the tools matching query and tags (every tool when
// both are empty), at most limit (0: all), within the caller's scope
// (gateway.ScopeFrom(ctx)).
func (r *Runner) SelectTools(ctx context.Context, query string, limit int, tags []string) []*utcp.Tool {
	if query == "" && len(tags) == 0 {
		tools := r.opts.Tools.ListTools(ctx)
		if limit > 0 && len(tools) > limit {
			tools = tools[:limit]
		}
		return tools
	}
	return r.opts.Tools.SearchTools(ctx, query, limit, tags)
}

// ToolDescription is the description of the codemode.run tool offered on
// the MCP front and in the LLM exports.
const ToolDescription = "Run a Lua 5.1 program that calls this gateway's tools with call_tool(\"manual.tool\", {args}) " +
	"and returns a result, in one round trip. Use it to chain several tool calls. search_tools(query, limit) and " +
	"list_tools() find tools; json.encode/json.decode and print (captured as logs) are available; os, io, " +
	"load and require are not. The answer is {result, logs, tool_calls} or {error: {stage, type, message, logs}}."

// ToolInputSchema is the JSON Schema of codemode.run's arguments.
var ToolInputSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"code":{"type":"string","description":"The Lua program; its return value is the result."},` +
	`"timeout_ms":{"type":"integer","minimum":0,"description":"Wall-clock deadline in milliseconds (0 or absent: the default)."},` +
	`"max_tool_calls":{"type":"integer","minimum":0,"description":"Most call_tool calls allowed (0 or absent: the default)."}` +
	`},"required":["code"]}`)

// Tool is codemode.run as a utcp.Tool (for listings and exports).
func Tool() *utcp.Tool {
	return &utcp.Tool{Name: ToolName, Description: ToolDescription, Inputs: ToolInputSchema, Tags: []string{"codemode"}}
}

// RequestFromArgs reads codemode.run's tool arguments (numbers as
// json.Number, float64 or int) into a Request.
func RequestFromArgs(args map[string]any) (Request, error) {
	var req Request
	code, ok := args["code"].(string)
	if !ok || code == "" {
		return req, utcp.NewError(utcp.CodeInvalidArguments, "codemode.run: code must be a non-empty string")
	}
	req.Code = code
	for _, k := range []string{"timeout_ms", "max_tool_calls"} {
		v, present := args[k]
		if !present || v == nil {
			continue
		}
		n, ok := intArg(v)
		if !ok || n < 0 {
			return req, utcp.NewError(utcp.CodeInvalidArguments, "codemode.run: %s must be a non-negative integer", k)
		}
		if k == "timeout_ms" {
			req.TimeoutMS = n
		} else {
			req.MaxToolCalls = int(min(n, 1<<30))
		}
	}
	for k := range args {
		if k != "code" && k != "timeout_ms" && k != "max_tool_calls" {
			return req, utcp.NewError(utcp.CodeInvalidArguments, "codemode.run: unknown argument %q", k)
		}
	}
	return req, nil
}

func intArg(v any) (int64, bool) {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	case float64:
		return int64(x), x == float64(int64(x))
	case int:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}
