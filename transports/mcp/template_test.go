package mcp

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports"
)

func TestParseTemplate(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		kinds   map[string]string // server → normalised transport
		unknown []string
		wantErr string // "" means valid
	}{
		{name: "stdio", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"fs":{"command":"npx","args":["-y","x"],"env":{"A":"1"},"cwd":"/"}}}}`,
			kinds: map[string]string{"fs": KindStdio}},
		{name: "http inferred", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"r":{"url":"https://x/mcp","headers":{"X-T":"1"},"timeout":30}}}}`,
			kinds: map[string]string{"r": KindHTTP}},
		{name: "python-utcp / @utcp/mcp variants", raw: `{"name":"mcp_tools","call_template_type":"mcp","config":{"mcpServers":{
			"filesystem":{"transport":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/data"],"env":{"LOG_LEVEL":"info"},"timeout":60},
			"remote":{"transport":"http","url":"https://mcp.example.com/mcp","headers":{"X-Tenant":"${TENANT}"},"sse_read_timeout":300,"terminate_on_close":true},
			"legacy":{"transport":"sse","url":"https://old.example.com/sse"},
			"streamable":{"transport":"streamable_http","url":"https://s.example.com/mcp"}}},
			"auth":{"auth_type":"oauth2","token_url":"https://auth.example.com/token","client_id":"${CID}","client_secret":"${CSECRET}","scope":"read:tools"},
			"register_resources_as_tools":true}`,
			kinds: map[string]string{"filesystem": KindStdio, "remote": KindHTTP, "legacy": KindSSE, "streamable": KindHTTP}},
		{name: "claude desktop type alias", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"type":"sse","url":"http://127.0.0.1:1/sse"},"b":{"type":"stdio","command":"x"}}}}`,
			kinds: map[string]string{"a": KindSSE, "b": KindStdio}},
		{name: "disabled server skipped", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x"},"b":{"command":"y","disabled":true}}}}`,
			kinds: map[string]string{"a": KindStdio, "b": KindStdio}},
		{name: "nested unknown fields", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","autoApprove":[]}},"extra":1}}`,
			kinds: map[string]string{"a": KindStdio}, unknown: []string{"config.extra", "config.mcpServers.a.autoApprove"}},
		{name: "no config", raw: `{"call_template_type":"mcp"}`, wantErr: "config.mcpServers"},
		{name: "no servers", raw: `{"call_template_type":"mcp","config":{"mcpServers":{}}}`, wantErr: "config.mcpServers"},
		{name: "only disabled", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","disabled":true}}}}`, wantErr: "not disabled"},
		{name: "null server", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":null}}}`, wantErr: "config.mcpServers.a"},
		{name: "empty server name", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"":{"command":"x"}}}}`, wantErr: "must not be empty"},
		{name: "neither command nor url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"args":["x"]}}}}`, wantErr: "config.mcpServers.a: field command"},
		{name: "both command and url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","url":"https://x"}}}}`, wantErr: "set transport"},
		{name: "unknown transport", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"carrier-pigeon","command":"x"}}}}`, wantErr: "carrier-pigeon"},
		{name: "stdio without command", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"stdio","url":"https://x"}}}}`, wantErr: "field command"},
		{name: "http without url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"http","command":"x"}}}}`, wantErr: "field url"},
		{name: "bad header", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"url":"https://x","headers":{"Bad Name":"1"}}}}}`, wantErr: "headers"},
		{name: "header injection", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"url":"https://x","headers":{"X":"1\r\nY: 2"}}}}}`, wantErr: "CR, LF"},
		{name: "bad env name", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","env":{"A=B":"1"}}}}}`, wantErr: "env"},
		{name: "negative timeout", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","timeout":-1}}}}`, wantErr: "negative"},
		{name: "servers not a map", raw: `{"call_template_type":"mcp","config":{"mcpServers":[]}}`, wantErr: "mcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Info.ParseTemplate(json.RawMessage(c.raw))
			if c.wantErr != "" {
				if !errors.Is(err, transports.ErrInvalidTemplate) {
					t.Fatalf("err = %v, want ErrInvalidTemplate", err)
				}
				if !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("error %q does not mention %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate: %v", err)
			}
			spec := tmpl.Spec.(*Template)
			for name, kind := range c.kinds {
				if got := spec.Config.MCPServers[name].Transport; got != kind {
					t.Errorf("server %s: Transport = %q, want %q", name, got, kind)
				}
			}
			if strings.Join(tmpl.Unknown, ",") != strings.Join(c.unknown, ",") {
				t.Errorf("Unknown = %v, want %v", tmpl.Unknown, c.unknown)
			}
		})
	}
}
