// Package console is utcpd's web console, served by the daemon itself
// under /ui/: server-rendered html/template pages with one small script
// of its own, every asset embedded (go:embed), nothing fetched from the
// network, no third-party JavaScript or CSS.
//
// Pages (every one needs a session, see below):
//
//	GET  /ui/login, POST /ui/login   the admin token in, a session cookie out
//	POST /ui/logout                  end the session
//	GET  /ui/manuals                 every manual: state, last error, tool count, source, transport; add one
//	POST /ui/manuals                 register a pasted call template, or a URL with its type
//	GET  /ui/manual?name=            one manual: redacted template, tools, variables; replace, refresh, delete
//	POST /ui/manual/{replace,refresh,delete}
//	GET  /ui/tools?q=&tags=&page=    list or search the tools (gateway.SearchTools, as GET /v1/tools)
//	GET  /ui/tool?name=              one tool: description, tags, schemas, redacted template, a form for its inputs
//	POST /ui/call?name=              call it: {"arguments": {...}} → {"result", "is_error"} or an error envelope
//	POST /ui/stream?name=            call it as a stream: one JSON object a line, event by event
//	GET  /ui/reviews                 pending reviews (redacted arguments, the guard's reason), history
//	POST /ui/reviews/decide          approve or deny with a note
//	GET  /ui/audit?...               the audit log: tool, manual, outcome, decision, principal, time range; paged
//	GET  /ui/traffic                 calls/s, error rate, p50/p99 per tool, top tools, guard decisions (SVG)
//	GET  /ui/traffic/events          the same panel, live, as server-sent events
//	GET  /ui/static/...              the embedded script, style sheet and icon
//
// The console calls the gateway, the review queue and the audit store
// through the same Go interfaces as the admin API (api/admin) and the
// REST front (api/front): a tool call from the console is
// gateway.CallTool with Front "console" and the admin principal, so the
// guard chain, the protocol check and the audit apply as on every front.
// Registration errors are the admin API's (admin.CheckTemplate,
// admin.ReadOnly and the gateway's own messages).
//
// Security (docs/security.md, "The web console"):
//   - Logging in takes the admin token (compared in constant time, as
//     SHA-256 digests); without an admin token configured every login is
//     refused. A login sets a session cookie: HttpOnly, SameSite=Strict,
//     Path=/ui/, Secure when served over TLS or when the public URL is
//     https. Sessions live in memory, expire (Options.SessionTTL,
//     Options.IdleTimeout) and are bounded in number (Options.MaxSessions:
//     the least recently used one goes first).
//   - Every POST needs the session's CSRF token (the form field "csrf",
//     or the header X-CSRF-Token for the script's JSON requests),
//     compared in constant time; the login form has its own token bound
//     to a short-lived cookie. A POST whose Origin is not the console's
//     own, or whose Sec-Fetch-Site says another site sent it, is refused
//     even when gateway.allowed_origins admits that origin elsewhere.
//   - The daemon's perimeter (httpx.Perimeter) runs first: Host and Origin
//     checks as on every route; the console's path is the only one where
//     a POST may be application/x-www-form-urlencoded (FormPaths).
//   - Every answer carries a Content-Security-Policy that admits only the
//     console's own script, style and images (and data: images for MCP
//     image results), X-Frame-Options DENY, nosniff, and no-store.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// Path is the prefix the console is served under; mount the Console
// there (and name it in httpx.Perimeter.FormPaths).
const Path = "/ui/"

// FrontName is the CallOptions.Front of the console's tool calls, as the
// audit log and reviews show it.
const FrontName = "console"

// DefaultPrincipal is the principal of the console's calls and review
// decisions when Options.Principal is empty: the admin API's.
const DefaultPrincipal = "utcpd-admin"

// Defaults of Options.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultIdleTimeout = time.Hour
	DefaultMaxSessions = 32
	DefaultCallTimeout = 30 * time.Second
)

