package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// RefreshManual discovers a registered manual again from its template and
// replaces it atomically (calls in flight finish on the old one). It keeps
// the manual's source and registration time, and updates the stored copy.
// A failed manual is retried at once; a manual whose replacement failed
// (degraded, RegisterOptions.KeepFailed) is tried with the template that
// replacement wanted. A failure leaves the registered version serving,
// degraded (or the manual failed), with its background retry
// rescheduled.
func (g *Gateway) RefreshManual(ctx context.Context, name string) (*RegisterResult, error) {
	return g.refresh(ctx, name, 0)
}

// refresh is RefreshManual; a background retry passes the generation of
// the manual's health record it was scheduled for (0: none to check).
func (g *Gateway) refresh(ctx context.Context, name string, gen uint64) (*RegisterResult, error) {
	m, ok := g.reg.Manual(name)
	if !ok {
		return nil, utcp.NewError(utcp.CodeManualNotFound, "manual %q is not registered", name).WithDetail("manual", name)
	}
	raw := m.Template.Raw
	t := &g.health
	t.mu.Lock()
	h := t.m[name]
	if h != nil && h.wanted != nil {
		raw = h.wanted
	}
	stale := gen != 0 && (h == nil || h.gen != gen)
	t.mu.Unlock()
	if stale {
		return nil, errOvertaken
	}
	return g.RegisterManual(ctx, raw, RegisterOptions{Source: m.Source, Replace: true, Registered: m.Registered, expect: m, gen: gen, checkGen: gen != 0})
}

// Restore registers every manual in the store from its stored copy,
// without contacting any backend, so the tools serve at once. It returns
// how many were restored and the failures (a manual whose template no
// longer parses or whose variables no longer resolve stays in the store).
// Then, unless rediscover is false, it discovers each manual again in the
// background, keeping the stored copy when its backend is unreachable.
//
// The first successful Restore also starts following the store: until the
// gateway closes, every change another process sharing the store makes
// (Store.Watch: replicas on one database) is applied to the registry with
// ApplyStored, without being written back. The watch starts before the
// store is read, so no change falls in between.
func (g *Gateway) Restore(ctx context.Context, rediscover bool) (int, []*RegisterResult, error) {
	if g.store == nil {
		return 0, nil, nil
	}
	wctx, stopWatch := context.WithCancel(g.life)
	changes := g.store.Watch(wctx)
	recs, err := g.store.List(ctx)
	if err != nil {
		stopWatch()
		return 0, nil, err
	}
	following := false
	g.followOnce.Do(func() { following = true })
	if following {
		defer g.goBackground(func() {
			defer stopWatch()
			g.follow(changes)
		})
	} else {
		stopWatch()
	}
	var (
		mu       sync.Mutex
		failed   []*RegisterResult
		restored []string
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 8)
	)
	for _, rec := range recs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := RegisterOptions{Source: rec.Source, Manual: rec.Manual, Registered: rec.Registered, NoPersist: true,
				KeepFailed: true, rediscover: rediscover}
			if rec.Manual == nil {
				opts.Manual = &utcp.Manual{UTCPVersion: utcp.Version}
			}
			_, err := g.RegisterManual(ctx, rec.Template, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				g.log.Error("restoring manual", "manual", rec.Name, "err", err)
				failed = append(failed, &RegisterResult{Name: rec.Name, Err: err})
				return
			}
			restored = append(restored, rec.Name)
		})
	}
	wg.Wait()
	if rediscover {
		g.goBackground(func() { g.rediscover(g.life, restored) })
	}
	return len(restored), failed, nil
}

// rediscover refreshes the named manuals, a few at a time. A failure keeps
// the stored copy serving (the manual is degraded and retried in the
// background) and is logged.
func (g *Gateway) rediscover(ctx context.Context, names []string) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if _, err := g.RefreshManual(cctx, name); err != nil {
				g.log.Warn("rediscovering manual failed; the stored copy keeps serving", "manual", name,
					"code", utcp.CodeOf(err), "err", FailureMessage(name, err))
			}
		})
	}
	wg.Wait()
}

// Manual returns a registered manual's entry (template, tools, source,
// times). Treat it as read-only; use Redact before showing its template.
func (g *Gateway) Manual(name string) (*registry.Manual, bool) { return g.reg.Manual(name) }

// Manuals returns every registered manual, sorted by name.
func (g *Gateway) Manuals() []*registry.Manual { return g.reg.Manuals() }
