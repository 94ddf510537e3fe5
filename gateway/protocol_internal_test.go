package gateway

import (
	"encoding/json"
	"testing"

	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/text"
	"github.com/utcpd/utcpd/utcp"
)

// The allowed-protocols check runs again at every call: a tool that is in
// the registry but whose protocol the manual no longer allows is refused
// before dispatch.
func TestProtocolCheckedAtCallTime(t *testing.T) {
	g, err := New(Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	content := `{"utcp_version":"1.1.0","manual_version":"1","tools":[{"name":"doc","description":"d","inputs":{},"tool_call_template":{"call_template_type":"text","content":"hi"}}]}`
	raw, _ := json.Marshal(map[string]any{"name": "m", "call_template_type": "text", "content": content, "allowed_communication_protocols": []string{"text", "cli"}})
	if _, err := g.RegisterManual(t.Context(), raw, RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CallTool(t.Context(), "m.doc", nil, CallOptions{}); err != nil {
		t.Fatalf("allowed call: %v", err)
	}
	m, _ := g.Registry().Manual("m")
	m.Template.AllowedCommunicationProtocols = []string{"cli"}
	_, err = g.CallTool(t.Context(), "m.doc", nil, CallOptions{})
	if utcp.CodeOf(err) != utcp.CodeProtocolNotAllowed {
		t.Fatalf("err = %v, want protocol_not_allowed", err)
	}
}
