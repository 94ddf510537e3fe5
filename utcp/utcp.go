// Package utcp holds the domain types of the Universal Tool Calling Protocol
// (UTCP v1.1) as utcpd uses them: manuals, tools, call templates, auth,
// calls, results, stream events and the closed list of error codes.
//
// The package depends on the standard library only. Field names follow
// python-utcp v1.1, the reference implementation; legacy v0.1 input is
// normalised by package manuals before it reaches these types.
package utcp

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Version is the UTCP version utcpd speaks and writes into manuals it serves.
const Version = "1.1.0"

// Manual is a UTCP manual: the list of tools a provider offers.
type Manual struct {
	UTCPVersion   string `json:"utcp_version"`
	ManualVersion string `json:"manual_version"`
	Tools         []Tool `json:"tools"`
}

// Tool describes one callable tool.
type Tool struct {
	// Name is the tool's name. Inside the registry it is qualified as
	// "manual.tool" (or "manual.server.tool" for MCP).
	Name        string `json:"name"`
	Description string `json:"description"`
	// Inputs and Outputs are JSON Schemas, kept as raw JSON. Empty means {}.
	Inputs              json.RawMessage `json:"inputs,omitempty"`
	Outputs             json.RawMessage `json:"outputs,omitempty"`
	Tags                []string        `json:"tags"`
	AverageResponseSize *int            `json:"average_response_size,omitempty"`
	// ToolCallTemplate says how to reach the tool natively.
	ToolCallTemplate *CallTemplate `json:"tool_call_template,omitempty"`
	// MCP is what an MCP server listed for the tool besides its name,
	// description and schemas: a JSON object with any of "title",
	// "annotations", "icons" and "_meta", as the server sent them, set by
	// the mcp transport so that the MCP front lists the tool as the
	// server does. Empty for tools of every other protocol. utcpd
	// extension.
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// CallTemplate is the protocol-independent part of a UTCP call template,
// together with the whole template as raw JSON.
//
// Raw is the source of truth: it holds every field of the template (after
// legacy normalisation, before variable substitution) and is what gets
// stored and re-encoded. Spec holds the transport-specific typed value that
// the transport's parser built from Raw; it is nil until the template has
// been parsed by the transport registry.
type CallTemplate struct {
	Name                          string   `json:"name,omitempty"`
	Type                          string   `json:"call_template_type"`
	Auth                          *Auth    `json:"auth,omitempty"`
	AllowedCommunicationProtocols []string `json:"allowed_communication_protocols,omitempty"`
	// AllowedHosts, on a manual call template, lists the hosts ("host" for
	// every port, "host:port" for one) that the tools of a remote manual
	// may reach besides the manual's own origin. utcpd extension; the
	// admin's choice, ignored on tool templates.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// Pin, on a manual call template, says how a change of the manual's
	// tool definitions after their first registration is treated: "off"
	// (the new definitions serve at once), "warn" (they serve, are pinned
	// anew and recorded) or "hold" (the pinned definitions keep serving
	// until an admin approves the change); absent, the gateway's default
	// (docs/security.md, "Pinned tool definitions"). utcpd extension; the
	// admin's choice, ignored on tool templates.
	Pin string `json:"pin,omitempty"`

	// Raw is the full template object as JSON.
	Raw json.RawMessage `json:"-"`
	// Spec is the transport's parsed form of Raw (for example *http.Template).
	Spec any `json:"-"`
	// Unknown lists the fields of Raw that neither the base nor the
	// transport knows. Callers turn them into warnings (or errors in
	// strict mode); they are never fatal by themselves.
	Unknown []string `json:"-"`
}

// MarshalJSON writes Raw when it is set, and the base fields otherwise.
func (t CallTemplate) MarshalJSON() ([]byte, error) {
	if len(t.Raw) > 0 {
		return t.Raw, nil
	}
	type base CallTemplate
	return json.Marshal(base(t))
}

// UnmarshalJSON decodes the base fields and keeps the whole object in Raw.
// It does not validate the transport-specific remainder: that is the
// transport's ParseTemplate.
func (t *CallTemplate) UnmarshalJSON(b []byte) error {
	type base CallTemplate
	var v base
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*t = CallTemplate(v)
	t.Raw = append(json.RawMessage(nil), bytes.TrimSpace(b)...)
	return nil
}

// AllowedProtocols returns the call_template_types this manual template
// allows its tools to use: allowed_communication_protocols when it is set
// and non-empty, and only the template's own type otherwise.
func (t *CallTemplate) AllowedProtocols() []string {
	if len(t.AllowedCommunicationProtocols) > 0 {
		return t.AllowedCommunicationProtocols
	}
	return []string{t.Type}
}

// Allows reports whether a tool of call_template_type typ may be called
// through a manual registered with template t.
func (t *CallTemplate) Allows(typ string) bool {
	for _, p := range t.AllowedProtocols() {
		if strings.EqualFold(p, typ) {
			return true
		}
	}
	return false
}

// The auth_type values utcpd knows.
const (
	AuthAPIKey     = "api_key"
	AuthBasic      = "basic"
	AuthOAuth2     = "oauth2"
	AuthOAuth2User = "oauth2_user"
)

// Auth is a UTCP auth block. One struct serves every auth_type; the fields
// that do not belong to Type are empty.
//
// Ownership and GrantType are the metadata of UTCP spec issue #62: who
// provisions the credential (static for the connector, user per end user)
// and which OAuth grant produced it.
type Auth struct {
	Type string `json:"auth_type"`

	// api_key
	APIKey   string `json:"api_key,omitempty"`
	VarName  string `json:"var_name,omitempty"` // default "X-Api-Key" (api_key), "Authorization" (oauth2_user)
	Location string `json:"location,omitempty"` // header (default), query, cookie

	// basic
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`

	// oauth2 (client credentials)
	TokenURL     string `json:"token_url,omitempty"`
	ClientID     string `json:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty"`
	Scope        string `json:"scope,omitempty"`

	// oauth2_user (bring your own token)
	AccessToken                 string  `json:"access_token,omitempty"`
	TokenEndpoint               string  `json:"token_endpoint,omitempty"`
	DeviceAuthorizationEndpoint string  `json:"device_authorization_endpoint,omitempty"`
	AuthorizationEndpoint       string  `json:"authorization_endpoint,omitempty"`
	Prefix                      *string `json:"prefix,omitempty"` // default "Bearer "

	// Metadata (UTCP spec issue #62).
	Ownership string `json:"ownership,omitempty"`  // static (default) | user
	GrantType string `json:"grant_type,omitempty"` // oauth2 only
}

// AuthMetadata is the lifecycle metadata of a tool's effective auth.
type AuthMetadata struct {
	Type      string `json:"auth_type,omitempty"` // "" when the tool needs no auth
	Ownership string `json:"ownership,omitempty"`
	GrantType string `json:"grant_type,omitempty"`
}

// Metadata returns a's lifecycle metadata with the defaults filled in:
// ownership "static", and for oauth2 grant_type "client_credentials".
// A nil Auth yields the zero AuthMetadata.
func (a *Auth) Metadata() AuthMetadata {
	if a == nil {
		return AuthMetadata{}
	}
	m := AuthMetadata{Type: a.Type, Ownership: a.Ownership, GrantType: a.GrantType}
	if m.Ownership == "" {
		m.Ownership = "static"
	}
	if m.GrantType == "" {
		switch a.Type {
		case AuthOAuth2:
			m.GrantType = "client_credentials"
		}
	}
	return m
}

// EffectiveAuth returns the auth that applies to a call of a tool: the
// tool template's own auth when it has one, else the manual template's.
func EffectiveAuth(manual, tool *CallTemplate) *Auth {
	if tool != nil && tool.Auth != nil {
		return tool.Auth
	}
	if manual != nil {
		return manual.Auth
	}
	return nil
}

// Call is one tool invocation as handed to a transport.
type Call struct {
	// Tool is the qualified name, "manual.tool".
	Tool string
	// Manual is the name of the manual the tool belongs to.
	Manual string
	// Name is the tool's name as its backend knows it (Tool without the
	// "manual." prefix).
	Name string
	// Template is the tool's call template, variables substituted and
	// parsed (Spec set).
	Template *CallTemplate
	// Arguments are the call's arguments, JSON-compatible values
	// (numbers as json.Number).
	Arguments map[string]any
	// Principal names the authenticated caller, "" if anonymous.
	Principal string
}

// Result is the outcome of a successful call.
type Result struct {
	// Value is the tool's output: a JSON-compatible value (map[string]any,
	// []any, string, json.Number, bool, nil) or json.RawMessage. It is
	// what every front answers, except the MCP front when MCP is set.
	Value any
	// MCP is the result as an MCP server sent it, a CallToolResult JSON
	// object ({"content": [...], "structuredContent": ..., "_meta": ...}),
	// set by the mcp transport so that the MCP front answers it block for
	// block. Empty for every other protocol, and dropped by the gateway
	// when a post-processor applies to the call (Value then says what the
	// tool answered).
	MCP json.RawMessage
}

// Event is one item of a streamed result.
type Event struct {
	// Type is an optional event name (the SSE event field, for example).
	Type string `json:"type,omitempty"`
	// ID is an optional event id.
	ID string `json:"id,omitempty"`
	// Data is the event's payload, a JSON-compatible value.
	Data any `json:"data"`
	// MCP, on the "result" event of an MCP call, is the result as the
	// server sent it (see Result.MCP). It is not part of the event's
	// JSON.
	MCP json.RawMessage `json:"-"`
}

// SanitizeName returns name with every character outside [A-Za-z0-9_]
// replaced by '_', the rule UTCP applies to manual names.
func SanitizeName(name string) string {
	b := []byte(name)
	changed := false
	out := make([]byte, 0, len(b))
	for _, r := range name {
		if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			out = append(out, byte(r))
			continue
		}
		out = append(out, '_')
		changed = true
	}
	if !changed {
		return name
	}
	return string(out)
}
