package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// newTransport returns a transport configured with cfg (may be nil),
// closed when the test ends.
func newTransport(t *testing.T, cfg map[string]any) *utcphttp.Transport {
	t.Helper()
	return transporttest.NewTransport(t, utcphttp.New, cfg)
}

// tmpl parses an http template made of fields.
func tmpl(t *testing.T, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	return transporttest.ParseTemplate(t, utcphttp.ParseTemplate, "http", fields)
}

func call(t *testing.T, tr *utcphttp.Transport, ct *utcp.CallTemplate, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return tr.CallTool(ctx, &utcp.Call{Tool: "m.t", Manual: "m", Name: "t", Template: ct, Arguments: args})
}

// recorded is what a recording server saw of one request.
type recorded struct {
	Method  string
	Path    string // escaped
	Query   string // raw
	Header  nethttp.Header
	Body    string
	Cookies map[string]string
}

// recorder starts a server that records each request and answers 200
// with {"ok": true}.
func recorder(t *testing.T) (string, <-chan recorded) {
	t.Helper()
	ch := make(chan recorded, 16)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		rec := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: string(b), Cookies: map[string]string{}}
		for _, c := range r.Cookies() {
			rec.Cookies[c.Name] = c.Value
		}
		ch <- rec
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

func TestTemplateParse(t *testing.T) {
	ct := tmpl(t, map[string]any{"url": "https://api.example.com/x"})
	spec := ct.Spec.(*utcphttp.Template)
	got := []string{spec.HTTPMethod, spec.ContentType, spec.BodyField}
	if diff := cmp.Diff([]string{"GET", "application/json", "body"}, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if spec := tmpl(t, map[string]any{"url": "${BASE_URL}/users/{id}", "http_method": "patch"}).Spec.(*utcphttp.Template); spec.HTTPMethod != "PATCH" {
		t.Errorf("method %q, want PATCH", spec.HTTPMethod)
	}
	bad := []map[string]any{
		{"url": "https://x/", "http_method": "HEAD"},
		{"url": "ftp://x/"},
		{"url": "/relative"},
		{"url": ""},
		{"url": "https://x/", "headers": map[string]any{"X-A": "a\r\nX-Injected: 1"}},
		{"url": "https://x/", "headers": map[string]any{"bad name": "v"}},
		{"url": "https://x/", "header_fields": []any{"ok", "not ok"}},
		{"url": "https://x/", "timeout": -1},
		{"url": "https://x/", "auth_tools": map[string]any{"auth_type": "api_key"}},
		{"url": "https://x/", "call_template_type": "sse"},
		{"url": 42},
	}
	for _, fields := range bad {
		m := map[string]any{"call_template_type": "http"}
		for k, v := range fields {
			m[k] = v
		}
		raw, _ := json.Marshal(m)
		if _, err := utcphttp.ParseTemplate(raw); !errors.Is(err, transports.ErrInvalidTemplate) {
			t.Errorf("ParseTemplate(%s): err = %v, want ErrInvalidTemplate", raw, err)
		}
	}
}

func TestCallMapping(t *testing.T) {
	base, got := recorder(t)
	cases := []struct {
		name   string
		fields map[string]any
		args   map[string]any
		want   recorded // Header: only the listed headers are compared
	}{
		{
			name:   "path placeholders are escaped",
			fields: map[string]any{"url": base + "/users/{id}/files/{name}"},
			args:   map[string]any{"id": "a b/c?d#e", "name": "ü%", "extra": 1},
			want:   recorded{Method: "GET", Path: "/users/a%20b%2Fc%3Fd%23e/files/%C3%BC%25", Query: "extra=1"},
		},
		{
			name:   "numeric path value",
			fields: map[string]any{"url": base + "/items/{n}"},
			args:   map[string]any{"n": json.Number("12")},
			want:   recorded{Method: "GET", Path: "/items/12"},
		},
		{
			name:   "query stringification",
			fields: map[string]any{"url": base + "/q"},
			args: map[string]any{
				"s": "x y&z=1", "i": 42, "f": 3.5, "big": 1e21, "whole": 2.0, "n": json.Number("7"), "e": json.Number("1e3"),
				"t": true, "o": map[string]any{"k": []any{1, "<b>"}}, "a": []any{"x", 1}, "null": nil,
			},
			want: recorded{Method: "GET", Path: "/q", Query: "a=%5B%22x%22%2C1%5D&big=1000000000000000000000&e=1000&f=3.5&i=42&n=7&o=%7B%22k%22%3A%5B1%2C%22%3Cb%3E%22%5D%7D&s=x+y%26z%3D1&t=true&whole=2"},
		},
		{
			name:   "header fields become headers",
			fields: map[string]any{"url": base + "/h", "header_fields": []any{"X-Request-Id", "X-Num"}},
			args:   map[string]any{"X-Request-Id": "abc", "X-Num": 5, "q": "v"},
			want:   recorded{Method: "GET", Path: "/h", Query: "q=v", Header: nethttp.Header{"X-Request-Id": {"abc"}, "X-Num": {"5"}}},
		},
		{
			name:   "json body from the default body field",
			fields: map[string]any{"url": base + "/b", "http_method": "POST"},
			args:   map[string]any{"body": map[string]any{"a": 1, "html": "<b>&"}, "q": "1"},
			want:   recorded{Method: "POST", Path: "/b", Query: "q=1", Body: `{"a":1,"html":"<b>&"}`, Header: nethttp.Header{"Content-Type": {"application/json"}}},
		},
		{
			name:   "json body holding a string",
			fields: map[string]any{"url": base + "/b", "http_method": "PUT"},
			args:   map[string]any{"body": "hi"},
			want:   recorded{Method: "PUT", Path: "/b", Body: `"hi"`, Header: nethttp.Header{"Content-Type": {"application/json"}}},
		},
		{
			name:   "raw body from a custom body field",
			fields: map[string]any{"url": base + "/raw", "http_method": "POST", "content_type": "text/plain; charset=utf-8", "body_field": "payload"},
			args:   map[string]any{"payload": "raw text ✓", "body": "stays in the query"},
			want:   recorded{Method: "POST", Path: "/raw", Query: "body=stays+in+the+query", Body: "raw text ✓", Header: nethttp.Header{"Content-Type": {"text/plain; charset=utf-8"}}},
		},
		{
			name:   "form body",
			fields: map[string]any{"url": base + "/form", "http_method": "POST", "content_type": "application/x-www-form-urlencoded"},
			args:   map[string]any{"body": map[string]any{"a": "1 2", "b": true}},
			want:   recorded{Method: "POST", Path: "/form", Body: "a=1+2&b=true", Header: nethttp.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
		},
		{
			name: "static headers and template query are kept",
			fields: map[string]any{"url": base + "/s?fixed=1&z=%2F", "http_method": "delete",
				"headers": map[string]any{"Accept": "text/plain", "X-Static": "s", "Content-Type": "application/vnd.x+json"}},
			args: map[string]any{"y": 2, "body": []any{1}},
			want: recorded{Method: "DELETE", Path: "/s", Query: "fixed=1&z=%2F&y=2", Body: "[1]",
				Header: nethttp.Header{"Accept": {"text/plain"}, "X-Static": {"s"}, "Content-Type": {"application/vnd.x+json"}}},
		},
		{
			name:   "placeholder in the query part",
			fields: map[string]any{"url": base + "/search?q={term}"},
			args:   map[string]any{"term": "a+b c&d"},
			want:   recorded{Method: "GET", Path: "/search", Query: "q=a%2Bb+c%26d"},
		},
		{
			name:   "patch without body",
			fields: map[string]any{"url": base + "/p", "http_method": "PATCH"},
			args:   nil,
			want:   recorded{Method: "PATCH", Path: "/p"},
		},
	}
	tr := newTransport(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := call(t, tr, tmpl(t, c.fields), c.args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]any{"ok": true}, res.Value); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			r := <-got
			wantHeader := c.want.Header
			gotHeader := nethttp.Header{}
			for k := range wantHeader {
				gotHeader[k] = r.Header.Values(k)
			}
			r.Header, c.want.Header = gotHeader, wantHeader
			if c.want.Header == nil {
				r.Header = nil
			}
			r.Cookies = nil
			if diff := cmp.Diff(c.want, r); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallArgumentsNotMutated(t *testing.T) {
	base, got := recorder(t)
	args := map[string]any{"id": "1", "body": "b", "X-H": "h", "q": "x"}
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": base + "/{id}", "http_method": "POST", "header_fields": []any{"X-H"}}), args)
	if err != nil {
		t.Fatal(err)
	}
	<-got
	if len(args) != 4 {
		t.Errorf("the caller's arguments were changed: %v", args)
	}
}

func TestMissingPathParameter(t *testing.T) {
	base, got := recorder(t)
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": base + "/users/{id}/{other}"}), map[string]any{"other": "x"})
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidArguments {
		t.Fatalf("err = %v (code %s), want invalid_arguments", err, code)
	}
	if !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("error %q does not name the parameter", err)
	}
	select {
	case r := <-got:
		t.Errorf("a request was sent: %+v", r)
	default:
	}
}

func TestHeaderFieldInjectionRefused(t *testing.T) {
	base, _ := recorder(t)
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": base, "header_fields": []any{"X-A"}}), map[string]any{"X-A": "v\r\nX-Injected: 1"})
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidArguments {
		t.Errorf("err = %v (code %s), want invalid_arguments", err, code)
	}
}

// tokenEndpoint is a real oauth2 token endpoint issuing tok-1, tok-2, ...
func tokenEndpoint(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		r.ParseForm()
		if r.PostForm.Get("client_id") != "cid" || r.PostForm.Get("client_secret") != "csecret" {
			w.WriteHeader(nethttp.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":3600}`, n.Add(1))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/token", &n
}

func TestAuthKinds(t *testing.T) {
	base, got := recorder(t)
	tokenURL, _ := tokenEndpoint(t)
	cases := []struct {
		name    string
		auth    map[string]any
		header  map[string]string
		query   string
		cookies map[string]string
	}{
		{"api_key default header", map[string]any{"auth_type": "api_key", "api_key": "k1"}, map[string]string{"X-Api-Key": "k1"}, "", nil},
		{"api_key authorization header", map[string]any{"auth_type": "api_key", "api_key": "Bearer k2", "var_name": "Authorization"}, map[string]string{"Authorization": "Bearer k2"}, "", nil},
		{"api_key query", map[string]any{"auth_type": "api_key", "api_key": "k&3", "var_name": "appid", "location": "query"}, nil, "appid=k%263&q=1", nil},
		{"api_key cookie", map[string]any{"auth_type": "api_key", "api_key": "k4", "var_name": "sid", "location": "cookie"}, nil, "", map[string]string{"sid": "k4"}},
		{"basic", map[string]any{"auth_type": "basic", "username": "alice", "password": "pw"}, map[string]string{"Authorization": "Basic YWxpY2U6cHc="}, "", nil},
		{"oauth2", map[string]any{"auth_type": "oauth2", "token_url": tokenURL, "client_id": "cid", "client_secret": "csecret"}, map[string]string{"Authorization": "Bearer tok-1"}, "", nil},
		{"oauth2_user default", map[string]any{"auth_type": "oauth2_user", "access_token": "ut"}, map[string]string{"Authorization": "Bearer ut"}, "", nil},
		{"oauth2_user custom", map[string]any{"auth_type": "oauth2_user", "access_token": "ut", "var_name": "X-Token", "prefix": "Token "}, map[string]string{"X-Token": "Token ut"}, "", nil},
	}
	tr := newTransport(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := call(t, tr, tmpl(t, map[string]any{"url": base + "/a", "auth": c.auth}), map[string]any{"q": 1}); err != nil {
				t.Fatal(err)
			}
			r := <-got
			for k, v := range c.header {
				if g := r.Header.Get(k); g != v {
					t.Errorf("header %s = %q, want %q", k, g, v)
				}
			}
			want := c.query
			if want == "" {
				want = "q=1"
			}
			if r.Query != want {
				t.Errorf("query = %q, want %q", r.Query, want)
			}
			if c.cookies == nil {
				c.cookies = map[string]string{}
			}
			if diff := cmp.Diff(c.cookies, r.Cookies); diff != "" {
				t.Errorf("cookies (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOAuth2UserEmptyToken(t *testing.T) {
	base, _ := recorder(t)
	ct := tmpl(t, map[string]any{"url": base, "auth": map[string]any{"auth_type": "oauth2_user", "access_token": "x"}})
	ct.Auth.AccessToken = "" // a variable that resolved to nothing
	_, err := call(t, newTransport(t, nil), ct, nil)
	if code := utcp.CodeOf(err); code != utcp.CodeUnauthorized || !strings.Contains(err.Error(), "access_token") {
		t.Errorf("err = %v (code %s), want unauthorized naming access_token", err, code)
	}
}

func TestOAuth2RetryOn401(t *testing.T) {
	tokenURL, fetched := tokenEndpoint(t)
	var hits atomic.Int64
	accept := "tok-2"
	backend := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+accept {
			w.WriteHeader(nethttp.StatusUnauthorized)
			return
		}
		io.WriteString(w, "welcome")
	}))
	defer backend.Close()
	auth := map[string]any{"auth_type": "oauth2", "token_url": tokenURL, "client_id": "cid", "client_secret": "csecret"}
	tr := newTransport(t, nil)
	res, err := call(t, tr, tmpl(t, map[string]any{"url": backend.URL, "auth": auth}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != "welcome" || fetched.Load() != 2 || hits.Load() != 2 {
		t.Errorf("value %v, %d token fetches, %d backend hits; want welcome, 2, 2", res.Value, fetched.Load(), hits.Load())
	}
	// A backend that keeps refusing is retried once only.
	accept = "never"
	_, err = call(t, tr, tmpl(t, map[string]any{"url": backend.URL, "auth": auth}), nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != nethttp.StatusUnauthorized {
		t.Fatalf("err = %v, want a 401 ToolError", err)
	}
	if hits.Load() != 4 {
		t.Errorf("backend hit %d times in total, want 4", hits.Load())
	}
}

func TestInsecureURLRefused(t *testing.T) {
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": "http://example.com/api/{id}"})
	_, err := call(t, tr, ct, map[string]any{"id": 1})
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidTemplate {
		t.Errorf("call: err = %v (code %s), want invalid_template", err, code)
	}
	_, err = tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": "http://example.com/utcp"}))
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidTemplate {
		t.Errorf("discovery: err = %v (code %s), want invalid_template", err, code)
	}
	// allow_insecure is accepted by the parser (the URL check itself is
	// covered in package transports).
	if spec := tmpl(t, map[string]any{"url": "http://example.com/", "allow_insecure": true}).Spec.(*utcphttp.Template); !spec.AllowInsecure {
		t.Errorf("allow_insecure not parsed")
	}
}

func TestRedirectToPublicHTTPRefused(t *testing.T) {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Redirect(w, r, "http://example.com/collect", nethttp.StatusFound)
	}))
	defer srv.Close()
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": srv.URL}), nil)
	var tre *utcp.TransportError
	if !errors.As(err, &tre) || utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Errorf("err = %v, want a TransportError (transport_error)", err)
	}
}

func TestAuthStrippedOnCrossOriginRedirect(t *testing.T) {
	target, got := recorder(t)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Redirect(w, r, target+"/elsewhere", nethttp.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	ct := tmpl(t, map[string]any{"url": srv.URL + "/start", "headers": map[string]any{"X-Secret-Header": "s"},
		"auth": map[string]any{"auth_type": "api_key", "api_key": "k", "var_name": "X-Custom-Key"}})
	if _, err := call(t, newTransport(t, nil), ct, nil); err != nil {
		t.Fatal(err)
	}
	r := <-got
	for _, k := range []string{"X-Custom-Key", "X-Secret-Header", "Authorization", "Referer"} {
		if v := r.Header.Get(k); v != "" {
			t.Errorf("%s = %q reached the other origin", k, v)
		}
	}
}

func TestStatusMapping(t *testing.T) {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		switch r.URL.Path {
		case "/404":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, `{"detail":"no such user"}`)
		case "/503":
			w.WriteHeader(503)
			io.WriteString(w, "upstream down")
		case "/204":
			w.WriteHeader(204)
		case "/text":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "plain answer")
		case "/problem":
			w.Header().Set("Content-Type", "application/problem+json")
			io.WriteString(w, `{"n": 1.50}`)
		case "/badjson":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"truncated": `)
		}
	}))
	defer srv.Close()
	tr := newTransport(t, nil)

	_, err := call(t, tr, tmpl(t, map[string]any{"url": srv.URL + "/404"}), nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("404: err = %v (%T), want *utcp.ToolError", err, err)
	}
	if te.Status != 404 || !strings.Contains(te.Message, "404") || !strings.Contains(te.Message, "no such user") {
		t.Errorf("404: %+v", te)
	}
	if diff := cmp.Diff(map[string]any{"detail": "no such user"}, te.Value); diff != "" {
		t.Errorf("404 value (-want +got):\n%s", diff)
	}

	_, err = call(t, tr, tmpl(t, map[string]any{"url": srv.URL + "/503"}), nil)
	var tre *utcp.TransportError
	if !errors.As(err, &tre) || tre.Status != 503 || utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Errorf("503: err = %v, want a TransportError with status 503", err)
	}

	for path, want := range map[string]any{
		"/204":     nil,
		"/text":    "plain answer",
		"/problem": map[string]any{"n": json.Number("1.50")},
		"/badjson": `{"truncated": `,
	} {
		res, err := call(t, tr, tmpl(t, map[string]any{"url": srv.URL + path}), nil)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if diff := cmp.Diff(want, res.Value); diff != "" {
			t.Errorf("%s value (-want +got):\n%s", path, diff)
		}
	}
}

func TestUnknownToolIs404ToolError(t *testing.T) {
	base := serveFixture(t, fixture.New())
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": base + "/tools/no_such_tool"}), nil)
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != nethttp.StatusNotFound {
		t.Errorf("err = %v, want a ToolError with status 404", err)
	}
}

// slowServer answers after the request's context ends (or 10 s).
func slowServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestTimeout(t *testing.T) {
	url := slowServer(t)
	tr := newTransport(t, nil)
	start := time.Now()
	_, err := call(t, tr, tmpl(t, map[string]any{"url": url, "timeout": 100}), nil)
	if code := utcp.CodeOf(err); code != utcp.CodeTimeout {
		t.Errorf("template timeout: err = %v (code %s), want timeout", err, code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err = tr.CallTool(ctx, &utcp.Call{Template: tmpl(t, map[string]any{"url": url})})
	if code := utcp.CodeOf(err); code != utcp.CodeTimeout {
		t.Errorf("context deadline: err = %v (code %s), want timeout", err, code)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("two 100 ms timeouts took %v", took)
	}
}

func TestConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(nethttp.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": url}), nil)
	var tre *utcp.TransportError
	if !errors.As(err, &tre) || utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Errorf("err = %v, want a TransportError", err)
	}
}

func TestErrorsDoNotLeakQueryKeys(t *testing.T) {
	srv := httptest.NewServer(nethttp.NotFoundHandler())
	url := srv.URL
	srv.Close()
	ct := tmpl(t, map[string]any{"url": url, "auth": map[string]any{"auth_type": "api_key", "api_key": "sekrit", "var_name": "key", "location": "query"}})
	_, err := call(t, newTransport(t, nil), ct, nil)
	if err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("err = %v: must exist and not contain the key", err)
	}
}

func TestOversizedResponse(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path == "/declared" {
			w.Header().Set("Content-Length", "1073741824")
		}
		chunk := []byte(strings.Repeat("x", 32<<10))
		for written.Load() < 1<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil || r.Context().Err() != nil {
				return
			}
		}
	}))
	defer srv.Close()
	tr := newTransport(t, map[string]any{"max_response_bytes": 1 << 20})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := call(t, tr, tmpl(t, map[string]any{"url": srv.URL + "/endless"}), nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, transports.ErrTooLarge) || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Fatalf("err = %v, want payload_too_large", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("reading a capped 1 MiB response allocated %d MiB", alloc>>20)
	}
	if w := written.Load(); w > 256<<20 {
		t.Errorf("the server wrote %d MiB: the transport kept reading", w>>20)
	}

	_, err = call(t, tr, tmpl(t, map[string]any{"url": srv.URL + "/declared"}), nil)
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Errorf("declared length: err = %v, want payload_too_large", err)
	}
}

func TestClosedTransport(t *testing.T) {
	tr := newTransport(t, nil)
	tr.Close()
	tr.Close()
	_, err := call(t, tr, tmpl(t, map[string]any{"url": "https://example.com/"}), nil)
	if code := utcp.CodeOf(err); code != utcp.CodeUnavailable {
		t.Errorf("err = %v (code %s), want unavailable", err, code)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []string{`{"max_response_bytes": -1}`, `{"max_response_bytes": "big"}`} {
		if _, err := utcphttp.New(transports.Options{Config: json.RawMessage(cfg)}); utcp.CodeOf(err) != utcp.CodeInvalidConfig {
			t.Errorf("New(%s): err = %v, want invalid_config", cfg, err)
		}
	}
}

func TestRegistered(t *testing.T) {
	if _, ok := transports.Default.Lookup("http"); !ok {
		t.Errorf("http is not registered in transports.Default")
	}
}

// --- discovery ---

func toolNames(m *utcp.Manual) []string {
	var names []string
	for _, tool := range m.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func fixtureNames() []string {
	var names []string
	for _, tool := range fixture.Tools() {
		names = append(names, tool.Name)
	}
	return names
}

func discover(t *testing.T, tr *utcphttp.Transport, fields map[string]any) (*utcp.Manual, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return tr.RegisterManual(ctx, tmpl(t, fields))
}

func TestDiscoverUTCPManual(t *testing.T) {
	base := serveFixture(t, fixture.New())
	tr := newTransport(t, nil)
	m, err := discover(t, tr, map[string]any{"url": base + "/utcp"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fixtureNames(), toolNames(m)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, tool := range m.Tools {
		if tool.ToolCallTemplate == nil || tool.ToolCallTemplate.Type != "http" {
			t.Fatalf("tool %s has template %+v", tool.Name, tool.ToolCallTemplate)
		}
		ct, err := utcphttp.ParseTemplate(tool.ToolCallTemplate.Raw)
		if err != nil {
			t.Fatalf("tool %s: %v", tool.Name, err)
		}
		if want := base + "/tools/" + tool.Name; ct.Spec.(*utcphttp.Template).URL != want {
			t.Errorf("tool %s url %q, want %q", tool.Name, ct.Spec.(*utcphttp.Template).URL, want)
		}
	}
}

func TestDiscoverOpenAPIAndCall(t *testing.T) {
	base := serveFixture(t, fixture.New())
	tr := newTransport(t, nil)
	m, err := discover(t, tr, map[string]any{"url": base + "/openapi.json"})
	if err != nil {
		t.Fatal(err)
	}
	got := toolNames(m)
	want := append([]string(nil), fixtureNames()...)
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, tool := range m.Tools {
		if tool.Name != fixture.Add {
			continue
		}
		ct, err := utcphttp.ParseTemplate(tool.ToolCallTemplate.Raw)
		if err != nil {
			t.Fatal(err)
		}
		res, err := call(t, tr, &ct, map[string]any{"a": 2, "b": 3.5})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"sum": json.Number("5.5")}, res.Value); diff != "" {
			t.Errorf("add via OpenAPI (-want +got):\n%s", diff)
		}
		var inputs map[string]any
		json.Unmarshal(tool.Inputs, &inputs)
		if diff := cmp.Diff([]any{"a", "b"}, inputs["required"]); diff != "" {
			t.Errorf("add inputs.required (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatal("add was not discovered")
}

// docServer serves fixed documents by path, recording request headers.
func docServer(t *testing.T, docs map[string]struct{ ctype, body string }) (string, <-chan nethttp.Header) {
	t.Helper()
	hdr := make(chan nethttp.Header, 16)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		hdr <- r.Header.Clone()
		d, ok := docs[r.URL.Path]
		if !ok {
			nethttp.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", d.ctype)
		io.WriteString(w, d.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hdr
}

const yamlManual = `
utcp_version: "1.1.0"
manual_version: "2.0.0"
tools:
  - name: weather
    description: Current weather
    tags: [weather]
    inputs:
      type: object
      properties:
        city: {type: string}
      required: [city]
    tool_call_template:
      call_template_type: http
      url: https://api.example.com/weather/{city}
      http_method: GET
`

const legacyManual = `{
  "version": "1.0",
  "tools": [{
    "name": "everything_get",
    "description": "Search news",
    "tags": ["news"],
    "inputs": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    "outputs": {"type": "object"},
    "tool_provider": {
      "provider_type": "http",
      "url": "https://newsapi.org/v2/everything",
      "http_method": "GET",
      "auth": {"auth_type": "api_key", "api_key": "$NEWS_API_KEY", "var_name": "X-Api-Key"}
    }
  }]
}`

const yamlOpenAPI = `
openapi: 3.0.0
info: {title: Pets, version: "3.1"}
servers:
  - url: https://pets.example.com/v1
paths:
  /pets/{id}:
    get:
      operationId: getPet
      summary: Get a pet
      parameters:
        - {name: id, in: path, required: true, schema: {type: integer}}
      responses:
        200:
          description: ok
          content:
            application/json:
              schema: {type: object}
`

func TestDiscoverDocuments(t *testing.T) {
	base, hdr := docServer(t, map[string]struct{ ctype, body string }{
		"/manual.yaml":  {"text/plain", yamlManual},
		"/manual":       {"application/yaml", yamlManual},
		"/legacy.json":  {"application/json", legacyManual},
		"/openapi.yaml": {"application/x-yaml", yamlOpenAPI},
		"/other.json":   {"application/json", `{"hello": "world"}`},
		"/array.json":   {"application/json", `[1, 2]`},
		"/garbage":      {"text/html", "<html>not a manual</html>"},
	})
	tr := newTransport(t, nil)
	for _, path := range []string{"/manual.yaml", "/manual"} {
		m, err := discover(t, tr, map[string]any{"url": base + path})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		<-hdr
		if diff := cmp.Diff([]string{"weather"}, toolNames(m)); diff != "" || m.ManualVersion != "2.0.0" {
			t.Errorf("%s: tools %v, manual_version %q", path, toolNames(m), m.ManualVersion)
		}
		if ct := m.Tools[0].ToolCallTemplate; ct == nil || ct.Type != "http" {
			t.Errorf("%s: template %+v", path, ct)
		}
	}

	m, err := discover(t, tr, map[string]any{"url": base + "/legacy.json"})
	if err != nil {
		t.Fatalf("legacy: %v", err)
	}
	<-hdr
	if diff := cmp.Diff([]string{"everything_get"}, toolNames(m)); diff != "" {
		t.Errorf("legacy tools (-want +got):\n%s", diff)
	}
	ct := m.Tools[0].ToolCallTemplate
	if ct == nil || ct.Type != "http" {
		t.Fatalf("legacy template %+v", ct)
	}
	if _, err := utcphttp.ParseTemplate(ct.Raw); err != nil {
		t.Errorf("legacy template does not parse as http: %v (%s)", err, ct.Raw)
	}

	m, err = discover(t, tr, map[string]any{"url": base + "/openapi.yaml"})
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	<-hdr
	if diff := cmp.Diff([]string{"getPet"}, toolNames(m)); diff != "" {
		t.Errorf("openapi.yaml tools (-want +got):\n%s", diff)
	}
	if got := m.Tools[0].ToolCallTemplate; got == nil || !strings.Contains(string(got.Raw), `"https://pets.example.com/v1/pets/{id}"`) {
		t.Errorf("openapi.yaml template %s", got.Raw)
	}

	for _, path := range []string{"/other.json", "/array.json", "/garbage", "/missing"} {
		_, err := discover(t, tr, map[string]any{"url": base + path})
		<-hdr
		if code := utcp.CodeOf(err); code != utcp.CodeDiscoveryFailed {
			t.Errorf("%s: err = %v (code %s), want discovery_failed", path, err, code)
		}
	}
}

func TestDiscoverySendsHeadersAndAuth(t *testing.T) {
	base, hdr := docServer(t, map[string]struct{ ctype, body string }{"/utcp": {"application/json", legacyManual}})
	_, err := discover(t, newTransport(t, nil), map[string]any{"url": base + "/utcp", "headers": map[string]any{"X-Tenant": "t1"},
		"auth": map[string]any{"auth_type": "api_key", "api_key": "dk"}})
	if err != nil {
		t.Fatal(err)
	}
	h := <-hdr
	if h.Get("X-Tenant") != "t1" || h.Get("X-Api-Key") != "dk" {
		t.Errorf("discovery headers: %v", h)
	}
}

func TestDiscoverOpenAPIAuthTools(t *testing.T) {
	spec := `{"openapi":"3.0.0","info":{"title":"k","version":"1"},
	  "components":{"securitySchemes":{"key":{"type":"apiKey","name":"X-Api-Key","in":"header"}}},
	  "security":[{"key":[]}],
	  "paths":{"/x":{"get":{"operationId":"x","responses":{"200":{"description":"ok"}}}}}}`
	base, hdr := docServer(t, map[string]struct{ ctype, body string }{"/openapi.json": {"application/json", spec}})
	m, err := discover(t, newTransport(t, nil), map[string]any{"url": base + "/openapi.json",
		"auth_tools": map[string]any{"auth_type": "api_key", "api_key": "${MY_KEY}", "var_name": "x-api-key"}})
	if err != nil {
		t.Fatal(err)
	}
	<-hdr
	if a := m.Tools[0].ToolCallTemplate.Auth; a == nil || a.APIKey != "${MY_KEY}" {
		t.Errorf("auth = %+v, want auth_tools", a)
	}
	// The spec came from loopback, so its URL is the base.
	if !strings.Contains(string(m.Tools[0].ToolCallTemplate.Raw), base+"/x") {
		t.Errorf("template %s does not use the spec's origin", m.Tools[0].ToolCallTemplate.Raw)
	}
}

func TestDiscoveryTimeout(t *testing.T) {
	url := slowServer(t)
	_, err := discover(t, newTransport(t, nil), map[string]any{"url": url, "timeout": 100})
	if code := utcp.CodeOf(err); code != utcp.CodeTimeout {
		t.Errorf("err = %v (code %s), want timeout", err, code)
	}
}

func TestRoundTripThroughQueryKeepsTypes(t *testing.T) {
	// The demo server's mapping: nested values survive the query string.
	base := serveFixture(t, fixture.New())
	args := map[string]any{"obj": map[string]any{"list": []any{1.0, "two"}, "s": "[not json"}, "flag": true, "n": 3}
	res, err := call(t, newTransport(t, nil), tmpl(t, map[string]any{"url": base + "/tools/echo"}), args)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"obj": map[string]any{"list": []any{json.Number("1"), "two"}, "s": "[not json"}, "flag": "true", "n": "3"}
	if diff := cmp.Diff(want, res.Value); diff != "" {
		t.Errorf("echo (-want +got):\n%s", diff)
	}
}

// TestPathTraversalRefusedAgainstDemoServer calls the demo server's
// /tools/{tool} through a {tool} path placeholder: dot segments, plain or
// percent-encoded, are refused before any request is sent, and ordinary
// values still reach the server.
func TestPathTraversalRefusedAgainstDemoServer(t *testing.T) {
	var requests atomic.Int64
	demo := httpserver.Handler(fixture.New())
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		requests.Add(1)
		demo.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": srv.URL + "/tools/{tool}", "http_method": "GET"})

	res, err := call(t, tr, ct, map[string]any{"tool": "echo", "msg": "hi"})
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
	if m, ok := res.Value.(map[string]any); !ok || m["msg"] != "hi" {
		t.Fatalf("echo answered %v", res.Value)
	}
	before := requests.Load()
	for _, v := range []string{"..", ".", "%2e%2e", "%2E%2E", "%252e%252e", "../utcp", "x/../../utcp", `..\utcp`} {
		_, err := call(t, tr, ct, map[string]any{"tool": v})
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments {
			t.Errorf("tool %q: err = %v, want invalid_arguments", v, err)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("%d refused calls reached the server", n)
	}
	// A "/" in a value stays inside its segment (escaped): the demo
	// server sees one unknown tool, not the manual at /utcp.
	_, err = call(t, tr, ct, map[string]any{"tool": "x/utcp"})
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != 404 {
		t.Errorf(`tool "x/utcp": err = %v, want a 404 tool error`, err)
	}
}

// TestCookieFields: cookie_fields arguments travel in one Cookie header
// (after the template's own, beside an api_key cookie), never in the
// query; a value that cannot be a cookie is refused before sending.
func TestCookieFields(t *testing.T) {
	base, got := recorder(t)
	ct := tmpl(t, map[string]any{"url": base + "/c", "cookie_fields": []any{"session", "lang", "absent"}, "headers": map[string]any{"Cookie": "static=1"},
		"auth": map[string]any{"auth_type": "api_key", "api_key": "k", "var_name": "key", "location": "cookie"}})
	if _, err := call(t, newTransport(t, nil), ct, map[string]any{"session": "abc123", "lang": 7, "q": "x"}); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if diff := cmp.Diff(map[string]string{"static": "1", "session": "abc123", "lang": "7", "key": "k"}, r.Cookies); diff != "" {
		t.Errorf("cookies (-want +got):\n%s\nCookie: %q", diff, r.Header.Values("Cookie"))
	}
	if r.Query != "q=x" {
		t.Errorf("query %q", r.Query)
	}
	for _, bad := range []string{"a b", "a;b=c", `"q"`, "é"} {
		_, err := call(t, newTransport(t, nil), ct, map[string]any{"session": bad})
		if code := utcp.CodeOf(err); code != utcp.CodeInvalidArguments {
			t.Errorf("%q: err = %v, want invalid_arguments", bad, err)
		}
	}
	if _, err := utcphttp.ParseTemplate(json.RawMessage(`{"call_template_type": "http", "url": "https://x", "cookie_fields": ["a b"]}`)); utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("bad cookie name: %v", err)
	}
}
