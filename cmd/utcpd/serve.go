package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/manuals"
)

func newServeCmd() *cobra.Command {
	var f serveFlags
	var configPath string
	var strict bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway daemon (admin API, REST front, health and metrics)",
		Long: `serve runs the utcpd daemon on one HTTP listener:

  /admin/...   admin API: register, list, replace, refresh and remove manuals
               (bearer admin token; without one, loopback clients only)
  /v1/...      REST front: list, search and call tools (API keys when set)
  /mcp         MCP front, Streamable HTTP (same API keys; docs/mcp.md)
  /healthz /readyz /metrics /openapi.json

Manuals come from four places: the store in --data-dir (manuals registered
through the admin API; served at once at start, then discovered again in the
background), the configuration file, the --manuals-dir folder, and the admin
API. /readyz answers 200 once the stored manuals are restored and the
configuration and folder manuals had their first registration.

Several replicas behind a load balancer share one PostgreSQL database
(docs/deploy.md): --store postgres://user@host/db ($UTCPD_STORE, or
gateway.store) keeps the manuals, reviews and audit log there instead of the
SQLite store in --data-dir. Every replica serves the same registry (a change
through one is live on the others within a second), a review can be decided
through any replica, and the audit log is shared. A replica whose database is
not reachable at start retries with backoff and answers /readyz 503 until it
has restored the stored manuals; once started it keeps serving calls from
memory while the database is away (/readyz 200 {"status": "degraded"}; writes
fail with unavailable) and recovers by itself when it is back.

The configuration file (--config, UTCPD_CONFIG, else ./utcpd.json when it
exists, else none) is a UTCP client configuration (v1.1 or legacy v0.1) with an
optional "gateway" section:

  "gateway": {
    "listen": "127.0.0.1:8787",      "admin_token": "...",   "api_keys": ["..."],
    "data_dir": "/var/lib/utcpd",    "manuals_dir": "manuals",
    "max_body_bytes": 4194304,       "default_timeout": "30s",
    "max_timeout": "5m",             "shutdown_timeout": "15s",
    "log_format": "text",            "log_level": "info",
    "guards": [{"kind": "policy", ...}, {"kind": "webhook", "secret": "${GUARD_HMAC}", ...}],
    "bypass_tools": ["health.ping"], "guard_timeout": "10s",
    "review_timeout": "10m",         "audit_retention": "720h",
    "allowed_origins": ["https://app.example.com"],
    "public_url": "https://tools.example.com",
    "store": "postgres://utcpd@db.internal/utcpd",
    "store_resync_interval": "30s", "store_max_conns": 8,
    "max_tools_per_manual": 20000,   "max_manual_bytes": 16777216
  }

allowed_origins are the browser origins (Origin header) /mcp accepts besides
loopback ones (http or https on localhost, 127.0.0.0/8, [::1]); a request from
any other origin is refused with 403; "*" accepts every origin.

max_tools_per_manual (default 20000) and max_manual_bytes (default 16 MiB) cap
what one manual discovery may bring in: a manual that lists more tools, or
whose document is larger, is not registered (discovery_failed naming the
limit), and nothing of it is kept.

public_url is the address clients reach the gateway at (scheme, host, optional
path prefix), used in the call templates of the UTCP manual at GET /utcp;
without it they point at the scheme and Host of each request.

guards is the guard chain, run in order on every call before dispatch (each
entry's kind names a registered guard kind; ${VAR} in it resolves like a
manual's variables, without namespace; an entry that does not load refuses to
start, exit 2, naming gateway.guards[i]); bypass_tools are exact qualified
tool names (manual.tool) that skip it: only the name a call resolves to
counts, never the name as typed. A review verdict parks the call for a decision through the admin
API (/admin/reviews) for up to review_timeout; every call is recorded in the
audit log (/admin/audit), kept for audit_retention.

Relative paths in it are relative to the configuration file. Settings apply in
the order flags > environment (UTCPD_LISTEN, UTCPD_ADMIN_TOKEN, UTCPD_API_KEYS
comma-separated, UTCPD_DATA_DIR, UTCPD_STORE, UTCPD_MANUALS_DIR, UTCPD_LOG_FORMAT,
UTCPD_LOG_LEVEL; an empty variable counts as unset) > file > defaults. A .env
file in the working directory is loaded into the environment first (variables
already set win).

The manuals folder (--manuals-dir): every *.json file is one manual call
template (named by its "name", else the file's base name) or one UTCP manual or
OpenAPI document (registered as a file call template pointing at it, named by
the file's base name, allowing the protocols its tools use: the folder is
trusted like the configuration). Names are sanitised; manuals from the folder
have source "dir". The folder is checked every second (modification time and
size): new files register, changed ones are discovered again and replace the
old version, removed ones deregister; calls in flight finish. A broken file, or
one whose manual cannot be discovered, keeps its last good version serving and
the log says why.

SIGHUP re-reads the configuration file (variables, manual call templates: new
ones register, removed ones deregister, changed ones and those whose variables
changed are discovered again; the guard chain, bypass_tools and guard_timeout
are rebuilt, a chain that fails to load keeping the last good one; the rest of
the gateway section, post_processing and
tool_search_strategy need a restart) and every file of the folder, and retries
the manuals that failed to register. An error keeps the last good
configuration serving. SIGTERM or
SIGINT stops accepting connections, lets calls in flight finish for up to
shutdown_timeout, then closes the transports and the store.

Security: the default listen address is loopback. Listening on any other
address needs both an admin token and at least one API key, else serve refuses
to start (exit 2).

Exit codes: 0 after a clean shutdown; 1 when the daemon could not run
(address in use, store unreadable); 2 for an invalid configuration, flag or
environment variable, or an exposed listener without credentials.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, &f, configPath, strict)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&configPath, "config", "c", "", "configuration file (default $UTCPD_CONFIG, else ./utcpd.json when it exists)")
	fl.BoolVar(&strict, "strict", false, "treat unknown configuration fields (also in the gateway section) as errors")
	f.bind(fl)
	return cmd
}

// daemonConfig is one successfully loaded configuration file.
type daemonConfig = daemon.Config

// resolveConfigPath picks the configuration file: the flag, else
// $UTCPD_CONFIG, else ./utcpd.json when it exists, else none (""). A file
// named by the flag or the variable must exist.
func resolveConfigPath(flagValue string, flagSet bool) string {
	if flagSet {
		return flagValue
	}
	if v := os.Getenv(envConfig); v != "" {
		return v
	}
	if _, err := os.Stat(defaultConfigFile); err == nil {
		return defaultConfigFile
	}
	return ""
}

// loadDaemonConfig loads the configuration file at path with the
// validation utcpd config validate runs (daemon.CheckConfig, without the
// preflight that registration runs on each manual) and builds its
// variable resolver. It returns the configuration and its problems (the
// warnings, and the errors of single manuals, which fail only those);
// an error that makes the file unusable is an error listing every error
// of the file. A reload leaves the guard chain to the daemon
// (daemon.CheckOptions.Guards).
func loadDaemonConfig(path string, strict, reload bool, base settings) (*daemonConfig, *daemon.Checked, error) {
	if path == "" {
		vars, err := manuals.NewResolver(nil, manuals.ResolverOptions{})
		return &daemonConfig{Vars: vars}, &daemon.Checked{Settings: base}, err
	}
	c := daemon.CheckConfig(path, daemon.CheckOptions{Strict: strict, Guards: !reload, Base: base})
	if c.Fatal {
		return nil, c, errors.New(listProblems(path, c.Errors()))
	}
	return c.Config, c, nil
}

// listProblems formats problems for the terminal: every problem on its
// own line, "file:line: path: message".
func listProblems(path string, ps []manuals.Problem) string {
	if len(ps) == 1 && ps[0].File == "" && ps[0].Line == 0 {
		return ps[0].String() // names the file already
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %d problem(s):", path, len(ps))
	for _, p := range ps {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

func runServe(cmd *cobra.Command, f *serveFlags, configFlag string, strict bool) error {
	path := resolveConfigPath(configFlag, cmd.Flags().Changed("config"))
	dc, checked, err := loadDaemonConfig(path, strict, false, defaultSettings())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	s, _, err := effectiveSettings(cmd.Flags(), f, dc, strict)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if _, err := checkExposure(&s); err != nil {
		return &exitError{code: exitUsage, err: err}
	}

	// The configuration's warnings (the gateway section's among them),
	// repeated ones summarised, as config validate prints them; a
	// rejected manual's errors are logged as its failed registration.
	log := newLogger(&s)
	for _, p := range checked.Problems {
		if p.Severity == manuals.SeverityWarning {
			log.Warn("configuration", "warning", p.String())
		}
	}

	opts := daemon.Options{
		Settings: s,
		Config:   dc,
		Logger:   log,
		Stdout:   cmd.OutOrStdout(),
		Version:  versionString(),
		LoadConfig: func(path string) (*daemon.Config, *daemon.Settings, error) {
			return reloadConfig(path, strict)
		},
	}
	if !cmd.Flags().Changed("config") && os.Getenv(envConfig) == "" {
		// No configuration named: a SIGHUP looks for ./utcpd.json again.
		opts.FindConfig = func() string { return resolveConfigPath("", false) }
	}
	err = daemon.Run(cmd.Context(), opts)
	if ue, ok := errors.AsType[*daemon.UsageError](err); ok {
		return &exitError{code: exitUsage, err: ue.Err}
	}
	return err
}

// reloadConfig loads the configuration file at path for a reload with
// the validation of the start (loadDaemonConfig) and decodes its gateway
// section; an error lists the problems that make the file unusable.
func reloadConfig(path string, strict bool) (*daemonConfig, *settings, error) {
	dc, checked, err := loadDaemonConfig(path, strict, true, settings{})
	if err != nil {
		return nil, nil, err
	}
	return dc, &checked.Settings, nil
}

// checkExposure refuses a listener on a non-loopback address without an
// admin token and API keys. It reports whether the address is loopback.
func checkExposure(s *settings) (bool, error) {
	host, _, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %w (want host:port, e.g. 127.0.0.1:8787)", s.Listen, err)
	}
	if isLoopback(host) {
		return true, nil
	}
	where := s.Listen
	if host == "" {
		where += " (every interface)"
	}
	switch {
	case s.AdminToken == "":
		return false, fmt.Errorf("refusing to listen on %s, which is not a loopback address, without an admin token: "+
			"set $UTCPD_ADMIN_TOKEN (or --admin-token, or gateway.admin_token), or listen on 127.0.0.1", where)
	case len(s.APIKeys) == 0:
		return false, fmt.Errorf("refusing to listen on %s, which is not a loopback address, without API keys for the REST front: "+
			"set $UTCPD_API_KEYS (or --api-keys, or gateway.api_keys), or listen on 127.0.0.1", where)
	}
	return false, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
