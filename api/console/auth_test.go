package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/registry"
)

// TestLogin: a page without a session goes to the login page; the login
// cookie and the session cookie are HttpOnly, SameSite=Strict and scoped
// to /ui/; a wrong token, a missing or wrong login token, or a login
// without an admin token configured make no session; the right token
// does, and the browser is sent back where it was going.
func TestLogin(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.browser()

	a := b.get("/ui/tools?q=add")
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/tools?q=add") {
		t.Fatalf("a page without a session: %s %v", a, a.header)
	}
	page := b.get("/ui/login?next=" + url.QueryEscape("/ui/tools?q=add"))
	lc := page.set["utcpd_console_login"]
	if page.status != http.StatusOK || lc == nil {
		t.Fatalf("login page: %s", page)
	}
	checkCookie(t, lc, false)
	m := loginField.FindStringSubmatch(page.body)
	if m == nil || m[1] != lc.Value {
		t.Fatalf("the login form's token is not its cookie's")
	}

	for _, c := range []struct {
		name   string
		form   url.Values
		status int
	}{
		{"wrong token", url.Values{"login_csrf": {m[1]}, "token": {"nope"}}, http.StatusUnauthorized},
		{"empty token", url.Values{"login_csrf": {m[1]}, "token": {""}}, http.StatusUnauthorized},
		{"token with a prefix of the real one", url.Values{"login_csrf": {m[1]}, "token": {adminToken[:10]}}, http.StatusUnauthorized},
		{"no login token", url.Values{"token": {adminToken}}, http.StatusForbidden},
		{"wrong login token", url.Values{"login_csrf": {"forged"}, "token": {adminToken}}, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			b.cookies["utcpd_console_login"] = lc
			a := b.post("/ui/login", c.form, nil)
			if a.status != c.status || a.set["utcpd_console"] != nil {
				t.Fatalf("got %s, want %d and no session", a, c.status)
			}
			if !strings.Contains(a.body, `class="problem"`) {
				t.Errorf("the refusal is not shown: %s", a)
			}
		})
	}

	// A login cookie of another browser (the one it holds now is new).
	b.cookies["utcpd_console_login"] = lc
	a = b.post("/ui/login", url.Values{"login_csrf": {m[1]}, "token": {adminToken}, "next": {"/ui/tools?q=add"}}, nil)
	sc := a.set["utcpd_console"]
	if a.status != http.StatusSeeOther || sc == nil || a.header.Get("Location") != "/ui/tools?q=add" {
		t.Fatalf("login: %s %v", a, a.header)
	}
	checkCookie(t, sc, false)
	if sc.MaxAge <= 0 || len(sc.Value) < 40 {
		t.Errorf("session cookie %+v", sc)
	}
	if a := b.get("/ui/tools?q=add"); a.status != http.StatusOK || !strings.Contains(a.body, `data-tool="demo.add"`) {
		t.Fatalf("after login: %s", a)
	}

	// Logging out ends the session on the daemon's side: the old cookie
	// no longer works.
	old := *b.cookies["utcpd_console"]
	if a := b.post("/ui/logout", url.Values{}, nil); a.status != http.StatusSeeOther || a.set["utcpd_console"] == nil || a.set["utcpd_console"].MaxAge >= 0 {
		t.Fatalf("logout: %s", a)
	}
	b.cookies["utcpd_console"] = &old
	if a := b.get("/ui/manuals"); a.status != http.StatusSeeOther {
		t.Fatalf("the logged-out session still works: %s", a)
	}
}

// TestLoginOpenRedirect: next is followed only to console pages.
func TestLoginOpenRedirect(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/v1/tools", "/ui/../admin/manuals", "/ui/\\evil", "/ui/login?x"} {
		b := d.browser()
		page := b.get("/ui/login")
		m := loginField.FindStringSubmatch(page.body)
		a := b.post("/ui/login", url.Values{"login_csrf": {m[1]}, "token": {adminToken}, "next": {next}}, nil)
		if loc := a.header.Get("Location"); a.status != http.StatusSeeOther || loc != "/ui/manuals" {
			t.Errorf("next=%q: %s → %q", next, a, loc)
		}
	}
}

func checkCookie(t *testing.T, c *http.Cookie, secure bool) {
	t.Helper()
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui/" || c.Secure != secure {
		t.Errorf("cookie %s: HttpOnly %v, SameSite %v, Path %q, Secure %v; want HttpOnly, Strict, /ui/, Secure %v",
			c.Name, c.HttpOnly, c.SameSite, c.Path, c.Secure, secure)
	}
}

