package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// gatewayKeys are the keys of the configuration's gateway section.
var gatewayKeys = []string{
	"listen", "admin_token", "api_keys", "data_dir", "manuals_dir", "max_body_bytes",
	"default_timeout", "max_timeout", "shutdown_timeout", "log_format", "log_level",
	"guards", "bypass_tools", "guard_timeout", "review_timeout", "audit_retention",
	"allowed_origins", "store", "store_resync_interval", "store_max_conns", "public_url",
	"codemode", "allowed_hosts", "read_timeout", "max_connections", "max_tools_per_manual", "max_manual_bytes",
	"audit_max_rows", "audit_max_bytes",
}

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
		res := applyGatewaySection(&s, dc.Cfg.Gateway, dc.Path, dc.Data, dc.Cfg.Dir, strict)
		if len(res.errs) > 0 {
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %d problem(s):", dc.Path, len(res.errs))
			for _, p := range res.errs {
				b.WriteString("\n  " + p.String())
			}
			return s, nil, errors.New(b.String())
		}
		warnings = res.warnings
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

// sectionResult is what applyGatewaySection found besides the settings.
type sectionResult struct {
	errs     []manuals.Problem
	warnings []manuals.Problem
}

// applyGatewaySection overlays the configuration's gateway section (raw,
// from file whose bytes are data) on s. Relative paths resolve against
// dir, the configuration's folder. Unknown keys are warnings naming the
// closest known key, errors when strict; wrong types and bad values are
// errors. Every finding names the file, the line and the JSON path.
func applyGatewaySection(s *settings, raw json.RawMessage, file string, data []byte, dir string, strict bool) sectionResult {
	var res sectionResult
	if len(raw) == 0 {
		return res
	}
	lines := gatewayKeyLines(file, data)
	problem := func(key, format string, args ...any) manuals.Problem {
		path := "gateway"
		if key != "" {
			path += "." + key
		}
		return manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: file, Line: lines[key],
			Path: path, Message: fmt.Sprintf(format, args...)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		res.errs = append(res.errs, problem("", "the gateway section must be a JSON object"))
		return res
	}
	keys := sortedKeys(obj)
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(lines[a], lines[b]) })
	for _, key := range keys {
		v := obj[key]
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			continue
		}
		bad := func(format string, args ...any) { res.errs = append(res.errs, problem(key, format, args...)) }
		switch key {
		case "listen":
			if str, ok := jsonString(v); ok {
				s.Listen = str
			} else {
				bad("must be a string such as \"127.0.0.1:8787\"")
			}
		case "admin_token":
			if str, ok := jsonString(v); ok {
				s.AdminToken = str
			} else {
				bad("must be a string")
			}
		case "public_url":
			str, ok := jsonString(v)
			if !ok {
				bad("must be a string such as \"https://tools.example.com\"")
				break
			}
			s.PublicURL = str
		case "allowed_origins":
			var origins []string
			if json.Unmarshal(v, &origins) != nil {
				bad("must be an array of origins such as \"https://app.example.com\" (or \"*\")")
				break
			}
			s.AllowedOrigins = nonEmpty(origins)
		case "allowed_hosts":
			var hosts []string
			if json.Unmarshal(v, &hosts) != nil {
				bad("must be an array of host names such as \"tools.example.com\" (or \"*.example.com\")")
				break
			}
			s.AllowedHosts = nonEmpty(hosts)
		case "read_timeout":
			d, err := jsonDuration(v)
			if err != nil || d <= 0 {
				bad("must be a positive duration such as \"30s\"")
				break
			}
			s.ReadTimeout = d
		case "max_connections":
			var n int
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				bad("must be a positive integer")
				break
			}
			s.MaxConnections = n
		case "api_keys":
			var keys []string
			if json.Unmarshal(v, &keys) != nil {
				bad("must be an array of strings")
				break
			}
			s.APIKeys = nonEmpty(keys)
		case "data_dir", "manuals_dir":
			str, ok := jsonString(v)
			if !ok {
				bad("must be a string (a folder path)")
				break
			}
			if str != "" && dir != "" && !filepath.IsAbs(str) {
				str = filepath.Join(dir, str)
			}
			if key == "data_dir" {
				s.DataDir = str
			} else {
				s.ManualsDir = str
			}
		case "store":
			if str, ok := jsonString(v); ok {
				s.Store = str
			} else {
				bad("must be a string: a postgres:// DSN (prefer $%s, which keeps the password out of the file)", envStore)
			}
		case "store_resync_interval":
			d, err := jsonDuration(v)
			if err != nil {
				bad("%v", err)
				break
			}
			s.StoreResync = d
		case "store_max_conns":
			var n int
			if json.Unmarshal(v, &n) != nil || n <= 0 || n > 1000 {
				bad("must be an integer from 1 to 1000")
				break
			}
			s.StoreMaxConns = n
		case "max_tools_per_manual":
			var n int
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				bad("must be a positive integer number of tools")
				break
			}
			s.MaxToolsPerManual = n
		case "max_manual_bytes":
			var n int64
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				bad("must be a positive integer number of bytes")
				break
			}
			s.MaxManualBytes = n
		case "audit_max_rows", "audit_max_bytes":
			var n int64
			if json.Unmarshal(v, &n) != nil || n < 0 {
				bad("must be a non-negative integer (0: no limit)")
				break
			}
			if key == "audit_max_rows" {
				s.AuditMaxRows = n
			} else {
				s.AuditMaxBytes = n
			}
		case "max_body_bytes":
			var n int64
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				bad("must be a positive integer number of bytes")
				break
			}
			s.MaxBodyBytes = n
		case "default_timeout", "max_timeout", "shutdown_timeout":
			d, err := jsonDuration(v)
			if err != nil {
				bad("%v", err)
				break
			}
			switch key {
			case "default_timeout":
				s.DefaultTimeout = d
			case "max_timeout":
				s.MaxTimeout = d
			default:
				s.ShutdownTimeout = d
			}
		case "log_format", "log_level":
			str, ok := jsonString(v)
			if !ok {
				bad("must be a string")
				break
			}
			if key == "log_format" {
				s.LogFormat = str
			} else {
				s.LogLevel = str
			}
		case "codemode":
			if msg := applyCodeModeSetting(s, v); msg != "" {
				bad("%s", msg)
			}
		case "guards", "bypass_tools", "guard_timeout", "review_timeout", "audit_retention":
			if msg := applyGuardSetting(s, key, v); msg != "" {
				bad("%s", msg)
			}
		default:
			p := problem(key, "unknown field %q in the gateway section", key)
			p.Kind = manuals.WarnUnknownField
			if c := utcp.Closest(key, gatewayKeys, 1); len(c) > 0 {
				p.Suggestion = c[0]
			}
			if strict {
				res.errs = append(res.errs, p)
			} else {
				p.Severity, p.Code = manuals.SeverityWarning, ""
				p.Message += "; ignored"
				res.warnings = append(res.warnings, p)
			}
		}
	}
	for _, key := range []string{"log_format", "log_level"} {
		if _, ok := obj[key]; !ok {
			continue
		}
		if err := checkLogSetting(key, s.LogFormat, s.LogLevel); err != nil {
			res.errs = append(res.errs, problem(key, "%v", err))
		}
	}
	return res
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
		s.APIKeys = nonEmpty(strings.Split(v, ","))
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
		if err := checkLogSetting("log_format", v, ""); err != nil {
			return fmt.Errorf("%s: %v", envLogFormat, err)
		}
	}
	if v := os.Getenv(envLogLevel); v != "" {
		s.LogLevel = v
		if err := checkLogSetting("log_level", "", v); err != nil {
			return fmt.Errorf("%s: %v", envLogLevel, err)
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
		s.APIKeys = nonEmpty(f.apiKeys)
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
		if err := checkLogSetting("log_format", f.logFormat, ""); err != nil {
			return fmt.Errorf("--log-format: %v", err)
		}
	}
	if set("log-level") {
		s.LogLevel = f.logLevel
		if err := checkLogSetting("log_level", "", f.logLevel); err != nil {
			return fmt.Errorf("--log-level: %v", err)
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
	return checkLogSetting("", s.LogFormat, s.LogLevel)
}

// isPostgresDSN reports whether dsn selects store/postgres.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// checkLogSetting validates a log format and level ("" skips one).
func checkLogSetting(key, format, level string) error {
	if format != "" && format != "text" && format != "json" && (key == "" || key == "log_format") {
		return fmt.Errorf("log format %q: must be text or json", format)
	}
	if level != "" && (key == "" || key == "log_level") {
		if _, err := parseLevel(level); err != nil {
			return err
		}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log level %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger returns the daemon's logger: slog to stderr in the settings'
// format and level, through utcp.RedactHandler so that no line shows a
// secret (by attribute name or by value).
func newLogger(s *settings) *slog.Logger {
	level, _ := parseLevel(s.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		return slog.New(utcp.RedactHandler(slog.NewJSONHandler(os.Stderr, opts)))
	}
	return slog.New(utcp.RedactHandler(slog.NewTextHandler(os.Stderr, opts)))
}

// jsonDuration reads a duration written as a Go duration string ("30s",
// "1m30s") or as a number of seconds.
func jsonDuration(v json.RawMessage) (time.Duration, error) {
	if str, ok := jsonString(v); ok {
		d, err := time.ParseDuration(str)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("must be a positive duration such as \"30s\" or \"5m\", got %q", str)
		}
		return d, nil
	}
	var secs float64
	if json.Unmarshal(v, &secs) != nil || secs <= 0 {
		return 0, fmt.Errorf("must be a positive duration such as \"30s\" or a number of seconds")
	}
	return time.Duration(secs * float64(time.Second)), nil
}

func jsonString(v json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// nonEmpty trims every string and drops the empty ones.
func nonEmpty(in []string) []string {
	out := []string{}
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// gatewayKeyLines returns the 1-based line of each key of the top-level
// "gateway" object of a configuration file ("" is the line of "gateway"
// itself). Keys it cannot place are absent (line 0).
func gatewayKeyLines(file string, data []byte) map[string]int {
	out := map[string]int{}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return out
	}
	if trimmed[0] != '{' || strings.HasSuffix(file, ".yaml") || strings.HasSuffix(file, ".yml") {
		yamlGatewayLines(data, out)
		return out
	}
	lineAt := func(off int64) int { return bytes.Count(data[:min(int(off), len(data))], []byte{'\n'}) + 1 }
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return out
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		if key != "gateway" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return out
			}
			continue
		}
		out[""] = lineAt(dec.InputOffset())
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return out
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return out
			}
			if k, ok := tok.(string); ok {
				if _, seen := out[k]; !seen {
					out[k] = lineAt(dec.InputOffset())
				}
			}
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return out
			}
		}
		return out
	}
	return out
}

var (
	yamlTop = regexp.MustCompile(`^gateway\s*:\s*(#.*)?$`)
	yamlKey = regexp.MustCompile(`^\s+["']?([A-Za-z0-9_\-]+)["']?\s*:`)
)

// yamlGatewayLines places the keys of a block-style YAML gateway mapping.
func yamlGatewayLines(data []byte, out map[string]int) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), len(data)+1)
	in := false
	indent := -1
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !in {
			if yamlTop.MatchString(line) {
				in = true
				out[""] = n
			}
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			return
		}
		ind := len(line) - len(strings.TrimLeft(line, " \t"))
		if indent < 0 {
			indent = ind
		}
		if ind != indent {
			continue
		}
		if m := yamlKey.FindStringSubmatch(line); m != nil {
			if _, seen := out[m[1]]; !seen {
				out[m[1]] = n
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
