package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// FrontName is the front recorded for calls made through this package
// (gateway.CallOptions.Front): audit records and reviews show "llm".
const FrontName = "llm"

// Defaults for Options.
const (
	// DefaultTimeout is each call's deadline when Options.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultParallel is how many calls of one request run at once when
	// Options.Parallel is zero.
	DefaultParallel = 8
)

// Options configure a Handler. Gateway is required.
type Options struct {
	// Gateway lists and calls the tools.
	Gateway *gateway.Gateway
	// MaxBodyBytes caps request bodies (default httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Timeout is each tool call's deadline (default DefaultTimeout).
	Timeout time.Duration
	// Parallel bounds the calls of one request running at once (default
	// DefaultParallel).
	Parallel int
	// CodeMode, when set, is exported as the tool codemode.run (function
	// name codemode__run) and runs its calls; it takes precedence over a
	// registered tool of that name.
	CodeMode *codemode.Runner
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
}

// Handler serves the LLM adapter routes. Create it with New and mount it
// with Register.
type Handler struct {
	g        *gateway.Gateway
	maxBody  int64
	timeout  time.Duration
	parallel int
	codemode *codemode.Runner
	log      *slog.Logger
	cache    Cache // the gateway's renderings and name mapping
}

// New returns the Handler for opts.
func New(opts Options) *Handler {
	h := &Handler{g: opts.Gateway, maxBody: opts.MaxBodyBytes, timeout: opts.Timeout, parallel: opts.Parallel, codemode: opts.CodeMode, log: opts.Logger}
	if h.maxBody <= 0 {
		h.maxBody = httpx.DefaultMaxBodyBytes
	}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	if h.parallel <= 0 {
		h.parallel = DefaultParallel
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Register mounts GET /v1/export/{provider} and POST
// /v1/llm/{provider}/tool_calls on rt, each wrapped by wrap (the API-key
// middleware; nil for none).
func (h *Handler) Register(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(next http.Handler) http.Handler { return next }
	}
	rt.Handle("GET /v1/export/{provider}", wrap(http.HandlerFunc(h.export)))
	rt.Handle("POST /v1/llm/{provider}/tool_calls", wrap(http.HandlerFunc(h.toolCalls)))
}

func provider(r *http.Request) (Provider, error) {
	p, err := ParseProvider(r.PathValue("provider"))
	if err != nil {
		return "", httpx.Errorf(utcp.CodeNotFound, "%w", err).WithDetail("provider", r.PathValue("provider"))
	}
	return p, nil
}

// namesOf computes the name mapping over all (every registered tool).
func namesOf(all []*utcp.Tool) *Names {
	qs := make([]string, len(all))
	for i, t := range all {
		qs[i] = t.Name
	}
	return NewNames(qs)
}

// ExportQuery is what GET /v1/export/{provider} and `utcpd tools export`
// select: the tools matching Q and Tags (search_tools), at most Limit
// (0: all), and the options.
type ExportQuery struct {
	// Q is the search query; empty selects every tool.
	Q string
	// Tags keep tools with at least one of them.
	Tags []string
	// Limit caps the number of tools; 0 means no limit.
	Limit int
	// Options are the export options.
	Options ExportOptions
	// CodeMode puts the codemode.run tool first, counted in Limit (and
	// leaves out a registered tool of that name).
	CodeMode bool
}

// ExportTools selects the tools of g by q and exports them in p's format,
// named by the mapping over every tool the caller's scope allows
// (gateway.ScopeFrom(ctx); so that execution, within the same scope,
// finds them). It renders every tool (a one-off export); the Handler's
// route gives the same bytes from its Cache.
func ExportTools(ctx context.Context, g *gateway.Gateway, p Provider, q ExportQuery) (json.RawMessage, error) {
	return exportTools(ctx, g, p, q, nil)
}

// exportTools is ExportTools, through c when it is not nil.
func exportTools(ctx context.Context, g *gateway.Gateway, p Provider, q ExportQuery, c *Cache) (json.RawMessage, error) {
	tools, all := selectTools(ctx, g, q)
	if c != nil {
		return c.Export(p, tools, all, q.Options)
	}
	return Export(p, tools, namesOf(all), q.Options)
}

// selectTools returns the tools an export query names (CodeMode's first
// when asked for) and every registered tool (for the name mapping).
func selectTools(ctx context.Context, g *gateway.Gateway, q ExportQuery) (tools, all []*utcp.Tool) {
	all = g.ListTools(ctx)
	if q.Q == "" && len(q.Tags) == 0 {
		tools = all
		if q.Limit > 0 && len(tools) > q.Limit {
			tools = tools[:q.Limit]
		}
	} else {
		tools = g.SearchTools(ctx, q.Q, q.Limit, q.Tags)
	}
	if q.CodeMode {
		tools = slices.DeleteFunc(slices.Clone(tools), func(t *utcp.Tool) bool { return t.Name == codemode.ToolName })
		tools = append([]*utcp.Tool{codemode.Tool()}, tools...)
		// codemode.run counts: Limit is the number of definitions.
		if q.Limit > 0 && len(tools) > q.Limit {
			tools = tools[:q.Limit]
		}
	}
	return tools, all
}

func (h *Handler) export(w http.ResponseWriter, r *http.Request) {
	p, err := provider(r)
	if err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	v := r.URL.Query()
	q := ExportQuery{Q: v.Get("q")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "limit must be a non-negative integer, got %q", s).WithDetail("parameter", "limit"))
			return
		}
		q.Limit = n
	}
	if s := v.Get("strict"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "strict must be true or false, got %q", s).WithDetail("parameter", "strict"))
			return
		}
		q.Options.Strict = b
	}
	q.CodeMode = h.codemode != nil
	if s := v.Get("codemode"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "codemode must be true or false, got %q", s).WithDetail("parameter", "codemode"))
			return
		}
		q.CodeMode = q.CodeMode && b
	}
	for _, s := range v["tags"] {
		for t := range strings.SplitSeq(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				q.Tags = append(q.Tags, t)
			}
		}
	}
	tools, all := selectTools(r.Context(), h.g, q)
	if name := v.Get("toolset"); name != "" {
		// A toolset's export: what it lists, named as it lists them
		// (execute them with ?toolset= on tool_calls).
		ts, err := h.g.ToolsetFor(r.Context(), name)
		if err != nil {
			httpx.Logged(h.log, w, r, err)
			return
		}
		tools, all = toolsetTools(r.Context(), ts, q)
	}
	n, write, err := h.cache.ExportPieces(p, tools, all, q.Options)
	if err != nil {
		httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInternal, "exporting the tools: %w", err))
		return
	}
	// Streamed from the cached per-tool renderings: no whole body is
	// assembled (docs/security.md, "Discovery limits").
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(n))
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	write(bw)
	_ = bw.Flush()
}