// TestSecureCookie: over TLS, and behind a proxy whose public URL is
// https, the cookies are Secure.
func TestSecureCookie(t *testing.T) {
	for _, o := range []daemonOptions{{tls: true}, {publicURL: "https://tools.example.com"}} {
		d := startDaemon(t, o)
		b := d.browser()
		if o.publicURL != "" {
			b.origin = ""
		}
		a := b.login()
		checkCookie(t, a.set["utcpd_console"], true)
	}
}

// TestNoAdminToken: without an admin token the console refuses every
// login, as the admin API refuses every request.
func TestNoAdminToken(t *testing.T) {
	d := startDaemon(t, daemonOptions{noToken: true})
	b := d.browser()
	page := b.get("/ui/login")
	if !strings.Contains(page.body, "no admin token configured") {
		t.Errorf("the login page does not say so: %s", page)
	}
	for _, tok := range []string{"", "anything", adminToken} {
		m := loginField.FindStringSubmatch(b.get("/ui/login").body)
		a := b.post("/ui/login", url.Values{"login_csrf": {m[1]}, "token": {tok}}, nil)
		if a.status != http.StatusUnauthorized || a.set["utcpd_console"] != nil {
			t.Errorf("token %q: %s", tok, a)
		}
	}
}

// TestCSRF: a logged-in session's POSTs need its CSRF token, as a form
// field or (for the script's JSON requests) the X-CSRF-Token header;
// without it, or with another session's, nothing happens.
func TestCSRF(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	other := d.loggedIn()
	add := func(csrf string) answer {
		return b.post("/ui/manuals", url.Values{"mode": {"template"}, "template": {d.template("extra")}, "csrf": {csrf}}, nil)
	}
	for name, tok := range map[string]string{"none": "", "forged": "x", "another session's": other.csrf} {
		if a := add(tok); a.status != http.StatusForbidden || !strings.Contains(a.body, "csrf") {
			t.Errorf("%s token: %s", name, a)
		}
	}
	if _, ok := d.g.Manual("extra"); ok {
		t.Fatal("a POST without the CSRF token registered a manual")
	}
	calls := d.f.Calls()
	for name, h := range map[string]map[string]string{"none": {"X-CSRF-Token": ""}, "forged": {"X-CSRF-Token": "x"}, "another session's": {"X-CSRF-Token": other.csrf}} {
		a := b.postJSON("/ui/call?name=demo.add", `{"arguments": {"a": 1, "b": 2}}`, h)
		if code, det := envelope(t, a); a.status != http.StatusForbidden || code != "forbidden" || det["reason"] != "csrf" {
			t.Errorf("a call with %s token: %s", name, a)
		}
	}
	if d.f.Calls() != calls {
		t.Fatal("a call without the CSRF token reached the tool")
	}
	// With it, both work.
	if a := add(b.csrf); a.status != http.StatusSeeOther {
		t.Fatalf("with the token: %s", a)
	}
	if m, ok := d.g.Manual("extra"); !ok || m.Source != registry.SourceAPI {
		t.Fatal("the manual is not registered with source api")
	}
	if a := b.postJSON("/ui/call?name=demo.add", `{"arguments": {"a": 1, "b": 2}}`, nil); a.status != http.StatusOK || !strings.Contains(a.body, `"sum":3`) {
		t.Fatalf("call with the token: %s", a)
	}
}

