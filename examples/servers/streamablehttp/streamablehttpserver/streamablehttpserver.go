// Package streamablehttpserver is the demo server of the fixture tools for
// utcpd's streamable_http transport (HTTP chunked streaming). Its tests
// and benchmarks, and the command in examples/servers/streamablehttp,
// serve it.
//
// Routes:
//
//	GET /utcp          the fixture manual (UTCP 1.1); every tool template is
//	                   a streamable_http template whose url points back at
//	                   this server, built from the request's Host
//	GET /tools/{name}  call a fixture tool; arguments are query parameters
//
// Arguments arrive as query parameters, as the transport sends them (see
// httpserver.Args: strings, with JSON objects and arrays decoded).
//
// count streams its numbers as they are produced, each flushed at once, in
// the format the first media type of the request's Accept header names:
// text/event-stream gives one server-sent event per number ("id" and
// "data"), text/plain gives one number per line as plain text (which the
// transport reads as raw chunks), and anything else (the transport's
// default Accept) gives NDJSON, Content-Type application/x-ndjson. The
// other tools answer with one JSON document, as the http demo server
// does: 200 with the result, 422 {"error": message} for a tool failure,
// 404 {"error": ...} for an unknown tool and 400 {"error": ...} for a bad
// argument. A call whose client goes away is cancelled: the fixture
// counts it, and count stops producing.
package streamablehttpserver

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/examples/servers/internal/httpdemo"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// MaxHeaderBytes is the request-line-and-headers limit the server needs so
// that a 1 MiB argument, query-escaped, fits in the URL.
const MaxHeaderBytes = httpserver.MaxHeaderBytes

// Options tune NewHandler.
type Options struct {
	// AllowInsecure adds "allow_insecure": true to every tool template, so
	// that utcpd may call the tools over plain http through a host that is
	// not loopback (a LAN demo).
	AllowInsecure bool
	// Name is the call template name given to the tool templates
	// (default "fixture_streamable_http").
	Name string
}

// Handler returns the demo server's handler for f with default Options.
func Handler(f *fixture.Fixture) http.Handler { return NewHandler(f, Options{}) }

// NewHandler returns the demo server's handler for f.
func NewHandler(f *fixture.Fixture, opts Options) http.Handler {
	s := &server{f: f, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", s.manual)
	mux.HandleFunc("GET /tools/{name}", s.call)
	return mux
}

// NewServer returns an *http.Server for addr serving NewHandler(f, opts),
// with MaxHeaderBytes and a read-header timeout set. It sets no write
// timeout: streams may last.
func NewServer(addr string, f *fixture.Fixture, opts Options) *http.Server {
	return httpdemo.NewServer(addr, NewHandler(f, opts))
}

type server struct {
	f    *fixture.Fixture
	opts Options
}

// Manual returns the fixture manual with tool URLs under baseURL
// (scheme://host, no trailing slash).
func Manual(baseURL string, opts Options) *utcp.Manual {
	name := opts.Name
	if name == "" {
		name = "fixture_streamable_http"
	}
	return httpdemo.Manual(baseURL, name, "streamable_http", opts.AllowInsecure, map[string]any{"http_method": "GET"})
}

func (s *server) manual(w http.ResponseWriter, r *http.Request) {
	httpdemo.WriteJSON(w, http.StatusOK, Manual(httpdemo.BaseURL(r), s.opts))
}

// Format names the framing of count's stream.
type Format string

// The stream formats count offers.
const (
	NDJSON Format = "application/x-ndjson"
	SSE    Format = "text/event-stream"
	Text   Format = "text/plain; charset=utf-8"
)

// Negotiate returns the format for an Accept header: the first media type
// listed decides.
func Negotiate(accept string) Format {
	first, _, _ := strings.Cut(accept, ",")
	first, _, _ = strings.Cut(first, ";")
	switch strings.ToLower(strings.TrimSpace(first)) {
	case "text/event-stream":
		return SSE
	case "text/plain":
		return Text
	}
	return NDJSON
}

func (s *server) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	args := httpserver.Args(r)
	if name != fixture.Count {
		httpdemo.Call(w, r, s.f, name, args)
		return
	}
	format := Negotiate(r.Header.Get("Accept"))
	httpdemo.Stream(w, r, s.f, name, args, string(format), 0, func(i int, data []byte) string {
		if format == SSE {
			return fmt.Sprintf("id: %d\ndata: %s\n\n", i, data)
		}
		return fmt.Sprintf("%s\n", data)
	})
}
