package httpx

import (
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

// DefaultReadTimeout bounds how long a client may take to send a request
// body when Perimeter.ReadTimeout is unset.
const DefaultReadTimeout = 30 * time.Second

// Perimeter is the check every route of the daemon passes before any
// handler runs (docs/security.md, "Web pages"). It refuses what a web page
// in the user's browser can send but a real client never needs:
//
//   - a Host header that is not a loopback name (localhost, *.localhost),
//     an IP literal, the listen host, the host of PublicURL or one of
//     AllowedHosts: 403 forbidden (reason host_not_allowed). This defeats
//     DNS rebinding, where a page's own name resolves to 127.0.0.1.
//   - an Origin header that is not the daemon's own origin (the origin
//     whose host:port is the request's Host), the origin of PublicURL or
//     one of AllowedOrigins ("*": every origin): 403 forbidden (reason
//     origin_not_allowed). Clients that send no Origin (curl, SDKs,
//     agents) are unaffected.
//   - a POST, PUT or PATCH whose Content-Type is not JSON
//     (application/json or a +json type), empty bodies included: 415
//     unsupported_media_type. A form or a no-cors fetch cannot send one
//     without a CORS preflight, which the Origin check refuses.
//     The one exception is FormPaths: a POST to a path under one of
//     them may also be application/x-www-form-urlencoded (the web
//     console's forms, which carry their own CSRF token); multipart and
//     text/plain are refused there too, and the Host and Origin checks
//     apply unchanged.
//
// A request with a body gets a read deadline (ReadTimeout) that is lifted
// once its body has been read, so a client that stalls mid-body is cut
// off while long calls and streams are not.
//
// The zero value is usable: loopback names and IP literals only, the
// daemon's own origin only, DefaultReadTimeout.
type Perimeter struct {
	// ListenHost is the host of the listen address; a name is accepted
	// in Host.
	ListenHost string
	// PublicURL is the address clients reach the daemon at; its host is
	// accepted in Host and its origin in Origin.
	PublicURL string
	// AllowedHosts are further host names accepted in Host (without a
	// port; "*.example.com" accepts every subdomain of example.com).
	AllowedHosts []string
	// AllowedOrigins are further browser origins accepted in Origin
	// ("https://app.example.com"); "*" accepts every origin.
	AllowedOrigins []string
	// ReadTimeout bounds the time to send a request body (default
	// DefaultReadTimeout; negative: no bound).
	ReadTimeout time.Duration
	// FormPaths are path prefixes ("/ui/") under which a POST may be
	// application/x-www-form-urlencoded as well as JSON. Only the web
	// console (api/console) is mounted there; it checks a CSRF token on
	// every form. Every other path stays JSON-only.
	FormPaths []string
	// Refuse writes a refusal; nil writes the error envelope (WriteError).
	// The MCP front answers JSON-RPC error objects instead.
	Refuse func(w http.ResponseWriter, r *http.Request, err *utcp.Error)
}

// Wrap returns next behind the perimeter checks.
func (p Perimeter) Wrap(next http.Handler) http.Handler {
	c := p.compile()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := c.check(r); err != nil {
			c.refuse(w, r, err)
			return
		}
		if c.readTimeout > 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(c.readTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		if tracing.On() {
			// The caller's W3C trace context, if any, parents the
			// spans of the request (a malformed one is ignored).
			if ctx := tracing.ExtractHeader(r.Context(), r.Header); ctx != r.Context() {
				r = r.WithContext(ctx)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Check reports why r would be refused, nil when it passes. It is what
// Wrap applies, for surfaces that run the checks themselves.
func (p Perimeter) Check(r *http.Request) *utcp.Error { return p.compile().check(r) }

type perimeter struct {
	hosts       map[string]bool
	wildcards   []string // ".example.com"
	origins     map[string]bool
	anyOrigin   bool
	readTimeout time.Duration
	formPaths   []string
	refuse      func(w http.ResponseWriter, r *http.Request, err *utcp.Error)
}

func (p Perimeter) compile() *perimeter {
	c := &perimeter{hosts: map[string]bool{}, origins: map[string]bool{}, readTimeout: p.ReadTimeout, refuse: p.Refuse}
	for _, fp := range p.FormPaths {
		if strings.HasPrefix(fp, "/") && strings.HasSuffix(fp, "/") {
			c.formPaths = append(c.formPaths, fp)
		}
	}
	if c.readTimeout == 0 {
		c.readTimeout = DefaultReadTimeout
	}
	if c.refuse == nil {
		c.refuse = func(w http.ResponseWriter, _ *http.Request, err *utcp.Error) { WriteError(w, err) }
	}
	addHost := func(h string) {
		h = normalHost(h)
		if h == "" {
			return
		}
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			c.wildcards = append(c.wildcards, "."+rest)
			return
		}
		c.hosts[h] = true
	}
	if p.ListenHost != "" {
		addHost(p.ListenHost)
	}
	for _, h := range p.AllowedHosts {
		addHost(h)
	}
	if u, err := url.Parse(p.PublicURL); err == nil && u.Host != "" {
		addHost(u.Hostname())
		c.origins[normalOrigin(u.Scheme+"://"+u.Host)] = true
	}
	for _, o := range p.AllowedOrigins {
		if o == "*" {
			c.anyOrigin = true
			continue
		}
		c.origins[normalOrigin(o)] = true
	}
	return c
}

func (c *perimeter) check(r *http.Request) *utcp.Error {
	if !c.hostAllowed(r.Host) {
		return Errorf(utcp.CodeForbidden, "requests addressed to host %q are refused: add it to gateway.allowed_hosts (or set gateway.public_url) to serve it", r.Host).
			WithDetail("reason", "host_not_allowed").WithDetail("host", r.Host)
	}
	if origin := r.Header.Get("Origin"); origin != "" && !c.originAllowed(origin, r.Host) {
		return Errorf(utcp.CodeForbidden, "requests from the browser origin %q are refused: add it to gateway.allowed_origins to let pages there use the daemon", origin).
			WithDetail("reason", "origin_not_allowed").WithDetail("origin", origin)
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		ct := r.Header.Get("Content-Type")
		form := r.Method == http.MethodPost && c.formPath(r.URL.Path)
		if form && !isJSONType(ct) && !isFormType(ct) {
			return Errorf(utcp.CodeUnsupportedMediaType, "%s needs Content-Type: application/json or application/x-www-form-urlencoded (got %q), also with an empty body", r.Method, ct).
				WithDetail("content_type", ct)
		}
		if !form && !isJSONType(ct) {
			return Errorf(utcp.CodeUnsupportedMediaType, "%s needs Content-Type: application/json (got %q), also with an empty body", r.Method, ct).
				WithDetail("content_type", ct)
		}
	}
	return nil
}

// formPath reports whether path lies under one of FormPaths. The path
// must be clean (no "." or ".." segment, no "//"), so that a prefix
// cannot be reached from outside it.
func (c *perimeter) formPath(path string) bool {
	for _, fp := range c.formPaths {
		if strings.HasPrefix(path, fp) && !strings.Contains(path, "/./") && !strings.Contains(path, "/../") &&
			!strings.Contains(path, "//") && !strings.HasSuffix(path, "/..") && !strings.HasSuffix(path, "/.") {
			return true
		}
	}
	return false
}

// isFormType reports whether ct is application/x-www-form-urlencoded
// (parameters such as charset allowed).
func isFormType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// hostAllowed reports whether a Host header may be served: empty
// (HTTP/1.0), a loopback name, an IP literal, or a configured name.
func (c *perimeter) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = normalHost(h)
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i]
	}
	if net.ParseIP(h) != nil {
		// An IP literal cannot be rebound: a page can only make the
		// browser send it by being served from that address.
		return true
	}
	if c.hosts[h] {
		return true
	}
	for _, suffix := range c.wildcards {
		if strings.HasSuffix(h, suffix) {
			return true
		}
	}
	return false
}

// originAllowed reports whether a browser origin may use the daemon: its
// own origin (same host:port as the request's Host), a configured one, or
// any when "*" is configured. "null" (sandboxed frames, file: pages) is
// never allowed unless "*" is.
func (c *perimeter) originAllowed(origin, host string) bool {
	if c.anyOrigin {
		return true
	}
	o := normalOrigin(origin)
	if c.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || host == "" {
		return false
	}
	return sameHostPort(u, host)
}

// sameHostPort reports whether origin u names host (a Host header), with
// the scheme's default port filled in on either side.
func sameHostPort(u *url.URL, host string) bool {
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	oh, op := u.Hostname(), u.Port()
	if op == "" {
		op = def
	}
	hh, hp, err := net.SplitHostPort(host)
	if err != nil {
		hh, hp = strings.Trim(host, "[]"), def
	}
	return normalHost(oh) == normalHost(hh) && op == hp
}

func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]")), ".")
}

// normalOrigin lower-cases an origin and drops a trailing slash.
func normalOrigin(o string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(o)), "/")
}

// deadlineBody lifts the read deadline once the body has been read to
// its end (or closed), so that the rest of the request is not bounded.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.lift()
	}
	return n, err
}

func (b *deadlineBody) Close() error {
	return b.ReadCloser.Close()
}

func (b *deadlineBody) lift() {
	if b.done {
		return
	}
	b.done = true
	_ = b.rc.SetReadDeadline(time.Time{})
}
