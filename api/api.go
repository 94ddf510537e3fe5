// Package api is utcpd's HTTP surface on one listener: the admin API
// (/admin/..., package api/admin), the REST front (/v1/..., package
// api/front) and the operational endpoints (/healthz, /readyz, /metrics,
// /openapi.json). New assembles them; the daemon serves the handler it
// returns.
//
// Every error, on every route, is the envelope
// {"error": {"code": "...", "message": "...", "details": {...}}} with the
// status httpx.Status gives the code (the one mapping every surface uses).
// Unknown routes are 404 not_found, a wrong method 405 method_not_allowed
// with an Allow header, and a panic in a handler 500 internal (logged with
// its stack, never sent).
//
// Authentication:
//   - /admin/...: "Authorization: Bearer <Options.AdminToken>", compared in
//     constant time; without an admin token configured the admin API
//     refuses every request (401): loopback is not a credential.
//   - /v1/...: "Authorization: Bearer <key>" for one of Options.APIKeys or
//     Options.Keys when any is configured, else open; a missing or wrong
//     key is 401 unauthorized with a WWW-Authenticate challenge. A named
//     key's scope (gateway.Scope) travels in the request context and
//     decides every listing and call: what is outside it is answered as
//     what does not exist.
//   - /mcp (the MCP front, package api/mcpfront, Streamable HTTP): the
//     same API keys as /v1/; its refusals are JSON-RPC error objects, not
//     the envelope (see the package documentation).
//   - GET /utcp and POST /utcp/call/{tool} (the whole gateway as one UTCP
//     manual, package api/utcpmanual): the same API keys as /v1/.
//   - POST /v1/codemode and GET /v1/codemode/interfaces (CodeMode,
//     package api/codemode): the same API keys as /v1/.
//   - /ui/ (the web console, package api/console): a login page that
//     takes the admin token, then a session cookie and a CSRF token on
//     every form; GET / sends a browser (Accept: text/html) there.
//   - /healthz, /readyz, /metrics and /openapi.json are open: bind the
//     listener to loopback or put a proxy in front to restrict them.
//
// Every route is behind one perimeter (httpx.Perimeter): the Host must be
// a loopback name, an IP literal or a configured host, a browser Origin
// must be the daemon's own or a configured one (403 forbidden otherwise),
// and every POST, PUT or PATCH must be sent as application/json (415
// unsupported_media_type), empty bodies included — except that the
// console's forms under /ui/ may also be url-encoded. Request bodies are
// capped (Options.MaxBodyBytes, 413 payload_too_large) and must arrive
// within Options.ReadTimeout.
package api

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/api/console"
	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/api/llm"
	"github.com/utcpd/utcpd/api/mcpfront"
	"github.com/utcpd/utcpd/api/utcpmanual"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// Options configure New. Gateway is required; every other field has a
