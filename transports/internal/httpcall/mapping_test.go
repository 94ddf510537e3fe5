package httpcall

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

func TestHTTPMapping(t *testing.T) {
	m := &Mapping{
		URL:          "http://127.0.0.1:9/items/{id}/{kind}?fixed=1&q={q}",
		Headers:      map[string]string{"X-Static": "s"},
		HeaderFields: []string{"X-Trace", "X-Absent"},
		BodyField:    "payload",
		ContentType:  "application/json",
	}
	args := map[string]any{
		"id": "a b/c", "kind": json.Number("7"), "q": "x&y", "X-Trace": 42,
		"payload": map[string]any{"k": "<v>"}, "flag": true, "obj": map[string]any{"a": []any{1.0}},
		"big": 1e21, "none": nil,
	}
	mr, err := m.Map(args)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mr.URL.String(), "http://127.0.0.1:9/items/a%20b%2Fc/7?fixed=1&q=x%26y&big=1000000000000000000000&flag=true&obj=%7B%22a%22%3A%5B1%5D%7D"; got != want {
		t.Errorf("URL\n got %s\nwant %s", got, want)
	}
	wantHeader := http.Header{"X-Static": {"s"}, "X-Trace": {"42"}, "Content-Type": {"application/json"}}
	if diff := cmp.Diff(wantHeader, mr.Header); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if string(mr.Body) != `{"k":"<v>"}` {
		t.Errorf("body = %s", mr.Body)
	}
	if len(args) != 9 {
		t.Errorf("Map modified its arguments")
	}

	t.Run("no body argument, no body", func(t *testing.T) {
		mr, err := m.Map(map[string]any{"id": 1, "kind": "k", "q": ""})
		if err != nil || mr.Body != nil || mr.Header.Get("Content-Type") != "" {
			t.Errorf("body %v, content type %q, err %v", mr.Body, mr.Header.Get("Content-Type"), err)
		}
	})
	t.Run("missing path argument", func(t *testing.T) {
		_, err := m.Map(map[string]any{"id": 1})
		var ue *utcp.Error
		if !errors.As(err, &ue) || ue.Code != utcp.CodeInvalidArguments || !cmp.Equal(ue.Details["missing"], []string{"kind", "q"}) {
			t.Errorf("err = %v, details %v", err, ue)
		}
	})
	t.Run("header value with a line break", func(t *testing.T) {
		_, err := m.Map(map[string]any{"id": 1, "kind": 1, "q": 1, "X-Trace": "a\r\nInjected: 1"})
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("URL check", func(t *testing.T) {
		_, err := (&Mapping{URL: "http://example.com/x"}).Map(nil)
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("err = %v", err)
		}
		if _, err := (&Mapping{URL: "http://example.com/x", AllowInsecure: true}).Map(nil); err != nil {
			t.Errorf("allow_insecure: %v", err)
		}
	})
}

func TestEncodeDecodeBody(t *testing.T) {
	for _, c := range []struct {
		ct   string
		v    any
		want string
	}{
		{"application/json", "s", `"s"`},
		{"application/vnd.x+json; charset=utf-8", map[string]any{"a": 1}, `{"a":1}`},
		{"application/octet-stream", "raw", "raw"},
		{"text/plain", 3.5, "3.5"},
		{"application/x-www-form-urlencoded", map[string]any{"b": 2, "a": "x y"}, "a=x+y&b=2"},
		{"text/plain", nil, ""},
	} {
		got, err := EncodeBody(c.ct, c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("EncodeBody(%q, %v) = %q, %v; want %q", c.ct, c.v, got, err, c.want)
		}
	}
	if v := DecodeBody("application/json", []byte(`{"n": 1}`)); !cmp.Equal(v, map[string]any{"n": json.Number("1")}) {
		t.Errorf("JSON: %v", v)
	}
	if v := DecodeBody("application/json", []byte(`{"n": 1} trailing`)); v != `{"n": 1} trailing` {
		t.Errorf("JSON with trailing text: %v", v)
	}
	if v := DecodeBody("text/plain", []byte(`{"n": 1}`)); v != `{"n": 1}` {
		t.Errorf("text: %v", v)
	}
	if v := DecodeBody("application/json", nil); v != nil {
		t.Errorf("empty: %v", v)
	}
}

func TestValidateTemplateURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://h/{a}/b":  true,
		"http://h:1/x?q=1": true,
		"${BASE}/x":        true,
		"":                 false,
		"/relative":        false,
		"ftp://h/x":        false,
		"https://":         false,
	} {
		if err := ValidateTemplateURL(raw, "http", "https"); (err == nil) != ok {
			t.Errorf("ValidateTemplateURL(%q) = %v", raw, err)
		}
	}
	if err := ValidateTemplateURL("ws://h/x", "ws", "wss"); err != nil {
		t.Error(err)
	}
}

func TestHTTPStatusError(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1/x?key=secret")
	err := StatusError("GET", u, 404, "application/json", []byte(`{"error":"no"}`))
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != 404 || !cmp.Equal(te.Value, map[string]any{"error": "no"}) {
		t.Errorf("4xx: %v", err)
	}
	err = StatusError("GET", u, 503, "", []byte("down"))
	var tr *utcp.TransportError
	if !errors.As(err, &tr) || tr.Status != 503 {
		t.Errorf("5xx: %v", err)
	}
	if msg := err.Error(); msg == "" || strings.Contains(msg, "secret") {
		t.Errorf("message %q leaks the query", msg)
	}
}

// TestPathPlaceholderDotSegmentsRefused: a path placeholder value that is,
// or holds a segment that is, "." or "..", percent-encoded or not, is
// invalid_arguments; other values, "/" included, are escaped as before.
func TestPathPlaceholderDotSegmentsRefused(t *testing.T) {
	m := &Mapping{URL: "http://127.0.0.1:1/files/{name}/raw?v={q}"}
	for _, v := range []string{".", "..", "%2e%2e", "%2E.", ".%2e", "%252e%252e", "../admin", "a/../../admin", `..\admin`, "x/./y", "%2e%2e%2fadmin", "..%2Fadmin", "%25252e%25252e"} {
		_, err := m.Map(map[string]any{"name": v, "q": "x"})
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments || !strings.Contains(err.Error(), `"name"`) {
			t.Errorf("name %q: err = %v, want invalid_arguments naming the argument", v, err)
		}
	}
	for v, want := range map[string]string{
		"a/b":    "/files/a%2Fb/raw",
		"...":    "/files/.../raw",
		"a..b":   "/files/a..b/raw",
		".hid":   "/files/.hid/raw",
		"x y":    "/files/x%20y/raw",
		"..json": "/files/..json/raw",
	} {
		req, err := m.Map(map[string]any{"name": v, "q": "x"})
		if err != nil {
			t.Errorf("name %q: %v", v, err)
			continue
		}
		if got := req.URL.EscapedPath(); got != want {
			t.Errorf("name %q: path %q, want %q", v, got, want)
		}
	}
	if _, err := m.Map(map[string]any{"name": "%2e"}); utcp.CodeOf(err) != utcp.CodeInvalidArguments {
		t.Errorf(`name "%%2e": err = %v, want invalid_arguments`, err)
	}
	// Query placeholders are query data: ".." is fine there.
	req, err := m.Map(map[string]any{"name": "a", "q": ".."})
	if err != nil || req.URL.RawQuery != "v=.." {
		t.Errorf("q \"..\": %v, %v", req, err)
	}
}
