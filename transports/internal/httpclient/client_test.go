package httpclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

func TestCheckURL(t *testing.T) {
	cases := []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"https://example.com/x", false, true},
		{"wss://example.com/ws", false, true},
		{"HTTPS://EXAMPLE.COM", false, true},
		{"http://localhost:8080/utcp", false, true},
		{"http://LocalHost./utcp", false, true},
		{"http://127.0.0.1/x", false, true},
		{"http://127.9.8.7:1/x", false, true},
		{"http://[::1]:8080/x", false, true},
		{"http://[::ffff:127.0.0.1]/x", false, true},
		{"ws://127.0.0.1:9/ws", false, true},
		{"http://example.com/x", false, false},
		{"ws://example.com/ws", false, false},
		{"http://example.com/x", true, true},
		{"ws://example.com/ws", true, true},
		{"http://localhost.example.com/x", false, false},
		{"http://127.0.0.1.nip.io/x", false, false},
		{"http://0.0.0.0/x", false, false},
		{"http://[::]/x", false, false},
		{"http://10.0.0.1/x", false, false},
		{"ftp://example.com/x", true, false},
		{"file:///etc/passwd", true, false},
		{"gopher://localhost/", false, false},
		{"//example.com/x", false, false},
		{"/relative", true, false},
		{"https:///nohost", false, false},
	}
	for _, c := range cases {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatalf("parse %q: %v", c.url, err)
		}
		err = CheckURL(u, c.insecure)
		if c.ok && err != nil {
			t.Errorf("CheckURL(%q, %v) = %v, want nil", c.url, c.insecure, err)
		}
		if !c.ok {
			if err == nil {
				t.Errorf("CheckURL(%q, %v) = nil, want an error", c.url, c.insecure)
			} else if code := utcp.CodeOf(err); code != utcp.CodeInvalidTemplate {
				t.Errorf("CheckURL(%q): code %s, want invalid_template", c.url, code)
			}
		}
	}
	if err := CheckURL(nil, true); err == nil {
		t.Errorf("CheckURL(nil) = nil")
	}
}

func TestCheckURLRedactsQuery(t *testing.T) {
	u, _ := url.Parse("http://example.com/x?api_key=s3cret")
	err := CheckURL(u, false)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %v must exist and not contain the query", err)
	}
}

