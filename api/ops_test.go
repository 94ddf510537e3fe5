package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

func TestHealthAndReady(t *testing.T) {
	var notReady error
	e := newEnv(t, envOptions{api: Options{Ready: func() error { return notReady }}})
	r := e.do(req{method: "GET", path: "/healthz"})
	if diff := cmp.Diff(map[string]any{"status": "ok", "version": "test"}, r.json(t)); r.status != 200 || diff != "" {
		t.Errorf("healthz %d (-want +got):\n%s", r.status, diff)
	}
	if r := e.do(req{method: "GET", path: "/readyz"}); r.status != 200 || r.json(t)["status"] != "ready" {
		t.Errorf("readyz: %s", r)
	}
	notReady = errors.New("restoring manuals")
	r = e.do(req{method: "GET", path: "/readyz"})
	expectError(t, r, 503, utcp.CodeUnavailable)
	if !strings.Contains(string(r.body), "restoring manuals") {
		t.Errorf("readyz does not say why: %s", r)
	}
	// healthz stays 200 while not ready.
	if r := e.do(req{method: "GET", path: "/healthz"}); r.status != 200 {
		t.Errorf("healthz while not ready: %s", r)
	}
	// HEAD works where GET does.
	if r := e.do(req{method: "HEAD", path: "/healthz"}); r.status != 200 || len(r.body) != 0 {
		t.Errorf("HEAD /healthz: %s", r)
	}
	expectError(t, e.do(req{method: "POST", path: "/healthz", body: "{}"}), 405, utcp.CodeMethodNotAllowed)
	expectError(t, e.do(req{method: "GET", path: "/nowhere"}), 404, utcp.CodeNotFound)
	expectError(t, e.do(req{method: "GET", path: "/"}), 404, utcp.CodeNotFound)
}

func TestMetrics(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	if r := e.do(req{method: "POST", path: "/admin/manuals", body: b.manual("demo")}); r.status != 201 {
		t.Fatalf("register: %s", r)
	}
	e.do(req{method: "POST", path: "/admin/manuals", body: b.manual("demo")}) // manual_exists
	e.register(b.manual("conf"), registry.SourceConfig)
	e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":2}}`})
	e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":2}}`})
	e.do(req{method: "POST", path: "/v1/tools/demo.fail/call", body: `{}`})
	e.do(req{method: "POST", path: "/v1/tools/nothing.here/call", body: `{}`})
	r := e.do(req{method: "GET", path: "/metrics"})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.body)
	for _, want := range []string{
		`utcpd_calls_total{outcome="ok",tool="demo.add"} 2`,
		`utcpd_calls_total{outcome="tool_error",tool="demo.fail"} 1`,
		`utcpd_calls_total{outcome="tool_not_found",tool="unresolved"} 1`,
		`utcpd_call_duration_seconds_bucket{protocol="http",le="+Inf"} 3`,
		`utcpd_call_duration_seconds_count{protocol="http"} 3`,
		`utcpd_guard_decisions_total{decision="allow"} 4`,
		`utcpd_calls_in_flight 0`,
		`utcpd_registrations_total{op="register",outcome="ok",source="api"} 1`,
		`utcpd_registrations_total{op="register",outcome="manual_exists",source="api"} 1`,
		`utcpd_manuals{source="api"} 1`,
		`utcpd_manuals{source="config"} 1`,
		`utcpd_manuals{source="dir"} 0`,
		`utcpd_tools{source="api"} 5`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", text)
	}
}

func TestObserverLogsOneLinePerCall(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(b.manual("demo"), registry.SourceAPI)
	e.do(req{method: "POST", path: "/v1/tools/demo.echo/call", body: `{"arguments":{"password":"arg-s3cr3t"}}`})
	e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":"arg-s3cr3t"}}`})
	e.do(req{method: "POST", path: "/v1/tools/demo.fail/call", body: `{"arguments":{"message":"arg-s3cr3t"}}`})
	logs := e.logs.String()
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 log lines, got %d:\n%s", len(lines), logs)
	}
	if strings.Contains(logs, "arg-s3cr3t") {
		t.Errorf("the log shows an argument:\n%s", logs)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"msg": "call", "tool": "demo.echo", "qualified": "demo.echo", "protocol": "http", "outcome": "ok", "guard": "allow"} {
		if first[k] != want {
			t.Errorf("log %s = %v, want %v (%s)", k, first[k], want, lines[0])
		}
	}
	if _, ok := first["duration"]; !ok {
		t.Errorf("no duration: %s", lines[0])
	}
	for i, want := range []string{"invalid_arguments", "tool_error"} {
		if !strings.Contains(lines[i+1], `"outcome":"`+want+`"`) {
			t.Errorf("line %d: %s", i+2, lines[i+1])
		}
	}
}

