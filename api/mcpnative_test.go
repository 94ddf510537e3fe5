package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// TestRESTMCPNativeForms: the REST front's answers keep their shape
// unless ?mcp=true asks for the MCP-native forms (for utcpd mcp
// --connect): tool metadata, the server's result beside the value, typed
// stream events, each marked with the Utcpd-MCP header.
func TestRESTMCPNativeForms(t *testing.T) {
	demo := httptest.NewServer(mcpserver.New(fixture.New(), mcpserver.Options{}).Handler(mcpserver.HTTPOptions{}))
	t.Cleanup(demo.Close)
	e := newEnv(t, envOptions{})
	e.register(fmt.Sprintf(`{"name": "be", "call_template_type": "mcp", "config": {"mcpServers": {"demo": {"url": %q}}}}`, demo.URL), "test")

	for _, c := range []struct {
		method, path, body string
		plain, native      string // a substring only the native answer has
	}{
		{"GET", "/v1/tools", "", `"mcp":`, `"mcp":{"annotations":{`},
		{"GET", "/v1/tools/be.demo.add", "", `"mcp":`, `"mcp":{"annotations":{`},
		{"POST", "/v1/tools/be.demo.content_types/call", `{}`, `"mcp":`, `"mcp":{"content":[{"type":"text"`},
		{"POST", "/v1/tools/be.demo.count/stream", `{"arguments":{"n":2}}`, `"type":"progress"`, `"type":"progress"`},
	} {
		r := e.do(req{method: c.method, path: c.path, body: c.body})
		if r.status != http.StatusOK || strings.Contains(string(r.body), c.plain) || r.header.Get("Utcpd-MCP") != "" {
			t.Errorf("%s %s without ?mcp: %s (header %q); want the plain form", c.method, c.path, r, r.header.Get("Utcpd-MCP"))
		}
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		r = e.do(req{method: c.method, path: c.path + sep + "mcp=true", body: c.body})
		if r.status != http.StatusOK || !strings.Contains(string(r.body), c.native) || r.header.Get("Utcpd-MCP") != "1" {
			t.Errorf("%s %s?mcp=true: %s (header %q); want %s", c.method, c.path, r, r.header.Get("Utcpd-MCP"), c.native)
		}
	}
	if r := e.do(req{method: "GET", path: "/v1/tools?mcp=maybe"}); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid_request") {
		t.Errorf("?mcp=maybe: %s, want 400 invalid_request", r)
	}
}
