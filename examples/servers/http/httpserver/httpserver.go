// Package httpserver is the demo HTTP server of the fixture tools: a
// plain REST service that also describes itself as a UTCP manual (GET
// /utcp) and as an OpenAPI 3 document (GET /openapi.json). The http
// transport's conformance and unit tests run against it; the command in
// examples/servers/http serves it for the README.
//
// Routes:
//
//	GET /utcp          the fixture manual (UTCP 1.1); tool URLs point back
//	                   at this server, built from the request's Host
//	GET /openapi.json  the same tools as OpenAPI 3.0 operations
//	GET /tools/{name}  call a fixture tool; arguments are query parameters
//
// Every tool template is a standard UTCP http template: GET
// <base>/tools/<name>, no body, so a client sends every argument as a query
// parameter (strings as they are, numbers in decimal, booleans as
// true/false, objects and arrays as JSON). The server reads each query
// parameter back as a string, except that a value that is a JSON object
// or array is decoded, which restores nested arguments. Numbers stay
// strings; the fixture tools accept numeric strings.
//
// Answers: 200 with the tool's JSON result; 422 {"error": message} for a
// tool failure (the fail tool); 404 {"error": ...} for an unknown tool;
// 400 {"error": ...} for a bad argument. A call whose client goes away is
// cancelled (sleep returns early and the fixture counts it).
//
// Long arguments travel in the URL, so the server must accept large
// request lines: use MaxHeaderBytes (NewServer does).
package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// MaxHeaderBytes is the request-line-and-headers limit the server needs so
// that a 1 MiB argument (about 3 MiB once query-escaped) fits in the URL.
const MaxHeaderBytes = 16 << 20

// Options tune NewHandler.
type Options struct {
	// AllowInsecure adds "allow_insecure": true to every tool template, so
	// that utcpd may call the tools over plain http when the server is
	// reached through a host that is not loopback (a LAN demo).
	AllowInsecure bool
	// Name is the call template name given to the tool templates
	// (default "fixture_http").
	Name string
}

// Handler returns the demo server's handler for f with default Options.
func Handler(f *fixture.Fixture) http.Handler { return NewHandler(f, Options{}) }

// NewHandler returns the demo server's handler for f.
func NewHandler(f *fixture.Fixture, opts Options) http.Handler {
	if opts.Name == "" {
		opts.Name = "fixture_http"
	}
	s := &server{f: f, opts: opts}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /utcp", s.manual)
	mux.HandleFunc("GET /openapi.json", s.openapi)
	mux.HandleFunc("GET /tools/{name}", s.call)
	return mux
}

// NewServer returns an *http.Server for addr serving NewHandler(f, opts),
// with MaxHeaderBytes and conservative read timeouts set.
func NewServer(addr string, f *fixture.Fixture, opts Options) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           NewHandler(f, opts),
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

type server struct {
	f    *fixture.Fixture
	opts Options
}

// base returns scheme://host of the request as the client addressed it.
func base(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Manual returns the fixture manual with tool URLs under baseURL
// (scheme://host, no trailing slash).
func Manual(baseURL string, opts Options) *utcp.Manual {
	if opts.Name == "" {
		opts.Name = "fixture_http"
	}
	return fixture.Manual(func(tool string) *utcp.CallTemplate {
		fields := map[string]any{
			"name":               opts.Name,
			"call_template_type": "http",
			"url":                baseURL + "/tools/" + tool,
			"http_method":        "GET",
		}
		if opts.AllowInsecure {
			fields["allow_insecure"] = true
		}
		raw, _ := json.Marshal(fields)
		return &utcp.CallTemplate{Name: opts.Name, Type: "http", Raw: raw}
	})
}

func (s *server) manual(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Manual(base(r), s.opts))
}

// OpenAPI returns an OpenAPI 3.0 document describing the fixture tools
// served under baseURL: one GET operation per tool (operationId = tool
// name) whose query parameters are the tool's input properties.
func OpenAPI(baseURL string) map[string]any {
	paths := map[string]any{}
	errorSchema := map[string]any{"type": "object", "properties": map[string]any{"error": map[string]any{"type": "string"}}}
	for _, tool := range fixture.Tools() {
		var in struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		_ = json.Unmarshal(tool.Inputs, &in)
		names := make([]string, 0, len(in.Properties))
		for name := range in.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		params := []any{}
		for _, name := range names {
			schema := in.Properties[name]
			required := false
			for _, r := range in.Required {
				required = required || r == name
			}
			params = append(params, map[string]any{"name": name, "in": "query", "required": required, "schema": schema})
		}
		ok := map[string]any{"description": "The tool's result."}
		if len(tool.Outputs) > 0 {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": tool.Outputs}}
		}
		paths["/tools/"+tool.Name] = map[string]any{"get": map[string]any{
			"operationId": tool.Name,
			"summary":     tool.Description,
			"tags":        tool.Tags,
			"parameters":  params,
			"responses": map[string]any{
				"200": ok,
				"422": map[string]any{"description": "The tool failed.", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}},
			},
		}}
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "utcpd fixture tools", "version": "1.0.0"},
		"servers": []any{map[string]any{"url": baseURL}},
		"paths":   paths,
	}
}

func (s *server) openapi(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, OpenAPI(base(r)))
}

// Args decodes a query string's parameters into tool arguments: the first
// value of each, decoded when it is a JSON object or array, a string
// otherwise.
func Args(r *http.Request) map[string]any {
	args := map[string]any{}
	for k, vs := range r.URL.Query() {
		if len(vs) == 0 {
			continue
		}
		v := vs[0]
		args[k] = v
		if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			var decoded any
			dec := json.NewDecoder(strings.NewReader(t))
			dec.UseNumber()
			if dec.Decode(&decoded) == nil && !dec.More() {
				args[k] = decoded
			}
		}
	}
	return args
}

func (s *server) call(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, err := s.f.Call(r.Context(), name, Args(r))
	var failure *fixture.Failure
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.As(err, &failure):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": failure.Message})
	case errors.Is(err, fixture.ErrUnknownTool):
		writeJSON(w, http.StatusNotFound, map[string]any{"error": err.Error()})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client went away; nobody reads the answer.
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"cannot encode the result"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
