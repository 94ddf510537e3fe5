package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/utcpd/utcpd/daemon"
	"github.com/utcpd/utcpd/manuals"
)

func newServeCmd() *cobra.Command {
	var f serveFlags
	var configPath string
	var strict bool
	var pprofListen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the gateway daemon (admin API, REST front, health and metrics)",
		Long: `serve runs the utcpd daemon on one HTTP listener:

  /admin/...   admin API: manuals, reviews, audit (bearer admin token)
  /v1/...      REST front: list, search, call and stream tools (API keys when set)
  /mcp         MCP front, Streamable HTTP (the same API keys)
  /utcp        the whole gateway as one UTCP manual
  /healthz /readyz /metrics /openapi.json

Manuals come from the store (--data-dir, or --store postgres://... shared by
replicas), the configuration file (--config, else $UTCPD_CONFIG, else
./utcpd.json when it exists; its "gateway" section holds the daemon's
settings), the watched --manuals-dir folder, and the admin API. Settings apply
in the order flags > environment > the file > defaults.

SIGHUP reloads the configuration file and the folder and retries failed
manuals; SIGTERM or SIGINT lets calls in flight finish (--shutdown-timeout)
and stops. Listening on a non-loopback address needs an admin token and API
keys.

Exit codes: 0 after a clean shutdown; 1 the daemon could not run; 2 an invalid
configuration, flag or environment variable, or an exposed listener without
credentials.

The full reference (every gateway setting, replicas, the manuals folder,
reloads): docs/cli.md, section "utcpd serve".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, &f, configPath, strict, pprofListen)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&configPath, "config", "c", "", "configuration file (default $UTCPD_CONFIG, else ./utcpd.json when it exists)")
	fl.BoolVar(&strict, "strict", false, "treat unknown configuration fields (also in the gateway section) as errors")
	fl.StringVar(&pprofListen, "pprof-listen", "", "serve Go profiles (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060; off when empty")
	f.bind(fl)
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprint(c.OutOrStdout(), groupedHelp(c, serveFlagGroups))
	})
	return cmd
}

// flagGroup is a titled group of flags in a command's help.
type flagGroup struct {
	title string
	names []string
}

// serveFlagGroups groups serve's flags for its help; a flag in no group
// is listed under "Other flags".
var serveFlagGroups = []flagGroup{
	{"Configuration", []string{"config", "strict"}},
	{"Listener and access", []string{"listen", "admin-token", "api-keys", "max-connections"}},
	{"Manuals and storage", []string{"data-dir", "store", "no-store", "manuals-dir"}},
	{"Limits and timeouts", []string{"max-body-bytes", "default-timeout", "max-timeout", "read-timeout", "shutdown-timeout"}},
	{"Logging and profiling", []string{"log-format", "log-level", "pprof-listen"}},
}

// groupedHelp is cmd's help with its flags listed by group.
func groupedHelp(cmd *cobra.Command, groups []flagGroup) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(cmd.Long))
	b.WriteString("\n\nUsage:\n  ")
	b.WriteString(cmd.UseLine())
	b.WriteString("\n")
	seen := map[string]bool{}
	section := func(title string, names []string) {
		fs := pflag.NewFlagSet(title, pflag.ContinueOnError)
		for _, n := range names {
			if f := cmd.Flags().Lookup(n); f != nil && !f.Hidden && !seen[n] {
				fs.AddFlag(f)
				seen[n] = true
			}
		}
		if fs.HasFlags() {
			b.WriteString("\n" + title + ":\n")
			b.WriteString(fs.FlagUsages())
		}
	}
	for _, g := range groups {
		section(g.title, g.names)
	}
	var rest []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { rest = append(rest, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { rest = append(rest, f.Name) })
	section("Other flags", rest)
	return b.String()
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
	fmt.Fprintf(&b, "%s: %s:", path, count(len(ps), "problem", ""))
	for _, p := range ps {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

func runServe(cmd *cobra.Command, f *serveFlags, configFlag string, strict bool, pprofListen string) error {
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
	if pprofListen != "" {
		if err := checkPprofAddr(pprofListen); err != nil {
			return &exitError{code: exitUsage, err: err}
		}
	}

	// The configuration's warnings (the gateway section's among them),
	// repeated ones summarised, as config validate prints them; a
	// rejected manual's errors are logged as its failed registration.
	// Log lines are buffered (logSink) and written when runServe returns,
	// before the exit's own message.
	sink := newLogSink(os.Stderr)
	defer sink.Close()
	log := newLogger(&s, sink)
	for _, p := range checked.Problems {
		if p.Severity == manuals.SeverityWarning {
			log.Warn("configuration", "warning", p.String())
		}
	}

	if pprofListen != "" {
		stop, err := startPprof(pprofListen, log)
		if err != nil {
			return err
		}
		defer stop()
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
	case len(s.APIKeys)+len(s.NamedKeys) == 0:
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
