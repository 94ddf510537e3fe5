package daemon

import (
	"encoding/json"
	"time"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/manuals"
)

// Config is one successfully loaded configuration file.
type Config struct {
	Path string // "" when there is none
	Cfg  *manuals.Config
	Data []byte // the file's bytes, for line numbers
	Vars *manuals.Resolver
}

// Settings are the daemon's effective settings (cmd/utcpd merges flags,
// environment, the configuration file's gateway section and defaults).
//
// Settings is also the shape of the gateway section: each field's json
// tag is its key there, and ApplyGateway reads a key by its field's type
// and tags (see ApplyGateway). A field tagged json:"-" is not a key. The
// order of the fields is the order "did you mean" hints prefer on a tie.
type Settings struct {
	Listen     string `json:"listen" invalid:"must be a string such as \"127.0.0.1:8787\""`
	AdminToken string `json:"admin_token"`
	// APIKeys are the plain keys (strings of gateway.api_keys, and
	// $UTCPD_API_KEYS or --api-keys, which replace the file's plain
	// keys); NamedKeys the objects of gateway.api_keys, with their
	// scopes (apikeys.go; key_env is read at start, ResolveAPIKeys).
	APIKeys         []string         `json:"api_keys" gateway:"keys=NamedKeys"`
	NamedKeys       []gateway.APIKey `json:"-"`
	DataDir         string           `json:"data_dir" gateway:"path"`    // "" keeps manuals in memory only
	ManualsDir      string           `json:"manuals_dir" gateway:"path"` // "" watches no folder
	MaxBodyBytes    int64            `json:"max_body_bytes" invalid:"must be a positive integer number of bytes"`
	DefaultTimeout  time.Duration    `json:"default_timeout"`
	MaxTimeout      time.Duration    `json:"max_timeout"`
	ShutdownTimeout time.Duration    `json:"shutdown_timeout"`
	LogFormat       string           `json:"log_format"`
	LogLevel        string           `json:"log_level"`

	// The guard chain, human review and audit log (guards.go;
	// review_timeout and audit_retention through EffectiveReviewTimeout
	// and EffectiveAuditRetention). Zero values mean the defaults. The
	// keys tagged reload apply again on SIGHUP (ReloadableKeys).
	Guards         json.RawMessage `json:"guards" gateway:"reload" invalid:"must be an array of guard objects, each with a \"kind\""` // the gateway.guards array, unresolved
	BypassTools    []string        `json:"bypass_tools" gateway:"reload" invalid:"must be an array of exact tool names, such as [\"health.ping\"]"`
	GuardTimeout   time.Duration   `json:"guard_timeout" gateway:"reload"`
	ReviewTimeout  time.Duration   `json:"review_timeout"`
	AuditRetention time.Duration   `json:"audit_retention"`
	// AuditMaxRows and AuditMaxBytes bound the audit log besides its age
	// (gateway.audit_max_rows, gateway.audit_max_bytes: the oldest
	// records beyond them are deleted); 0 is no limit.
	AuditMaxRows  int64 `json:"audit_max_rows" gateway:"zero"`
	AuditMaxBytes int64 `json:"audit_max_bytes" gateway:"zero"`

	// AllowedOrigins are the browser origins every route accepts besides
	// the daemon's own (gateway.allowed_origins).
	AllowedOrigins []string `json:"allowed_origins" invalid:"must be an array of origins such as \"https://app.example.com\" (or \"*\")"`

	// Store is the shared store's DSN (postgres://...); "" keeps the
	// embedded SQLite store in DataDir. StoreResync and StoreMaxConns
	// tune it (0: the defaults of store/postgres).
	Store         string        `json:"store" invalid:"must be a string: a postgres:// DSN (prefer $UTCPD_STORE, which keeps the password out of the file)"`
	StoreResync   time.Duration `json:"store_resync_interval"`
	StoreMaxConns int           `json:"store_max_conns" gateway:"max=1000" invalid:"must be an integer from 1 to 1000"`

	// PublicURL is the gateway's address as clients reach it, used in the
	// call templates of the UTCP manual at GET /utcp (gateway.public_url).
	PublicURL string `json:"public_url" invalid:"must be a string such as \"https://tools.example.com\""`

	// CodeMode tunes CodeMode (gateway.codemode, read as codeModeSection;
	// zero fields keep the defaults of api/codemode); CodeModeOff turns
	// it off (gateway.codemode.enabled false).
	CodeMode    codemode.Options `json:"codemode" gateway:"off=CodeModeOff"`
	CodeModeOff bool             `json:"-"`

	// AllowedHosts are the host names every route accepts in the Host
	// header besides loopback names, IP literals, the listen host and
	// public_url's host (gateway.allowed_hosts).
	AllowedHosts []string `json:"allowed_hosts" invalid:"must be an array of host names such as \"tools.example.com\" (or \"*.example.com\")"`
	// ReadTimeout bounds how long a client may take to send a request
	// body (gateway.read_timeout); MaxConnections caps the connections
	// served at once (gateway.max_connections).
	ReadTimeout    time.Duration `json:"read_timeout" invalid:"must be a positive duration such as \"30s\""`
	MaxConnections int           `json:"max_connections"`

	// MCP configures the /mcp front (gateway.mcp, read as MCPSection).
	MCP MCPSection `json:"mcp"`

	// Toolsets are the config file's toolsets (gateway.toolsets, read as
	// Toolsets): virtual servers at /mcp/{name} and /v1/toolsets/{name}/.
	// They apply again on SIGHUP.
	Toolsets Toolsets `json:"toolsets" gateway:"reload"`

	// Discovery limits (gateway.max_tools_per_manual,
	// gateway.max_manual_bytes); 0 keeps the gateway's defaults (20,000
	// tools, 16 MiB).
	MaxToolsPerManual int   `json:"max_tools_per_manual" invalid:"must be a positive integer number of tools"`
	MaxManualBytes    int64 `json:"max_manual_bytes" invalid:"must be a positive integer number of bytes"`

	// PinDefault is the pin mode of the manuals whose template sets no
	// "pin" (gateway.pin_default: "off", "warn" or "hold"; see
	// gateway.Options.PinDefault); "" keeps the gateway's default: hold
	// for manuals fetched over the network, warn for cli, text and file.
	PinDefault string `json:"pin_default"`

	// RateLimits are the call rates and concurrency caps
	// (gateway.rate_limits, read and validated by ratelimit.ParseRules;
	// docs/ratelimits.md).
	RateLimits []ratelimit.Rule `json:"rate_limits"`
}

