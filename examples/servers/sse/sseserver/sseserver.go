// Package sseserver is the demo Server-Sent Events server of the fixture
// tools, for utcpd's sse transport. Its tests and benchmarks, and the
// command in examples/servers/sse, serve it.
//
// Routes:
//
//	GET /utcp          the fixture manual (UTCP 1.1); every tool template is
//	                   an sse template whose url points back at this server,
//	                   built from the request's Host
//	GET /tools/{name}  call a fixture tool; arguments are query parameters
//
// Arguments arrive as query parameters, as the sse transport sends them
// (see httpserver.Args: strings, with JSON objects and arrays decoded).
//
// count answers with a text/event-stream: one event per number, produced
// and flushed one at a time ("id: <i>" and "data: <i>", then a blank
// line), so a client sees each number as soon as the fixture emits it. A
// request carrying Last-Event-ID: k resumes after k: the numbers up to k
// are not sent again. The other tools answer with one JSON document, as
// the http demo server does: 200 with the result, 422 {"error": message}
// for a tool failure (fail), 404 {"error": ...} for an unknown tool and
// 400 {"error": ...} for a bad argument. A call whose client goes away is
// cancelled: the fixture counts it, and count stops producing. A count
// that fails after its first event breaks the connection, so the client
// sees a stream that did not end cleanly.
package sseserver

import (
	"fmt"
	"net/http"
	"strconv"

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
	// (default "fixture_sse").
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
		name = "fixture_sse"
	}
	return httpdemo.Manual(baseURL, name, "sse", opts.AllowInsecure, nil)
}

func (s *server) manual(w http.ResponseWriter, r *http.Request) {
	httpdemo.WriteJSON(w, http.StatusOK, Manual(httpdemo.BaseURL(r), s.opts))
}

func (s *server) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	args := httpserver.Args(r)
	if name != fixture.Count {
		httpdemo.Call(w, r, s.f, name, args)
		return
	}
	resume, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	httpdemo.Stream(w, r, s.f, name, args, "text/event-stream", resume, func(i int, data []byte) string {
		return fmt.Sprintf("id: %d\ndata: %s\n\n", i, data)
	})
}
