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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
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
	cache    map[string]*rendered // by base URL
	tools    []manualTool         // base-independent, for toolsGen
	toolsGen uint64
	infos    map[string]*toolInfo // by the name the call route was given
	infoGen  uint64
}

// rendered is the manual for one base URL at one generation.
type rendered struct {
	gen  uint64
	body []byte
	etag string
}

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
		cache: map[string]*rendered{}, infos: map[string]*toolInfo{}}
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
	m := h.manual(base)
	hdr := w.Header()
	hdr.Set("ETag", m.etag)
	hdr.Set("Cache-Control", "private, no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), m.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	httpx.WriteRaw(w, http.StatusOK, "application/json", m.body)
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
// tool set has not changed since it was rendered.
func (h *Handler) manual(base string) *rendered {
	gen := h.gen.Load() // before listing: a change after this renders again
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.cache[base]; m != nil && m.gen == gen {
		return m
	}
	m := h.render(base, gen)
	if len(h.cache) >= maxCached {
		clear(h.cache)
	}
	h.cache[base] = m
	return m
}

// The manual's JSON shapes. Field sets are exactly UTCP's: the
// TypeScript client rejects unknown keys in a manual and in a tool.
// jsonHeaders are the headers of every tool's call template (shared,
// read-only).
var jsonHeaders = map[string]string{"Content-Type": "application/json"}

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

// render builds the manual for base: tools sorted by name, the
// manual_version "1.0.0+<digest of the tools>", a strong ETag over the
// whole body. The base-independent part of each tool is computed once
// per generation. Call with h.mu held.
func (h *Handler) render(base string, gen uint64) *rendered {
	if h.tools == nil || h.toolsGen != gen {
		h.tools = h.toolList()
		h.toolsGen = gen
	}
	list := make([]manualTool, len(h.tools))
	for i, t := range h.tools {
		list[i] = t
		list[i].ToolCallTemplate.URL = base + list[i].ToolCallTemplate.URL
	}
	var tb bytes.Buffer
	enc := json.NewEncoder(&tb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(list); err != nil {
		// Unreachable: every schema went through clientSchema.
		h.log.Error("encoding the UTCP manual", "err", err)
		tb.Reset()
		tb.WriteString("[]")
	}
	toolsJSON := bytes.TrimSpace(tb.Bytes())
	digest := sha256.Sum256(toolsJSON)
	var body bytes.Buffer
	body.Grow(len(toolsJSON) + 96)
	body.WriteString(`{"utcp_version":"` + utcp.Version + `","manual_version":"1.0.0+` + hex.EncodeToString(digest[:6]) + `","tools":`)
	body.Write(toolsJSON)
	body.WriteString("}\n")
	sum := sha256.Sum256(body.Bytes())
	return &rendered{gen: gen, body: body.Bytes(), etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// toolList returns the manual's tools sorted by name, each template's URL
// holding only the path (render prefixes the base).
func (h *Handler) toolList() []manualTool {
	tools := h.g.ListTools()
	slices.SortFunc(tools, func(a, b *utcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	var auth *apiKeyAuth
	if h.auth {
		auth = &apiKeyAuth{Type: "api_key", APIKey: "Bearer ${" + APIKeyVariable + "}", VarName: "Authorization", Location: "header"}
	}
	list := make([]manualTool, 0, len(tools))
	for _, t := range tools {
		tags := t.Tags
		if tags == nil {
			tags = []string{}
		}
		list = append(list, manualTool{
			Name: t.Name, Description: t.Description, Tags: tags,
			Inputs: clientSchema(t.Inputs), Outputs: clientSchema(t.Outputs),
			AverageResponseSize: t.AverageResponseSize,
			ToolCallTemplate: callTemplate{
				Type: "http", URL: "/utcp/call/" + escapeSegment(t.Name), Method: http.MethodPost,
				ContentType: "application/json", BodyField: BodyField(t.Inputs), Headers: jsonHeaders, Auth: auth,
			},
		})
	}
	return list
}

// escapeSegment escapes a tool name as one URL path segment, including
// "$" (UTCP clients substitute $VAR in a template's URL).
func escapeSegment(name string) string {
	return strings.ReplaceAll(url.PathEscape(name), "$", "%24")
}

// info returns the schema and body field of the tool the call route was
// given, or the zero schema and "body" when no tool has that name (the
// gateway's call then reports it, through the guard and audit).
func (h *Handler) info(name string) *toolInfo {
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
	t, err := h.g.Tool(name)
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
	ti := h.info(name)
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
	res, err := h.g.CallTool(r.Context(), name, args,
		gateway.CallOptions{Principal: httpx.Principal(r.Context()), Front: FrontName, Timeout: h.timeout})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := httpx.GetBuffer()
	defer httpx.PutBuffer(out)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res.Value); err != nil {
		h.fail(w, r, httpx.Errorf(utcp.CodeInternal, "encoding the result: %v", err))
		return
	}
	httpx.WriteRaw(w, http.StatusOK, "application/json", out.Bytes())
}