// MCPSection is the gateway section's mcp object, the /mcp front:
//
//	"mcp": {"codemode": true, "native_names": ["everything.srv"], "input_timeout": "2m", "max_input_calls": 16}
//
// Every key is optional. Its fields are read as Settings' are (see
// ApplyGateway); an unknown key is an error.
type MCPSection struct {
	// CodeMode offers codemode.run on /mcp (off by default, and never
	// while CodeMode itself is off).
	CodeMode bool `json:"codemode"`
	// NativeNames are the MCP servers, each "manual.server", whose tools
	// /mcp lists exactly as the server names them
	// (mcpfront.Options.NativeNames).
	NativeNames []string `json:"native_names"`
	// InputTimeout is how long a call of a 2026-07-28 client parked on an
	// input-required result waits for the client's retry
	// (mcpfront.Options.InputTimeout; unset: mcpfront.DefaultInputTimeout).
	InputTimeout time.Duration `json:"input_timeout"`
	// MaxInputCalls caps the calls of one principal parked on
	// input-required results (mcpfront.Options.MaxInputCalls, a
	// positive integer; unset: mcpfront.DefaultMaxInputCalls).
	MaxInputCalls int `json:"max_input_calls"`
}

// EffectiveReviewTimeout is the review_timeout of s, else the default.
func (s *Settings) EffectiveReviewTimeout() time.Duration {
	if s.ReviewTimeout > 0 {
		return s.ReviewTimeout
	}
	return review.DefaultTimeout
}

// EffectiveAuditRetention is the audit_retention of s, else the default.
func (s *Settings) EffectiveAuditRetention() time.Duration {
	if s.AuditRetention > 0 {
		return s.AuditRetention
	}
	return audit.DefaultRetention
}
