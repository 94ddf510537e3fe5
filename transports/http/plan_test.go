package http_test

import (
	nethttp "net/http"
	"testing"

	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/utcp"
)

// The requests of a template share what was prepared when it was parsed
// (static headers, the URL): what one call adds (header fields, a body's
// Content-Type, credentials) must not leak into the next call.
func TestPreparedRequestNotShared(t *testing.T) {
	base, got := recorder(t)
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": base + "/p?fixed=1", "http_method": "POST", "header_fields": []any{"X-H"},
		"headers": map[string]any{"X-Static": "s"}})
	withAuth := *ct
	withAuth.Auth = &utcp.Auth{Type: utcp.AuthAPIKey, APIKey: "k", VarName: "X-Key"}
	steps := []struct {
		ct     *utcp.CallTemplate
		args   map[string]any
		header nethttp.Header // the headers compared
		query  string
	}{
		{ct, map[string]any{"X-H": "one", "body": "b", "q": 1},
			nethttp.Header{"X-H": {"one"}, "Content-Type": {"application/json"}, "X-Key": nil, "X-Static": {"s"}, "User-Agent": {"utcpd"}}, "fixed=1&q=1"},
		{&withAuth, nil,
			nethttp.Header{"X-H": nil, "Content-Type": nil, "X-Key": {"k"}, "X-Static": {"s"}, "User-Agent": {"utcpd"}}, "fixed=1"},
		{ct, map[string]any{"X-H": nil},
			nethttp.Header{"X-H": nil, "Content-Type": nil, "X-Key": nil, "X-Static": {"s"}, "User-Agent": {"utcpd"}}, "fixed=1"},
		{ct, map[string]any{"X-H": "two", "r": "x"},
			nethttp.Header{"X-H": {"two"}, "Content-Type": nil, "X-Key": nil, "X-Static": {"s"}, "User-Agent": {"utcpd"}}, "fixed=1&r=x"},
	}
	for i, s := range steps {
		if _, err := call(t, tr, s.ct, s.args); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		r := <-got
		if r.Query != s.query {
			t.Errorf("call %d: query %q, want %q", i, r.Query, s.query)
		}
		for k, want := range s.header {
			if v := r.Header.Values(k); len(v) != len(want) || (len(v) == 1 && v[0] != want[0]) {
				t.Errorf("call %d: header %s = %q, want %q", i, k, v, want)
			}
		}
	}
}

// A Template that did not come from ParseTemplate (Spec set by hand) is
// prepared at each call instead.
func TestHandBuiltTemplate(t *testing.T) {
	base, got := recorder(t)
	spec := &utcphttp.Template{URL: base + "/items/{id}", HTTPMethod: "GET", ContentType: "application/json", BodyField: "body",
		Headers: map[string]string{"X-Static": "s"}}
	ct := &utcp.CallTemplate{Name: "m", Type: utcphttp.Type, Spec: spec}
	for _, id := range []string{"a", "b/c"} {
		if _, err := call(t, newTransport(t, nil), ct, map[string]any{"id": id, "q": 2}); err != nil {
			t.Fatal(err)
		}
		r := <-got
		want := map[string]string{"a": "/items/a", "b/c": "/items/b%2Fc"}[id]
		if r.Path != want || r.Query != "q=2" || r.Header.Get("X-Static") != "s" {
			t.Errorf("request %+v, want path %s, query q=2 and X-Static", r, want)
		}
	}
}
