package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "mcp"

// Kinds of MCP server connections, the normalised values of
// Server.Transport.
const (
	// KindStdio runs the server as a subprocess and speaks
	// newline-delimited JSON-RPC on its standard input and output.
	KindStdio = "stdio"
	// KindHTTP speaks Streamable HTTP to a URL and falls back to the
	// legacy HTTP+SSE transport when the server rejects the Streamable
	// HTTP handshake with a 4xx status.
	KindHTTP = "http"
	// KindSSE speaks only the legacy HTTP+SSE transport (2024-11-05).
	KindSSE = "sse"
)

// Template is the mcp-specific part of a call template (call_template_type
// "mcp"). The base fields (name, call_template_type, auth,
// allowed_communication_protocols) live in utcp.CallTemplate; auth applies
// to the requests sent to HTTP servers.
type Template struct {
	// Config holds the servers, in the standard MCP client JSON shape.
	// Required.
	Config ClientConfig `json:"config" jsonschema:"required"`
	// RegisterResourcesAsTools makes every resource a server lists a tool
	// named "<server>.resource_<name>" that reads it, as python-utcp does.
	RegisterResourcesAsTools bool `json:"register_resources_as_tools,omitempty"`
}

// ClientConfig is the "config" object of an mcp call template, the JSON
// shape MCP clients (Claude Desktop, VS Code, python-utcp, @utcp/mcp) use.
type ClientConfig struct {
	// MCPServers maps a server name to its connection. At least one
	// server that is not disabled is required. Server names become the
	// middle part of tool names (manual.server.tool) and may contain any
	// character but must not be empty.
	MCPServers map[string]*Server `json:"mcpServers" jsonschema:"required"`
}

// Server is one MCP server of a manual: a subprocess spoken to over stdio
// (Command set) or an HTTP endpoint (URL set).
type Server struct {
	// Transport selects the connection: "stdio", "http" (Streamable HTTP,
	// falling back to legacy HTTP+SSE) or "sse" (legacy HTTP+SSE only).
	// "streamable_http", "streamable-http", "streamableHttp" and
	// "streamable" mean "http". Empty infers stdio from Command and http
	// from URL. After ParseTemplate it holds the normalised kind.
	Transport string `json:"transport,omitempty"`
	// Type is an alias of Transport used by other MCP client
	// configurations (Claude Desktop, VS Code). Transport wins when both
	// are set.
	Type string `json:"type,omitempty"`

	// Command is the program of a stdio server, looked up in the
	// daemon's PATH when it has no slash.
	Command string `json:"command,omitempty"`
	// Args are the program's arguments.
	Args []string `json:"args,omitempty"`
	// Env is set in the server's environment on top of the inherited
	// variables.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the server's working directory ("" is the daemon's).
	Cwd string `json:"cwd,omitempty"`
	// InheritEnvVars, a utcpd extension, selects the daemon environment
	// variables a stdio server inherits: nil inherits DefaultInherit, an
	// empty list nothing, a list exactly the named variables (a trailing
	// "*" matches a prefix).
	InheritEnvVars []string `json:"inherit_env_vars"`

	// URL is the MCP endpoint of an HTTP server. https, or http to a
	// literal loopback host unless AllowInsecure is set.
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to the server's origin.
	Headers map[string]string `json:"headers,omitempty"`
	// AllowInsecure, a utcpd extension, permits plain http to a host that
	// is not loopback.
	AllowInsecure bool `json:"allow_insecure,omitempty"`

	// Timeout, in seconds as in other MCP client configurations, bounds
	// each tool call whose caller sets no sooner deadline, and connecting
	// plus discovery. 0 means DefaultCallTimeout for calls and
	// DefaultConnectTimeout for connecting.
	Timeout float64 `json:"timeout,omitempty"`
	// SSEReadTimeout (seconds) is accepted for compatibility with
	// @utcp/mcp; utcpd detects dead sessions with pings instead.
	SSEReadTimeout float64 `json:"sse_read_timeout,omitempty"`
	// TerminateOnClose is accepted for compatibility with @utcp/mcp;
	// utcpd always ends HTTP sessions (DELETE) when it drops them.
	TerminateOnClose *bool `json:"terminate_on_close,omitempty"`
	// Disabled servers are skipped (a field of several MCP client
	// configurations).
	Disabled bool `json:"disabled,omitempty"`
}

// DefaultInherit lists the daemon environment variables a stdio server
// inherits when its inherit_env_vars is null. Names ending in "*" are
// prefixes. Secrets are deliberately absent: pass them in env.
var DefaultInherit = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*",
	"TZ", "TMPDIR", "TERM",
}