// default.
type Options struct {
	// Gateway serves every surface.
	Gateway *gateway.Gateway
	// AdminToken guards /admin/. Empty: the admin API refuses every
	// request.
	AdminToken string
	// APIKeys guard /v1/ when non-empty. An empty key is an error.
	APIKeys []string
	// Keys are named API keys (gateway.api_keys objects), accepted beside
	// APIKeys: each one's name is its callers' principal and its scope
	// decides what they list and call, on every front.
	Keys []gateway.APIKey
	// MaxBodyBytes caps request bodies (default 4 MiB).
	MaxBodyBytes int64
	// DefaultTimeout is a tool call's deadline without ?timeout= (default
	// 30 s); MaxTimeout caps it and ?timeout= (default 5 min). Discovery
	// through the admin API is bounded by admin.DefaultTimeout, or by
	// MaxTimeout when that is shorter.
	DefaultTimeout, MaxTimeout time.Duration
	// Ready reports whether the daemon is ready to serve (/readyz); nil
	// means always ready. It must be fast.
	Ready func() error
	// Degraded, when set and Ready passes, reports a problem that leaves
	// the daemon serving but not fully (the shared store unreachable, or
	// the SQLite store refusing writes: calls are served from memory,
	// writes fail): /readyz then answers 200 {"status": "degraded",
	// "reason": ...}, so that a load balancer keeps routing calls. It
	// must be fast.
	Degraded func() error
	// Observer, when set, counts registrations and calls in flight, and is
	// told the Gateway for its gauges. Install Observer.OnCall as
	// gateway.Options.OnCall for the per-call metrics and log lines; it
	// also feeds the web console's Traffic page (Observer.SetTap), which
	// stays empty without an Observer.
	Observer *Observer
	// Metrics serves /metrics. Default: the Observer's registry when it is
	// a prometheus.Gatherer, else prometheus.DefaultGatherer.
	Metrics http.Handler
	// Reviews, when set, serves the review routes (/admin/reviews...,
	// GET /v1/reviews/{id}); it should be the gateway's Options.Reviews.
	Reviews *review.Queue
	// Audit, when set, serves GET /admin/audit.
	Audit audit.Store
	// MCP tunes the MCP front served at /mcp (package api/mcpfront):
	// allowed origins, session limits, page size, names. Its Gateway,
	// APIKeys and Keys, CallTimeout (DefaultTimeout), MaxBodyBytes, Tracker,
	// Logger and Version are filled from the options above when unset.
	MCP mcpfront.Options
	// CodeMode tunes CodeMode (POST /v1/codemode, and the codemode.run
	// tool of the MCP front and the LLM exports): timeouts, tool-call,
	// instruction and memory limits. Its Tools is the Gateway.
	CodeMode codemode.Options
	// DisableCodeMode turns CodeMode off: no /v1/codemode routes, no
	// codemode.run tool on the MCP front or in the exports.
	DisableCodeMode bool
	// MCPCodeMode offers CodeMode on the MCP front as the tool
	// codemode.run (when MCP.CodeMode is not set and CodeMode is on). Off
	// by default: an MCP client is shown the tools behind the gateway and
	// nothing else unless asked.
	MCPCodeMode bool
	// PublicURL is the gateway's address as clients reach it (scheme,
	// host, optional path prefix), used in the call templates of the UTCP
	// manual at GET /utcp (package api/utcpmanual); empty: the request's
	// scheme and Host.
	PublicURL string
	// Logger receives internal errors and panics; nil discards them.
	Logger *slog.Logger
	// Version is reported by /healthz and in the OpenAPI document.
	Version string
	// StreamHeartbeat is how often an idle REST stream writes an SSE
	// comment (default 15 s).
	StreamHeartbeat time.Duration
	// ListenHost is the host of the listen address, accepted in the Host
	// header of every route besides loopback names and IP literals.
	ListenHost string
	// AllowedHosts are further host names accepted in the Host header
	// (gateway.allowed_hosts); see httpx.Perimeter.
	AllowedHosts []string
	// AllowedOrigins are the browser origins accepted on every route
	// besides the daemon's own (gateway.allowed_origins; "*": all).
	AllowedOrigins []string
	// ReadTimeout bounds how long a client may take to send a request
	// body (default httpx.DefaultReadTimeout).
	ReadTimeout time.Duration
}

