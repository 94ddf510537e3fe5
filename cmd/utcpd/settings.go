package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of the daemon settings.
const (
	defaultListen          = "127.0.0.1:8787"
	defaultConfigFile      = "utcpd.json"
	defaultMaxBodyBytes    = 4 << 20
	defaultDefaultTimeout  = 30 * time.Second
	defaultMaxTimeout      = 5 * time.Minute
	defaultShutdownTimeout = 15 * time.Second
	defaultReadTimeout     = 30 * time.Second
	// defaultMaxConnections leaves room for many idle keep-alive clients
	// while bounding what stalled ones can hold (a few KiB each).
	defaultMaxConnections = 4096
	defaultLogFormat      = "text"
	defaultLogLevel       = "info"
)

// Environment variables the daemon and the client commands read.
const (
	envListen     = "UTCPD_LISTEN"
	envAdminToken = "UTCPD_ADMIN_TOKEN"
	envAPIKeys    = "UTCPD_API_KEYS"
	envAPIKey     = "UTCPD_API_KEY"
	envDataDir    = "UTCPD_DATA_DIR"
	envStore      = "UTCPD_STORE"
	envManualsDir = "UTCPD_MANUALS_DIR"
	envConfig     = "UTCPD_CONFIG"
	envLogFormat  = "UTCPD_LOG_FORMAT"
	envLogLevel   = "UTCPD_LOG_LEVEL"
	envServer     = "UTCPD_SERVER"
)

// settings are the daemon's effective settings: flags over environment
// over the configuration file's gateway section over defaults.
type settings = daemon.Settings

// defaultSettings returns the built-in defaults.
func defaultSettings() settings {
	return settings{
		Listen:          defaultListen,
		APIKeys:         []string{},
		DataDir:         defaultDataDir(),
		MaxBodyBytes:    defaultMaxBodyBytes,
		DefaultTimeout:  defaultDefaultTimeout,
		MaxTimeout:      defaultMaxTimeout,
		ShutdownTimeout: defaultShutdownTimeout,
		ReadTimeout:     defaultReadTimeout,
		MaxConnections:  defaultMaxConnections,
		LogFormat:       defaultLogFormat,
		LogLevel:        defaultLogLevel,
	}
}

// defaultDataDir is $XDG_STATE_HOME/utcpd, else ~/.local/state/utcpd, else
// ./utcpd-data when there is no home folder.
func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "utcpd")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "utcpd")
	}
	return "utcpd-data"
}

// effectiveSettings merges defaults, the configuration's gateway section,
// the environment and the flags set on fs, in rising precedence, and
// checks the result. It returns the gateway section's warnings; an error
// lists every problem with its file and line.
func effectiveSettings(fs *pflag.FlagSet, f *serveFlags, dc *daemonConfig, strict bool) (settings, []manuals.Problem, error) {
	s := defaultSettings()
	var warnings []manuals.Problem
	if dc != nil && dc.Cfg != nil {
		errs, ws := daemon.ApplyGateway(&s, dc.Cfg, dc.Data, strict)
		if len(errs) > 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %d problem(s):", dc.Path, len(errs))
			for _, p := range errs {
				b.WriteString("\n  " + p.String())
			}
			return s, nil, errors.New(b.String())
		}
		warnings = ws
	}
	if err := applyEnv(&s); err != nil {
		return s, nil, err
	}
	if err := f.apply(fs, &s); err != nil {
		return s, nil, err
	}
	if err := checkSettings(&s); err != nil {
		return s, nil, err
	}
	return s, warnings, nil
}

// applyEnv overlays the UTCPD_* environment variables on s. An empty
// variable counts as unset. Errors name the variable.
func applyEnv(s *settings) error {
	if v := os.Getenv(envListen); v != "" {
		s.Listen = v
	}
	if v := os.Getenv(envAdminToken); v != "" {
		s.AdminToken = v
	}
	if v := os.Getenv(envAPIKeys); v != "" {
		s.APIKeys = daemon.NonEmpty(strings.Split(v, ","))
	}
	if v := os.Getenv(envDataDir); v != "" {
		s.DataDir = v
	}
	if v := os.Getenv(envManualsDir); v != "" {
		s.ManualsDir = v
	}
	if v := os.Getenv(envStore); v != "" {
		s.Store = v
	}
	if v := os.Getenv(envLogFormat); v != "" {
		s.LogFormat = v
		if err := daemon.CheckLog(v, ""); err != nil {
			return fmt.Errorf("%s: %w", envLogFormat, err)
		}
	}
	if v := os.Getenv(envLogLevel); v != "" {
		s.LogLevel = v
		if err := daemon.CheckLog("", v); err != nil {
			return fmt.Errorf("%s: %w", envLogLevel, err)
		}
	}
	return nil
}

// serveFlags are the flags of utcpd serve that override settings.
type serveFlags struct {
	listen, adminToken, dataDir, manualsDir string
	store                                   string
	apiKeys                                 []string
	noStore                                 bool
	maxBodyBytes                            int64
	defaultTimeout, maxTimeout, shutdown    time.Duration
	readTimeout                             time.Duration
	maxConnections                          int
	logFormat, logLevel                     string
}

