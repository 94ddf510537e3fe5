package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	_ "github.com/utcpd/utcpd/guard/all" // every guard kind: policy, holguard, webhook
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of the guard settings of the gateway section.
const (
	// defaultGuardTimeout bounds one guard's evaluation (guard_timeout);
	// guard kinds with a timeout of their own (holguard, webhook) answer
	// well before it.
	defaultGuardTimeout = 10 * time.Second
	// reviewGrace is how much longer than review_timeout the chain waits
	// for the review queue, as a backstop: the queue answers at the
	// review's expiry itself.
	reviewGrace = 30 * time.Second
)

// reloadableKeys are the keys of the gateway section that apply again on
// SIGHUP (guard_timeout, review_timeout and audit_retention are read by
// applyGuardSetting too, but the last two need a restart).
var reloadableKeys = []string{"guards", "bypass_tools", "guard_timeout"}

// applyGuardSetting reads one guard key of the gateway section into s. It
// returns a problem message, "" when the value is good. The guard entries
// themselves are checked when the chain is built (loadGuards).
func applyGuardSetting(s *settings, key string, v json.RawMessage) string {
	switch key {
	case "guards":
		var entries []json.RawMessage
		if json.Unmarshal(v, &entries) != nil {
			return `must be an array of guard objects, each with a "kind"`
		}
		s.Guards = bytes.Clone(v)
	case "bypass_tools":
		var tools []string
		if json.Unmarshal(v, &tools) != nil {
			return `must be an array of exact tool names, such as ["health.ping"]`
		}
		s.BypassTools = nonEmpty(tools)
	case "guard_timeout", "review_timeout", "audit_retention":
		d, err := jsonDuration(v)
		if err != nil {
			return err.Error()
		}
		switch key {
		case "guard_timeout":
			s.GuardTimeout = d
		case "review_timeout":
			s.ReviewTimeout = d
		default:
			s.AuditRetention = d
		}
	}
	return ""
}

// guardEntryError is a guard entry of the configuration that cannot be
// used; it names the entry as gateway.guards[i].
type guardEntryError struct {
	index int
	kind  string
	err   error
}

func (e *guardEntryError) Error() string {
	if e.kind == "" {
		return fmt.Sprintf("gateway.guards[%d]: %v", e.index, e.err)
	}
	return fmt.Sprintf("gateway.guards[%d] (kind %q): %s", e.index, e.kind, e.message())
}

// message is the entry's error, with the close kinds of an unknown one.
func (e *guardEntryError) message() string {
	msg := e.err.Error()
	var ue *utcp.Error
	if errors.As(e.err, &ue) {
		if dym, _ := ue.Details["did_you_mean"].([]string); len(dym) > 0 {
			msg += " (did you mean " + strings.Join(dym, ", ") + "?)"
		}
	}
	return msg
}

func (e *guardEntryError) Unwrap() error { return e.err }

// loadGuards builds the guards of the gateway.guards array raw, in order,
// each named "<index>:<kind>": the entry's ${VAR} and $VAR references are
// resolved through vars (config variables, dotenv, environment; no
// namespace; `$$` is a literal '$'), then its kind is looked up in reg and
// built from the whole entry. An entry that fails, and the first failure
// only, is a *guardEntryError naming it.
func loadGuards(reg *guard.Registry, raw json.RawMessage, vars *manuals.Resolver, log *slog.Logger) ([]guard.Named, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("gateway.guards: must be an array of guard objects: %v", err)
	}
	out := make([]guard.Named, 0, len(entries))
	for i, entry := range entries {
		var head struct {
			Kind *string `json:"kind"`
		}
		if err := json.Unmarshal(entry, &head); err != nil || entry[0] != '{' {
			return nil, &guardEntryError{index: i, err: errors.New(`must be an object with a "kind"`)}
		}
		if head.Kind == nil || *head.Kind == "" {
			return nil, &guardEntryError{index: i, err: fmt.Errorf(`has no "kind" (registered kinds: %s)`, strings.Join(reg.Kinds(), ", "))}
		}
		kind := *head.Kind
		resolved, err := manuals.Substitute(entry, "", vars)
		if err != nil {
			return nil, &guardEntryError{index: i, kind: kind, err: err}
		}
		name := fmt.Sprintf("%d:%s", i, kind)
		g, err := reg.New(kind, resolved, log.With("guard", name))
		if err != nil {
			return nil, &guardEntryError{index: i, kind: kind, err: err}
		}
		out = append(out, guard.Named{Name: name, Guard: g})
	}
	return out, nil
}

