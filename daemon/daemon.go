// Package daemon runs utcpd serve: the store, the guard chain, review
// queue and audit log, the gateway, the HTTP handler on its listener, the
// manual sources (package sources) and their reloads, readiness, and the
// graceful shutdown. cmd/utcpd resolves the settings and calls [Run].
package daemon

import (
	"context"
	"crypto/rand"
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

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/api/mcpfront"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/internal/telemetry"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/sources"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// DirPollInterval is how often the manuals folder is checked for changes.
const DirPollInterval = time.Second

// AuditSpillFile is the file in the data dir that keeps the audit records
// the store could not take at shutdown; the next start writes them first
// (gateway/audit.WriterOptions.SpillPath).
const AuditSpillFile = "audit-spill.jsonl"

// Options configure a daemon.
type Options struct {
	// Settings are the effective settings.
	Settings Settings
	// Config is the configuration loaded at start (Path "" when there is
	// none); its Vars resolve variables.
	Config *Config
	// Logger logs; Stdout gets the listening address and an admin token
	// made for this run only.
	Logger *slog.Logger
	Stdout io.Writer
	// Version is reported by the API and in the log.
	Version string
	// LoadConfig loads the configuration file at path again for a reload
	// and decodes its gateway section (only the guard keys apply again:
	// guards, bypass_tools, guard_timeout). An error, printable as it is,
	// keeps the last good configuration serving.
	LoadConfig func(path string) (*Config, *Settings, error)
	// FindConfig, when set, names the configuration file a reload reads
	// when the daemon started without one ("": still none).
	FindConfig func() string
}

// UsageError is an error of the configuration or the settings found
// while starting (cmd/utcpd exits 2 on it).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run runs a daemon until ctx ends (then shuts it down gracefully) or it
// fails. SIGHUP reloads it.
func Run(ctx context.Context, opts Options) error { return New(opts).Run(ctx) }

// New returns a daemon that Run starts.
func New(opts Options) *Daemon {
	conf := opts.Config
	if conf == nil {
		conf = &Config{}
	}
	d := &Daemon{log: opts.Logger, set: opts.Settings, conf: conf, opts: opts, stdout: opts.Stdout,
		reloads: make(chan struct{}, 1)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.stdout == nil {
		d.stdout = io.Discard
	}
	d.vars.Store(conf.Vars)
	d.startErr.Store("starting: restoring stored manuals")
	return d
}

// Reload asks the running daemon to re-read its configuration file and
// manuals folder, as SIGHUP does; it returns at once. Reloads run one at a
// time; a request while one is pending is merged into it.
func (d *Daemon) Reload() {
	select {
	case d.reloads <- struct{}{}:
	default: // a reload is pending already
	}
}

// Daemon is a utcpd serve.
type Daemon struct {
	opts     Options
	log      *slog.Logger
	stdout   io.Writer
	set      Settings
	g        *gateway.Gateway
	store    registry.Store
	pg       *postgres.Store // the shared store, nil with SQLite or memory
	lite     *sqlite.Store   // the SQLite store, nil with PostgreSQL or memory
	observer *api.Observer
	guards   *guard.Holder // the gateway's guard; SIGHUP swaps the chain
	reviews  *review.Queue // the chain's approver
	audit    *audit.Writer // the audit log's writer

	// reloadMu serialises configuration reloads and folder scans.
	reloadMu sync.Mutex
	conf     *Config // the last good configuration
	vars     atomic.Pointer[manuals.Resolver]
	confSrc  *sources.Config
	dir      *sources.Dir  // nil without a manuals folder
	reloads  chan struct{} // Reload's requests

	ready    atomic.Bool
	startErr atomic.Value // string: why not ready yet
}

// Run starts the daemon and blocks until it has shut down.
func (d *Daemon) Run(ctx context.Context) error {
	stdout := d.stdout
	log := d.log
	s := &d.set

	// Signals: SIGHUP reloads; SIGINT/SIGTERM stop (ctx, set up by main);
	// a second SIGINT/SIGTERM during the shutdown exits at once.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// The guard chain: a chain that does not load refuses to start.
	named, err := LoadGuards(guard.Default, s.Guards, d.vars.Load(), log.With("component", "guard"))
	if err != nil {
		return &UsageError{Err: GuardProblem(d.conf.Path, err)}
	}

	// Traces: on only when the OTEL_* environment asks for them; the
	// spans still buffered are flushed last, after the calls drained.
	tel, err := telemetry.Setup(ctx, telemetry.Options{Version: d.opts.Version, Log: log.With("component", "telemetry")})
	if err != nil {
		return &UsageError{Err: fmt.Errorf("tracing: %w", err)}
	}
	if tel != nil {
		log.Info("tracing on: spans are exported over OTLP", "protocol", tel.Protocol())
		defer flushTraces(tel, log)
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
			return &UsageError{Err: fmt.Errorf("store: %w", err)}
		}
		d.store, d.pg = pg, pg
		reviewStore, auditStore = pg.Reviews(), pg.Audit()
		replica = replicaName()
		log.Info("shared store: PostgreSQL; connecting in the background", "replica", replica)
	case s.DataDir == "":
		log.Warn("no data dir: manuals registered through the admin API are kept in memory only and lost at exit")
		d.store = memstore.New()
	default:
		st, err := sqlite.Open(ctx, s.DataDir, sqlite.WithLogger(log.With("component", "store")))
		if err != nil {
			return fmt.Errorf("opening the store in %s: %w", s.DataDir, err)
		}
		d.store, d.lite = st, st
		log.Info("store opened", "data_dir", s.DataDir)
	}
	defer func() {
		if err := d.store.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	// Reviews and the audit log live in the same store.
	if reviewStore == nil {
		reviewStore, auditStore = guardStores(d.store, s)
	}
	d.reviews = review.NewQueue(reviewStore, review.Options{Timeout: s.EffectiveReviewTimeout(), DispatchTimeout: s.DefaultTimeout,
		Retention: s.EffectiveAuditRetention(), Logger: log.With("component", "reviews"), Replica: replica})
	spill := ""
	if s.DataDir != "" {
		spill = filepath.Join(s.DataDir, AuditSpillFile)
	}
	d.audit = audit.NewWriter(auditStore, audit.WriterOptions{Retention: s.EffectiveAuditRetention(), SpillPath: spill, Linger: audit.DefaultLinger,
		MaxRows: s.AuditMaxRows, MaxBytes: s.AuditMaxBytes, Logger: log.With("component", "audit")})
	defer d.closeAudit()
	registerAuditMetrics(d.audit)
	d.guards = guard.NewHolder(NewChain(named, s, d.reviews, s.EffectiveReviewTimeout()))

	// The admin API always needs a token: without one configured, the
	// daemon uses the one in its data dir (created at first start).
	adminToken, adminTokenFrom := s.AdminToken, "configured"
	if adminToken == "" {
		t, stored, err := ensureAdminToken(s.DataDir)
		if err != nil {
			return fmt.Errorf("admin token: %w", err)
		}
		adminToken, adminTokenFrom = t, filepath.Join(s.DataDir, AdminTokenFile)
		if !stored {
			adminTokenFrom = "this run only (printed on stdout)"
			fmt.Fprintf(stdout, "utcpd admin token (this run only; no data dir): %s\n", t)
		}
	}

	// The API keys: a named key's key_env is read now, so that a
	// variable missing fails the start (naming the variable, never a
	// value); its scope decides its calls, approved reviews included.
	namedKeys, err := ResolveAPIKeys(s, os.LookupEnv)
	if err != nil {
		return &UsageError{Err: err}
	}
	scopes := make(map[string]*gateway.Scope, len(namedKeys))
	for _, k := range namedKeys {
		scopes[k.Name] = k.Scope
	}

	// The gateway and the HTTP handler.
	obs := api.NewObserver(log.With("component", "calls"), nil)
	d.observer = obs
	var shared ratelimit.SharedStore
	if d.pg != nil {
		shared = d.pg
	}
	// gateway.rate_limits, then the named keys' rate_limit and
	// max_concurrent, each a rule for the key's principal.
	limiter, err := newRateLimiter(KeyRules(s.RateLimits, namedKeys), shared, log.With("component", "ratelimit"))
	if err != nil {
		return &UsageError{Err: err}
	}
	defer func() {
		// Unused leased tokens go back to the replicas' shared buckets.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := limiter.Close(ctx); err != nil {
			log.Warn("returning leased rate limit tokens", "err", err)
		}
	}()
	g, err := gateway.New(gateway.Options{
		Guard:             d.guards,
		Reviews:           d.reviews,
		Audit:             d.audit,
		Transports:        transports.Default,
		Variables:         d.vars.Load(),
		PostProcessors:    postProcessors(d.conf.Cfg),
		TagWeight:         weight(d.conf.Cfg, true),
		DescriptionWeight: weight(d.conf.Cfg, false),
		SearchStrategy:    searchStrategy(d.conf.Cfg),
		OnCall:            obs.OnCall,
		Store:             d.store,
		Logger:            log.With("component", "gateway"),
		MaxToolsPerManual: s.MaxToolsPerManual,
		MaxManualBytes:    s.MaxManualBytes,
		PinDefault:        s.PinDefault,
		RateLimits:        limiter,
		PrincipalScope:    func(p string) *gateway.Scope { return scopes[p] },
	})
	if err != nil {
		return err
	}
	d.g = g
	// Toolsets: the config file's, and the admin API's in the store
	// (restored in start, once the store is reachable).
	tstore, _ := d.store.(gateway.ToolsetStore)
	if err := g.SetToolsets(s.Toolsets, tstore); err != nil {
		return &UsageError{Err: err}
	}
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
		Keys:            namedKeys,
		MaxBodyBytes:    s.MaxBodyBytes,
		DefaultTimeout:  s.DefaultTimeout,
		MaxTimeout:      s.MaxTimeout,
		Ready:           d.readiness,
		Degraded:        d.degraded,
		Observer:        obs,
		Reviews:         d.reviews,
		Audit:           auditStore,
		MCP:             mcpfront.Options{AllowedOrigins: s.AllowedOrigins, NativeNames: s.MCP.NativeNames, InputTimeout: s.MCP.InputTimeout, MaxInputCalls: s.MCP.MaxInputCalls},
		MCPCodeMode:     s.MCP.CodeMode,
		PublicURL:       s.PublicURL,
		ListenHost:      listenHost(s.Listen),
		AllowedHosts:    s.AllowedHosts,
		AllowedOrigins:  s.AllowedOrigins,
		ReadTimeout:     s.ReadTimeout,
		CodeMode:        s.CodeMode,
		DisableCodeMode: s.CodeModeOff,
		Logger:          log.With("component", "api"),
		Version:         d.opts.Version,
	})
	if err != nil {
		return &UsageError{Err: err}
	}
	// Deferred after g.Close, so it runs before it: the MCP fronts end
	// their parked calls while the sessions with the servers are open.
	if c, ok := handler.(io.Closer); ok {
		defer func() { _ = c.Close() }()
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
	log.Info("utcpd listening", "url", url, "version", d.opts.Version, "admin_token", adminTokenFrom,
		"api_keys", len(s.APIKeys)+len(namedKeys), "manuals_dir", s.ManualsDir, "config", d.conf.Path)
	if len(s.APIKeys)+len(namedKeys) == 0 {
		log.Info("no API keys: the REST front is open to every client that can reach the listener")
	}

	// Start-up: stored manuals first, then the configuration and folder
	// manuals in parallel; then ready. Reloads run one at a time beside
	// it (reloadMu), so that a signal to stop is never held up.
	d.confSrc = sources.NewConfig(sources.NewReconciler(registry.SourceConfig, g, log.With("component", "config"), s.DefaultTimeout, obs.Registration), d.conf.Cfg)
	if s.ManualsDir != "" {
		dirLog := log.With("component", "manuals_dir")
		d.dir = sources.NewDir(s.ManualsDir, sources.NewReconciler(registry.SourceDir, g, dirLog, s.DefaultTimeout, obs.Registration), dirLog)
	}
	startCtx, cancelStart := context.WithCancel(ctx)
	defer cancelStart()
	var bg sync.WaitGroup
	bg.Go(func() { d.start(startCtx) })
	bg.Go(func() {
		for {
			select {
			case <-startCtx.Done():
				return
			case <-d.reloads:
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
			d.Reload()
		}
	}

	// Shutdown.
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(quit)
	go func() {
		<-quit
		log.Error("second signal: exiting now")
		os.Exit(1) // exit code 1: the daemon could not run its shutdown
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
func (d *Daemon) start(ctx context.Context) {
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
	if err := d.g.RestoreToolsets(ctx); err != nil {
		log.Error("restoring stored toolsets", "err", err)
	}
	d.startErr.Store("starting: registering configuration and folder manuals")

	d.reloadMu.Lock()
	var wg sync.WaitGroup
	vars := d.vars.Load()
	wg.Go(func() {
		st, _ := d.confSrc.Sync(ctx, vars, false)
		if d.conf.Cfg != nil {
			log.Info("configuration manuals registered", "config", d.conf.Path, "registered", st.Added, "failed", st.Failed)
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
	c := d.g.Counts()
	log.Info("ready", "manuals", c.Total, "failed", c.Failed, "degraded", c.Degraded, "discovering", c.Discovering,
		"took", time.Since(t0).Round(time.Millisecond))
	d.reviews.Start(d.g.DispatchApproved) // approved reviews find their tools now
	if d.dir != nil {
		d.dir.Watch(ctx, DirPollInterval, func() func() { d.reloadMu.Lock(); return d.reloadMu.Unlock }, d.vars.Load)
	}
}

// degraded is the /readyz note of a started daemon: the store's health —
// the shared store unreachable, or the SQLite store refusing writes (nil
// with the memory store).
func (d *Daemon) degraded() error {
	switch {
	case d.pg != nil:
		return d.pg.Health()
	case d.lite != nil:
		return d.lite.Health()
	}
	return nil
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
func (d *Daemon) readiness() error {
	if d.ready.Load() {
		return nil
	}
	msg, _ := d.startErr.Load().(string)
	return utcp.NewError(utcp.CodeUnavailable, "%s", msg)
}

// reload re-reads the configuration file and the manuals folder (SIGHUP).
// A configuration that fails to load keeps the last good one serving.
func (d *Daemon) reload(ctx context.Context) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	log := d.log
	log.Info("SIGHUP: reloading")
	path := d.conf.Path
	if path == "" && d.opts.FindConfig != nil {
		path = d.opts.FindConfig() // ./utcpd.json may exist now
	}
	if path != "" && d.opts.LoadConfig != nil {
		dc, gs, err := d.opts.LoadConfig(path)
		if err != nil {
			log.Error("reloading the configuration failed; the last good configuration keeps serving",
				"config", path, "err", err.Error())
		} else {
			d.noteRestartOnly(dc)
			d.conf = dc
			d.vars.Store(dc.Vars)
			d.g.SetVariables(dc.Vars)
			d.reloadGuards(dc, gs)
			d.reloadToolsets(ctx, gs)
			d.confSrc.Set(dc.Cfg)
			st, _ := d.confSrc.Sync(ctx, dc.Vars, true)
			log.Info("configuration reloaded", "config", dc.Path, "added", st.Added, "replaced", st.Replaced,
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
func (d *Daemon) noteRestartOnly(next *Config) {
	prev := d.conf.Cfg
	cur := next.Cfg
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
	if prev.SearchStrategy.TagWeight != cur.SearchStrategy.TagWeight || prev.SearchStrategy.DescriptionWeight != cur.SearchStrategy.DescriptionWeight ||
		prev.SearchStrategy.Type != cur.SearchStrategy.Type {
		changed = append(changed, "tool_search_strategy")
	}
	if len(changed) > 0 {
		d.log.Warn("configuration sections changed that apply only after a restart", "sections", changed)
	}
}

// searchStrategy is the configuration's tool_search_strategy_type, ""
// without a configuration.
func searchStrategy(cfg *manuals.Config) string {
	if cfg == nil {
		return ""
	}
	return cfg.SearchStrategy.Type
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

// flushTraceTimeout bounds the export of the last spans at exit.
const flushTraceTimeout = 5 * time.Second

// flushTraces exports the spans not yet sent and stops tracing.
func flushTraces(tel *telemetry.Telemetry, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), flushTraceTimeout)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "err", err)
	}
}