// Options configure a Console. Gateway is required.
type Options struct {
	// Gateway holds the manuals and carries the calls.
	Gateway *gateway.Gateway
	// AdminToken is the credential the login page takes. Empty: every
	// login is refused (as the admin API refuses every request).
	AdminToken string
	// Principal names the console's user in calls, reviews and the audit
	// log (default DefaultPrincipal).
	Principal string
	// Reviews, when set, serves the Reviews page.
	Reviews *review.Queue
	// Audit, when set, serves the Audit page.
	Audit audit.Store
	// Recorder, when set, counts registrations as the admin API does.
	Recorder admin.Recorder
	// CallTimeout is a tool call's deadline (default DefaultCallTimeout),
	// counted from the moment the guard chain allowed it.
	CallTimeout time.Duration
	// DiscoveryTimeout bounds a registration's discovery (default
	// admin.DefaultTimeout).
	DiscoveryTimeout time.Duration
	// MaxBodyBytes caps request bodies (default httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// PublicURL, when it is https, makes the session cookie Secure even
	// behind a proxy that terminates TLS.
	PublicURL string
	// SessionTTL is a session's lifetime from login (default
	// DefaultSessionTTL); IdleTimeout ends a session unused that long
	// (default DefaultIdleTimeout); MaxSessions caps the sessions kept
	// (default DefaultMaxSessions).
	SessionTTL, IdleTimeout time.Duration
	MaxSessions             int
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
	// Version is shown in the page footer.
	Version string
}

// Console serves the web console. Create it with New and mount it at
// Path; feed its Traffic page with Record (Observer.SetTap). It is safe
// for concurrent use.
type Console struct {
	opts     Options
	g        *gateway.Gateway
	log      *slog.Logger
	sessions *sessions
	traffic  *Traffic
	secure   bool
	pages    map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
	streams  chan struct{} // live traffic streams in flight

	shutMu    sync.Mutex
	shutdowns map[*http.Server]chan struct{} // closed when that server shuts down
}

//go:embed assets
var assets embed.FS

// maxLiveStreams caps the traffic event streams served at once.
const maxLiveStreams = 16

// New returns the console for opts. It fails without a Gateway or when an
// embedded template does not parse (a build defect).
func New(opts Options) (*Console, error) {
	if opts.Gateway == nil {
		return nil, fmt.Errorf("console: Options.Gateway is required")
	}
	if opts.Principal == "" {
		opts.Principal = DefaultPrincipal
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.DiscoveryTimeout <= 0 {
		opts.DiscoveryTimeout = admin.DefaultTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = httpx.DefaultMaxBodyBytes
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	c := &Console{opts: opts, g: opts.Gateway, log: opts.Logger, traffic: NewTraffic(),
		streams: make(chan struct{}, maxLiveStreams), shutdowns: map[*http.Server]chan struct{}{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if u, err := url.Parse(opts.PublicURL); err == nil && u.Scheme == "https" {
		c.secure = true
	}
	c.sessions = newSessions(opts.MaxSessions, opts.SessionTTL, opts.IdleTimeout)
	if err := c.parsePages(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c.static = http.StripPrefix(Path+"static/", http.FileServerFS(static))
	c.routes()
	return c, nil
}

// Record takes one finished call for the Traffic page. Install it with
// Observer.SetTap (or call it from gateway.Options.OnCall); it is fast
// and does not keep rec.
func (c *Console) Record(rec *gateway.CallRecord) { c.traffic.Record(rec) }

// Traffic returns the recorder behind the Traffic page.
func (c *Console) Traffic() *Traffic { return c.traffic }

func (c *Console) routes() {
	m := http.NewServeMux()
	c.mux = m
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Path+"manuals", http.StatusSeeOther)
	})
	m.Handle("GET /ui/static/", c.static)
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("POST /ui/logout", c.authed(c.logout))
	m.HandleFunc("GET /ui/manuals", c.authed(c.manualsPage))
	m.HandleFunc("POST /ui/manuals", c.authed(c.addManual))
	m.HandleFunc("GET /ui/manual", c.authed(c.manualPage))
	m.HandleFunc("POST /ui/manual/replace", c.authed(c.replaceManual))
	m.HandleFunc("POST /ui/manual/refresh", c.authed(c.refreshManual))
	m.HandleFunc("POST /ui/manual/delete", c.authed(c.deleteManual))
	m.HandleFunc("POST /ui/manual/changes/decide", c.authed(c.decideChange))
	m.HandleFunc("GET /ui/tools", c.authed(c.toolsPage))
	m.HandleFunc("GET /ui/tool", c.authed(c.toolPage))
	m.HandleFunc("POST /ui/call", c.authed(c.call))
	m.HandleFunc("POST /ui/stream", c.authed(c.stream))
	m.HandleFunc("GET /ui/reviews", c.authed(c.reviewsPage))
	m.HandleFunc("POST /ui/reviews/decide", c.authed(c.decide))
	m.HandleFunc("GET /ui/audit", c.authed(c.auditPage))
	m.HandleFunc("GET /ui/traffic", c.authed(c.trafficPage))
	m.HandleFunc("GET /ui/traffic/events", c.authed(c.trafficEvents))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeNotFound, "no console page at %s", r.URL.Path))
	})
}

