package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// errStale reports that a change from the store was overtaken by a newer
// one before it could be applied: the newer one is applied instead.
var errStale = errors.New("the stored record changed again meanwhile")

// followRetry is how long follow waits before applying again a change
// that failed (the store was unreachable).
const followRetry = 2 * time.Second

// follow applies the changes ch reports (another process sharing the
// store registered, replaced or removed a manual) until ch is closed. A
// change that cannot be applied because the store cannot be read is
// retried every followRetry until it applies.
func (g *Gateway) follow(ch <-chan registry.Change) {
	retry := map[string]bool{}
	var tick <-chan time.Time
	apply := func(name string) {
		ctx, cancel := context.WithTimeout(g.life, time.Minute)
		err := g.ApplyStored(ctx, name)
		cancel()
		switch {
		case err == nil || g.life.Err() != nil:
			delete(retry, name)
		case utcp.CodeOf(err) == utcp.CodeUnavailable:
			if !retry[name] {
				g.log.Warn("applying a change another replica made; retrying", "manual", name, "err", err)
			}
			retry[name] = true
		default:
			delete(retry, name)
			g.log.Warn("applying a change another replica made", "manual", name, "err", err)
		}
	}
	for {
		if len(retry) > 0 && tick == nil {
			tick = time.After(followRetry)
		}
		select {
		case c, ok := <-ch:
			if !ok {
				return
			}
			apply(c.Name)
		case <-tick:
			tick = nil
			for name := range retry {
				apply(name)
			}
		}
	}
}

// ApplyStored makes the registry agree with the store about the manual
// called name, after another process sharing the store changed it: the
// stored record is registered (replacing the registered manual) from its
// stored copy, without contacting the backend (discovered when the record
// has none), or the registered manual is removed when the store no longer
// has it. Nothing is written back to the store. Manuals of another source
// than "api" (configuration, folder) belong to this process and are left
// alone, as is a registered manual that already matches the record. A
// record that changes again meanwhile is left to that newer change.
func (g *Gateway) ApplyStored(ctx context.Context, name string) error {
	if g.store == nil {
		return nil
	}
	rec, err := g.store.Get(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return g.removeStored(ctx, name)
	}
	if err != nil {
		return err
	}
	if local, ok := g.reg.Manual(name); ok {
		if local.Source != registry.SourceAPI {
			return fmt.Errorf("manual %q is registered here from %s; the stored manual of that name is not applied", name, local.Source)
		}
		if sameAsStored(local, rec) {
			return nil
		}
	}
	opts := RegisterOptions{Source: rec.Source, Manual: rec.Manual, Registered: rec.Registered, Replace: true, NoPersist: true, stored: rec,
		KeepFailed: true}
	if _, err := g.RegisterManual(ctx, rec.Template, opts); err != nil {
		if errors.Is(err, errStale) {
			return nil
		}
		return err
	}
	g.log.Info("manual changed by another replica applied", "manual", name)
	return nil
}

// removeStored removes the manual called name, which the store no longer
// holds, without touching the store.
func (g *Gateway) removeStored(ctx context.Context, name string) error {
	g.regLock.Lock()
	m, ok := g.reg.Manual(name)
	if !ok || m.Source != registry.SourceAPI {
		g.regLock.Unlock()
		return nil
	}
	// Registered again meanwhile? Then that change applies instead.
	if _, err := g.store.Get(ctx, name); !errors.Is(err, registry.ErrNotFound) {
		g.regLock.Unlock()
		return nil
	}
	old, err := g.reg.Remove(name)
	if err == nil {
		g.forget(name)
	}
	g.regLock.Unlock()
	if err != nil {
		return nil // removed meanwhile
	}
	g.log.Info("manual removed by another replica", "manual", name)
	g.changed()
	g.retire(old)
	return nil
}

// checkStored runs under regLock before a stored record replaces prev
// (nil when the name is free): the name must not be taken by another
// source's manual, and the store must still hold the record.
func (g *Gateway) checkStored(ctx context.Context, prev *registry.Manual, rec *registry.Record) error {
	if prev != nil && prev.Source != registry.SourceAPI {
		return utcp.NewError(utcp.CodeManualExists, "manual %q is registered here from %s; the stored manual of that name is not applied",
			rec.Name, prev.Source).WithDetail("manual", rec.Name)
	}
	cur, err := g.store.Get(context.WithoutCancel(ctx), rec.Name)
	if err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return errStale
		}
		return err
	}
	if !sameRecord(cur, rec) {
		return errStale
	}
	return nil
}

// sameAsStored reports whether the registered manual m is the one rec
// records.
func sameAsStored(m *registry.Manual, rec *registry.Record) bool {
	return m.Template != nil && bytes.Equal(m.Template.Raw, rec.Template) && m.Source == rec.Source &&
		m.Registered.Equal(rec.Registered) && m.Refreshed.Equal(rec.Refreshed)
}

func sameRecord(a, b *registry.Record) bool {
	return bytes.Equal(a.Template, b.Template) && a.Source == b.Source &&
		a.Registered.Equal(b.Registered) && a.Refreshed.Equal(b.Refreshed)
}
