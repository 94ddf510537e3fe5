package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/policy"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

const adminToken = "console-test-admin-token"

// daemon is the whole HTTP surface (api.New, perimeter included) over a
// gateway with the demo HTTP server's manual, a policy guard that sends
// demo.echo to review and denies demo.sleep, a review queue and an audit
// log.
type daemon struct {
	t       *testing.T
	f       *fixture.Fixture
	backend string // the demo server's base URL
	g       *gateway.Gateway
	q       *review.Queue
	w       *audit.Writer
	audit   audit.Store
	srv     *httptest.Server
}

type daemonOptions struct {
	tls            bool
	publicURL      string
	allowedOrigins []string
	noToken        bool
	noManual       bool
	failedManual   bool
}

func startDaemon(t *testing.T, o daemonOptions) *daemon {
	t.Helper()
	d := &daemon{t: t, f: fixture.New()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bs := httpserver.NewServer("", d.f, httpserver.Options{})
	go func() { _ = bs.Serve(ln) }()
	t.Cleanup(func() { _ = bs.Close() })
	d.backend = "http://" + ln.Addr().String()

	pol, err := policy.New(json.RawMessage(`{"kind": "policy", "default": "allow", "rules": [
		{"tools": ["demo.echo"], "decision": "review", "reason": "echoes need a look"},
		{"tools": ["demo.sleep"], "decision": "deny", "reason": "no sleeping"}]}`), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	d.q = review.NewQueue(review.NewMemStore(), review.Options{Timeout: time.Minute, SweepInterval: 20 * time.Millisecond})
	d.audit = audit.NewMemStore()
	d.w = audit.NewWriter(d.audit, audit.WriterOptions{})
	chain := guard.NewChain([]guard.Named{{Name: "0:policy", Guard: pol}}, guard.WithApprover(d.q), guard.WithReviewTimeout(2*time.Minute))
	types := transports.NewRegistry()
	if err := types.Register(utcphttp.Info); err != nil {
		t.Fatal(err)
	}
	obs := api.NewObserver(nil, prometheus.NewRegistry())
	g, err := gateway.New(gateway.Options{Transports: types, Guard: chain, Reviews: d.q, Audit: d.w, OnCall: obs.OnCall})
	if err != nil {
		t.Fatal(err)
	}
	d.g = g
	tok := adminToken
	if o.noToken {
		tok = ""
	}
	h, err := api.New(api.Options{Gateway: g, Reviews: d.q, Audit: d.audit, AdminToken: tok, Observer: obs, Version: "test",
		PublicURL: o.publicURL, AllowedOrigins: o.allowedOrigins})
	if err != nil {
		t.Fatal(err)
	}
	if o.tls {
		d.srv = httptest.NewTLSServer(h)
	} else {
		d.srv = httptest.NewServer(h)
	}
	t.Cleanup(func() {
		d.srv.Close()
		_ = d.q.Close(context.Background())
		_ = d.w.Close(context.Background())
		_ = d.g.Close()
	})
	if !o.noManual {
		if _, err := g.RegisterManual(t.Context(), json.RawMessage(d.template("demo")), gateway.RegisterOptions{Source: registry.SourceConfig}); err != nil {
			t.Fatal(err)
		}
	}
	if o.failedManual {
		// A configuration manual whose backend is away: kept as failed.
		tpl := `{"name": "away", "call_template_type": "http", "http_method": "GET", "url": "http://127.0.0.1:1/utcp?api_key=sk-live-0123456789abcdefghijkl"}`
		if _, err := g.RegisterManual(t.Context(), json.RawMessage(tpl), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true}); err == nil {
			t.Fatal("a manual at 127.0.0.1:1 registered")
		}
	}
	d.q.Start(g.DispatchApproved)
	return d
}

// template is an http manual call template for the demo server.
func (d *daemon) template(name string) string {
	return fmt.Sprintf(`{"name": %q, "call_template_type": "http", "http_method": "GET", "url": %q}`, name, d.backend+"/utcp")
}

// flushAudit waits until the audit writer stored what it queued.
func (d *daemon) flushAudit() {
	d.t.Helper()
	if err := d.w.Flush(d.t.Context()); err != nil {
		d.t.Fatal(err)
	}
}

// browser is a client that keeps the console's cookies (by hand, so a
// test sees every Set-Cookie) and does not follow redirects.
type browser struct {
	t       *testing.T
	d       *daemon
	c       *http.Client
	cookies map[string]*http.Cookie
	csrf    string
	// origin, when set, is sent as Origin on POSTs (as a browser does).
	origin string
}

func (d *daemon) browser() *browser {
	c := d.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: d.t, d: d, c: c, cookies: map[string]*http.Cookie{}, origin: d.srv.URL}
}

