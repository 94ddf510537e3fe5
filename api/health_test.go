package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// serveGated starts the demo HTTP server whose manual answers 503 until
// up is set.
func serveGated(t *testing.T) (*atomic.Bool, string) {
	t.Helper()
	up := new(atomic.Bool)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", fixture.New(), httpserver.Options{})
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" && !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return up, "http://" + ln.Addr().String()
}

// TestManualHealthSurfaces: a manual that failed to register (as one from
// the configuration file would) is listed with its status, error and next
// retry, shown by GET /admin/manuals/{name}, named by /readyz (which stays
// 200), and reported by utcpd_manual_up; a refresh retries it at once.
func TestManualHealthSurfaces(t *testing.T) {
	b := serveBackend(t)
	up, base := serveGated(t)
	degraded := error(nil)
	e := newEnv(t, envOptions{api: Options{Degraded: func() error { return degraded }}})
	if r := e.do(req{method: "POST", path: "/admin/manuals", body: b.manual("demo")}); r.status != http.StatusCreated {
		t.Fatalf("POST: %s", r)
	}
	_, err := e.g.RegisterManual(t.Context(), json.RawMessage(`{"name":"late","call_template_type":"http","url":"`+base+`/utcp"}`),
		gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Fatalf("register: %v", err)
	}

	r := e.do(req{method: "GET", path: "/admin/manuals"})
	conforms(t, e, "ManualList", r.body)
	var list admin.ManualList
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || len(list.Manuals) != 2 {
		t.Fatalf("GET /admin/manuals: %s", r)
	}
	demo, late := list.Manuals[0], list.Manuals[1]
	if demo.Name != "demo" || demo.Status != gateway.StateReady || demo.LastError != nil || demo.LastSuccess == nil || demo.NextRetry != nil || demo.ToolCount != 5 {
		t.Errorf("demo: %+v", demo)
	}
	if late.Name != "late" || late.Status != gateway.StateFailed || late.ToolCount != 0 || late.Source != "config" || late.Type != "http" ||
		late.LastError == nil || late.LastError.Code != utcp.CodeDiscoveryFailed || !strings.Contains(late.LastError.Message, "503") ||
		late.NextRetry == nil || late.LastSuccess != nil || late.Failures != 1 || late.Registered.IsZero() {
		t.Errorf("late: %+v %+v", late, late.LastError)
	}
	var raw struct {
		Manuals []map[string]any `json:"manuals"`
	}
	_ = json.Unmarshal(r.body, &raw)
	if _, ok := raw.Manuals[1]["refreshed"]; ok {
		t.Errorf("a never discovered manual has a refreshed time: %v", raw.Manuals[1])
	}
	if _, ok := raw.Manuals[1]["last_success"]; !ok || raw.Manuals[1]["last_success"] != nil {
		t.Errorf("last_success of a failed manual: %v", raw.Manuals[1])
	}

	r = e.do(req{method: "GET", path: "/admin/manuals/late"})
	conforms(t, e, "ManualDetail", r.body)
	var detail admin.ManualDetail
	if err := json.Unmarshal(r.body, &detail); err != nil || r.status != 200 {
		t.Fatalf("GET /admin/manuals/late: %s", r)
	}
	if detail.Status != gateway.StateFailed || detail.LastError == nil || detail.ToolCount != 0 || len(detail.Tools) != 0 ||
		!strings.Contains(string(detail.Template), base) {
		t.Errorf("detail: %+v", detail)
	}

	ready := func() map[string]any {
		t.Helper()
		r := e.do(req{method: "GET", path: "/readyz"})
		if r.status != 200 {
			t.Fatalf("readyz: %s", r)
		}
		conforms(t, e, "Ready", r.body)
		return r.json(t)
	}
	v := ready()
	if v["status"] != "ready" || !slices.Equal(names(v["failed_manuals"]), []string{"late"}) || len(names(v["degraded_manuals"])) != 0 {
		t.Errorf("readyz: %v", v)
	}
	if c := fmt.Sprint(v["manuals"]); c != "map[degraded:0 discovering:0 failed:1 ready:1 total:2]" {
		t.Errorf("readyz counts: %v", c)
	}
	degraded = errors.New("sqlite: the store refuses writes")
	if v := ready(); v["status"] != "degraded" || v["reason"] != degraded.Error() || !slices.Equal(names(v["failed_manuals"]), []string{"late"}) {
		t.Errorf("readyz degraded: %v", v)
	}
	degraded = nil

	metrics := func() string {
		t.Helper()
		return string(e.do(req{method: "GET", path: "/metrics"}).body)
	}
	m := metrics()
	for _, want := range []string{`utcpd_manual_up{manual="demo"} 1`, `utcpd_manual_up{manual="late"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// A refresh retries at once: still down, then up.
	expectError(t, e.do(req{method: "POST", path: "/admin/manuals/late/refresh"}), 422, utcp.CodeDiscoveryFailed)
	if h, _ := e.g.Health("late"); h.Failures != 2 || h.State != gateway.StateFailed {
		t.Errorf("after a failed refresh: %+v", h)
	}
	up.Store(true)
	if r := e.do(req{method: "POST", path: "/admin/manuals/late/refresh"}); r.status != 200 || !strings.Contains(string(r.body), "late.add") {
		t.Fatalf("refresh: %s", r)
	}
	if v := ready(); len(names(v["failed_manuals"])) != 0 || fmt.Sprint(v["manuals"]) != "map[degraded:0 discovering:0 failed:0 ready:2 total:2]" {
		t.Errorf("readyz after the refresh: %v", v)
	}
	if m := metrics(); !strings.Contains(m, `utcpd_manual_up{manual="late"} 1`) {
		t.Errorf("metric after the refresh:\n%s", m)
	}
	// Removed: no series left.
	if err := e.g.DeregisterManual(t.Context(), "late"); err != nil {
		t.Fatal(err)
	}
	if m := metrics(); strings.Contains(m, `manual="late"`) {
		t.Errorf("metric of a removed manual")
	}
}

func names(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// conforms checks body against the schema the served OpenAPI document
// gives it (components/schemas/<schema>).
func conforms(t *testing.T, e *env, schema string, body []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(e.do(req{method: "GET", path: "/openapi.json"}).body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("utcpd:openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("utcpd:openapi.json#/components/schemas/" + schema)
	if err != nil {
		t.Fatalf("compiling %s: %v", schema, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s does not match the OpenAPI schema %s: %v", body, schema, err)
	}
}
