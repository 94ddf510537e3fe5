package httpx

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// Route is one (method, path) the Router serves. Path is a net/http
// ServeMux path pattern such as "/v1/tools/{name}/call".
type Route struct {
	// Method is the HTTP method, upper case.
	Method string
	// Path is the path pattern.
	Path string
}

// String returns "METHOD /path".
func (r Route) String() string { return r.Method + " " + r.Path }

// Router maps (method, path pattern) to handlers on top of an
// http.ServeMux. Unlike a bare ServeMux, an unknown path is answered with
// a 404 not_found envelope and a known path with a wrong method with a
// 405 method_not_allowed envelope and an Allow header. A GET route also
// answers HEAD. Register every route before serving; a Router is then
// safe for concurrent use.
type Router struct {
	mux    *http.ServeMux
	paths  map[string]*pathRoutes
	routes []Route
}

// pathRoutes dispatches one path pattern by method.
type pathRoutes struct {
	methods  []string
	handlers []http.Handler
	allow    string
}

// NewRouter returns an empty Router.
func NewRouter() *Router {
	rt := &Router{mux: http.NewServeMux(), paths: map[string]*pathRoutes{}}
	rt.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, Errorf(utcp.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path).
			WithDetail("method", r.Method).WithDetail("path", r.URL.Path))
	})
	return rt
}

// Handle registers h for "METHOD /path". It panics on a malformed or
// duplicate pattern, as ServeMux does: routes are fixed at start.
func (rt *Router) Handle(pattern string, h http.Handler) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || !strings.HasPrefix(path, "/") || strings.ToUpper(method) != method {
		panic(fmt.Sprintf("httpx: route %q is not \"METHOD /path\"", pattern))
	}
	p := rt.paths[path]
	if p == nil {
		p = &pathRoutes{}
		rt.paths[path] = p
		rt.mux.Handle(path, p)
	}
	if slices.Contains(p.methods, method) {
		panic(fmt.Sprintf("httpx: route %q registered twice", pattern))
	}
	p.methods = append(p.methods, method)
	p.handlers = append(p.handlers, h)
	allow := slices.Clone(p.methods)
	if slices.Contains(allow, http.MethodGet) && !slices.Contains(allow, http.MethodHead) {
		allow = append(allow, http.MethodHead)
	}
	slices.Sort(allow)
	p.allow = strings.Join(allow, ", ")
	rt.routes = append(rt.routes, Route{Method: method, Path: path})
}

// HandleFunc registers f for "METHOD /path".
func (rt *Router) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(f))
}

// Routes returns every registered route in registration order.
func (rt *Router) Routes() []Route { return slices.Clone(rt.routes) }

// ServeHTTP dispatches r.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.mux.ServeHTTP(w, r) }

func (p *pathRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := r.Method
	for i, method := range p.methods {
		if method == m {
			p.handlers[i].ServeHTTP(w, r)
			return
		}
	}
	if m == http.MethodHead {
		for i, method := range p.methods {
			if method == http.MethodGet {
				p.handlers[i].ServeHTTP(w, r)
				return
			}
		}
	}
	w.Header().Set("Allow", p.allow)
	WriteError(w, Errorf(utcp.CodeMethodNotAllowed, "method %s is not allowed on %s; use %s", m, r.URL.Path, p.allow).
		WithDetail("method", m).WithDetail("allow", strings.Split(p.allow, ", ")))
}

// Recover returns a middleware that turns a panic in next into a 500
// internal envelope (when nothing was written yet) and logs the panic with
// its stack; the stack never reaches the client. http.ErrAbortHandler is
// passed on, as net/http expects.
func Recover(log *slog.Logger) func(http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				WriteError(w, Errorf(utcp.CodeInternal, "panic"))
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// Chain applies middlewares to h, the first one outermost.
func Chain(h http.Handler, mws ...func(http.Handler) http.Handler) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}
