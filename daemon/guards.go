package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of the guard settings of the gateway section.
const (
	// DefaultGuardTimeout bounds one guard's evaluation (guard_timeout);
	// guard kinds with a timeout of their own (holguard, webhook) answer
	// well before it.
	DefaultGuardTimeout = 10 * time.Second
	// reviewGrace is how much longer than review_timeout the chain waits
	// for the review queue, as a backstop: the queue answers at the
	// review's expiry itself.
	reviewGrace = 30 * time.Second
)

// GuardEntryError is a guard entry of the configuration that cannot be
// used; it names the entry as gateway.guards[i].
type GuardEntryError struct {
	Index int    // the entry's index in gateway.guards
	Kind  string // its kind, "" when it has none
	Err   error
}

func (e *GuardEntryError) Error() string {
	if e.Kind == "" {
		return fmt.Sprintf("gateway.guards[%d]: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("gateway.guards[%d] (kind %q): %s", e.Index, e.Kind, e.Message())
}

// Message is the entry's error, with the close kinds of an unknown one.
func (e *GuardEntryError) Message() string {
	msg := e.Err.Error()
	var ue *utcp.Error
	if errors.As(e.Err, &ue) {
		if dym, _ := ue.Details["did_you_mean"].([]string); len(dym) > 0 {
			msg += " (did you mean " + strings.Join(dym, ", ") + "?)"
		}
	}
	return msg
}

func (e *GuardEntryError) Unwrap() error { return e.Err }

// LoadGuards builds the guards of the gateway.guards array raw, in order,
// each named "<index>:<kind>": the entry's ${VAR} and $VAR references are
// resolved through vars (config variables, dotenv, environment; no
// namespace; `$$` is a literal '$'), then its kind is looked up in reg and
// built from the whole entry. An entry that fails, and the first failure
// only, is a *GuardEntryError naming it.
func LoadGuards(reg *guard.Registry, raw json.RawMessage, vars *manuals.Resolver, log *slog.Logger) ([]guard.Named, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("gateway.guards: must be an array of guard objects: %w", err)
	}
	out := make([]guard.Named, 0, len(entries))
	for i, entry := range entries {
		var head struct {
			Kind *string `json:"kind"`
		}
		if err := json.Unmarshal(entry, &head); err != nil || entry[0] != '{' {
			return nil, &GuardEntryError{Index: i, Err: errors.New(`must be an object with a "kind"`)}
		}
		if head.Kind == nil || *head.Kind == "" {
			return nil, &GuardEntryError{Index: i, Err: fmt.Errorf(`has no "kind" (registered kinds: %s)`, strings.Join(reg.Kinds(), ", "))}
		}
		kind := *head.Kind
		resolved, err := manuals.Substitute(entry, "", vars)
		if err != nil {
			return nil, &GuardEntryError{Index: i, Kind: kind, Err: err}
		}
		name := fmt.Sprintf("%d:%s", i, kind)
		g, err := reg.New(kind, resolved, log.With("guard", name))
		if err != nil {
			return nil, &GuardEntryError{Index: i, Kind: kind, Err: err}
		}
		out = append(out, guard.Named{Name: name, Guard: g})
	}
	return out, nil
}

// NewChain assembles the daemon's chain: guards in order, bypass_tools,
// the guard timeout, and approver (nil: a review is a deny) with
// reviewTimeout as a backstop.
func NewChain(guards []guard.Named, s *Settings, approver guard.Approver, reviewTimeout time.Duration) *guard.Chain {
	gt := s.GuardTimeout
	if gt <= 0 {
		gt = DefaultGuardTimeout
	}
	opts := []guard.Option{guard.WithBypass(s.BypassTools...), guard.WithGuardTimeout(gt)}
	if approver != nil {
		opts = append(opts, guard.WithApprover(approver), guard.WithReviewTimeout(reviewTimeout+reviewGrace))
	}
	return guard.NewChain(guards, opts...)
}

// restartOnlyGatewayChanged reports whether the gateway sections a and b
// differ in a key that applies only at start (not the reloadable guard
// keys). Sections that do not parse compare as bytes.
func restartOnlyGatewayChanged(a, b json.RawMessage) bool {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return !bytes.Equal(a, b)
	}
	for _, k := range ReloadableKeys {
		delete(ma, k)
		delete(mb, k)
	}
	return !maps.EqualFunc(ma, mb, func(x, y json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(x), bytes.TrimSpace(y)) })
}

// reloadGuards builds the chain of a reloaded configuration and installs
// it (s: the settings of its gateway section); a chain that fails to load
// keeps the last good one serving.
func (d *Daemon) reloadGuards(dc *Config, s *Settings) {
	if d.guards == nil {
		return
	}
	named, err := LoadGuards(guard.Default, s.Guards, dc.Vars, d.log.With("component", "guard"))
	if err != nil {
		d.log.Error("reloading the guard chain failed; the last good chain keeps deciding", "config", dc.Path, "err", err)
		return
	}
	d.guards.Set(NewChain(named, s, d.reviews, d.set.EffectiveReviewTimeout()))
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

// GuardProblem formats a chain that failed to load for the terminal: the
// file, the entry and what is wrong (a plain error, so that the message is
// printed once, as it is).
func GuardProblem(path string, err error) error {
	if path == "" {
		return errors.New(err.Error())
	}
	return errors.New(path + ": " + err.Error())
}

// MemoryAuditRecords is how many audit records a daemon without a data
// directory keeps in memory when audit_max_rows does not say: some tens
// of megabytes, at about a kilobyte a record.
const MemoryAuditRecords = 50_000

// guardStores returns the review and audit stores that go with the
// manual store st: the same SQLite database, or memory, where the audit
// log keeps the newest audit_max_rows records (MemoryAuditRecords
// unless set).
func guardStores(st registry.Store, s *Settings) (review.Store, audit.Store) {
	if db, ok := st.(*sqlite.Store); ok {
		return db.Reviews(), db.Audit()
	}
	return review.NewMemStore(), audit.NewBoundedMemStore(memoryAuditMax(s))
}

// memoryAuditMax is the bound of the in-memory audit log.
func memoryAuditMax(s *Settings) int {
	if s.AuditMaxRows > 0 && s.AuditMaxRows < math.MaxInt32 {
		return int(s.AuditMaxRows)
	}
	return MemoryAuditRecords
}

// closeReviews stops the review dispatcher, letting the calls it runs
// finish within the shutdown timeout.
func (d *Daemon) closeReviews() {
	ctx, cancel := context.WithTimeout(context.Background(), d.set.ShutdownTimeout)
	defer cancel()
	_ = d.reviews.Close(ctx)
}

// closeAudit writes the audit records still queued.
func (d *Daemon) closeAudit() {
	ctx, cancel := context.WithTimeout(context.Background(), d.set.ShutdownTimeout)
	defer cancel()
	if err := d.audit.Close(ctx); err != nil {
		d.log.Error("the audit log did not finish writing at shutdown", "err", err, "dropped", d.audit.Dropped(),
			"failed", d.audit.Failed(), "spilled", d.audit.Spilled())
	}
}