// headerRecorder is a server that records the headers of the requests it
// receives.
type headerRecorder struct {
	srv *httptest.Server
	got chan http.Header
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	t.Helper()
	r := &headerRecorder{got: make(chan http.Header, 16)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h := req.Header.Clone()
		if req.URL.RawQuery != "" {
			h.Set("X-Test-Query", req.URL.RawQuery)
		}
		r.got <- h
		io.WriteString(w, "ok")
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func redirector(t *testing.T, to func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func secretRequest(t *testing.T, ctx context.Context, target string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer secret-token")
	req.Header.Set("X-Api-Key", "secret-key")
	req.Header.Set("Appid", "secret-appid")
	req.Header.Set("Cookie", "session=secret-cookie")
	req.Header.Set("Accept", "application/json")
	return req
}

func TestRedirectStripsCredentialsCrossOrigin(t *testing.T) {
	client := New(Options{})
	defer client.CloseIdleConnections()
	target := newHeaderRecorder(t)
	// Another port on the same host is another origin.
	a := redirector(t, func() string { return target.srv.URL + "/landed" })
	resp, err := client.Do(secretRequest(t, t.Context(), a.URL+"/start?api_key=secret-query"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-target.got
	for _, k := range []string{"Authorization", "X-Api-Key", "Appid", "Cookie", "Referer", "X-Test-Query"} {
		if v := h.Get(k); v != "" {
			t.Errorf("header %s = %q reached the other origin", k, v)
		}
	}
	if got := h.Get("Accept"); got != "application/json" {
		t.Errorf("Accept = %q, want it kept", got)
	}
}

func TestRedirectKeepsCredentialsSameOrigin(t *testing.T) {
	client := New(Options{})
	defer client.CloseIdleConnections()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
			return
		}
		got = r.Header.Clone()
	}))
	defer srv.Close()
	resp, err := client.Do(secretRequest(t, t.Context(), srv.URL+"/start"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]string{"Authorization": "Bearer secret-token", "X-Api-Key": "secret-key", "Cookie": "session=secret-cookie"}
	for k, v := range want {
		if got.Get(k) != v {
			t.Errorf("%s = %q after a same-origin redirect, want %q", k, got.Get(k), v)
		}
	}
}

func TestRedirectStripIsSticky(t *testing.T) {
	// A → B → A: once the chain left A, credentials do not come back.
	client := New(Options{})
	defer client.CloseIdleConnections()
	var bURL string
	final := make(chan http.Header, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, bURL, http.StatusFound) })
	mux.HandleFunc("/final", func(w http.ResponseWriter, r *http.Request) { final <- r.Header.Clone() })
	a := httptest.NewServer(mux)
	defer a.Close()
	b := redirector(t, func() string { return a.URL + "/final" })
	bURL = b.URL
	resp, err := client.Do(secretRequest(t, t.Context(), a.URL+"/start"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-final
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("Cookie") != "" {
		t.Errorf("credentials came back after leaving the origin: %v", h)
	}
}

func TestRedirectToInsecureHostRefused(t *testing.T) {
	client := New(Options{})
	defer client.CloseIdleConnections()
	a := redirector(t, func() string { return "http://example.com/steal" })
	resp, err := client.Do(secretRequest(t, t.Context(), a.URL))
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect to plain http on a public host was followed")
	}
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeTransportError {
		t.Errorf("err = %v, want a *utcp.Error with code transport_error", err)
	}
	// Other schemes are refused too, even with allow_insecure.
	b := redirector(t, func() string { return "file:///etc/passwd" })
	resp, err = client.Do(secretRequest(t, WithAllowInsecure(t.Context(), true), b.URL))
	if err == nil {
		resp.Body.Close()
		t.Fatal("redirect to file:// was followed")
	}
}

func TestRedirectLimit(t *testing.T) {
	client := New(Options{})
	defer client.CloseIdleConnections()
	hops := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hops++
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := client.Do(secretRequest(t, t.Context(), srv.URL))
	if err == nil {
		resp.Body.Close()
		t.Fatal("endless redirects did not fail")
	}
	if hops != DefaultMaxRedirects {
		t.Errorf("server saw %d requests, want %d", hops, DefaultMaxRedirects)
	}
}

func TestApplyAuth(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		auth   *utcp.Auth
		header map[string]string
		query  string
		cookie string
		code   utcp.Code
	}{
		{name: "nil"},
		{name: "api_key default header", auth: &utcp.Auth{Type: "api_key", APIKey: "k1"}, header: map[string]string{"X-Api-Key": "k1"}},
		{name: "api_key custom header", auth: &utcp.Auth{Type: "api_key", APIKey: "Bearer k2", VarName: "Authorization", Location: "header"}, header: map[string]string{"Authorization": "Bearer k2"}},
		{name: "api_key query", auth: &utcp.Auth{Type: "api_key", APIKey: "k 3", VarName: "appid", Location: "query"}, query: "appid=k+3&q=1"},
		{name: "api_key cookie", auth: &utcp.Auth{Type: "api_key", APIKey: "k4", VarName: "sid", Location: "cookie"}, cookie: "sid=k4"},
		{name: "api_key empty", auth: &utcp.Auth{Type: "api_key"}, code: utcp.CodeUnauthorized},
		{name: "api_key bad header name", auth: &utcp.Auth{Type: "api_key", APIKey: "k", VarName: "X\r\nInjected: 1"}, code: utcp.CodeInvalidTemplate},
		{name: "basic", auth: &utcp.Auth{Type: "basic", Username: "u", Password: "p"}, header: map[string]string{"Authorization": "Basic dTpw"}},
		{name: "oauth2_user default", auth: &utcp.Auth{Type: "oauth2_user", AccessToken: "ut"}, header: map[string]string{"Authorization": "Bearer ut"}},
		{name: "oauth2_user custom", auth: &utcp.Auth{Type: "oauth2_user", AccessToken: "ut", VarName: "X-Token", Prefix: str("")}, header: map[string]string{"X-Token": "ut"}},
		{name: "oauth2_user empty", auth: &utcp.Auth{Type: "oauth2_user"}, code: utcp.CodeUnauthorized},
		{name: "oauth2 without token source", auth: &utcp.Auth{Type: "oauth2", TokenURL: "https://x/t", ClientID: "c"}, code: utcp.CodeInvalidTemplate},
		{name: "unknown", auth: &utcp.Auth{Type: "kerberos"}, code: utcp.CodeInvalidTemplate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.example.com/x?q=1", nil)
			err := ApplyAuth(t.Context(), req, c.auth, nil)
			if c.code != "" {
				if utcp.CodeOf(err) != c.code {
					t.Fatalf("err = %v (code %s), want code %s", err, utcp.CodeOf(err), c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.header {
				if got := req.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			wantQuery := c.query
			if wantQuery == "" {
				wantQuery = "q=1"
			}
			if req.URL.RawQuery != wantQuery {
				t.Errorf("query = %q, want %q", req.URL.RawQuery, wantQuery)
			}
			if got := req.Header.Get("Cookie"); got != c.cookie {
				t.Errorf("Cookie = %q, want %q", got, c.cookie)
			}
		})
	}
}

func TestReadResponseBodyContentLength(t *testing.T) {
	// A declared length over the cap fails before reading.
	resp := &http.Response{ContentLength: 100, Body: io.NopCloser(failingReader{})}
	if _, err := ReadResponseBody(resp, 10); !errors.Is(err, transports.ErrTooLarge) {
		t.Errorf("err = %v, want transports.ErrTooLarge", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("must not be read") }

func TestValidHeader(t *testing.T) {
	got := []bool{ValidHeaderName("X-Api-Key"), ValidHeaderName(""), ValidHeaderName("a b"), ValidHeaderName("a\nb"),
		ValidHeaderValue("Bearer x"), ValidHeaderValue("x\r\ny")}
	if diff := cmp.Diff([]bool{true, false, false, false, true, false}, got); diff != "" {
		t.Error(diff)
	}
}
