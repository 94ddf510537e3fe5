package httpx_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// perimeterCase is one request and the code the perimeter answers ("" =
// the handler ran).
type perimeterCase struct {
	name        string
	method      string
	host        string
	origin      string
	contentType string // "-" = none
	body        string
	want        utcp.Code
}

func TestPerimeter(t *testing.T) {
	p := httpx.Perimeter{
		ListenHost:     "gateway.lan",
		PublicURL:      "https://tools.example.com/base",
		AllowedHosts:   []string{"alias.example.org", "*.corp.example"},
		AllowedOrigins: []string{"https://app.example.com/"},
	}
	cases := []perimeterCase{
		{name: "loopback ip", method: "GET", host: "127.0.0.1:8787"},
		{name: "localhost", method: "GET", host: "localhost:8787"},
		{name: "localhost trailing dot", method: "GET", host: "LOCALHOST.:8787"},
		{name: "sub.localhost", method: "GET", host: "app.localhost:8787"},
		{name: "ipv6 loopback", method: "GET", host: "[::1]:8787"},
		{name: "lan ip literal", method: "GET", host: "192.0.2.7:8787"},
		{name: "listen host", method: "GET", host: "gateway.lan:8787"},
		{name: "public url host", method: "GET", host: "tools.example.com"},
		{name: "allowed host", method: "GET", host: "alias.example.org:8787"},
		{name: "allowed wildcard", method: "GET", host: "a.b.corp.example"},
		{name: "wildcard is not the apex", method: "GET", host: "corp.example", want: utcp.CodeForbidden},
		{name: "rebinding name", method: "GET", host: "rebind.attacker.example:8787", want: utcp.CodeForbidden},
		{name: "lookalike suffix", method: "GET", host: "localhost.attacker.example", want: utcp.CodeForbidden},
		{name: "own origin", method: "POST", host: "127.0.0.1:8787", origin: "http://127.0.0.1:8787", contentType: "application/json", body: "{}"},
		{name: "own origin default port", method: "POST", host: "localhost", origin: "http://localhost", contentType: "application/json", body: "{}"},
		{name: "public url origin", method: "POST", host: "tools.example.com", origin: "https://tools.example.com", contentType: "application/json", body: "{}"},
		{name: "allowed origin", method: "POST", host: "127.0.0.1:8787", origin: "https://app.example.com", contentType: "application/json", body: "{}"},
		{name: "other loopback port origin", method: "POST", host: "127.0.0.1:8787", origin: "http://127.0.0.1:3000", contentType: "application/json", body: "{}", want: utcp.CodeForbidden},
		{name: "foreign origin", method: "POST", host: "127.0.0.1:8787", origin: "https://evil.example", contentType: "application/json", body: "{}", want: utcp.CodeForbidden},
		{name: "foreign origin on GET", method: "GET", host: "127.0.0.1:8787", origin: "https://evil.example", want: utcp.CodeForbidden},
		{name: "null origin", method: "POST", host: "127.0.0.1:8787", origin: "null", contentType: "application/json", body: "{}", want: utcp.CodeForbidden},
		{name: "scheme mismatch port", method: "POST", host: "127.0.0.1:8787", origin: "https://127.0.0.1", contentType: "application/json", body: "{}", want: utcp.CodeForbidden},
		{name: "form post", method: "POST", host: "127.0.0.1:8787", contentType: "application/x-www-form-urlencoded", body: "a=1", want: utcp.CodeUnsupportedMediaType},
		{name: "text plain", method: "POST", host: "127.0.0.1:8787", contentType: "text/plain", body: "{}", want: utcp.CodeUnsupportedMediaType},
		{name: "empty body no type", method: "POST", host: "127.0.0.1:8787", contentType: "-", want: utcp.CodeUnsupportedMediaType},
		{name: "empty body json", method: "POST", host: "127.0.0.1:8787", contentType: "application/json"},
		{name: "json with charset", method: "PUT", host: "127.0.0.1:8787", contentType: "application/json; charset=utf-8", body: "{}"},
		{name: "plus json", method: "PATCH", host: "127.0.0.1:8787", contentType: "application/merge-patch+json", body: "{}"},
		{name: "delete needs no type", method: "DELETE", host: "127.0.0.1:8787"},
	}
	var ran atomic.Int64
	h := p.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != "" {
				body = strings.NewReader(c.body)
			}
			r := httptest.NewRequest(c.method, "http://x/v1/tools/t/call", body)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.contentType != "" && c.contentType != "-" {
				r.Header.Set("Content-Type", c.contentType)
			}
			before := ran.Load()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if c.want == "" {
				if w.Code != http.StatusNoContent || ran.Load() != before+1 {
					t.Fatalf("want the handler to run, got %d %s", w.Code, w.Body)
				}
				return
			}
			if ran.Load() != before {
				t.Fatalf("the handler ran for a refused request")
			}
			var env httpx.Envelope
			if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil {
				t.Fatalf("answer %d %s: %v", w.Code, w.Body, err)
			}
			if env.Error.Code != c.want || w.Code != httpx.Status(c.want) {
				t.Fatalf("got %d %s, want %s", w.Code, env.Error.Code, c.want)
			}
		})
	}
}

