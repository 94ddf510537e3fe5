package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/api/mcpfront"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/sources"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// dirPollInterval is how often the manuals folder is checked for changes.
const dirPollInterval = time.Second

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
type daemonConfig struct {
	path string // "" when there is none
	cfg  *manuals.Config
	data []byte // the file's bytes, for line numbers
	vars *manuals.Resolver
}

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

// loadDaemonConfig loads the configuration file at path and builds its
// variable resolver. Errors carry every problem (manuals.ProblemsOf) or
// name the file.
func loadDaemonConfig(path string, strict bool) (*daemonConfig, error) {
	dc := &daemonConfig{path: path}
	if path == "" {
		vars, err := manuals.NewResolver(nil, manuals.ResolverOptions{})
		dc.vars = vars
		return dc, err
	}
	opts := manuals.Options{Strict: strict, Parser: transports.Default}
	opts.ReadFile = func(name string) ([]byte, error) {
		data, err := sources.ReadCapped(name, 32<<20)
		if err == nil && name == path {
			dc.data = data
		}
		return data, err
	}
	cfg, err := manuals.LoadConfig(path, opts)
	if err != nil {
		return nil, err
	}
	dc.cfg = cfg
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err != nil {
		return nil, err
	}
	dc.vars = vars
	return dc, nil
}