// ServeHTTP serves the console's routes, each answer with the console's
// security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if strings.HasPrefix(r.URL.Path, Path+"static/") {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy admits the console's own script, style and
// images, data: images (MCP image results) and same-origin fetches;
// nothing inline, no frames, no form posts elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// RedirectBrowsers returns a handler that sends a browser asking for "/"
// (a GET whose Accept names text/html) to the console, and passes every
// other request to next (where GET / is a 404 envelope for API clients).
func RedirectBrowsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, Path, http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ---- pages ----

// page is what every page template gets.
type page struct {
	Title    string
	Nav      string // the section shown: manuals, tools, reviews, audit, traffic
	CSRF     string
	Flash    []string
	Problem  *problem
	Pending  int // pending reviews, for the menu
	Version  string
	LoggedIn bool
	Data     any
}

// problem is an error as a page shows it.
type problem struct {
	Status  int
	Code    utcp.Code
	Message string
	Details []detail
}

type detail struct{ Key, Value string }

// problemOf turns err into what a page shows: the admin API's code,
// message (redacted) and details.
func problemOf(err error) *problem {
	status, env := httpx.Problem(err)
	p := &problem{Status: status, Code: env.Error.Code, Message: env.Error.Message}
	for _, k := range sortedKeys(env.Error.Details) {
		v := env.Error.Details[k]
		s, ok := v.(string)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				continue
			}
			s = string(b)
		}
		p.Details = append(p.Details, detail{k, s})
	}
	return p
}

func (c *Console) parsePages() error {
	funcs := template.FuncMap{
		"since":   sinceText,
		"when":    whenText,
		"pretty":  prettyJSON,
		"dur":     durationText,
		"join":    strings.Join,
		"add":     func(a, b int) int { return a + b },
		"qs":      queryString,
		"pct":     func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"rate":    func(f float64) string { return fmt.Sprintf("%.2f", f) },
		"urlpath": url.PathEscape,
		"list":    func(s ...string) []string { return s },
		"short":   shortDuration,
	}
	names, err := fs.Glob(assets, "assets/pages/*.html")
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(n[len("assets/pages/"):], ".html")
		t, err := template.New(base).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/form.html", n)
		if err != nil {
			return fmt.Errorf("console: page %s: %w", base, err)
		}
		c.pages[base] = t
	}
	return nil
}

// render writes page name with status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t := c.pages[name]
	if t == nil {
		c.log.Error("console: no page template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if s := sessionFrom(r.Context()); s != nil {
		p.LoggedIn = true
		p.CSRF = s.csrf
		if p.Flash == nil {
			p.Flash = c.sessions.takeFlash(s)
		}
	}
	p.Version = c.opts.Version
	if p.LoggedIn && c.opts.Reviews != nil {
		if rs, err := c.opts.Reviews.List(r.Context(), review.StatusPending); err == nil {
			p.Pending = len(rs)
		}
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := t.ExecuteTemplate(buf, "layout", p); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError shows err on the error page (or, for the script's JSON
// requests, as the error envelope).
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, _ *session, err error) {
	if utcp.CodeOf(err) == utcp.CodeInternal {
		c.log.Error("console: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if wantsJSON(r) {
		httpx.WriteError(w, err)
		return
	}
	p := problemOf(err)
	c.render(w, r, p.Status, "error", page{Title: "Error", Problem: p})
}

// wantsJSON reports whether r comes from the console's script (which
// asks for JSON answers).
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json") && !strings.Contains(r.Header.Get("Accept"), "text/html")
}

// flash keeps a message for the next page the session sees.
func (c *Console) flash(r *http.Request, msg string) {
	if s := sessionFrom(r.Context()); s != nil {
		c.sessions.addFlash(s, msg)
	}
}

// seeOther redirects to a console path after a successful form post.
func seeOther(w http.ResponseWriter, r *http.Request, path string) {
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// discoveryContext bounds a registration's discovery.
func (c *Console) discoveryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.DiscoveryTimeout)
}

func (c *Console) record(source, op string, err error) {
	if c.opts.Recorder != nil {
		c.opts.Recorder.Registration(source, op, err)
	}
}