func (h *Handler) toolCalls(w http.ResponseWriter, r *http.Request) {
	p, err := provider(r)
	if err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	if buf.Len() == 0 {
		httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInvalidRequest, "the body is empty: send the model's response or assistant message"))
		return
	}
	req, err := ParseRequest(p, buf.Bytes())
	if err != nil {
		httpx.Logged(h.log, w, r, err)
		return
	}
	var outs []Outcome
	if name := r.URL.Query().Get("toolset"); name != "" {
		ts, err := h.g.ToolsetFor(r.Context(), name)
		if err != nil {
			httpx.Logged(h.log, w, r, err)
			return
		}
		outs = h.run(r.Context(), req.Calls, httpx.Principal(r.Context()), ts.Listed(r.Context()), ts.CallTool, false)
	} else {
		outs = h.Run(r.Context(), req.Calls, httpx.Principal(r.Context()))
	}
	reply, err := Reply(p, req, outs)
	if err != nil {
		httpx.Logged(h.log, w, r, httpx.Errorf(utcp.CodeInternal, "%w", err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, reply)
}

// Run runs calls through the gateway in parallel (at most
// Options.Parallel at once), as principal with front FrontName, and
// returns their outcomes in order. A function name outside the mapping,
// unusable arguments, and every failure of the call become the call's
// Outcome.Err.
func (h *Handler) Run(ctx context.Context, calls []Call, principal string) []Outcome {
	if len(calls) == 0 {
		return make([]Outcome, 0)
	}
	return h.run(ctx, calls, principal, h.g.ListTools(ctx), h.g.CallTool, h.codemode != nil)
}

// run is Run over the tools listed (the names map to them) through
// callTool; codeMode runs codemode.run itself.
func (h *Handler) run(ctx context.Context, calls []Call, principal string, listed []*utcp.Tool,
	callTool func(context.Context, string, map[string]any, gateway.CallOptions) (*utcp.Result, error), codeMode bool) []Outcome {
	outs := make([]Outcome, len(calls))
	if len(calls) == 0 {
		return outs
	}
	names := h.cache.Names(listed)
	sem := make(chan struct{}, h.parallel)
	var wg sync.WaitGroup
	for i, c := range calls {
		if c.ArgsErr != nil {
			outs[i].Err = utcp.Errorf(utcp.CodeInvalidArguments, "%s: %w", c.Name, c.ArgsErr)
			continue
		}
		q, ok := names.Qualified(c.Name)
		if !ok {
			outs[i].Err = utcp.NewError(utcp.CodeToolNotFound, "unknown tool %q", c.Name)
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if q == codemode.ToolName && codeMode {
				outs[i] = h.runCode(ctx, c.Args, principal)
				return
			}
			res, err := callTool(ctx, q, c.Args, gateway.CallOptions{Principal: principal, Front: FrontName, Timeout: h.timeout})
			if err != nil {
				outs[i].Err = err
				return
			}
			outs[i].Value = res.Value
		})
	}
	wg.Wait()
	return outs
}

// toolsetTools selects the tools of an export query from what the
// toolset lists (q searches its members), with the toolset's listing as
// the name mapping.
func toolsetTools(ctx context.Context, ts *gateway.Toolset, q ExportQuery) (tools, all []*utcp.Tool) {
	all = ts.Listed(ctx)
	tools = all
	if q.Q != "" {
		tools = ts.SearchTools(ctx, q.Q, q.Limit)
	}
	if q.Limit > 0 && len(tools) > q.Limit {
		tools = tools[:q.Limit]
	}
	return tools, all
}

// runCode runs one codemode.run call; its value is the CodeMode answer
// (codemode.Response as JSON: a failed program is a completed call whose
// answer holds "error").
func (h *Handler) runCode(ctx context.Context, args map[string]any, principal string) Outcome {
	req, err := codemode.RequestFromArgs(args)
	if err != nil {
		return Outcome{Err: err}
	}
	res, err := h.codemode.Run(ctx, codemode.Caller{Principal: principal}, req)
	if err != nil {
		return Outcome{Err: err}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return Outcome{Err: utcp.Errorf(utcp.CodeInternal, "encoding the CodeMode answer: %w", err)}
	}
	return Outcome{Value: json.RawMessage(raw)}
}