// configProblems formats a configuration error for the terminal: every
// problem on its own line, "file:line: path: message".
func configProblems(path string, err error) string {
	ps := manuals.ProblemsOf(err)
	if len(ps) == 0 {
		msg := err.Error()
		if path != "" && !bytes.Contains([]byte(msg), []byte(path)) {
			msg = path + ": " + msg
		}
		return msg
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %d problem(s):", path, len(ps))
	for _, p := range ps {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// daemon is a running utcpd serve.
type daemon struct {
	log      *slog.Logger
	set      settings
	strict   bool
	g        *gateway.Gateway
	store    registry.Store
	pg       *postgres.Store // the shared store, nil with SQLite or memory
	observer *api.Observer
	guards   *guard.Holder // the gateway's guard; SIGHUP swaps the chain
	reviews  *review.Queue // the chain's approver
	audit    *audit.Writer // the audit log's writer

	// reloadMu serialises configuration reloads and folder scans.
	reloadMu sync.Mutex
	conf     *daemonConfig // the last good configuration
	vars     atomic.Pointer[manuals.Resolver]
	// autoConfig is set when no configuration was named (flag or
	// environment): a SIGHUP then looks for ./utcpd.json again.
	autoConfig bool
	confSrc    *sources.Config
	dir        *sources.Dir // nil without a manuals folder

	ready    atomic.Bool
	startErr atomic.Value // string: why not ready yet
}

func runServe(cmd *cobra.Command, f *serveFlags, configFlag string, strict bool) error {
	path := resolveConfigPath(configFlag, cmd.Flags().Changed("config"))
	dc, err := loadDaemonConfig(path, strict)
	if err != nil {
		return &exitError{code: exitUsage, err: errors.New(configProblems(path, err))}
	}
	s, warnings, err := effectiveSettings(cmd.Flags(), f, dc, strict)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	loopback, err := checkExposure(&s)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}

	log := newLogger(&s)
	if dc.cfg != nil {
		for _, w := range dc.cfg.Warnings {
			log.Warn("configuration", "warning", w.String())
		}
	}
	for _, p := range warnings {
		log.Warn("configuration", "warning", p.String())
	}

	d := &daemon{log: log, set: s, strict: strict, conf: dc,
		autoConfig: !cmd.Flags().Changed("config") && os.Getenv(envConfig) == ""}
	d.vars.Store(dc.vars)
	d.startErr.Store("starting: restoring stored manuals")
	return d.run(cmd.Context(), cmd.OutOrStdout(), loopback)
}

// checkExposure refuses a listener on a non-loopback address without an
// admin token and API keys. It reports whether the address is loopback.
func checkExposure(s *settings) (bool, error) {
	host, _, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return false, fmt.Errorf("listen address %q: %v (want host:port, e.g. 127.0.0.1:8787)", s.Listen, err)
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

// run starts the daemon and blocks until it has shut down.
func (d *daemon) run(ctx context.Context, stdout io.Writer, loopback bool) error {
	log := d.log
	s := &d.set

	// Signals: SIGHUP reloads; SIGINT/SIGTERM stop (ctx, set up by main);
	// a second SIGINT/SIGTERM during the shutdown exits at once.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// The guard chain: a chain that does not load refuses to start.
	named, err := loadGuards(guard.Default, s.Guards, d.vars.Load(), log.With("component", "guard"))
	if err != nil {
		return &exitError{code: exitUsage, err: guardProblem(d.conf.path, err)}
	}

	// The store.
	var reviewStore review.Store
	var auditStore audit.Store
	replica := ""
	switch {
	case s.Store != "":
		pg, err := postgres.New(s.Store, postgres.Options{ResyncInterval: s.StoreResync, MaxConns: int32(s.StoreMaxConns),
			Logger: log.With("component", "store")})
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("store: %w", err)}
		}
		d.store, d.pg = pg, pg
		reviewStore, auditStore = pg.Reviews(), pg.Audit()
		replica = replicaName()
		log.Info("shared store: PostgreSQL; connecting in the background", "replica", replica)
	case s.DataDir == "":
		log.Warn("no data dir: manuals registered through the admin API are kept in memory only and lost at exit")
		d.store = memstore.New()
	default:
		st, err := sqlite.Open(ctx, s.DataDir)
		if err != nil {
			return fmt.Errorf("opening the store in %s: %w", s.DataDir, err)
		}
		d.store = st
		log.Info("store opened", "data_dir", s.DataDir)
	}
	defer func() {
		if err := d.store.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	// Reviews and the audit log live in the same store.
	if reviewStore == nil {
		reviewStore, auditStore = guardStores(d.store)
	}
	d.reviews = review.NewQueue(reviewStore, review.Options{Timeout: s.reviewTimeout(), DispatchTimeout: s.DefaultTimeout,
		Retention: s.auditRetention(), Logger: log.With("component", "reviews"), Replica: replica})
	d.audit = audit.NewWriter(auditStore, audit.WriterOptions{Retention: s.auditRetention(), Logger: log.With("component", "audit")})
	defer d.closeAudit()
	registerAuditMetrics(d.audit)
	d.guards = guard.NewHolder(newChain(named, s, d.reviews, s.reviewTimeout()))

	// The admin API always needs a token: without one configured, the
	// daemon uses the one in its data dir (created at first start).
	adminToken, adminTokenFrom := s.AdminToken, "configured"
	if adminToken == "" {
		t, stored, err := ensureAdminToken(s.DataDir)
		if err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
		adminToken, adminTokenFrom = t, filepath.Join(s.DataDir, adminTokenFile)
		if !stored {
			adminTokenFrom = "this run only (printed on stdout)"
			fmt.Fprintf(stdout, "utcpd admin token (this run only; no data dir): %s\n", t)
		}
	}

	// The gateway and the HTTP handler.
	obs := api.NewObserver(log.With("component", "calls"), nil)
	d.observer = obs
	g, err := gateway.New(gateway.Options{
		Guard:             d.guards,
		Reviews:           d.reviews,
		Audit:             d.audit,
		Transports:        transports.Default,
		Variables:         d.vars.Load(),
		PostProcessors:    postProcessors(d.conf.cfg),
		TagWeight:         weight(d.conf.cfg, true),
		DescriptionWeight: weight(d.conf.cfg, false),
		OnCall:            obs.OnCall,
		Store:             d.store,
		Logger:            log.With("component", "gateway"),
		MaxToolsPerManual: s.MaxToolsPerManual,
		MaxManualBytes:    s.MaxManualBytes,
	})
	if err != nil {
		return err
	}
	d.g = g
	defer func() {
		if err := g.Close(); err != nil {
			log.Error("closing the transports", "err", err)
		}
	}()
	defer d.closeReviews()
	handler, err := api.New(api.Options{
		Gateway:         g,
		AdminToken:      adminToken,
		APIKeys:         s.APIKeys,
		MaxBodyBytes:    s.MaxBodyBytes,
		DefaultTimeout:  s.DefaultTimeout,
		MaxTimeout:      s.MaxTimeout,
		Ready:           d.readiness,
		Degraded:        d.degraded,
		Observer:        obs,
		Reviews:         d.reviews,
		Audit:           auditStore,
		MCP:             mcpfront.Options{AllowedOrigins: s.AllowedOrigins},
		PublicURL:       s.PublicURL,
		ListenHost:      listenHost(s.Listen),
		AllowedHosts:    s.AllowedHosts,
		AllowedOrigins:  s.AllowedOrigins,
		ReadTimeout:     s.ReadTimeout,
		CodeMode:        s.CodeMode,
		DisableCodeMode: s.CodeModeOff,
		Logger:          log.With("component", "api"),
		Version:         versionString(),
	})
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}

	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.Listen, err)
	}
	ln = limitListener(ln, s.MaxConnections)
	// No remote manual's tool, and no redirect, may connect back to the
	// daemon's own listener (internal/netguard).
	defer netguard.RegisterListener(ln.Addr())()
	// Calls in flight run on callsCtx, which outlives the listener until
	// the drain deadline.
	callsCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return callsCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "utcpd listening on %s\n", url)
	log.Info("utcpd listening", "url", url, "version", versionString(), "admin_token", adminTokenFrom,
		"api_keys", len(s.APIKeys), "manuals_dir", s.ManualsDir, "config", d.conf.path)
	if len(s.APIKeys) == 0 {
		log.Info("no API keys: the REST front is open to every client that can reach the listener")
	}

	// Start-up: stored manuals first, then the configuration and folder
	// manuals in parallel; then ready. Reloads run one at a time beside
	// it (reloadMu), so that a signal to stop is never held up.
	d.confSrc = sources.NewConfig(sources.NewReconciler(registry.SourceConfig, g, log.With("component", "config"), s.DefaultTimeout, obs.Registration), d.conf.cfg)
	if s.ManualsDir != "" {
		dirLog := log.With("component", "manuals_dir")
		d.dir = sources.NewDir(s.ManualsDir, sources.NewReconciler(registry.SourceDir, g, dirLog, s.DefaultTimeout, obs.Registration), dirLog)
	}
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	var bg sync.WaitGroup
	bg.Go(func() { d.start(startCtx) })
	reloads := make(chan struct{}, 1)
	bg.Go(func() {
		for {
			select {
			case <-startCtx.Done():
				return
			case <-reloads:
				d.reload(startCtx)
			}
		}
	})

	// Run until a signal.
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-serveErr:
			runErr = fmt.Errorf("serving: %w", err)
			break loop
		case <-hup:
			select {
			case reloads <- struct{}{}:
			default: // a reload is pending already
			}
		}
	}

	// Shutdown.
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(quit)
	go func() {
		<-quit
		log.Error("second signal: exiting now")
		os.Exit(exitFailure)
	}()
	log.Info("shutting down: no new connections; calls in flight may finish", "shutdown_timeout", s.ShutdownTimeout)
	cancelStart()
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), s.ShutdownTimeout)
	defer cancelDrain()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Warn("calls still in flight at the shutdown deadline are cancelled", "err", err)
		cancelCalls()
		_ = srv.Close()
	}
	cancelCalls()
	bg.Wait()
	log.Info("stopped")
	return runErr
}

