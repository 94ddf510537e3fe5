// Package utcpmanual serves the whole gateway as one UTCP v1.1 manual, so
// that any UTCP client registers utcpd once and calls every tool with the
// tool's own arguments, through the gateway's guard chain and audit log.
//
// Routes (every error is the httpx envelope):
//
//	GET  /utcp               the manual: {"utcp_version", "manual_version", "tools": [...]}
//	POST /utcp/call/{tool}   call one tool; the answer's body is the tool's result
//
// The manual lists every registered tool (there is no per-key tool
// scoping: a valid API key may call every tool) under its qualified name
// (manual.tool), with its own description, tags, inputs and outputs, and
// an http call template pointing back at the gateway:
//
//	{"call_template_type": "http", "http_method": "POST",
//	 "url": "<base>/utcp/call/<tool, path-escaped>",
//	 "content_type": "application/json", "body_field": "<see BodyField>",
//	 "headers": {"Content-Type": "application/json"},
//	 "auth": {"auth_type": "api_key", "api_key": "Bearer ${UTCPD_API_KEY}",
//	          "var_name": "Authorization", "location": "header"}}
//
// auth is present only when API keys guard the gateway, and carries a
// variable reference, never a key: a UTCP client resolves it in its own
// variables (namespaced by the name it gave the manual: a manual
// registered as "utcpd" reads utcpd_UTCPD_API_KEY). <base> is
// Options.PublicURL, else the request's scheme and Host.
//
// A UTCP http client sends the argument named by body_field as the JSON
// request body and every other argument as a query parameter. The call
// route reverses that: the body is the body_field argument, exactly; the
// query parameters become the other arguments, their JSON types restored
// from the tool's input schema (see decodeArgs for the rules, which also
// read the bracket notation axios, the TypeScript client's HTTP library,
// writes nested objects and arrays in). BodyField picks an object- or
// array-typed argument when the tool has one, so the most structured
// argument travels losslessly.
//
// GET /utcp carries a strong ETag (a SHA-256 of the body) and answers
// If-None-Match with 304, so clients poll cheaply. The rendered manual is
// cached per base URL and rebuilt after the tool set changes
// (gateway.Subscribe).
//
// A call runs through gateway.CallTool exactly like a REST call (guard,
// protocol check, input validation, audit under the API key's principal,
// front "utcp"), with the default call timeout and waiting for a human
// review when a guard asks for one. A failure the tool reports is 502
// tool_error whose details hold the tool's value; every other failure has
// the status httpx.Status gives its code.
package utcpmanual

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// Names and paths of this surface.
const (
	// ManualPath serves the manual.
	ManualPath = "/utcp"
	// CallPath is the call route's pattern; the manual's templates point
	// at CallPath with the tool's name in place of {tool}.
	CallPath = "/utcp/call/{tool}"
	// FrontName is the front name of calls made through this surface, in
	// the audit log and reviews.
	FrontName = "utcp"
	// APIKeyVariable is the variable the templates' auth refers to; UTCP
	// clients resolve it in their own configuration (namespaced by the
	// manual's name).
	APIKeyVariable = "UTCPD_API_KEY"
	// DefaultTimeout is a call's deadline when Options.Timeout is zero.
	DefaultTimeout = 30 * time.Second
)

// maxCached bounds the number of base URLs (Host headers) whose rendered
// manual is kept.
const maxCached = 16

// maxInfos bounds the per-tool schema cache of the call route.
const maxInfos = 4096

// CallTracker is told when a call starts and ends (the in-flight gauge).
// Its methods must be fast and safe for concurrent use.
type CallTracker interface {
	CallStarted()
	CallFinished()
}

