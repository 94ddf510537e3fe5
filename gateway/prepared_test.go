package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/utcpd/utcpd/gateway"
)

// The http transport prepares each tool template's requests once (at
// registration, or when the gateway re-resolves a template's variables):
// a changed variable and a re-registered template must both take effect
// on the next call.
func TestPreparedTemplateFollowsVariablesAndReregistration(t *testing.T) {
	var seen atomic.Value // "path header"
	var header atomic.Value
	header.Store("v1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" {
			tmpl := map[string]any{"call_template_type": "http", "url": "http://" + r.Host + "/${SEG}/do",
				"headers": map[string]any{"X-Static": header.Load(), "X-Var": "${HV}"}}
			raw, _ := json.Marshal(tmpl)
			_, _ = w.Write([]byte(`{"utcp_version":"1.1.0","manual_version":"1","tools":[{"name":"t","description":"d",` +
				`"inputs":{"type":"object","properties":{"n":{"type":"integer"}}},"tool_call_template":` + string(raw) + `}]}`))
			return
		}
		seen.Store(r.URL.Path + "?" + r.URL.RawQuery + " " + r.Header.Get("X-Static") + " " + r.Header.Get("X-Var"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	g := newGateway(t, gateway.Options{Variables: mustResolver(t, map[string]string{"m_SEG": "one", "m_HV": "a"})})
	// The backend changes its tool on purpose: pin "warn" accepts it.
	register(t, g, httpManual("m", srv.URL+"/utcp", `"pin":"warn"`))
	check := func(want string) {
		t.Helper()
		if _, err := g.CallTool(t.Context(), "m.t", map[string]any{"n": json.Number("1")}, gateway.CallOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := seen.Load(); got != want {
			t.Errorf("backend saw %q, want %q", got, want)
		}
	}
	check("/one/do?n=1 v1 a")
	check("/one/do?n=1 v1 a")
	g.SetVariables(mustResolver(t, map[string]string{"m_SEG": "two", "m_HV": "b"}))
	check("/two/do?n=1 v1 b")
	header.Store("v2")
	if _, err := g.RegisterManual(t.Context(), httpManual("m", srv.URL+"/utcp", `"pin":"warn"`), gateway.RegisterOptions{Source: "api", Replace: true}); err != nil {
		t.Fatal(err)
	}
	check("/two/do?n=1 v2 b")
}