// TestOpenAPIMatchesRoutes checks that every route the router serves is
// in the OpenAPI document and that the document describes no other.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do(req{method: "GET", path: "/openapi.json"})
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Info    struct{ Version string }              `json:"info"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil || r.status != 200 {
		t.Fatalf("openapi.json: %v %s", err, r)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Version != "test" {
		t.Errorf("openapi %q, version %q", doc.OpenAPI, doc.Info.Version)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true, "trace": true}
	var documented []string
	for path, item := range doc.Paths {
		for m := range item {
			if methods[m] {
				documented = append(documented, strings.ToUpper(m)+" "+path)
			}
		}
	}
	var served []string
	for _, rt := range e.server.router.Routes() {
		served = append(served, rt.String())
	}
	slices.Sort(documented)
	slices.Sort(served)
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("routes (-served +documented):\n%s", diff)
	}
	// Every operation has responses and every $ref resolves.
	var full map[string]any
	_ = json.Unmarshal(r.body, &full)
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				if !resolves(full, ref) {
					t.Errorf("unresolved $ref %q", ref)
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(full)
	// The error codes of the document are the closed list.
	var codes []string
	for _, c := range utcp.Codes() {
		codes = append(codes, string(c))
	}
	schemas := full["components"].(map[string]any)["schemas"].(map[string]any)
	enum := schemas["ErrorEnvelope"].(map[string]any)["properties"].(map[string]any)["error"].(map[string]any)["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any)
	var docCodes []string
	for _, c := range enum {
		docCodes = append(docCodes, c.(string))
	}
	if diff := cmp.Diff(codes, docCodes); diff != "" {
		t.Errorf("error codes (-utcp +document):\n%s", diff)
	}
}

func resolves(doc map[string]any, ref string) bool {
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

func TestPanicIsAnEnvelope(t *testing.T) {
	rt := httpx.NewRouter()
	rt.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("kaboom at 0xdeadbeef") })
	logs := &logBuffer{}
	h := httpx.Recover(newTestLogger(logs))(rt)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	r := reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	expectError(t, r, 500, utcp.CodeInternal)
	if strings.Contains(rec.Body.String(), "kaboom") || strings.Contains(rec.Body.String(), "goroutine") {
		t.Errorf("the answer leaks the panic: %s", rec.Body)
	}
	if !strings.Contains(logs.String(), "kaboom") {
		t.Errorf("the panic was not logged")
	}
}

// TestEveryRoute walks the router: every /admin and /v1 route refuses a
// request without credentials when they are configured, every route
// answers a method it does not serve with 405 and an Allow header, and
// every route that takes a body refuses malformed JSON, unknown fields
// and an oversized body, always with the envelope, and the server keeps
// serving.
func TestEveryRoute(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{AdminToken: "adm", APIKeys: []string{"key"}, MaxBodyBytes: 256}})
	e.register(b.manual("demo"), registry.SourceAPI)
	path := func(p string) string {
		p = strings.ReplaceAll(p, "/admin/manuals/{name}", "/admin/manuals/demo")
		return strings.ReplaceAll(p, "{name}", "demo.add")
	}
	takesBody := map[string]bool{
		"POST /admin/manuals": true, "PUT /admin/manuals/{name}": true,
		"POST /v1/tools/{name}/call": true, "POST /v1/tools/{name}/stream": true,
		"POST /v1/prompts/{name}/get": true, "POST /v1/completions": true,
	}
	served := map[string]map[string]bool{}
	for _, rt := range e.server.router.Routes() {
		if served[rt.Path] == nil {
			served[rt.Path] = map[string]bool{}
		}
		served[rt.Path][rt.Method] = true
	}
	for _, rt := range e.server.router.Routes() {
		t.Run(rt.String(), func(t *testing.T) {
			p := path(rt.Path)
			var cred map[string]string
			switch {
			case strings.HasPrefix(rt.Path, "/admin/"):
				cred = map[string]string{"Authorization": "Bearer adm"}
			case strings.HasPrefix(rt.Path, "/v1/"):
				cred = map[string]string{"Authorization": "Bearer key"}
			}
			if cred != nil {
				for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
					r := e.do(req{method: rt.Method, path: p, body: `{}`, headers: h})
					expectError(t, r, 401, utcp.CodeUnauthorized)
					if r.header.Get("WWW-Authenticate") == "" {
						t.Errorf("401 without WWW-Authenticate")
					}
				}
			}
			for _, m := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
				if served[rt.Path][m] {
					continue
				}
				r := e.do(req{method: m, path: p, body: `{}`, headers: cred})
				expectError(t, r, 405, utcp.CodeMethodNotAllowed)
				if r.header.Get("Allow") == "" {
					t.Errorf("%s: 405 without Allow", m)
				}
			}
			if takesBody[rt.String()] {
				for _, c := range []struct {
					body   string
					status int
					code   utcp.Code
				}{
					{`{"name":`, 400, utcp.CodeInvalidRequest},
					{`not json`, 400, utcp.CodeInvalidRequest},
					{`{"x":"` + strings.Repeat("y", 300) + `"}`, 413, utcp.CodePayloadTooLarge},
				} {
					expectError(t, e.do(req{method: rt.Method, path: p, body: c.body, headers: cred}), c.status, c.code)
				}
				if strings.HasPrefix(rt.Path, "/v1/") {
					expectError(t, e.do(req{method: rt.Method, path: p, body: `{"arguments":{},"extra":1}`, headers: cred}), 400, utcp.CodeInvalidRequest)
					expectError(t, e.do(req{method: rt.Method, path: p, body: `{"arguments":"x"}`, headers: cred}), 400, utcp.CodeInvalidRequest)
				} else {
					expectError(t, e.do(req{method: rt.Method, path: p, body: `{"name":"demo","call_template_type":"http","url":[]}`, headers: cred}), 400, utcp.CodeInvalidTemplate)
				}
			}
			e.alive()
		})
	}
}

func TestObserversShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewObserver(nil, reg)
	b := NewObserver(nil, reg)
	a.Registration("api", "register", nil)
	b.Registration("api", "register", errors.New("x"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "utcpd_registrations_total" && len(mf.GetMetric()) != 2 {
			t.Errorf("registrations: %v", mf)
		}
	}
}

// TestEveryRouteBehindThePerimeter sends what a web page can send to
// every route the router serves, and to /mcp, with the right credentials:
// a foreign Origin, a rebinding Host, a form post and an empty body
// without a JSON Content-Type. Each is refused before its handler runs
// (no call reaches the backend, no manual changes), and the same
// requests without the hostile part are not refused by the perimeter.
func TestEveryRouteBehindThePerimeter(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{AdminToken: "adm", APIKeys: []string{"key"}}})
	e.register(b.manual("demo"), registry.SourceAPI)
	calls := b.f.Calls()
	path := func(p string) string {
		p = strings.ReplaceAll(p, "/admin/manuals/{name}", "/admin/manuals/demo")
		p = strings.ReplaceAll(p, "{id}", "rv_nope")
		p = strings.ReplaceAll(p, "{provider}", "openai")
		return strings.ReplaceAll(p, "{name}", "demo.add")
	}
	routes := e.server.router.Routes()
	routes = append(routes, httpx.Route{Method: "POST", Path: "/mcp"})
	attacks := []struct {
		name    string
		headers map[string]string
		ctype   string
		body    string
		status  int
		code    utcp.Code
		writes  bool // only for methods that take a body
	}{
		{name: "foreign origin", headers: map[string]string{"Origin": "https://evil.example"}, body: `{"arguments":{"a":1,"b":2}}`, status: 403, code: utcp.CodeForbidden},
		{name: "other local origin", headers: map[string]string{"Origin": "http://localhost:3000"}, body: `{"arguments":{"a":1,"b":2}}`, status: 403, code: utcp.CodeForbidden},
		{name: "rebinding host", headers: map[string]string{"Host": "rebind.attacker.example:8787"}, body: `{"arguments":{"a":1,"b":2}}`, status: 403, code: utcp.CodeForbidden},
		{name: "form post", ctype: "application/x-www-form-urlencoded", body: "a=1&b=2", status: 415, code: utcp.CodeUnsupportedMediaType, writes: true},
		{name: "empty body without type", ctype: "-", status: 415, code: utcp.CodeUnsupportedMediaType, writes: true},
	}
	for _, rt := range routes {
		cred := "Bearer key"
		if strings.HasPrefix(rt.Path, "/admin/") {
			cred = "Bearer adm"
		}
		for _, a := range attacks {
			if a.writes && rt.Method != "POST" && rt.Method != "PUT" {
				continue
			}
			t.Run(rt.String()+"/"+a.name, func(t *testing.T) {
				h := map[string]string{"Authorization": cred}
				for k, v := range a.headers {
					h[k] = v
				}
				body := a.body
				if rt.Method == "GET" || rt.Method == "DELETE" {
					body = ""
				}
				r := e.do(req{method: rt.Method, path: path(rt.Path), body: body, ctype: a.ctype, headers: h})
				if r.status != a.status {
					t.Fatalf("got %s, want %d", r, a.status)
				}
				if rt.Path == "/mcp" {
					// JSON-RPC error object with the utcpd code in data.
					var m struct {
						Error struct {
							Data struct {
								Code utcp.Code `json:"code"`
							} `json:"data"`
						} `json:"error"`
					}
					if err := json.Unmarshal(r.body, &m); err != nil || m.Error.Data.Code != a.code {
						t.Fatalf("/mcp refusal %s: %v", r, err)
					}
					return
				}
				expectError(t, r, a.status, a.code)
			})
		}
	}
	if got := b.f.Calls(); got != calls {
		t.Errorf("refused requests reached the backend: %d calls, want %d", got, calls)
	}
	if _, ok := e.g.Manual("demo"); !ok {
		t.Errorf("a refused request removed the manual")
	}
	// The same call without the hostile part runs.
	if r := e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":2}}`,
		headers: map[string]string{"Authorization": "Bearer key", "Origin": e.srv.URL}}); r.status != 200 {
		t.Errorf("a same-origin call: %s", r)
	}
}