// Options configure New. Gateway is required.
type Options struct {
	// Gateway lists and calls the tools.
	Gateway *gateway.Gateway
	// RequireAPIKey says the routes are behind API keys, so every call
	// template carries the api_key auth a client must send.
	RequireAPIKey bool
	// PublicURL is the gateway's address as clients reach it (scheme,
	// host and an optional path prefix, such as
	// "https://tools.example.com/utcpd"), used in the templates' URLs.
	// Empty: the request's scheme and Host.
	PublicURL string
	// MaxBodyBytes caps a call's body (default httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Timeout is a call's deadline, counted from the moment the guard
	// chain allowed it (default DefaultTimeout).
	Timeout time.Duration
	// Tracker, when set, counts calls in flight.
	Tracker CallTracker
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
}

// Handler serves the manual and the call route. Create it with New, mount
// it with Register; it is safe for concurrent use.
type Handler struct {
	g       *gateway.Gateway
	auth    bool
	public  string
	maxBody int64
	timeout time.Duration
	tracker CallTracker
	log     *slog.Logger

	gen    atomic.Uint64 // bumped on every change of the tool set
	cancel func()

	mu       sync.Mutex
	cache    map[cacheKey]*rendered // by base URL and caller's scope
	pieces   []toolPiece            // base-independent encoded tools, for toolsGen
	toolsGen uint64
	infos    map[string]*toolInfo // by the name the call route was given
	infoGen  uint64
}

// rendered is what is kept of the manual for one base URL at one
// generation: its head (up to the tools array), the base as it is written
// into each tool's URL, its length and ETag. The body itself is never held
// whole: serveManual writes it from the per-tool pieces.
type rendered struct {
	gen    uint64
	head   []byte
	base   []byte // JSON-escaped, without quotes
	pieces []toolPiece
	length int
	etag   string
}

// toolPiece is one tool's JSON split where the base URL goes: the manual
// holds before + base + after for it. def is the tool, for scopes.
type toolPiece struct {
	before, after []byte
	def           *utcp.Tool
}

// cacheKey names one rendering of the manual: a base URL as seen by a
// caller's scope (nil: every tool). Scopes are the daemon's, one per API
// key, so pointers name them.
type cacheKey struct {
	base  string
	scope *gateway.Scope
}

// manualTail ends the tools array and the manual.
const manualTail = "]}\n"

// writeTools writes the tools array's elements for base, separated by
// commas (without the brackets).
func writeTools(w io.Writer, base []byte, pieces []toolPiece) {
	for i, p := range pieces {
		if i > 0 {
			_, _ = w.Write(comma)
		}
		_, _ = w.Write(p.before)
		_, _ = w.Write(base)
		_, _ = w.Write(p.after)
	}
}

var comma = []byte(",")

// toolInfo is what the call route needs to know of a tool.
type toolInfo struct {
	schema    schema
	bodyField string
}

// New returns the handler for opts. It fails without a Gateway or with a
// PublicURL that is not an absolute http(s) URL without query or
// fragment.
func New(opts Options) (*Handler, error) {
	if opts.Gateway == nil {
		return nil, errors.New("utcpmanual: Options.Gateway is required")
	}
	public, err := checkPublicURL(opts.PublicURL)
	if err != nil {
		return nil, err
	}
	h := &Handler{g: opts.Gateway, auth: opts.RequireAPIKey, public: public, maxBody: opts.MaxBodyBytes,
		timeout: opts.Timeout, tracker: opts.Tracker, log: opts.Logger,
		cache: map[cacheKey]*rendered{}, infos: map[string]*toolInfo{}}
	if h.maxBody <= 0 {
		h.maxBody = httpx.DefaultMaxBodyBytes
	}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.cancel = opts.Gateway.Subscribe(func() { h.gen.Add(1) })
	return h, nil
}

