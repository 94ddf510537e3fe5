package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

var demoTools = []string{"demo.echo", "demo.add", "demo.fail", "demo.sleep", "demo.count"}

func TestAdminLifecycle(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})

	// POST registers.
	r := e.do(req{method: "POST", path: "/admin/manuals", body: b.manual("demo")})
	if r.status != http.StatusCreated {
		t.Fatalf("POST /admin/manuals: %s", r)
	}
	var reg admin.RegisterResponse
	if err := json.Unmarshal(r.body, &reg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(admin.RegisterResponse{Name: "demo", Tools: demoTools, Warnings: []string{}}, reg); diff != "" {
		t.Errorf("POST answer (-want +got):\n%s", diff)
	}
	if loc := r.header.Get("Location"); loc != "/admin/manuals/demo" {
		t.Errorf("Location %q", loc)
	}
	if m, ok := e.g.Manual("demo"); !ok || m.Source != registry.SourceAPI {
		t.Fatalf("manual not registered with source api: %+v", m)
	}

	// GET list.
	r = e.do(req{method: "GET", path: "/admin/manuals"})
	var list admin.ManualList
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 {
		t.Fatalf("GET /admin/manuals: %s", r)
	}
	if len(list.Manuals) != 1 {
		t.Fatalf("list: %+v", list)
	}
	got := list.Manuals[0]
	if got.Name != "demo" || got.Source != "api" || got.ToolCount != 5 || got.Type != "http" || got.Registered.IsZero() || got.Refreshed.IsZero() {
		t.Errorf("list entry: %+v", got)
	}

	// GET one.
	r = e.do(req{method: "GET", path: "/admin/manuals/demo"})
	var detail admin.ManualDetail
	if err := json.Unmarshal(r.body, &detail); err != nil || r.status != 200 {
		t.Fatalf("GET /admin/manuals/demo: %s", r)
	}
	if detail.Name != "demo" || detail.Source != "api" || detail.Type != "http" || len(detail.Tools) != 5 ||
		detail.Tools[1].Name != "demo.add" || !strings.Contains(detail.Tools[1].Description, "sum") {
		t.Errorf("detail: %+v", detail)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(detail.Template, &tmpl); err != nil || tmpl["url"] != b.base+"/utcp" {
		t.Errorf("detail template: %s", detail.Template)
	}

	// Variables.
	r = e.do(req{method: "GET", path: "/admin/manuals/demo/variables"})
	if r.status != 200 || !strings.Contains(string(r.body), `"variables":[]`) {
		t.Errorf("variables: %s", r)
	}

	// Refresh keeps the registration time, moves the refresh time.
	time.Sleep(5 * time.Millisecond)
	r = e.do(req{method: "POST", path: "/admin/manuals/demo/refresh"})
	if r.status != 200 || !strings.Contains(string(r.body), `"demo.add"`) {
		t.Fatalf("refresh: %s", r)
	}
	m, _ := e.g.Manual("demo")
	if !m.Registered.Equal(got.Registered) || !m.Refreshed.After(got.Refreshed) {
		t.Errorf("refresh times: registered %v→%v refreshed %v→%v", got.Registered, m.Registered, got.Refreshed, m.Refreshed)
	}

	// PUT replaces (200) an existing manual; the name may be left out.
	r = e.do(req{method: "PUT", path: "/admin/manuals/demo", body: `{"call_template_type":"http","url":"` + b.base + `/utcp"}`})
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"name":"demo"`) {
		t.Fatalf("PUT replace: %s", r)
	}
	// PUT creates (201) a new one, with a matching name in the body.
	r = e.do(req{method: "PUT", path: "/admin/manuals/other", body: b.manual("other")})
	if r.status != http.StatusCreated || r.header.Get("Location") != "/admin/manuals/other" {
		t.Fatalf("PUT create: %s", r)
	}

	// DELETE.
	r = e.do(req{method: "DELETE", path: "/admin/manuals/demo"})
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE: %s", r)
	}
	expectError(t, e.do(req{method: "GET", path: "/admin/manuals/demo"}), 404, utcp.CodeManualNotFound)
	if _, err := e.g.Tool(t.Context(), "demo.add"); utcp.CodeOf(err) != utcp.CodeToolNotFound {
		t.Errorf("tool still resolves after DELETE: %v", err)
	}
}

func TestAdminErrors(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{MaxBodyBytes: 1024}})
	e.register(b.manual("demo"), registry.SourceAPI)
	e.register(b.manual("fromconfig"), registry.SourceConfig)
	e.register(b.manual("fromdir"), registry.SourceDir)
	big := `{"name":"x","call_template_type":"http","url":"` + strings.Repeat("a", 2048) + `"}`
	dead := `{"name":"dead","call_template_type":"http","url":"http://127.0.0.1:1/utcp"}`

	cases := []struct {
		name   string
		r      req
		status int
		code   utcp.Code
	}{
		{"malformed JSON", req{method: "POST", path: "/admin/manuals", body: `{"name":`}, 400, utcp.CodeInvalidRequest},
		{"syntax error", req{method: "POST", path: "/admin/manuals", body: `{"name" "x"}`}, 400, utcp.CodeInvalidRequest},
		{"not an object", req{method: "POST", path: "/admin/manuals", body: `[1,2]`}, 400, utcp.CodeInvalidRequest},
		{"two values", req{method: "POST", path: "/admin/manuals", body: `{} {}`}, 400, utcp.CodeInvalidRequest},
		{"empty body", req{method: "POST", path: "/admin/manuals"}, 400, utcp.CodeInvalidRequest},
		{"not JSON content", req{method: "POST", path: "/admin/manuals", body: b.manual("x"), ctype: "text/plain"}, 415, utcp.CodeUnsupportedMediaType},
		{"no content type", req{method: "POST", path: "/admin/manuals", body: b.manual("x"), ctype: "-"}, 415, utcp.CodeUnsupportedMediaType},
		{"wrong type", req{method: "POST", path: "/admin/manuals", body: `{"name":"x","call_template_type":"http","url":5}`}, 400, utcp.CodeInvalidTemplate},
		{"unknown type", req{method: "POST", path: "/admin/manuals", body: `{"name":"x","call_template_type":"carrier_pigeon"}`}, 400, utcp.CodeInvalidTemplate},
		{"missing field", req{method: "POST", path: "/admin/manuals", body: `{"name":"x","call_template_type":"http"}`}, 400, utcp.CodeInvalidTemplate},
		{"oversized (length)", req{method: "POST", path: "/admin/manuals", body: big}, 413, utcp.CodePayloadTooLarge},
		{"oversized (chunked)", req{method: "POST", path: "/admin/manuals", rawBody: io.MultiReader(strings.NewReader(big))}, 413, utcp.CodePayloadTooLarge},
		{"exists", req{method: "POST", path: "/admin/manuals", body: b.manual("demo")}, 409, utcp.CodeManualExists},
		{"discovery failed", req{method: "POST", path: "/admin/manuals", body: dead}, 422, utcp.CodeDiscoveryFailed},
		{"wrong method on collection", req{method: "DELETE", path: "/admin/manuals"}, 405, utcp.CodeMethodNotAllowed},
		{"wrong method on manual", req{method: "PATCH", path: "/admin/manuals/demo", body: `{}`}, 405, utcp.CodeMethodNotAllowed},
		{"wrong method on refresh", req{method: "GET", path: "/admin/manuals/demo/refresh"}, 405, utcp.CodeMethodNotAllowed},
		{"get unknown", req{method: "GET", path: "/admin/manuals/nope"}, 404, utcp.CodeManualNotFound},
		{"delete unknown", req{method: "DELETE", path: "/admin/manuals/nope"}, 404, utcp.CodeManualNotFound},
		{"refresh unknown", req{method: "POST", path: "/admin/manuals/nope/refresh"}, 404, utcp.CodeManualNotFound},
		{"variables unknown", req{method: "GET", path: "/admin/manuals/nope/variables"}, 404, utcp.CodeManualNotFound},
		{"put name mismatch", req{method: "PUT", path: "/admin/manuals/demo", body: b.manual("other")}, 400, utcp.CodeInvalidRequest},
		{"put name not a string", req{method: "PUT", path: "/admin/manuals/demo", body: `{"name":5,"call_template_type":"http","url":"x"}`}, 400, utcp.CodeInvalidRequest},
		{"put invalid path name", req{method: "PUT", path: "/admin/manuals/my-api", body: b.manual("my-api")}, 400, utcp.CodeInvalidRequest},
		{"put malformed", req{method: "PUT", path: "/admin/manuals/demo", body: `{"name":"demo",}`}, 400, utcp.CodeInvalidRequest},
		{"put oversized", req{method: "PUT", path: "/admin/manuals/demo", body: big}, 413, utcp.CodePayloadTooLarge},
		{"put discovery failed", req{method: "PUT", path: "/admin/manuals/demo", body: `{"call_template_type":"http","url":"http://127.0.0.1:1/utcp"}`}, 422, utcp.CodeDiscoveryFailed},
		{"put over config manual", req{method: "PUT", path: "/admin/manuals/fromconfig", body: b.manual("fromconfig")}, 409, utcp.CodeManualReadOnly},
		{"delete config manual", req{method: "DELETE", path: "/admin/manuals/fromconfig"}, 409, utcp.CodeManualReadOnly},
		{"delete dir manual", req{method: "DELETE", path: "/admin/manuals/fromdir"}, 409, utcp.CodeManualReadOnly},
		{"unknown admin route", req{method: "GET", path: "/admin/nothing"}, 404, utcp.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.r)
			expectError(t, r, c.status, c.code)
			if c.status == 405 && r.header.Get("Allow") == "" {
				t.Errorf("405 without Allow header")
			}
			e.alive()
		})
	}
	// Nothing of the failures was kept; the old demo manual still serves.
	if _, ok := e.g.Manual("dead"); ok {
		t.Errorf("a manual whose discovery failed was registered")
	}
	if m, _ := e.g.Manual("demo"); m == nil || len(m.Tools) != 5 {
		t.Errorf("demo manual damaged by failed requests: %+v", m)
	}
	// The messages say where a read-only manual comes from.
	r := e.do(req{method: "DELETE", path: "/admin/manuals/fromdir"})
	if !strings.Contains(string(r.body), "manuals directory") {
		t.Errorf("read-only message does not say where: %s", r)
	}
	r = e.do(req{method: "DELETE", path: "/admin/manuals/fromconfig"})
	if !strings.Contains(string(r.body), "configuration file") {
		t.Errorf("read-only message does not say where: %s", r)
	}
	// Refresh and read of config manuals work.
	if r := e.do(req{method: "POST", path: "/admin/manuals/fromconfig/refresh"}); r.status != 200 {
		t.Errorf("refresh config manual: %s", r)
	}
	// The discovery failure carries the transport's reason.
	r = e.do(req{method: "POST", path: "/admin/manuals", body: dead})
	if !strings.Contains(string(r.body), "connect") && !strings.Contains(string(r.body), "refused") {
		t.Errorf("discovery failure without the transport's reason: %s", r)
	}
}

func TestAdminUnknownFieldsAreWarnings(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	r := e.do(req{method: "POST", path: "/admin/manuals", body: `{"name":"demo","call_template_type":"http","url":"` + b.base + `/utcp","http_methd":"GET"}`})
	if r.status != http.StatusCreated {
		t.Fatalf("POST: %s", r)
	}
	if !strings.Contains(string(r.body), `http_methd`) || !strings.Contains(string(r.body), `http_method`) {
		t.Errorf("no typo warning: %s", r)
	}
}

func TestAdminRedaction(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	body := `{"name":"demo","call_template_type":"http","url":"` + b.base + `/utcp",
		"headers":{"Authorization":"Bearer literal-s3cr3t","X-Trace":"visible"},
		"auth":{"auth_type":"api_key","api_key":"key-s3cr3t","var_name":"X-Api-Key","location":"header"}}`
	if r := e.do(req{method: "POST", path: "/admin/manuals", body: body}); r.status != 201 {
		t.Fatalf("POST: %s", r)
	}
	for _, path := range []string{"/admin/manuals/demo", "/admin/manuals", "/admin/manuals/demo/variables", "/v1/tools/demo.add"} {
		r := e.do(req{method: "GET", path: path})
		if bytes.Contains(r.body, []byte("s3cr3t")) {
			t.Errorf("GET %s leaks a secret: %s", path, r)
		}
	}
	r := e.do(req{method: "GET", path: "/admin/manuals/demo"})
	var d admin.ManualDetail
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatal(err)
	}
	var tmpl struct {
		Headers map[string]string `json:"headers"`
		Auth    map[string]string `json:"auth"`
	}
	if err := json.Unmarshal(d.Template, &tmpl); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Authorization": utcp.Redacted, "X-Trace": "visible"}
	if diff := cmp.Diff(want, tmpl.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if tmpl.Auth["api_key"] != utcp.Redacted || tmpl.Auth["var_name"] != "X-Api-Key" {
		t.Errorf("auth: %v", tmpl.Auth)
	}
}

func TestAdminVariables(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	t.Setenv("demo_TRACE", "v-s3cr3t")
	body := `{"name":"demo","call_template_type":"http","url":"` + b.base + `/utcp","headers":{"X-Trace":"${TRACE}"}}`
	if r := e.do(req{method: "POST", path: "/admin/manuals", body: body}); r.status != 201 {
		t.Fatalf("POST: %s", r)
	}
	r := e.do(req{method: "GET", path: "/admin/manuals/demo/variables"})
	var got admin.VariableList
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := admin.VariableList{Manual: "demo", Variables: []gateway.Variable{{Name: "demo_TRACE", Resolves: true}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
	if bytes.Contains(r.body, []byte("s3cr3t")) {
		t.Errorf("variables answer shows a value: %s", r)
	}
}

func TestAdminReplaceWhileCalling(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(b.manual("demo"), registry.SourceAPI)
	done := make(chan reply, 1)
	go func() {
		done <- doCtx(t, t.Context(), e.srv.URL, req{method: "POST", path: "/v1/tools/demo.sleep/call", body: `{"arguments":{"ms":300}}`})
	}()
	deadline := time.Now().Add(2 * time.Second)
	for b.f.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	r := e.do(req{method: "PUT", path: "/admin/manuals/demo", body: b.manual("demo")})
	if r.status != http.StatusOK {
		t.Fatalf("PUT: %s", r)
	}
	if r := <-done; r.status != 200 || !strings.Contains(string(r.body), `"slept_ms":300`) {
		t.Errorf("the call in flight did not finish on the old manual: %s", r)
	}
}

func TestAdminAuth(t *testing.T) {
	b := serveBackend(t)
	t.Run("token", func(t *testing.T) {
		e := newEnv(t, envOptions{api: Options{AdminToken: "adm1n-token"}})
		e.register(b.manual("demo"), registry.SourceAPI)
		for _, c := range []struct {
			name, auth string
		}{{"missing", ""}, {"wrong", "Bearer nope"}, {"wrong scheme", "Basic adm1n-token"}, {"prefix", "Bearer adm1n"}} {
			h := map[string]string{}
			if c.auth != "" {
				h["Authorization"] = c.auth
			}
			for _, rq := range []req{
				{method: "GET", path: "/admin/manuals", headers: h},
				{method: "POST", path: "/admin/manuals", body: b.manual("x"), headers: h},
				{method: "DELETE", path: "/admin/manuals/demo", headers: h},
				// The routes of pinning and toolsets sit behind the same token.
				{method: "GET", path: "/admin/manuals/demo/changes", headers: h},
				{method: "POST", path: "/admin/manuals/demo/changes/c1/approve", headers: h},
				{method: "GET", path: "/admin/toolsets", headers: h},
				{method: "POST", path: "/admin/toolsets", body: `{"name": "t", "include": ["demo.*"]}`, headers: h},
				{method: "DELETE", path: "/admin/toolsets/t", headers: h},
			} {
				r := e.do(rq)
				expectError(t, r, 401, utcp.CodeUnauthorized)
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s: no WWW-Authenticate challenge", c.name, rq.path)
				}
			}
		}
		ok := map[string]string{"Authorization": "Bearer adm1n-token"}
		if r := e.do(req{method: "GET", path: "/admin/manuals", headers: ok}); r.status != 200 {
			t.Errorf("right token: %s", r)
		}
		// A token also admits remote clients.
		rec := httptest.NewRecorder()
		hr := httptest.NewRequest("GET", "/admin/manuals", nil)
		hr.RemoteAddr = "203.0.113.7:4242"
		hr.Host = "203.0.113.1:8787"
		hr.Header.Set("Authorization", "Bearer adm1n-token")
		e.handler.ServeHTTP(rec, hr)
		if rec.Code != 200 {
			t.Errorf("remote client with the token: %d %s", rec.Code, rec.Body)
		}
		// The REST front does not take the admin token's place: it is open here.
		if r := e.do(req{method: "GET", path: "/v1/tools"}); r.status != 200 {
			t.Errorf("front: %s", r)
		}
	})
	t.Run("no token configured refuses everyone, loopback too", func(t *testing.T) {
		g, err := gateway.New(gateway.Options{Transports: transports.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		h, err := New(Options{Gateway: g, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ remote, host, auth string }{
			{"127.0.0.1:4242", "127.0.0.1:8787", ""},
			{"[::1]:4242", "[::1]:8787", ""},
			{"127.0.0.1:4242", "localhost:8787", "Bearer anything"},
			{"203.0.113.7:4242", "127.0.0.1:8787", ""},
		} {
			rec := httptest.NewRecorder()
			hr := httptest.NewRequest("POST", "/admin/manuals", strings.NewReader(b.manual("x")))
			hr.Header.Set("Content-Type", "application/json")
			if c.auth != "" {
				hr.Header.Set("Authorization", c.auth)
			}
			hr.RemoteAddr, hr.Host = c.remote, c.host
			h.ServeHTTP(rec, hr)
			expectError(t, reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, 401, utcp.CodeUnauthorized)
		}
		if _, ok := g.Manual("x"); ok {
			t.Errorf("a refused request registered a manual")
		}
	})
}
