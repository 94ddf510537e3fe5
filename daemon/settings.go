package daemon

import (
	"encoding/json"
	"time"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/gateway/audit"
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
type Settings struct {
	Listen          string
	AdminToken      string
	APIKeys         []string
	DataDir         string // "" keeps manuals in memory only
	ManualsDir      string // "" watches no folder
	MaxBodyBytes    int64
	DefaultTimeout  time.Duration
	MaxTimeout      time.Duration
	ShutdownTimeout time.Duration
	LogFormat       string
	LogLevel        string

	// Store is the shared store's DSN (postgres://...); "" keeps the
	// embedded SQLite store in DataDir. StoreResync and StoreMaxConns
	// tune it (0: the defaults of store/postgres).
	Store         string
	StoreResync   time.Duration
	StoreMaxConns int

	// The guard chain, human review and audit log (guards.go; review_timeout and
	// audit_retention through EffectiveReviewTimeout and
	// EffectiveAuditRetention). Zero
	// values mean the defaults.
	Guards         json.RawMessage // the gateway.guards array, unresolved
	BypassTools    []string
	GuardTimeout   time.Duration
	ReviewTimeout  time.Duration
	AuditRetention time.Duration
	// AuditMaxRows and AuditMaxBytes bound the audit log besides its age
	// (gateway.audit_max_rows, gateway.audit_max_bytes: the oldest
	// records beyond them are deleted); 0 is no limit.
	AuditMaxRows, AuditMaxBytes int64

	// AllowedOrigins are the browser origins every route accepts besides
	// the daemon's own (gateway.allowed_origins).
	AllowedOrigins []string
	// AllowedHosts are the host names every route accepts in the Host
	// header besides loopback names, IP literals, the listen host and
	// public_url's host (gateway.allowed_hosts).
	AllowedHosts []string
	// ReadTimeout bounds how long a client may take to send a request
	// body (gateway.read_timeout); MaxConnections caps the connections
	// served at once (gateway.max_connections).
	ReadTimeout    time.Duration
	MaxConnections int

	// PublicURL is the gateway's address as clients reach it, used in the
	// call templates of the UTCP manual at GET /utcp (gateway.public_url).
	PublicURL string

	// CodeMode tunes CodeMode (gateway.codemode; zero fields keep the
	// defaults of api/codemode); CodeModeOff turns it off.
	CodeMode    codemode.Options
	CodeModeOff bool

	// Discovery limits (gateway.max_tools_per_manual,
	// gateway.max_manual_bytes); 0 keeps the gateway's defaults (20,000
	// tools, 16 MiB).
	MaxToolsPerManual int
	MaxManualBytes    int64
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