// New returns the handler serving every HTTP surface of utcpd, configured
// by opts. It fails on an invalid configuration (no Gateway, an empty API
// key, negative limits, a default timeout above the maximum).
//
// The handler is also an io.Closer: Close ends the MCP fronts (their
// sessions, and the calls parked on input-required results, whose
// questions the MCP servers behind get declined). Close it after the
// HTTP server stopped and before the Gateway.
func New(opts Options) (http.Handler, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// server is the assembled surface; tests reach its router.
type server struct {
	router  *httpx.Router
	handler http.Handler
	closers []io.Closer // the MCP fronts
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close closes the MCP fronts. Idempotent.
func (s *server) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func newServer(opts Options) (*server, error) {
	if opts.Gateway == nil {
		return nil, errors.New("api: Options.Gateway is required")
	}
	for _, k := range opts.APIKeys {
		if k == "" {
			return nil, errors.New("api: an API key is empty")
		}
	}
	keys, err := httpx.NewAPIKeys(opts.APIKeys, opts.Keys)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	requireKeys := httpx.RequireKeys(keys, "utcpd")
	if opts.MaxBodyBytes < 0 || opts.DefaultTimeout < 0 || opts.MaxTimeout < 0 {
		return nil, errors.New("api: limits and timeouts must not be negative")
	}
	if opts.MaxTimeout == 0 {
		opts.MaxTimeout = front.DefaultMaxTimeout
	}
	if opts.DefaultTimeout == 0 {
		opts.DefaultTimeout = min(front.DefaultTimeout, opts.MaxTimeout)
	}
	if opts.DefaultTimeout > opts.MaxTimeout {
		return nil, fmt.Errorf("api: the default timeout %v is above the maximum %v", opts.DefaultTimeout, opts.MaxTimeout)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = httpx.DefaultMaxBodyBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	doc, err := openAPIDocument(opts.Version)
	if err != nil {
		return nil, err
	}

	rt := httpx.NewRouter()
	var recorder admin.Recorder
	var tracker front.CallTracker
	if opts.Observer != nil {
		opts.Observer.SetGateway(opts.Gateway)
		recorder, tracker = opts.Observer, opts.Observer
	}

	// The admin API always needs its token: loopback is not a
	// credential (a tool's own request to /admin comes from loopback
	// too). Without one configured it refuses every request.
	adminAuth := httpx.RefuseAll(utcp.CodeUnauthorized, "the admin API has no admin token configured, so it refuses every request: "+
		"start the daemon with $UTCPD_ADMIN_TOKEN, or let it create one in its data dir (admin-token)")
	if opts.AdminToken != "" {
		adminAuth = httpx.RequireToken(opts.AdminToken, "utcpd-admin")
	}
	admin.New(admin.Options{
		Gateway: opts.Gateway, MaxBodyBytes: opts.MaxBodyBytes, Timeout: min(admin.DefaultTimeout, opts.MaxTimeout),
		Recorder: recorder, Reviews: opts.Reviews, Audit: opts.Audit, Logger: log,
	}).Register(rt, adminAuth)

	front.New(front.Options{
		Gateway: opts.Gateway, MaxBodyBytes: opts.MaxBodyBytes,
		DefaultTimeout: opts.DefaultTimeout, MaxTimeout: opts.MaxTimeout,
		Tracker: tracker, Reviews: opts.Reviews, Heartbeat: opts.StreamHeartbeat, Logger: log,
	}).Register(rt, requireKeys)
	var runner *codemode.Runner
	if !opts.DisableCodeMode {
		cmOpts := opts.CodeMode
		cmOpts.Tools = opts.Gateway
		r, err := codemode.New(cmOpts)
		if err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
		runner = r
		codemode.NewHandler(runner, opts.MaxBodyBytes, log).Register(rt, requireKeys)
	}
	llm.New(llm.Options{
		Gateway: opts.Gateway, MaxBodyBytes: opts.MaxBodyBytes, Timeout: opts.DefaultTimeout, CodeMode: runner, Logger: log,
	}).Register(rt, requireKeys)

	um, err := utcpmanual.New(utcpmanual.Options{
		Gateway: opts.Gateway, RequireAPIKey: keys.Len() > 0, PublicURL: opts.PublicURL,
		MaxBodyBytes: opts.MaxBodyBytes, Timeout: opts.DefaultTimeout, Tracker: tracker, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	um.Register(rt, requireKeys)

	// The web console (/ui/): the admin token at its login page, the
	// same gateway, review queue and audit store as the admin API.
	con, err := console.New(console.Options{Gateway: opts.Gateway, AdminToken: opts.AdminToken, Reviews: opts.Reviews, Audit: opts.Audit,
		Recorder: recorder, CallTimeout: opts.DefaultTimeout, DiscoveryTimeout: min(admin.DefaultTimeout, opts.MaxTimeout),
		MaxBodyBytes: opts.MaxBodyBytes, PublicURL: opts.PublicURL, Logger: log.With("front", console.FrontName), Version: opts.Version})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if opts.Observer != nil {
		opts.Observer.SetTap(con.Record)
	}

	health, _ := json.Marshal(map[string]string{"status": "ok", "version": opts.Version})
	rt.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteRaw(w, http.StatusOK, "application/json", health)
	})
	rt.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if opts.Ready != nil {
			if err := opts.Ready(); err != nil {
				httpx.WriteError(w, httpx.Errorf(utcp.CodeUnavailable, "not ready: %w", err).WithDetail("reason", err.Error()))
				return
			}
		}
		out := readiness(opts.Gateway)
		if opts.Degraded != nil {
			if err := opts.Degraded(); err != nil {
				out.Status, out.Reason = "degraded", err.Error()
			}
		}
		httpx.WriteJSON(w, http.StatusOK, out)
	})
	metrics := opts.Metrics
	if metrics == nil {
		g := prometheus.DefaultGatherer
		if opts.Observer != nil && opts.Observer.gatherer != nil {
			g = opts.Observer.gatherer
		}
		metrics = promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
	}
	rt.Handle("GET /metrics", metrics)
	rt.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteRaw(w, http.StatusOK, "application/json", doc)
	})

	// The MCP front answers JSON-RPC, not the envelope, so it sits beside
	// the router rather than on it.
	mo := opts.MCP
	if mo.Gateway == nil && mo.Backend == nil {
		mo.Gateway = opts.Gateway
	}
	if mo.AllowedOrigins == nil {
		mo.AllowedOrigins = opts.AllowedOrigins
	}
	if mo.APIKeys == nil && mo.Keys == nil {
		mo.APIKeys, mo.Keys = opts.APIKeys, opts.Keys
	}
	if mo.CallTimeout == 0 {
		mo.CallTimeout = opts.DefaultTimeout
	}
	if mo.MaxBodyBytes == 0 {
		mo.MaxBodyBytes = opts.MaxBodyBytes
	}
	if mo.Tracker == nil && opts.Observer != nil {
		mo.Tracker = opts.Observer
	}
	if mo.Logger == nil {
		mo.Logger = log.With("front", mcpfront.FrontName)
	}
	if mo.Version == "" {
		mo.Version = opts.Version
	}
	if mo.CodeMode == nil && mo.Gateway != nil && runner != nil && opts.MCPCodeMode {
		mo.CodeMode = runner
	}
	mcpFront, err := mcpfront.New(context.Background(), mo)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	closers := []io.Closer{mcpFront}
	mux := http.NewServeMux()
	mux.Handle(mcpfront.Path, mcpFront.Handler())
	// Each toolset is a virtual MCP server of its own at /mcp/{toolset}
	// (api/mcpfront/toolset.go), with the same options.
	if mo.Gateway != nil {
		tso := mo
		tso.CodeMode = nil
		toolsets := mcpfront.NewToolsets(mo.Gateway, tso)
		closers = append(closers, toolsets)
		mux.Handle(mcpfront.ToolsetPrefix, toolsets)
	}
	// Tool names with "/" are routable with plain slashes
	// (front.SlashNames).
	mux.Handle(console.Path, con)
	mux.Handle("/", console.RedirectBrowsers(front.SlashNames(rt)))
	// One perimeter for every route (docs/security.md, "Web pages"):
	// Host, Origin and Content-Type are checked before any handler runs.
	perimeter := httpx.Perimeter{
		ListenHost: opts.ListenHost, PublicURL: opts.PublicURL,
		AllowedHosts: opts.AllowedHosts, AllowedOrigins: opts.AllowedOrigins,
		ReadTimeout: opts.ReadTimeout, FormPaths: []string{console.Path},
		Refuse: func(w http.ResponseWriter, r *http.Request, err *utcp.Error) {
			if r.URL.Path == mcpfront.Path || strings.HasPrefix(r.URL.Path, mcpfront.ToolsetPrefix) {
				mcpfront.Refuse(w, err)
				return
			}
			httpx.WriteError(w, err)
		},
	}
	return &server{router: rt, handler: httpx.Recover(log)(perimeter.Wrap(mux)), closers: closers}, nil
}

