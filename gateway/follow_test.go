package gateway_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/utcp"
)

// bus is one in-memory store shared by several "processes": each view
// reports, through Watch, the changes the other views make, as
// store/postgres does for replicas on one database.
type bus struct {
	data *memstore.Store
	mu   sync.Mutex
	subs map[*busView][]chan registry.Change
}

type busView struct {
	b        *bus
	writes   atomic.Int64 // Puts and Deletes through this view
	failGets atomic.Int64 // Gets to fail with unavailable (the database away)
}

func newBus() *bus { return &bus{data: memstore.New(), subs: map[*busView][]chan registry.Change{}} }

func (b *bus) view() *busView { return &busView{b: b} }

func (v *busView) announce(c registry.Change) {
	v.b.mu.Lock()
	defer v.b.mu.Unlock()
	for w, chs := range v.b.subs {
		if w == v {
			continue
		}
		for _, ch := range chs {
			ch <- c
		}
	}
}

func (v *busView) Put(ctx context.Context, rec *registry.Record) error {
	if err := v.b.data.Put(ctx, rec); err != nil {
		return err
	}
	v.writes.Add(1)
	v.announce(registry.Change{Kind: registry.ChangePut, Name: rec.Name})
	return nil
}

func (v *busView) Delete(ctx context.Context, name string) error {
	if err := v.b.data.Delete(ctx, name); err != nil {
		return err
	}
	v.writes.Add(1)
	v.announce(registry.Change{Kind: registry.ChangeDelete, Name: name})
	return nil
}

func (v *busView) Get(ctx context.Context, name string) (*registry.Record, error) {
	if v.failGets.Add(-1) >= 0 {
		return nil, utcp.NewError(utcp.CodeUnavailable, "store away")
	}
	return v.b.data.Get(ctx, name)
}

func (v *busView) List(ctx context.Context) ([]*registry.Record, error) { return v.b.data.List(ctx) }

func (v *busView) Watch(ctx context.Context) <-chan registry.Change {
	in := make(chan registry.Change, 1024)
	out := make(chan registry.Change)
	v.b.mu.Lock()
	v.b.subs[v] = append(v.b.subs[v], in)
	v.b.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case c := <-in:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (v *busView) Close() error { return nil }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFollowOtherReplicas runs two gateways over one shared store: a
// manual registered, replaced and removed on one is registered, replaced
// and removed on the other, from the stored copy (no discovery), without
// being written back; a manual of the configuration is never touched by
// a stored one of the same name.
func TestFollowOtherReplicas(t *testing.T) {
	_, url := serveFixture(t)
	b := newBus()
	va, vb := b.view(), b.view()
	ga := newGateway(t, gateway.Options{Store: va})
	gb := newGateway(t, gateway.Options{Store: vb})
	for _, g := range []*gateway.Gateway{ga, gb} {
		if _, _, err := g.Restore(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gb.RegisterManual(t.Context(), httpManual("local", url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig}); err != nil {
		t.Fatal(err)
	}

	register(t, ga, httpManual("shared", url+"/utcp"))
	eventually(t, "shared registered on B", func() bool { _, ok := gb.Manual("shared"); return ok })
	res, err := gb.CallTool(t.Context(), "shared.add", map[string]any{"a": 2, "b": 3}, gateway.CallOptions{})
	if err != nil {
		t.Fatalf("call on B: %v", err)
	}
	if sum := res.Value.(map[string]any)["sum"]; fmt.Sprint(sum) != "5" {
		t.Errorf("sum = %v", sum)
	}
	ma, _ := ga.Manual("shared")
	mb, _ := gb.Manual("shared")
	if !ma.Registered.Equal(mb.Registered) || !ma.Refreshed.Equal(mb.Refreshed) || string(ma.Template.Raw) != string(mb.Template.Raw) {
		t.Errorf("B's copy differs: registered %v/%v refreshed %v/%v", ma.Registered, mb.Registered, ma.Refreshed, mb.Refreshed)
	}

	// Replace on A (a tool filter in the template): B follows.
	if _, err := ga.RegisterManual(t.Context(), httpManual("shared", url+"/utcp", `"headers":{"X-Version":"2"}`),
		gateway.RegisterOptions{Source: registry.SourceAPI, Replace: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replacement on B", func() bool {
		m, ok := gb.Manual("shared")
		return ok && string(m.Template.Raw) == string(mustManual(t, ga, "shared").Template.Raw)
	})

	// A stored manual named like B's configuration manual: B keeps its own.
	register(t, ga, httpManual("local", url+"/utcp"))
	time.Sleep(100 * time.Millisecond)
	if m := mustManual(t, gb, "local"); m.Source != registry.SourceConfig {
		t.Errorf("B's configuration manual replaced by a stored one: source %q", m.Source)
	}

	// Remove on B: A follows; B's configuration manual stays.
	if err := gb.DeregisterManual(t.Context(), "shared"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shared removed on A", func() bool { _, ok := ga.Manual("shared"); return !ok })
	if err := ga.DeregisterManual(t.Context(), "local"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if m := mustManual(t, gb, "local"); m.Source != registry.SourceConfig {
		t.Errorf("B's configuration manual removed with the stored one")
	}

	// No echo: B wrote only its own removal, A its three writes and one
	// removal.
	if va.writes.Load() != 4 || vb.writes.Load() != 1 {
		t.Errorf("writes: A %d, B %d; want 4 and 1 (a change applied was written back)", va.writes.Load(), vb.writes.Load())
	}
}

func mustManual(t *testing.T, g *gateway.Gateway, name string) *registry.Manual {
	t.Helper()
	m, ok := g.Manual(name)
	if !ok {
		t.Fatalf("manual %q not registered", name)
	}
	return m
}

// TestApplyStoredSkipsStale checks that applying a change the store has
// since overtaken does not bring an old version back.
func TestApplyStoredSkipsStale(t *testing.T) {
	_, url := serveFixture(t)
	b := newBus()
	ga := newGateway(t, gateway.Options{Store: b.view()})
	gb := newGateway(t, gateway.Options{Store: b.view()})
	register(t, ga, httpManual("m", url+"/utcp"))
	if err := gb.ApplyStored(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	if err := ga.DeregisterManual(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	// B applies "m" again: the store no longer has it, so B removes it.
	if err := gb.ApplyStored(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	if _, ok := gb.Manual("m"); ok {
		t.Error("B still has a manual the store no longer holds")
	}
	// Applying a name nobody has is a no-op.
	if err := gb.ApplyStored(t.Context(), "never"); err != nil {
		t.Errorf("ApplyStored(never) = %v", err)
	}
}

// TestFollowRetriesUnavailable checks that a change B cannot read at once
// (its store unreachable) is applied once the store answers again.
func TestFollowRetriesUnavailable(t *testing.T) {
	_, url := serveFixture(t)
	b := newBus()
	va, vb := b.view(), b.view()
	ga := newGateway(t, gateway.Options{Store: va})
	gb := newGateway(t, gateway.Options{Store: vb})
	if _, _, err := gb.Restore(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	vb.failGets.Store(2)
	register(t, ga, httpManual("late", url+"/utcp"))
	eventually(t, "late registered on B after the store came back", func() bool { _, ok := gb.Manual("late"); return ok })
	if n := vb.failGets.Load(); n >= 0 {
		t.Errorf("B's store was not read while failing (%d failures left)", n)
	}
}
