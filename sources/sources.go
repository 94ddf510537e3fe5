// Package sources keeps the manuals of a source registered in a gateway
// in step with what the source wants. A source is the configuration file
// ([Config], registry.SourceConfig) or the manuals folder ([Dir],
// registry.SourceDir); the stored manuals and those of the admin API are
// the gateway's own (gateway.Restore, gateway.RegisterManual). Each
// source feeds a [Reconciler], which adds new manuals, replaces changed
// ones (discovery first; a failure keeps the old version serving) and
// removes the ones the source no longer has, never touching a manual of
// another source. A manual that fails to register is kept by the gateway
// (gateway.RegisterOptions.KeepFailed): listed as failed and retried in
// the background, or, when it was a replacement, its last good version
// serving degraded while the new one is retried.
package sources

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// A Source brings the manuals it wants registered in step with it.
// Calls to Sync must not overlap.
type Source interface {
	// Sync registers, replaces and removes manuals so that the gateway
	// serves what the source wants now, substituting vars. force reads
	// everything again and retries failed registrations (SIGHUP). It
	// reports what it did and whether the source had changed (a source
	// that did not change does nothing).
	Sync(ctx context.Context, vars *manuals.Resolver, force bool) (Stats, bool)
}

// Wanted is one manual a source wants registered.
type Wanted struct {
	// Name is the sanitised manual name.
	Name string
	// Raw is the manual call template, variables unresolved.
	Raw json.RawMessage
	// Origin says where it came from, for logs: "utcpd.json:7:
	// manual_call_templates[0]", or a file of the manuals folder.
	Origin string
	// Extra is content whose change needs a new discovery although Raw
	// is unchanged (the bytes of a manual file a file template points at).
	Extra []byte
	// Keep leaves the registered version alone: the source is broken
	// now and its last good version keeps serving.
	Keep bool
	// Err, when set, is why the source cannot use the manual as written
	// (a configuration template the shared check rejected,
	// daemon.CheckConfig): it is not registered but counted and logged as
	// a failed registration; a version registered before keeps serving.
	Err error
}

// Stats counts what one sync did.
type Stats struct {
	Added, Replaced, Removed, Failed, Unchanged int
}

// entry is what a Reconciler did last for one manual.
type entry struct {
	fp     [32]byte // fingerprint of what was last tried
	ok     bool     // the last try registered it
	origin string
}

// Reconciler keeps the manuals of one source registered in a gateway in
// step with what the source wants. Calls to Sync must not overlap.
type Reconciler struct {
	source  string
	g       *gateway.Gateway
	log     *slog.Logger
	timeout time.Duration // per registration
	have    map[string]*entry
	record  func(source, op string, err error)
}

// NewReconciler returns the reconciler of the manuals with the given
// source (registry.SourceConfig, registry.SourceDir) in g. timeout bounds
// one registration. record, when set, counts registrations (op
// "register", "replace" or "deregister") for metrics.
func NewReconciler(source string, g *gateway.Gateway, log *slog.Logger, timeout time.Duration, record func(source, op string, err error)) *Reconciler {
	if record == nil {
		record = func(string, string, error) {}
	}
	return &Reconciler{source: source, g: g, log: log, timeout: timeout, have: map[string]*entry{}, record: record}
}

// Registered reports whether the manual name is registered from this
// source and serving: the last try registered it, or a background retry
// has since.
func (s *Reconciler) Registered(name string) bool {
	e := s.have[name]
	if e == nil {
		return false
	}
	if e.ok {
		return true
	}
	st, ok := s.g.Status(name)
	return ok && st.Manual != nil && st.Source == s.source && st.Health.State != gateway.StateFailed
}

