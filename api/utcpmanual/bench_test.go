package utcpmanual_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// benchManuals registers n more copies of the typed manual (7 tools each).
func benchManuals(_ *testing.B, e *env, n int) {
	for i := range n {
		e.register(fmt.Sprintf(`{"name":"bulk%d","call_template_type":"typed"}`, i))
	}
}

// BenchmarkManual measures GET /utcp on the handler (no network): cached
// (200 with the body), revalidated (304), and rendered after every tool
// change, with 145 tools.
func BenchmarkManual(b *testing.B) {
	e := newEnv(b, envOptions{})
	benchManuals(b, e, 20)
	get := func(inm string) *httptest.ResponseRecorder {
		return getHost(e, "127.0.0.1:8787", inm)
	}
	first := get("")

	if first.Code != http.StatusOK {
		b.Fatalf("GET /utcp: %d", first.Code)
	}
	b.Logf("manual: %d bytes", first.Body.Len())
	etag := first.Header().Get("ETag")
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			get("")
		}
	})
	b.Run("not_modified", func(b *testing.B) {
		for b.Loop() {
			if w := get(etag); w.Code != http.StatusNotModified {
				b.Fatal(w.Code)
			}
		}
	})
	// A new Host each time: the manual is rendered for it.
	b.Run("render", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if w := getHost(e, fmt.Sprintf("h%d.example:8787", i), ""); w.Code != http.StatusOK {
				b.Fatal(w.Code)
			}
		}
	})
}

func getHost(e *env, host, inm string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "http://"+host+"/utcp", nil)
	if inm != "" {
		r.Header.Set("If-None-Match", inm)
	}
	w := httptest.NewRecorder()
	e.rt.ServeHTTP(w, r)
	return w
}

// BenchmarkCall measures POST /utcp/call/typed.echo on the handler with
// typed query arguments and a body argument, through the gateway to the
// in-process tool.
func BenchmarkCall(b *testing.B) {
	e := newEnv(b, envOptions{})
	rt := e.rt
	q := url.Values{"count": {"3"}, "flag": {"true"}, "label": {"x y"}, "tags[]": {"a", "b"}, "options[deep][on]": {"false"}}
	target := "http://127.0.0.1:8787/utcp/call/typed.echo?" + q.Encode()
	for b.Loop() {
		r := httptest.NewRequest("POST", target, nil)
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