// bind defines the flags on fs.
func (f *serveFlags) bind(fl *pflag.FlagSet) {
	fl.StringVarP(&f.listen, "listen", "l", defaultListen, "address to listen on, host:port (port 0 picks a free port) [$UTCPD_LISTEN]")
	fl.StringVar(&f.adminToken, "admin-token", "", "bearer token of the admin API; prefer $UTCPD_ADMIN_TOKEN, flags show in ps [$UTCPD_ADMIN_TOKEN]")
	fl.StringSliceVar(&f.apiKeys, "api-keys", nil, "API keys the REST front accepts, comma-separated; none: open front [$UTCPD_API_KEYS]")
	fl.StringVar(&f.dataDir, "data-dir", "", "folder of the manual store (SQLite); '' keeps manuals in memory only (default $XDG_STATE_HOME/utcpd, else ~/.local/state/utcpd) [$UTCPD_DATA_DIR]")
	fl.StringVar(&f.store, "store", "", "shared store of several replicas: a postgres:// DSN; '' keeps the SQLite store in --data-dir [$UTCPD_STORE]")
	fl.BoolVar(&f.noStore, "no-store", false, "keep manuals registered through the admin API in memory only (same as --data-dir '')")
	fl.StringVar(&f.manualsDir, "manuals-dir", "", "folder of *.json manuals and manual call templates, watched for changes [$UTCPD_MANUALS_DIR]")
	fl.Int64Var(&f.maxBodyBytes, "max-body-bytes", defaultMaxBodyBytes, "largest request body accepted")
	fl.DurationVar(&f.defaultTimeout, "default-timeout", defaultDefaultTimeout, "deadline of a tool call that asks for none")
	fl.DurationVar(&f.maxTimeout, "max-timeout", defaultMaxTimeout, "longest deadline a tool call may ask for")
	fl.DurationVar(&f.shutdown, "shutdown-timeout", defaultShutdownTimeout, "how long calls in flight may finish on SIGTERM/SIGINT")
	fl.DurationVar(&f.readTimeout, "read-timeout", defaultReadTimeout, "longest time a client may take to send a request body")
	fl.IntVar(&f.maxConnections, "max-connections", defaultMaxConnections, "most client connections served at once (others wait)")
	fl.StringVar(&f.logFormat, "log-format", defaultLogFormat, "log format on stderr: text or json [$UTCPD_LOG_FORMAT]")
	fl.StringVar(&f.logLevel, "log-level", defaultLogLevel, "log level: debug, info, warn or error [$UTCPD_LOG_LEVEL]")
}

// apply overlays the flags the user set on fs on s.
func (f *serveFlags) apply(fs *pflag.FlagSet, s *settings) error {
	set := func(name string) bool { return fs.Changed(name) }
	if set("listen") {
		s.Listen = f.listen
	}
	if set("admin-token") {
		s.AdminToken = f.adminToken
	}
	if set("api-keys") {
		s.APIKeys = daemon.NonEmpty(f.apiKeys)
	}
	if set("data-dir") {
		s.DataDir = f.dataDir
	}
	if f.noStore {
		s.DataDir = ""
	}
	if set("manuals-dir") {
		s.ManualsDir = f.manualsDir
	}
	if set("store") {
		s.Store = f.store
	}
	if f.noStore {
		s.Store = ""
	}
	if set("max-body-bytes") {
		s.MaxBodyBytes = f.maxBodyBytes
	}
	if set("default-timeout") {
		s.DefaultTimeout = f.defaultTimeout
	}
	if set("max-timeout") {
		s.MaxTimeout = f.maxTimeout
	}
	if set("shutdown-timeout") {
		s.ShutdownTimeout = f.shutdown
	}
	if set("read-timeout") {
		if f.readTimeout <= 0 {
			return errors.New("--read-timeout must be positive")
		}
		s.ReadTimeout = f.readTimeout
	}
	if set("max-connections") {
		if f.maxConnections <= 0 {
			return errors.New("--max-connections must be positive")
		}
		s.MaxConnections = f.maxConnections
	}
	if set("log-format") {
		s.LogFormat = f.logFormat
		if err := daemon.CheckLog(f.logFormat, ""); err != nil {
			return fmt.Errorf("--log-format: %w", err)
		}
	}
	if set("log-level") {
		s.LogLevel = f.logLevel
		if err := daemon.CheckLog("", f.logLevel); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
	}
	return nil
}

// checkSettings validates the merged settings.
func checkSettings(s *settings) error {
	switch {
	case s.Listen == "":
		return fmt.Errorf("the listen address is empty")
	case s.MaxBodyBytes <= 0:
		return fmt.Errorf("max_body_bytes must be positive, got %d", s.MaxBodyBytes)
	case s.DefaultTimeout <= 0 || s.MaxTimeout <= 0 || s.ShutdownTimeout <= 0:
		return fmt.Errorf("timeouts must be positive (default_timeout %s, max_timeout %s, shutdown_timeout %s)", s.DefaultTimeout, s.MaxTimeout, s.ShutdownTimeout)
	case s.DefaultTimeout > s.MaxTimeout:
		return fmt.Errorf("default_timeout %s is longer than max_timeout %s", s.DefaultTimeout, s.MaxTimeout)
	case s.Store != "" && !isPostgresDSN(s.Store):
		return fmt.Errorf("store: unsupported value (want a postgres:// or postgresql:// DSN, or empty for the SQLite store in data_dir)")
	}
	return daemon.CheckLog(s.LogFormat, s.LogLevel)
}

// isPostgresDSN reports whether dsn selects store/postgres.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// newLogger returns the daemon's logger: slog in the settings' format and
// level to out (the daemon's buffered stderr, logSink), through
// utcp.RedactHandler so that no line shows a secret (by attribute name or
// by value). Records of level warn and above flush out at once.
func newLogger(s *settings, out *logSink) *slog.Logger {
	level, _ := daemon.ParseLevel(s.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if s.LogFormat == "json" {
		h = slog.NewJSONHandler(out, opts)
	} else {
		h = slog.NewTextHandler(out, opts)
	}
	return slog.New(flushAbove{utcp.RedactHandler(h), out})
}