// checkPublicURL validates a public URL and returns it without a
// trailing slash ("" stays "").
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#") {
		return "", fmt.Errorf("utcpmanual: the public URL %q must be an absolute http(s) URL without credentials, query or fragment", s)
	}
	if strings.ContainsAny(s, "${}") {
		return "", fmt.Errorf("utcpmanual: the public URL %q must not contain \"$\", \"{\" or \"}\" (UTCP clients read them as variables and path parameters)", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// Close stops following the gateway's tool changes; the manual then
// keeps the tool set it last rendered. Idempotent.
func (h *Handler) Close() {
	h.cancel()
}

// Register mounts the routes on rt, each wrapped by wrap (the API-key
// middleware; nil for none).
func (h *Handler) Register(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(next http.Handler) http.Handler { return next }
	}
	rt.Handle("GET "+ManualPath, wrap(http.HandlerFunc(h.serveManual)))
	rt.Handle("POST "+CallPath, wrap(http.HandlerFunc(h.call)))
	h.registerToolsets(rt, wrap)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpx.Logged(h.log, w, r, err)
}

// baseURL is the address the templates point at.
func (h *Handler) baseURL(r *http.Request) (string, error) {
	if h.public != "" {
		return h.public, nil
	}
	host := r.Host
	if host == "" || strings.IndexFunc(host, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune(".-:[]_", c))
	}) >= 0 {
		return "", httpx.Errorf(utcp.CodeInvalidRequest, "the Host header %q cannot address the gateway; set gateway.public_url", host).
			WithDetail("host", host)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + host, nil
}

func (h *Handler) serveManual(w http.ResponseWriter, r *http.Request) {
	base, err := h.baseURL(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	m := h.manual(base, gateway.ScopeFrom(r.Context()))
	hdr := w.Header()
	hdr.Set("ETag", m.etag)
	hdr.Set("Cache-Control", "private, no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), m.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	// Streamed from the per-tool pieces: a gateway with many tools is
	// never one body in memory (docs/security.md, "Discovery limits").
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(m.length))
	hdr.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	m.writeTo(bw)
	_ = bw.Flush()
}

// writeTo writes the manual's body.
func (m *rendered) writeTo(w io.Writer) {
	_, _ = w.Write(m.head)
	writeTools(w, m.base, m.pieces)
	_, _ = io.WriteString(w, manualTail)
}

// etagMatches implements If-None-Match's weak comparison against a strong
// etag: "*", or any listed tag equal to etag once a W/ prefix is dropped.
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// manual returns the rendered manual for base, from the cache while the
// tool set has not changed since it was rendered. It holds the tools
// scope allows (gateway.Scope), only.
func (h *Handler) manual(base string, scope *gateway.Scope) *rendered {
	if scope.All() {
		scope = nil
	}
	gen := h.gen.Load() // before listing: a change after this renders again
	h.mu.Lock()
	defer h.mu.Unlock()
	key := cacheKey{base, scope}
	if m := h.cache[key]; m != nil && m.gen == gen {
		return m
	}
	m := h.render(base, gen, scope)
	if len(h.cache) >= maxCached {
		clear(h.cache)
	}
	h.cache[key] = m
	return m
}

// jsonHeaders are the headers of every tool's call template (shared,
// read-only).
var jsonHeaders = map[string]string{"Content-Type": "application/json"}

// The manual's JSON shapes. Field sets are exactly UTCP's: the
// TypeScript client rejects unknown keys in a manual and in a tool.
type (
	manualTool struct {
		Name                string          `json:"name"`
		Description         string          `json:"description"`
		Tags                []string        `json:"tags"`
		Inputs              json.RawMessage `json:"inputs"`
		Outputs             json.RawMessage `json:"outputs"`
		AverageResponseSize *int            `json:"average_response_size,omitempty"`
		ToolCallTemplate    callTemplate    `json:"tool_call_template"`
	}
	callTemplate struct {
		Type        string `json:"call_template_type"`
		URL         string `json:"url"`
		Method      string `json:"http_method"`
		ContentType string `json:"content_type"`
		BodyField   string `json:"body_field"`
		// Headers always carries Content-Type: application/json, so that
		// a client sends it with an empty body too (the daemon refuses a
		// POST without it; docs/security.md, "Web pages").
		Headers map[string]string `json:"headers"`
		Auth    *apiKeyAuth       `json:"auth,omitempty"`
	}
	apiKeyAuth struct {
		Type     string `json:"auth_type"`
		APIKey   string `json:"api_key"`
		VarName  string `json:"var_name"`
		Location string `json:"location"`
	}
)

// render prepares the manual for base: tools sorted by name, the
// manual_version "1.0.0+<digest of the tools array>", a strong ETag over
// the whole body. Both digests are computed by hashing the pieces as they
// would be written, so no body is assembled. The base-independent pieces
// of each tool are encoded once per generation. Call with h.mu held.
func (h *Handler) render(base string, gen uint64, scope *gateway.Scope) *rendered {
	if h.pieces == nil || h.toolsGen != gen {
		list, defs := h.toolList()
		h.pieces = h.encodePieces(list, defs)
		h.toolsGen = gen
	}
	pieces := h.pieces
	if scope != nil {
		pieces = make([]toolPiece, 0, len(h.pieces))
		for _, p := range h.pieces {
			if scope.Allows(p.def) {
				pieces = append(pieces, p)
			}
		}
	}
	var eb bytes.Buffer
	enc := json.NewEncoder(&eb)
	enc.SetEscapeHTML(false) // as the tools are encoded
	_ = enc.Encode(base)
	esc := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(eb.Bytes()), []byte(`"`)), []byte(`"`))
	arr := sha256.New()
	arr.Write([]byte("["))
	writeTools(arr, esc, pieces)
	arr.Write([]byte("]"))
	digest := arr.Sum(nil)
	head := []byte(`{"utcp_version":"` + utcp.Version + `","manual_version":"1.0.0+` + hex.EncodeToString(digest[:6]) + `","tools":[`)
	m := &rendered{gen: gen, head: head, base: esc, pieces: pieces}
	body := sha256.New()
	cw := &countWriter{w: body}
	m.writeTo(cw)
	sum := body.Sum(nil)
	m.length, m.etag = cw.n, `"`+hex.EncodeToString(sum[:16])+`"`
	return m
}