// kindOf normalises a transport name; ok is false for an unknown one.
func kindOf(name string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "stdio":
		return KindStdio, true
	case "http", "streamable_http", "streamable-http", "streamablehttp", "streamable":
		return KindHTTP, true
	case "sse":
		return KindSSE, true
	}
	return "", false
}

// Validate checks t and normalises every server's Transport to its kind.
func (t *Template) Validate() error {
	if t.Config.MCPServers == nil {
		return fmt.Errorf("field config.mcpServers is required: a map from server name to server")
	}
	enabled := 0
	for _, name := range t.ServerNames() {
		s := t.Config.MCPServers[name]
		if name == "" {
			return fmt.Errorf("field config.mcpServers: a server name must not be empty")
		}
		if strings.ContainsAny(name, "\x00\r\n") {
			return fmt.Errorf("field config.mcpServers: server name %q contains a control character", name)
		}
		if s == nil {
			return fmt.Errorf("field config.mcpServers.%s must be an object", name)
		}
		if err := s.validate(); err != nil {
			return fmt.Errorf("field config.mcpServers.%s: %w", name, err)
		}
		if !s.Disabled {
			enabled++
		}
	}
	if enabled == 0 {
		return fmt.Errorf("field config.mcpServers is required and must list at least one server that is not disabled")
	}
	return nil
}

func (s *Server) validate() error {
	name := s.Transport
	if name == "" {
		name = s.Type
	}
	switch {
	case name != "":
		kind, ok := kindOf(name)
		if !ok {
			return fmt.Errorf("transport %q is not one of stdio, http, sse", name)
		}
		s.Transport = kind
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("both command and url are set; set transport to say which to use")
	case s.Command != "":
		s.Transport = KindStdio
	case s.URL != "":
		s.Transport = KindHTTP
	default:
		return fmt.Errorf("field command (a stdio server) or url (an HTTP server) is required")
	}
	switch s.Transport {
	case KindStdio:
		if strings.TrimSpace(s.Command) == "" {
			return fmt.Errorf("field command is required for a stdio server")
		}
		if strings.ContainsRune(s.Command, 0) || slices.ContainsFunc(s.Args, func(a string) bool { return strings.ContainsRune(a, 0) }) {
			return fmt.Errorf("command or args contain a NUL byte")
		}
		for k, v := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("field env: invalid variable name %q", k)
			}
			if strings.ContainsRune(v, 0) {
				return fmt.Errorf("field env: the value of %s contains a NUL byte", k)
			}
		}
		for _, k := range s.InheritEnvVars {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return fmt.Errorf("field inherit_env_vars: invalid variable name %q", k)
			}
		}
		if strings.ContainsRune(s.Cwd, 0) {
			return fmt.Errorf("field cwd contains a NUL byte")
		}
	default:
		if strings.TrimSpace(s.URL) == "" {
			return fmt.Errorf("field url is required for an %s server", s.Transport)
		}
		for k, v := range s.Headers {
			if !httpclient.ValidHeaderName(k) {
				return fmt.Errorf("field headers: %q is not a valid HTTP header name", k)
			}
			if !httpclient.ValidHeaderValue(v) {
				return fmt.Errorf("field headers: the value of %s contains CR, LF or NUL", k)
			}
		}
	}
	if s.Timeout < 0 || s.SSEReadTimeout < 0 {
		return fmt.Errorf("timeouts must not be negative (they are in seconds)")
	}
	return nil
}

// ServerNames returns the names of the template's servers, sorted.
func (t *Template) ServerNames() []string {
	names := make([]string, 0, len(t.Config.MCPServers))
	for n := range t.Config.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseTemplate decodes and validates an mcp call template. Unknown
// fields, including those inside config and inside a server (named
// "config.mcpServers.<server>.<field>"), are listed in Unknown; they are
// never fatal.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, err := transports.DecodeTemplate(raw, &Template{})
	if err != nil {
		return tmpl, err
	}
	tmpl.Unknown = append(tmpl.Unknown, nestedUnknown(raw)...)
	sort.Strings(tmpl.Unknown)
	return tmpl, nil
}

// nestedUnknown lists the unknown fields inside config and its servers.
func nestedUnknown(raw json.RawMessage) []string {
	var top struct {
		Config map[string]json.RawMessage `json:"config"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return nil
	}
	var out []string
	for k := range top.Config {
		if k != "mcpServers" {
			out = append(out, "config."+k)
		}
	}
	var servers map[string]json.RawMessage
	if json.Unmarshal(top.Config["mcpServers"], &servers) != nil {
		return out
	}
	known := transports.FieldNames(&Server{})
	for name, s := range servers {
		var fields map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSpace(s), &fields) != nil {
			continue
		}
		for k := range fields {
			if !slices.Contains(known, k) {
				out = append(out, "config.mcpServers."+name+"."+k)
			}
		}
	}
	return out
}