// start restores the stored manuals, registers the configuration and
// folder manuals, marks the daemon ready, then watches the folder.
func (d *daemon) start(ctx context.Context) {
	log := d.log
	t0 := time.Now()
	if d.pg != nil {
		d.startErr.Store("starting: waiting for the database")
		if err := d.pg.Connect(ctx); err != nil {
			if ctx.Err() == nil {
				log.Error("the shared store cannot be used", "err", err)
				d.startErr.Store("the shared store cannot be used: " + err.Error())
			}
			return
		}
		log.Info("connected to the shared store", "took", time.Since(t0).Round(time.Millisecond))
		d.startErr.Store("starting: restoring stored manuals")
	}
	n, failed, err := d.g.Restore(ctx, true)
	for wait := time.Second; err != nil && d.pg != nil && ctx.Err() == nil; wait = min(2*wait, 10*time.Second) {
		// A shared store: a replica must not serve without its registry.
		log.Warn("restoring stored manuals failed; retrying", "err", err, "retry_in", wait)
		d.startErr.Store("starting: restoring stored manuals: " + err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		n, failed, err = d.g.Restore(ctx, true)
	}
	if err != nil {
		log.Error("restoring stored manuals", "err", err)
	} else {
		log.Info("stored manuals restored", "restored", n, "failed", len(failed), "took", time.Since(t0).Round(time.Millisecond))
	}
	if ctx.Err() != nil {
		return
	}
	d.startErr.Store("starting: registering configuration and folder manuals")

	d.reloadMu.Lock()
	var wg sync.WaitGroup
	vars := d.vars.Load()
	wg.Go(func() {
		st, _ := d.confSrc.Sync(ctx, vars, false)
		if d.conf.cfg != nil {
			log.Info("configuration manuals registered", "config", d.conf.path, "registered", st.Added, "failed", st.Failed)
		}
	})
	if d.dir != nil {
		wg.Go(func() {
			st, _ := d.dir.Sync(ctx, vars, false)
			log.Info("manuals folder loaded", "dir", d.dir.Path(), "registered", st.Added, "failed", st.Failed)
		})
	}
	wg.Wait()
	d.reloadMu.Unlock()
	if ctx.Err() != nil {
		return
	}
	d.ready.Store(true)
	log.Info("ready", "manuals", len(d.g.Manuals()), "took", time.Since(t0).Round(time.Millisecond))
	d.reviews.Start(d.g.DispatchApproved) // approved reviews find their tools now
	if d.dir != nil {
		d.dir.Watch(ctx, dirPollInterval, func() func() { d.reloadMu.Lock(); return d.reloadMu.Unlock }, d.vars.Load)
	}
}

// degraded is the /readyz note of a started daemon: the shared store's
// health (nil without one).
func (d *daemon) degraded() error {
	if d.pg == nil {
		return nil
	}
	return d.pg.Health()
}

// replicaName names this process among the replicas sharing a store: the
// host name and a random suffix (a restarted process is a new replica).
func replicaName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "utcpd"
	}
	return host + "-" + strings.ToLower(rand.Text()[:6])
}