// encodePieces encodes each tool (its URL holding only the path) and
// splits it just before the path, where render puts the base.
func (h *Handler) encodePieces(list []manualTool, defs []*utcp.Tool) []toolPiece {
	out := make([]toolPiece, 0, len(list))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range list {
		buf.Reset()
		if err := enc.Encode(&list[i]); err != nil {
			// Unreachable: every schema went through clientSchema.
			h.log.Error("encoding a tool of the UTCP manual", "tool", list[i].Name, "err", err)
			continue
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		// The template is the tool's last field, so its url is the last
		// match (a schema may hold the same bytes).
		at := bytes.LastIndex(b, urlMarker)
		if at < 0 {
			h.log.Error("encoding a tool of the UTCP manual: no url", "tool", list[i].Name)
			continue
		}
		at += len(urlMarker)
		out = append(out, toolPiece{before: bytes.Clone(b[:at]), after: bytes.Clone(b[at:]), def: defs[i]})
	}
	return out
}

// urlMarker precedes the URL in an encoded tool.
var urlMarker = []byte(`"tool_call_template":{"call_template_type":"http","url":"`)

// countWriter counts what passes through it.
type countWriter struct {
	w io.Writer
	n int
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}

// toolList returns the manual's tools sorted by name, each template's URL
// holding only the path (render prefixes the base), and their
// definitions. Every tool: render applies the caller's scope.
func (h *Handler) toolList() ([]manualTool, []*utcp.Tool) {
	tools := h.g.ListTools(context.Background())
	slices.SortFunc(tools, func(a, b *utcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	list := make([]manualTool, 0, len(tools))
	for _, t := range tools {
		list = append(list, h.manualTool(t, "/utcp/call/"+escapeSegment(t.Name)))
	}
	return list, tools
}

// manualTool is t as the manual lists it, called over HTTP POST at url
// (the API key header in its template when keys guard the front).
func (h *Handler) manualTool(t *utcp.Tool, url string) manualTool {
	var auth *apiKeyAuth
	if h.auth {
		auth = &apiKeyAuth{Type: "api_key", APIKey: "Bearer ${" + APIKeyVariable + "}", VarName: "Authorization", Location: "header"}
	}
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return manualTool{
		Name: t.Name, Description: t.Description, Tags: tags,
		Inputs: clientSchema(t.Inputs), Outputs: clientSchema(t.Outputs),
		AverageResponseSize: t.AverageResponseSize,
		ToolCallTemplate: callTemplate{
			Type: "http", URL: url, Method: http.MethodPost,
			ContentType: "application/json", BodyField: BodyField(t.Inputs), Headers: jsonHeaders, Auth: auth,
		},
	}
}

// escapeSegment escapes a tool name as one URL path segment, including
// "$" (UTCP clients substitute $VAR in a template's URL).
func escapeSegment(name string) string {
	return strings.ReplaceAll(url.PathEscape(name), "$", "%24")
}

// info returns the schema and body field of the tool the call route was
// given, or the zero schema and "body" when no tool has that name (the
// gateway's call then reports it, through the guard and audit). A tool
// outside the caller's scope (in ctx) has no name either, so that its
// arguments are read as a missing tool's.
func (h *Handler) info(ctx context.Context, name string) *toolInfo {
	if !gateway.ScopeFrom(ctx).All() {
		if _, err := h.g.Tool(ctx, name); err != nil {
			return &toolInfo{bodyField: "body"}
		}
	}
	gen := h.gen.Load()
	h.mu.Lock()
	if h.infoGen != gen {
		clear(h.infos)
		h.infoGen = gen
	}
	ti := h.infos[name]
	h.mu.Unlock()
	if ti != nil {
		return ti
	}
	t, err := h.g.Tool(ctx, name)
	if err != nil {
		return &toolInfo{bodyField: "body"}
	}
	s := parseSchema(t.Inputs)
	ti = &toolInfo{schema: s, bodyField: s.bodyField()}
	h.mu.Lock()
	if h.infoGen == gen {
		if len(h.infos) >= maxInfos {
			clear(h.infos)
		}
		h.infos[name] = ti
	}
	h.mu.Unlock()
	return ti
}

func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tool")
	h.callWith(w, r, h.info(r.Context(), name), func(args map[string]any, opts gateway.CallOptions) (*utcp.Result, error) {
		return h.g.CallTool(r.Context(), name, args, opts)
	})
}

// callWith serves a call route: the arguments from the query and body by
// ti, the call through callTool.
func (h *Handler) callWith(w http.ResponseWriter, r *http.Request, ti *toolInfo, callTool func(map[string]any, gateway.CallOptions) (*utcp.Result, error)) {
	args, err := decodeArgs(r.URL.Query(), ti.schema)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		h.fail(w, r, err)
		return
	}
	if buf.Len() > 0 {
		var v any
		if err := httpx.DecodeStrict(buf.Bytes(), &v); err != nil {
			h.fail(w, r, err)
			return
		}
		if _, dup := args[ti.bodyField]; dup {
			h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "the argument %q is both the request body and a query parameter", ti.bodyField).
				WithDetail("argument", ti.bodyField))
			return
		}
		if args == nil {
			args = map[string]any{}
		}
		args[ti.bodyField] = v
	}
	if h.tracker != nil {
		h.tracker.CallStarted()
		defer h.tracker.CallFinished()
	}
	res, err := callTool(args, gateway.CallOptions{Principal: httpx.Principal(r.Context()), Front: FrontName, Timeout: h.timeout})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := httpx.GetBuffer()
	defer httpx.PutBuffer(out)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res.Value); err != nil {
		h.fail(w, r, httpx.Errorf(utcp.CodeInternal, "encoding the result: %w", err))
		return
	}
	httpx.WriteRaw(w, http.StatusOK, "application/json", out.Bytes())
}