// TestCrossOrigin: a page of another origin cannot drive the console,
// even with the session cookie (SameSite does not separate the ports of
// one host): the perimeter refuses its Origin and a rebinding Host, the
// console refuses an Origin gateway.allowed_origins admits for the API
// and a Sec-Fetch-Site of another site, and a form post elsewhere stays
// JSON-only.
func TestCrossOrigin(t *testing.T) {
	d := startDaemon(t, daemonOptions{allowedOrigins: []string{"https://app.example.com"}})
	b := d.loggedIn()
	form := func() url.Values {
		return url.Values{"mode": {"template"}, "template": {d.template("evil")}}
	}
	for _, c := range []struct {
		name    string
		headers map[string]string
		status  int
		reason  string
	}{
		{"another origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden, "origin_not_allowed"},
		{"another loopback port", map[string]string{"Origin": "http://127.0.0.1:1"}, http.StatusForbidden, "origin_not_allowed"},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden, "origin_not_allowed"},
		{"an origin the API admits", map[string]string{"Origin": "https://app.example.com"}, http.StatusForbidden, "cross_site"},
		{"same-site fetch metadata", map[string]string{"Origin": "", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden, "cross_site"},
		{"cross-site fetch metadata", map[string]string{"Origin": "", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden, "cross_site"},
		{"rebinding host", map[string]string{"Host": "rebind.attacker.example:8787", "Origin": "http://rebind.attacker.example:8787"}, http.StatusForbidden, "host_not_allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{"Accept": "application/json"}
			for k, v := range c.headers {
				h[k] = v
			}
			a := b.post("/ui/manuals", form(), h)
			code, det := envelope(t, a)
			if a.status != c.status || code != "forbidden" || det["reason"] != c.reason {
				t.Fatalf("got %s, want %d %s", a, c.status, c.reason)
			}
			a = b.postJSON("/ui/call?name=demo.add", `{"arguments": {"a": 1, "b": 2}}`, c.headers)
			if code, det := envelope(t, a); a.status != c.status || det["reason"] != c.reason {
				t.Fatalf("call: got %s %s, want %d %s", a, code, c.status, c.reason)
			}
		})
	}
	if _, ok := d.g.Manual("evil"); ok || d.f.Calls() != 0 {
		t.Fatalf("a refused request had an effect: manual %v, calls %d", ok, d.f.Calls())
	}
	// The daemon's own pages (same origin, same-origin fetch metadata)
	// work.
	if a := b.post("/ui/manuals", form(), map[string]string{"Sec-Fetch-Site": "same-origin"}); a.status != http.StatusSeeOther {
		t.Fatalf("same origin: %s", a)
	}
}

// TestConsoleFormsOnly: the perimeter admits url-encoded forms on the
// console's routes and nowhere else; multipart and text/plain stay
// refused on the console too. Every console POST route needs a session.
func TestConsoleFormsOnly(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	for _, p := range []string{"/v1/tools/demo.add/call", "/admin/manuals", "/utcp/call/demo.add", "/admin/reviews/rv_x/approve"} {
		a := b.do(http.MethodPost, p, "application/x-www-form-urlencoded", "a=1&b=2&csrf="+b.csrf, map[string]string{"Authorization": "Bearer " + adminToken})
		if code, _ := envelope(t, a); a.status != http.StatusUnsupportedMediaType || code != "unsupported_media_type" {
			t.Errorf("form post to %s: %s", p, a)
		}
	}
	routes := []string{"/ui/login", "/ui/logout", "/ui/manuals", "/ui/manual/replace", "/ui/manual/refresh", "/ui/manual/delete",
		"/ui/call", "/ui/stream", "/ui/reviews/decide"}
	for _, p := range routes {
		for _, ct := range []string{"multipart/form-data; boundary=x", "text/plain", ""} {
			a := b.do(http.MethodPost, p, ct, "csrf="+b.csrf, nil)
			if code, _ := envelope(t, a); a.status != http.StatusUnsupportedMediaType || code != "unsupported_media_type" {
				t.Errorf("%q to %s: %s", ct, p, a)
			}
		}
	}
	anon := d.browser()
	for _, p := range routes[1:] {
		a := anon.do(http.MethodPost, p, "application/x-www-form-urlencoded", "name=demo", map[string]string{"Accept": "application/json"})
		if code, _ := envelope(t, a); a.status != http.StatusUnauthorized || code != "unauthorized" {
			t.Errorf("%s without a session: %s", p, a)
		}
	}
	if d.f.Calls() != 0 {
		t.Fatalf("a refused request reached the tools")
	}
}

// TestRootRedirect: GET / sends a browser to the console; API clients
// keep the 404 envelope.
func TestRootRedirect(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.browser()
	a := b.do(http.MethodGet, "/", "", "", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
	if a.status != http.StatusFound || a.header.Get("Location") != "/ui/" {
		t.Fatalf("a browser at /: %s %v", a, a.header)
	}
	a = b.do(http.MethodGet, "/", "", "", nil)
	if code, _ := envelope(t, a); a.status != http.StatusNotFound || code != "not_found" {
		t.Fatalf("an API client at /: %s", a)
	}
	if a := b.get("/ui/"); a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/manuals" {
		t.Fatalf("/ui/: %s", a)
	}
	if a := b.get("/ui/static/console.js"); a.status != http.StatusOK || !strings.Contains(a.header.Get("Content-Type"), "javascript") ||
		a.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("the script: %s %v", a, a.header)
	}
	if a := b.get("/ui/nope"); a.status != http.StatusNotFound {
		t.Fatalf("an unknown console page: %s", a)
	}
}
