package all_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// TestCheckTemplate: Registry.CheckTemplate refuses, with no network
// I/O, what each transport's RegisterManual refuses before it connects —
// plain http, ws or a plaintext socket to a host that is not loopback
// without allow_insecure, a file template's missing file, allowed_hosts
// that do not parse — and lets the rest through.
func TestCheckTemplate(t *testing.T) {
	dir := t.TempDir()
	manual := filepath.Join(dir, "m.json")
	if err := os.WriteFile(manual, []byte(`{"utcp_version": "1.1.0", "tools": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tmpl string
		code utcp.Code // "" when it passes
	}{
		{`{"call_template_type": "http", "url": "https://example.com/utcp"}`, ""},
		{`{"call_template_type": "http", "url": "http://127.0.0.1:1/utcp"}`, ""},
		{`{"call_template_type": "http", "url": "http://localhost:1/utcp"}`, ""},
		{`{"call_template_type": "http", "url": "http://example.com/utcp"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "http", "url": "http://example.com/utcp", "allow_insecure": true}`, ""},
		{`{"call_template_type": "http", "url": "https://example.com/utcp", "allowed_hosts": ["https://x"]}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "sse", "url": "http://example.com/events"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "sse", "url": "https://example.com/events"}`, ""},
		{`{"call_template_type": "streamable_http", "url": "http://example.com/stream"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "websocket", "url": "ws://example.com/ws"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "websocket", "url": "wss://example.com/ws"}`, ""},
		{`{"call_template_type": "graphql", "url": "http://example.com/graphql"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "graphql", "url": "http://127.0.0.1:1/graphql"}`, ""},
		{`{"call_template_type": "mcp", "config": {"mcpServers": {"s": {"url": "http://example.com/mcp"}}}}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "mcp", "config": {"mcpServers": {"s": {"url": "https://example.com/mcp"}}}}`, ""},
		{`{"call_template_type": "webrtc", "signaling_server": "http://example.com/offer", "peer_id": "p"}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "grpc", "host": "example.com", "port": 50051}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "grpc", "host": "example.com", "port": 50051, "use_ssl": true}`, ""},
		{`{"call_template_type": "tcp", "host": "example.com", "port": 9000}`, utcp.CodeInvalidTemplate},
		{`{"call_template_type": "udp", "host": "127.0.0.1", "port": 9000}`, ""},
		{`{"call_template_type": "file", "file_path": ` + quote(manual) + `}`, ""},
		{`{"call_template_type": "file", "file_path": ` + quote(filepath.Join(dir, "gone.json")) + `}`, utcp.CodeDiscoveryFailed},
		{`{"call_template_type": "file", "file_path": ` + quote(dir) + `}`, utcp.CodeDiscoveryFailed},
		{`{"call_template_type": "text", "content": "hello"}`, ""},
	}
	for _, c := range cases {
		tmpl, err := transports.Default.ParseTemplate(json.RawMessage(c.tmpl))
		if err != nil {
			t.Errorf("%s: parse: %v", c.tmpl, err)
			continue
		}
		err = transports.Default.CheckTemplate(&tmpl)
		if got := utcp.CodeOf(err); err == nil && c.code != "" || err != nil && got != c.code {
			t.Errorf("%s: CheckTemplate = %v (code %q), want code %q", c.tmpl, err, got, c.code)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