// newChain assembles the daemon's chain: guards in order, bypass_tools,
// the guard timeout, and approver (nil: a review is a deny) with
// reviewTimeout as a backstop.
func newChain(guards []guard.Named, s *settings, approver guard.Approver, reviewTimeout time.Duration) *guard.Chain {
	gt := s.GuardTimeout
	if gt <= 0 {
		gt = defaultGuardTimeout
	}
	opts := []guard.Option{guard.WithBypass(s.BypassTools...), guard.WithGuardTimeout(gt)}
	if approver != nil {
		opts = append(opts, guard.WithApprover(approver), guard.WithReviewTimeout(reviewTimeout+reviewGrace))
	}
	return guard.NewChain(guards, opts...)
}

// reviewTimeout is the effective review_timeout of s.
func (s *settings) reviewTimeout() time.Duration {
	if s.ReviewTimeout > 0 {
		return s.ReviewTimeout
	}
	return review.DefaultTimeout
}

// auditRetention is the effective audit_retention of s.
func (s *settings) auditRetention() time.Duration {
	if s.AuditRetention > 0 {
		return s.AuditRetention
	}
	return audit.DefaultRetention
}

// restartOnlyGatewayChanged reports whether the gateway sections a and b
// differ in a key that applies only at start (not the reloadable guard
// keys). Sections that do not parse compare as bytes.
func restartOnlyGatewayChanged(a, b json.RawMessage) bool {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return !bytes.Equal(a, b)
	}
	for _, k := range reloadableKeys {
		delete(ma, k)
		delete(mb, k)
	}
	return !maps.EqualFunc(ma, mb, func(x, y json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(x), bytes.TrimSpace(y)) })
}

// reloadGuards builds the chain of a reloaded configuration and installs
// it; a chain that fails to load keeps the last good one serving.
func (d *daemon) reloadGuards(dc *daemonConfig) {
	if d.guards == nil {
		return
	}
	var s settings
	if dc.cfg != nil {
		if res := applyGatewaySection(&s, dc.cfg.Gateway, dc.path, dc.data, dc.cfg.Dir, d.strict); len(res.errs) > 0 {
			return // reported by the caller
		}
	}
	named, err := loadGuards(guard.Default, s.Guards, dc.vars, d.log.With("component", "guard"))
	if err != nil {
		d.log.Error("reloading the guard chain failed; the last good chain keeps deciding", "config", dc.path, "err", err)
		return
	}
	d.guards.Set(newChain(named, &s, d.reviews, d.set.reviewTimeout()))
	d.log.Info("guard chain reloaded", "guards", len(named), "bypass_tools", len(s.BypassTools))
}

// auditMetrics exposes the audit writer's counters once per process (the
// writer of the latest daemon in this process).
var (
	auditMetricsOnce sync.Once
	auditWriterNow   atomic.Pointer[audit.Writer]
)

func registerAuditMetrics(w *audit.Writer) {
	auditWriterNow.Store(w)
	auditMetricsOnce.Do(func() {
		read := func(f func(*audit.Writer) float64) func() float64 {
			return func() float64 {
				if w := auditWriterNow.Load(); w != nil {
					return f(w)
				}
				return 0
			}
		}
		for _, c := range []prometheus.Collector{
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "utcpd_audit_records_written_total",
				Help: "Audit records written to the store."}, read(func(w *audit.Writer) float64 { return float64(w.Written()) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "utcpd_audit_records_dropped_total",
				Help: "Audit records dropped because the write queue was full (the store fell behind)."}, read(func(w *audit.Writer) float64 { return float64(w.Dropped()) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "utcpd_audit_records_failed_total",
				Help: "Audit records lost to store errors."}, read(func(w *audit.Writer) float64 { return float64(w.Failed()) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "utcpd_audit_queue_length",
				Help: "Audit records waiting to be written."}, read(func(w *audit.Writer) float64 { return float64(w.Pending()) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "utcpd_audit_records_held",
				Help: "Audit records taken from the queue and not written yet: the batch being written, and those held back for retry while the store is unavailable."}, read(func(w *audit.Writer) float64 { return float64(w.Held()) })),
		} {
			if err := prometheus.DefaultRegisterer.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					panic("registering audit metrics: " + err.Error())
				}
			}
		}
	})
}

// guardProblem formats a chain that failed to load for the terminal: the
// file, the entry and what is wrong (a plain error, so that the message is
// printed once, as it is).
func guardProblem(path string, err error) error {
	if path == "" {
		return errors.New(err.Error())
	}
	return errors.New(path + ": " + err.Error())
}

// guardStores returns the review and audit stores that go with the
// manual store st: the same SQLite database, or memory.
func guardStores(st registry.Store) (review.Store, audit.Store) {
	if db, ok := st.(*sqlite.Store); ok {
		return db.Reviews(), db.Audit()
	}
	return review.NewMemStore(), audit.NewMemStore()
}

// closeReviews stops the review dispatcher, letting the calls it runs
// finish within the shutdown timeout.
func (d *daemon) closeReviews() {
	ctx, cancel := context.WithTimeout(context.Background(), d.set.ShutdownTimeout)
	defer cancel()
	_ = d.reviews.Close(ctx)
}

