package front

import (
	"net/http"
	"strings"
)

// toolsPrefix is where the routes naming a tool start.
const toolsPrefix = "/v1/tools/"

// SlashNames lets tool names containing "/" (an OpenAPI operationId such
// as "repos/get" gives the tool gh.repos/get) be written with plain
// slashes in the REST front's paths. It rewrites the escaped path of a
// request under /v1/tools/ that has more than one segment before an
// optional final action so that the name is one path segment, as if its
// slashes had been sent as %2F:
//
//	/v1/tools/gh.repos/get              → /v1/tools/gh.repos%2Fget
//	/v1/tools/gh.repos/get/call         → /v1/tools/gh.repos%2Fget/call
//	/v1/tools/gh.repos/get/stream       → /v1/tools/gh.repos%2Fget/stream
//
// The last segment is the action when it is "call" or "stream"; every
// segment before it is the name. Without an action the path is the
// tool's description, rewritten for GET and HEAD only. So a tool whose own name ends in "/call"
// or "/stream" is reached with that slash escaped (%2F), which keeps
// working for every name. Paths with an empty, "." or ".." segment are
// left alone (the mux cleans or refuses them). Wrap the router holding
// the front's routes with it.
func SlashNames(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if raw, ok := slashPath(r.Method, r.URL.EscapedPath()); ok {
			r2 := new(http.Request)
			*r2 = *r
			u := *r.URL
			u.RawPath = raw // Path is unchanged: raw is another encoding of it
			r2.URL = &u
			next.ServeHTTP(w, r2)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// slashPath returns escaped with the tool name's segments joined by %2F,
// and whether it rewrote anything. A path without an action is a tool's
// description, rewritten for GET and HEAD only: another method on it
// stays an unknown route (404), as /v1/tools/demo.add/invoke is.
func slashPath(method, escaped string) (string, bool) {
	prefix := toolsPrefix
	rest, ok := strings.CutPrefix(escaped, toolsPrefix)
	if !ok {
		// A toolset's tools: /v1/toolsets/{toolset}/tools/{name...}.
		ts, ok := strings.CutPrefix(escaped, toolsetsPrefix)
		if !ok {
			return "", false
		}
		set, after, ok := strings.Cut(ts, "/tools/")
		if !ok || set == "" || strings.Contains(set, "/") {
			return "", false
		}
		prefix, rest = toolsetsPrefix+set+"/tools/", after
	}
	// The common case, a one-segment name and its action
	// (demo.add/call), without splitting: nothing to rewrite.
	if i := strings.IndexByte(rest, '/'); i >= 0 && strings.IndexByte(rest[i+1:], '/') < 0 {
		if last := rest[i+1:]; last == "call" || last == "stream" {
			return "", false
		}
	}
	segs := strings.Split(rest, "/")
	if len(segs) < 2 {
		return "", false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", false
		}
	}
	name, action := segs, ""
	if last := segs[len(segs)-1]; last == "call" || last == "stream" {
		name, action = segs[:len(segs)-1], last
	}
	if len(name) < 2 {
		return "", false // a one-segment name: the routes match it as it is
	}
	if action == "" && method != http.MethodGet && method != http.MethodHead {
		return "", false
	}
	out := prefix + strings.Join(name, "%2F")
	if action != "" {
		out += "/" + action
	}
	return out, true
}