// Ready is the answer of /readyz while the daemon serves (200): ready, or
// degraded (with the reason) while it serves without being able to write
// its store. Either way the manuals' health is counted, and the failed and
// degraded manuals are named (at most maxReadyNames of each; the counts
// are complete): a manual failing does not make the daemon unready.
type Ready struct {
	// Status is "ready" or "degraded".
	Status string `json:"status"`
	// Reason says why the daemon is degraded.
	Reason string `json:"reason,omitempty"`
	// Manuals counts the manuals by health state.
	Manuals ReadyCounts `json:"manuals"`
	// FailedManuals and DegradedManuals name the failed and degraded
	// manuals, sorted.
	FailedManuals   []string `json:"failed_manuals"`
	DegradedManuals []string `json:"degraded_manuals"`
}

// ReadyCounts counts manuals by health state (gateway.HealthCounts).
type ReadyCounts struct {
	Total       int `json:"total"`
	Ready       int `json:"ready"`
	Discovering int `json:"discovering"`
	Failed      int `json:"failed"`
	Degraded    int `json:"degraded"`
}

// maxReadyNames caps the names /readyz lists of each state.
const maxReadyNames = 100

func readiness(g *gateway.Gateway) Ready {
	out := Ready{Status: "ready", FailedManuals: []string{}, DegradedManuals: []string{}}
	for _, s := range g.Statuses() {
		c := &out.Manuals
		c.Total++
		switch s.Health.State {
		case gateway.StateReady:
			c.Ready++
		case gateway.StateDiscovering:
			c.Discovering++
		case gateway.StateFailed:
			c.Failed++
			if len(out.FailedManuals) < maxReadyNames {
				out.FailedManuals = append(out.FailedManuals, s.Name)
			}
		case gateway.StateDegraded:
			c.Degraded++
			if len(out.DegradedManuals) < maxReadyNames {
				out.DegradedManuals = append(out.DegradedManuals, s.Name)
			}
		}
	}
	return out
}

//go:embed openapi.json
var openAPIJSON []byte

// openAPIDocument returns the embedded OpenAPI document with info.version
// set to version (when given).
func openAPIDocument(version string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIJSON, &doc); err != nil {
		return nil, fmt.Errorf("api: the embedded OpenAPI document: %w", err)
	}
	if info, ok := doc["info"].(map[string]any); ok && version != "" {
		info["version"] = version
	}
	return json.MarshalIndent(doc, "", "  ")
}