// closeAudit writes the audit records still queued.
func (d *daemon) closeAudit() {
	ctx, cancel := context.WithTimeout(context.Background(), d.set.ShutdownTimeout)
	defer cancel()
	if err := d.audit.Close(ctx); err != nil {
		d.log.Error("audit records still queued at shutdown are lost", "err", err, "dropped", d.audit.Dropped())
	}
}

// cliChain builds the guard chain of an in-process command from the
// configuration's gateway section: the same guards and bypass_tools as
// the daemon, but no approver (the review queue lives in the daemon), so
// a review verdict denies.
func cliChain(cfg *manuals.Config, vars *manuals.Resolver, log *slog.Logger) (guard.Guard, error) {
	var s settings
	if cfg != nil && len(cfg.Gateway) > 0 {
		// Only the guard keys: the rest of the section is the daemon's.
		var section map[string]json.RawMessage
		_ = json.Unmarshal(cfg.Gateway, &section)
		for _, key := range reloadableKeys {
			if v, ok := section[key]; ok && string(bytes.TrimSpace(v)) != "null" {
				if msg := applyGuardSetting(&s, key, v); msg != "" {
					return nil, fmt.Errorf("%s: gateway.%s: %s", cfg.Path, key, msg)
				}
			}
		}
	}
	named, err := loadGuards(guard.Default, s.Guards, vars, log)
	if err != nil {
		return nil, guardProblem(cfg.Path, err)
	}
	if len(named) == 0 {
		return guard.NewChain(nil, guard.WithBypass(s.BypassTools...)), nil
	}
	return newChain(named, &s, nil, 0), nil
}

// cliAuditor returns an auditor that appends an in-process command's
// calls to the audit log of the daemon's data directory (the
// configuration's data_dir, else $UTCPD_DATA_DIR, else the default),
// when a store exists there, or to the replicas' shared log when a
// PostgreSQL store is configured (gateway.store, $UTCPD_STORE); else nil.
// done closes the store.
func cliAuditor(ctx context.Context, cfg *manuals.Config, warn io.Writer) (gateway.Auditor, func()) {
	s := defaultSettings()
	if cfg != nil && len(cfg.Gateway) > 0 {
		applyGatewaySection(&s, cfg.Gateway, cfg.Path, nil, cfg.Dir, false)
	}
	if v := os.Getenv(envDataDir); v != "" {
		s.DataDir = v
	}
	if v := os.Getenv(envStore); v != "" {
		s.Store = v
	}
	if isPostgresDSN(s.Store) { // the replicas' shared audit log
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, s.Store, postgres.Options{MaxConns: 1, ResyncInterval: -1})
		if err != nil {
			fmt.Fprintf(warn, "warning: the call is not audited: %v\n", err)
			return nil, func() {}
		}
		return &syncAuditor{store: st.Audit(), warn: warn}, func() { _ = st.Close() }
	}
	if s.DataDir == "" {
		return nil, func() {}
	}
	if _, err := os.Stat(filepath.Join(s.DataDir, sqlite.FileName)); err != nil {
		return nil, func() {}
	}
	st, err := sqlite.Open(ctx, s.DataDir)
	if err != nil {
		fmt.Fprintf(warn, "warning: the call is not audited: %v\n", err)
		return nil, func() {}
	}
	return &syncAuditor{store: st.Audit(), warn: warn}, func() { _ = st.Close() }
}

// syncAuditor appends each record at once: an in-process command makes
// one call.
type syncAuditor struct {
	store audit.Store
	warn  io.Writer
}

func (a *syncAuditor) Append(r audit.Record) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.store.Append(ctx, []audit.Record{r}); err != nil {
		fmt.Fprintf(a.warn, "warning: the call was not audited: %v\n", err)
	}
}

// validateGuards builds the guard chain of a configuration for utcpd
// config validate, as the daemon would at start, and returns the problem
// of the first entry that does not load (nil when the chain loads, or the
// guards key itself is malformed: applyGatewaySection reported that).
func validateGuards(cfg *manuals.Config, s *settings, file string, data []byte) *manuals.Problem {
	if len(s.Guards) == 0 {
		return nil
	}
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err == nil {
		_, err = loadGuards(guard.Default, s.Guards, vars, slog.New(slog.DiscardHandler))
	}
	if err == nil {
		return nil
	}
	path, msg := "gateway.guards", err.Error()
	var ge *guardEntryError
	if errors.As(err, &ge) {
		path, msg = fmt.Sprintf("gateway.guards[%d]", ge.index), ge.message()
		if ge.kind != "" {
			msg = fmt.Sprintf("kind %q: %s", ge.kind, msg)
		}
	}
	return &manuals.Problem{Severity: manuals.SeverityError, Code: utcp.CodeInvalidConfig, File: file,
		Line: gatewayKeyLines(file, data)["guards"], Path: path, Message: msg}
}