// answer is one response, its body read.
type answer struct {
	status int
	header http.Header
	body   string
	set    map[string]*http.Cookie
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, clip(a.body, 600)) }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (b *browser) do(method, path, ctype, body string, headers map[string]string) answer {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.d.srv.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if method == http.MethodPost && b.origin != "" {
		req.Header.Set("Origin", b.origin)
	}
	for _, ck := range b.cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	if k := "Host"; headers[k] != "" {
		req.Host = headers[k]
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: string(data), set: map[string]*http.Cookie{}}
	for _, ck := range resp.Cookies() {
		a.set[ck.Name] = ck
		if ck.MaxAge < 0 || ck.Value == "" {
			delete(b.cookies, ck.Name)
		} else {
			b.cookies[ck.Name] = ck
		}
	}
	if m := csrfMeta.FindStringSubmatch(a.body); m != nil {
		b.csrf = m[1]
	}
	return a
}

var (
	csrfMeta   = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)
	loginField = regexp.MustCompile(`name="login_csrf" value="([^"]+)"`)
)

func (b *browser) get(path string) answer {
	b.t.Helper()
	return b.do(http.MethodGet, path, "", "", map[string]string{"Accept": "text/html"})
}

// post sends a form with the session's CSRF token (unless form sets
// "csrf" itself).
func (b *browser) post(path string, form url.Values, headers map[string]string) answer {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok && b.csrf != "" {
		form.Set("csrf", b.csrf)
	}
	if headers == nil {
		headers = map[string]string{}
	}
	if _, ok := headers["Accept"]; !ok {
		headers["Accept"] = "text/html"
	}
	return b.do(http.MethodPost, path, "application/x-www-form-urlencoded", form.Encode(), headers)
}

// postJSON sends what the console's script sends for a call.
func (b *browser) postJSON(path, body string, headers map[string]string) answer {
	b.t.Helper()
	h := map[string]string{"Accept": "application/json", "X-CSRF-Token": b.csrf}
	for k, v := range headers {
		h[k] = v
	}
	return b.do(http.MethodPost, path, "application/json", body, h)
}

// login logs in with the admin token and returns the login answer.
func (b *browser) login() answer {
	b.t.Helper()
	page := b.get("/ui/login")
	m := loginField.FindStringSubmatch(page.body)
	if page.status != http.StatusOK || m == nil {
		b.t.Fatalf("login page: %s", page)
	}
	a := b.post("/ui/login", url.Values{"login_csrf": {m[1]}, "token": {adminToken}, "next": {"/ui/manuals"}}, nil)
	if a.status != http.StatusSeeOther || a.set["utcpd_console"] == nil {
		b.t.Fatalf("login: %s", a)
	}
	if p := b.get("/ui/manuals"); p.status != http.StatusOK || b.csrf == "" {
		b.t.Fatalf("the manuals page after login: %s", p)
	}
	return a
}

// loggedIn returns a browser with a session.
func (d *daemon) loggedIn() *browser {
	b := d.browser()
	b.login()
	return b
}

// envelope decodes an error envelope.
func envelope(t *testing.T, a answer) (code string, details map[string]any) {
	t.Helper()
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &env); err != nil {
		t.Fatalf("not an error envelope: %s", a)
	}
	return env.Error.Code, env.Error.Details
}