func TestPerimeterAnyOrigin(t *testing.T) {
	p := httpx.Perimeter{AllowedOrigins: []string{"*"}}
	r := httptest.NewRequest("GET", "http://127.0.0.1/healthz", nil)
	r.Header.Set("Origin", "https://anything.example")
	if err := p.Check(r); err != nil {
		t.Fatalf("with \"*\" every origin passes: %v", err)
	}
	r.Host = "rebind.attacker.example"
	if err := p.Check(r); err == nil {
		t.Fatal("\"*\" origins do not open the Host check")
	}
}

// TestPerimeterReadDeadline starts a real server and sends a body that
// stalls: the server cuts it off after the read timeout, while a slow
// handler after a complete body is not cut.
func TestPerimeterReadDeadline(t *testing.T) {
	p := httpx.Perimeter{ReadTimeout: 300 * time.Millisecond}
	srv := httptest.NewServer(p.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if err := httpx.ReadBody(w, r, 1<<20, &buf); err != nil {
			httpx.WriteError(w, err)
			return
		}
		time.Sleep(600 * time.Millisecond) // longer than the read timeout
		if r.Context().Err() != nil {
			t.Errorf("the request context ended after the body was read: %v", r.Context().Err())
		}
		httpx.WriteJSON(w, 200, map[string]int{"n": buf.Len()})
	})))
	defer srv.Close()

	// A complete body and a handler slower than the read timeout: served.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("complete body: %d", resp.StatusCode)
	}

	// A stalled body: the connection is cut off near the deadline.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{")
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(conn)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the stalled body was held %v", took)
	}
	if len(got) > 0 && !bytes.Contains(got, []byte("HTTP/1.1 4")) {
		t.Fatalf("a stalled body got %q", got)
	}
}

// TestPerimeterFormPaths: under FormPaths (the web console) a POST may
// be a url-encoded form; nowhere else, and not with another type or
// method, and the Host and Origin checks still apply there.
func TestPerimeterFormPaths(t *testing.T) {
	p := httpx.Perimeter{FormPaths: []string{"/ui/", "bad-not-a-prefix"}}
	form := "application/x-www-form-urlencoded"
	cases := []struct {
		name, method, path, host, origin, ctype string
		want                                    utcp.Code
	}{
		{name: "console form", method: "POST", path: "/ui/login", ctype: form},
		{name: "console form with charset", method: "POST", path: "/ui/manuals", ctype: form + "; charset=UTF-8"},
		{name: "console json", method: "POST", path: "/ui/call", ctype: "application/json"},
		{name: "console own origin", method: "POST", path: "/ui/login", ctype: form, origin: "http://127.0.0.1:8787"},
		{name: "console foreign origin", method: "POST", path: "/ui/login", ctype: form, origin: "https://evil.example", want: utcp.CodeForbidden},
		{name: "console other local origin", method: "POST", path: "/ui/login", ctype: form, origin: "http://localhost:3000", want: utcp.CodeForbidden},
		{name: "console rebinding host", method: "POST", path: "/ui/login", ctype: form, host: "rebind.attacker.example:8787", want: utcp.CodeForbidden},
		{name: "console multipart", method: "POST", path: "/ui/login", ctype: "multipart/form-data; boundary=x", want: utcp.CodeUnsupportedMediaType},
		{name: "console text plain", method: "POST", path: "/ui/login", ctype: "text/plain", want: utcp.CodeUnsupportedMediaType},
		{name: "console no type", method: "POST", path: "/ui/login", ctype: "-", want: utcp.CodeUnsupportedMediaType},
		{name: "console form PUT", method: "PUT", path: "/ui/manuals", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "prefix itself only as a folder", method: "POST", path: "/uifoo", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "dot-dot out of the prefix", method: "POST", path: "/ui/../v1/tools/t/call", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "double slash", method: "POST", path: "/ui//v1", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "REST stays JSON-only", method: "POST", path: "/v1/tools/t/call", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "admin stays JSON-only", method: "POST", path: "/admin/manuals", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "utcp stays JSON-only", method: "POST", path: "/utcp/call/t", ctype: form, want: utcp.CodeUnsupportedMediaType},
		{name: "a non-prefix entry is ignored", method: "POST", path: "/bad-not-a-prefix/x", ctype: form, want: utcp.CodeUnsupportedMediaType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, "http://127.0.0.1:8787/", strings.NewReader("a=1"))
			r.URL.Path = c.path
			r.Host = "127.0.0.1:8787"
			if c.host != "" {
				r.Host = c.host
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.ctype != "-" {
				r.Header.Set("Content-Type", c.ctype)
			}
			err := p.Check(r)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || err.Code != c.want):
				t.Fatalf("got %v, want %s", err, c.want)
			}
		})
	}
}