// readiness is the /readyz check: nil once started.
func (d *daemon) readiness() error {
	if d.ready.Load() {
		return nil
	}
	msg, _ := d.startErr.Load().(string)
	return utcp.NewError(utcp.CodeUnavailable, "%s", msg)
}

// reload re-reads the configuration file and the manuals folder (SIGHUP).
// A configuration that fails to load keeps the last good one serving.
func (d *daemon) reload(ctx context.Context) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	log := d.log
	log.Info("SIGHUP: reloading")
	path := d.conf.path
	if path == "" && d.autoConfig {
		path = resolveConfigPath("", false) // ./utcpd.json may exist now
	}
	if path != "" {
		dc, err := loadDaemonConfig(path, d.strict)
		if err == nil && dc.cfg != nil {
			var probe settings
			if res := applyGatewaySection(&probe, dc.cfg.Gateway, dc.path, dc.data, dc.cfg.Dir, d.strict); len(res.errs) > 0 {
				err = errors.New(res.errs[0].String())
			}
		}
		if err != nil {
			log.Error("reloading the configuration failed; the last good configuration keeps serving",
				"config", path, "err", configProblems(path, err))
		} else {
			d.noteRestartOnly(dc)
			d.conf = dc
			d.vars.Store(dc.vars)
			d.g.SetVariables(dc.vars)
			d.reloadGuards(dc)
			d.confSrc.Set(dc.cfg)
			st, _ := d.confSrc.Sync(ctx, dc.vars, true)
			log.Info("configuration reloaded", "config", dc.path, "added", st.Added, "replaced", st.Replaced,
				"removed", st.Removed, "failed", st.Failed, "unchanged", st.Unchanged)
		}
	}
	if d.dir != nil {
		st, _ := d.dir.Sync(ctx, d.vars.Load(), true)
		log.Info("manuals folder reloaded", "dir", d.dir.Path(), "added", st.Added, "replaced", st.Replaced,
			"removed", st.Removed, "failed", st.Failed, "unchanged", st.Unchanged)
	}
}

// noteRestartOnly logs the changed parts of a reloaded configuration that
// apply only at the next start.
func (d *daemon) noteRestartOnly(next *daemonConfig) {
	prev := d.conf.cfg
	cur := next.cfg
	if prev == nil || cur == nil {
		return
	}
	var changed []string
	if restartOnlyGatewayChanged(prev.Gateway, cur.Gateway) {
		changed = append(changed, "gateway")
	}
	if !reflect.DeepEqual(prev.PostProcessors, cur.PostProcessors) {
		changed = append(changed, "post_processing")
	}
	if prev.SearchStrategy.TagWeight != cur.SearchStrategy.TagWeight || prev.SearchStrategy.DescriptionWeight != cur.SearchStrategy.DescriptionWeight {
		changed = append(changed, "tool_search_strategy")
	}
	if len(changed) > 0 {
		d.log.Warn("configuration sections changed that apply only after a restart", "sections", changed)
	}
}

func postProcessors(cfg *manuals.Config) []manuals.PostProcessor {
	if cfg == nil {
		return nil
	}
	return cfg.PostProcessors
}

func weight(cfg *manuals.Config, tag bool) float64 {
	if cfg == nil {
		return 0
	}
	if tag {
		return cfg.SearchStrategy.TagWeight
	}
	return cfg.SearchStrategy.DescriptionWeight
}