// fingerprint hashes what decides a manual's registration: its template,
// its extra content, and its template with variables substituted (so a
// changed variable value triggers a new discovery; the hash keeps no
// secret).
func fingerprint(w *Wanted, vars *manuals.Resolver) [32]byte {
	h := sha256.New()
	h.Write(w.Raw)
	h.Write([]byte{0})
	h.Write(w.Extra)
	h.Write([]byte{0})
	if w.Err != nil {
		h.Write([]byte("rejected: " + w.Err.Error()))
		h.Write([]byte{0})
	}
	if manuals.HasVariables(w.Raw) {
		sub, err := manuals.Substitute(w.Raw, w.Name, vars)
		if err != nil {
			h.Write([]byte("error: " + err.Error()))
		} else {
			h.Write(sub)
		}
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Sync brings the gateway in step with want. Unchanged manuals are left
// alone; a manual whose last registration failed is tried again only
// when its fingerprint changed or force is set.
func (s *Reconciler) Sync(ctx context.Context, want []Wanted, vars *manuals.Resolver, force bool) Stats {
	var st Stats
	wantNames := map[string]bool{}
	for _, w := range want {
		wantNames[w.Name] = true
	}
	// Removals first, so that a manual renamed in its source can take a
	// name another one gave up.
	for _, name := range slices.Sorted(maps.Keys(s.have)) {
		if wantNames[name] {
			continue
		}
		e := s.have[name]
		delete(s.have, name)
		if m, ok := s.g.Manual(name); !ok || m.Source != s.source {
			continue
		}
		err := s.g.DeregisterManual(context.WithoutCancel(ctx), name)
		s.record(s.source, "deregister", err)
		if err != nil {
			s.log.Error("removing manual", "source", s.source, "manual", name, "err", err)
			continue
		}
		st.Removed++
		s.log.Info("manual removed", "source", s.source, "manual", name, "origin", e.origin)
	}

	type job struct {
		w       Wanted
		fp      [32]byte
		replace bool
	}
	var jobs []job
	for _, w := range want {
		if w.Keep {
			continue
		}
		fp := fingerprint(&w, vars)
		if w.Err != nil {
			if e, ok := s.have[w.Name]; ok && e.fp == fp && !e.ok && !force {
				st.Unchanged++
				continue
			}
			st.Failed++
			if m, ok := s.g.Manual(w.Name); ok && m.Source == s.source {
				s.record(s.source, "replace", w.Err)
				s.log.Error("manual not replaced; its last good version keeps serving",
					"source", s.source, "manual", w.Name, "origin", w.Origin, "code", utcp.CodeOf(w.Err), "err", w.Err)
			} else {
				s.record(s.source, "register", w.Err)
				s.g.KeepRejected(w.Name, w.Raw, s.source, w.Err)
				s.log.Error("manual not registered", "source", s.source, "manual", w.Name, "origin", w.Origin,
					"code", utcp.CodeOf(w.Err), "err", gateway.FailureMessage(w.Name, w.Err))
			}
			s.have[w.Name] = &entry{fp: fp, origin: w.Origin}
			continue
		}
		if e, ok := s.have[w.Name]; ok && e.fp == fp && (e.ok || !force) {
			st.Unchanged++
			continue
		}
		replace := false
		if m, ok := s.g.Manual(w.Name); ok {
			if m.Source != s.source {
				s.have[w.Name] = &entry{fp: fp, origin: w.Origin}
				st.Failed++
				s.log.Error("manual not registered: the name is taken by a manual from another source",
					"source", s.source, "manual", w.Name, "origin", w.Origin, "taken_by", m.Source)
				continue
			}
			replace = true
		}
		jobs = append(jobs, job{w: w, fp: fp, replace: replace})
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rctx, cancel := context.WithTimeout(ctx, s.timeout)
			res, err := s.g.RegisterManual(rctx, j.w.Raw, gateway.RegisterOptions{Source: s.source, Replace: j.replace, KeepFailed: true})
			cancel()
			op := "register"
			if j.replace {
				op = "replace"
			}
			s.record(s.source, op, err)
			mu.Lock()
			defer mu.Unlock()
			s.have[j.w.Name] = &entry{fp: j.fp, ok: err == nil, origin: j.w.Origin}
			if err != nil {
				st.Failed++
				s.logFailure(j.w, j.replace, err)
				return
			}
			switch {
			case j.replace:
				st.Replaced++
				s.log.Info("manual replaced", "source", s.source, "manual", res.Name, "tools", len(res.Tools), "origin", j.w.Origin)
			default:
				st.Added++
				s.log.Info("manual registered", "source", s.source, "manual", res.Name, "tools", len(res.Tools), "origin", j.w.Origin)
			}
		})
	}
	wg.Wait()
	return st
}

// logFailure logs one line for a registration that failed: the manual's
// name once (the message leaves it out, gateway.FailureMessage), where it
// came from, the code, and when the gateway retries it.
func (s *Reconciler) logFailure(w Wanted, replace bool, err error) {
	msg := "manual not registered"
	args := []any{"source", s.source, "manual", w.Name, "origin", w.Origin, "code", utcp.CodeOf(err), "err", gateway.FailureMessage(w.Name, err)}
	if st, ok := s.g.Status(w.Name); ok {
		if st.Health.State == gateway.StateDegraded || (replace && st.Health.State != gateway.StateFailed) {
			msg = "manual not replaced; its last good version keeps serving"
		}
		if !st.Health.NextRetry.IsZero() {
			args = append(args, "retry_in", time.Until(st.Health.NextRetry).Round(100*time.Millisecond))
		}
	}
	s.log.Error(msg, args...)
}
