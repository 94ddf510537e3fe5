package gateway_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// TestRegisterPreflight: registration refuses, before any network I/O,
// what utcpd config validate refuses (manuals.ResolveTemplate): plain
// http to a host that is not loopback, a file template's missing file.
func TestRegisterPreflight(t *testing.T) {
	g := newGateway(t, gateway.Options{})
	_, err := g.RegisterManual(t.Context(), httpManual("plain", "http://example.com/utcp"), gateway.RegisterOptions{Source: "api"})
	if e := codeOf(t, err, utcp.CodeInvalidTemplate); !strings.Contains(e.Message, "plain http is allowed only to loopback hosts") {
		t.Errorf("plain http: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "gone.json")
	raw, _ := json.Marshal(map[string]any{"name": "f", "call_template_type": "file", "file_path": missing})
	_, err = g.RegisterManual(t.Context(), raw, gateway.RegisterOptions{Source: "api"})
	if e := codeOf(t, err, utcp.CodeDiscoveryFailed); !strings.Contains(e.Message, missing) {
		t.Errorf("missing file: %v", err)
	}
	if len(g.Manuals()) != 0 {
		t.Errorf("manuals registered: %v", g.Manuals())
	}
}

// TestRegisterWarnsWithoutTools: a manual that yields no tool registers
// with a warning saying so (the 201 answer's warnings).
func TestRegisterWarnsWithoutTools(t *testing.T) {
	g := newGateway(t, gateway.Options{})
	for name, content := range map[string]string{
		"empty":   `{"utcp_version": "1.1.0", "tools": []}`,
		"openapi": `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://api.example.com"}], "paths": {}}`,
	} {
		raw, _ := json.Marshal(map[string]any{"name": name, "call_template_type": "text", "content": content})
		res := register(t, g, raw)
		if len(res.Tools) != 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "lists no tools") {
			t.Errorf("%s: tools %v, warnings %q", name, res.Tools, res.Warnings)
		}
	}
	res := register(t, g, json.RawMessage(`{"name": "dropped", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"t\", \"tool_call_template\": {\"call_template_type\": \"cli\", \"commands\": [{\"command\": \"true\"}]}}]}"}`))
	if len(res.Tools) != 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "all 1 of its tools were dropped") {
		t.Errorf("dropped: tools %v, warnings %q", res.Tools, res.Warnings)
	}
}
