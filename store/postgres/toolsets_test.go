package postgres_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/utcp"
)

var _ gateway.ToolsetStore = (*postgres.Store)(nil)

// TestToolsetStore: two replicas on one database; a toolset one puts is
// signalled to the other's WatchToolsets and listed by it, a delete too,
// and both survive the stores being opened again.
func TestToolsetStore(t *testing.T) {
	dsn := newDB(t)
	a := open(t, dsn, postgres.Options{ResyncInterval: -1})
	b := open(t, dsn, postgres.Options{ResyncInterval: -1})
	ctx := t.Context()
	ch := b.WatchToolsets(ctx)
	signalled := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no toolset signal after %s", what)
		}
	}
	mini := json.RawMessage(`{"include":["demo.add"],"rename":{"demo.add":"plus"}}`)
	if err := a.PutToolset(ctx, "mini", mini); err != nil {
		t.Fatal(err)
	}
	signalled("a put")
	got, err := b.ListToolsets(ctx)
	if err != nil || len(got) != 1 || string(got["mini"]) != string(mini) {
		t.Fatalf("b lists %s, %v; want mini = %s", got, err, mini)
	}
	if err := a.PutToolset(ctx, "gone", json.RawMessage(`{"tags":["x"]}`)); err != nil {
		t.Fatal(err)
	}
	signalled("a second put")
	if err := a.DeleteToolset(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	signalled("a delete")
	if err := b.DeleteToolset(ctx, "gone"); utcp.CodeOf(err) != utcp.CodeNotFound {
		t.Errorf("deleting a missing toolset: %v, want not_found", err)
	}
	_ = a.Close()
	c := open(t, dsn, postgres.Options{})
	if got, err := c.ListToolsets(ctx); err != nil || len(got) != 1 || string(got["mini"]) != string(mini) {
		t.Errorf("a new store lists %s, %v", got, err)
	}
}

// TestToolsetReplicas: two gateways (replicas) share one database; a
// toolset created through A's gateway is served by B (mapping the listed
// name to the real one, with its fixed argument), a replacement and a
// removal reach B too, and a new replica restores it.
func TestToolsetReplicas(t *testing.T) {
	dsn := newDB(t)
	url := serveFixture(t)
	ga, sa := replica(t, dsn)
	gb, sb := replica(t, dsn)
	for _, p := range []struct {
		g  *gateway.Gateway
		st *postgres.Store
	}{{ga, sa}, {gb, sb}} {
		if err := p.g.SetToolsets(nil, p.st); err != nil {
			t.Fatal(err)
		}
		if err := p.g.RestoreToolsets(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ga.RegisterManual(t.Context(), manual("demo", url), gateway.RegisterOptions{Source: registry.SourceAPI}); err != nil {
		t.Fatal(err)
	}
	put := func(b int) {
		t.Helper()
		spec := gateway.ToolsetSpec{Include: []string{"demo.add"}, Rename: map[string]string{"demo.add": "plus"},
			Hidden: map[string]map[string]any{"demo.add": {"b": b}}}
		if _, err := ga.PutToolset(t.Context(), "mini", spec, false); err != nil {
			t.Fatal(err)
		}
	}
	sum := func() (any, error) {
		ts, err := gb.Toolset("mini")
		if err != nil {
			return nil, err
		}
		res, err := ts.CallTool(t.Context(), "plus", map[string]any{"a": 1}, gateway.CallOptions{})
		if err != nil {
			return nil, err
		}
		return res.Value.(map[string]any)["sum"], nil
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	put(10)
	until("B serves the toolset", func() bool { v, err := sum(); return err == nil && fmt.Sprint(v) == "11" })
	put(20)
	until("B serves the replaced toolset", func() bool { v, err := sum(); return err == nil && fmt.Sprint(v) == "21" })
	gc, sc := replica(t, dsn)
	if err := gc.SetToolsets(nil, sc); err != nil {
		t.Fatal(err)
	}
	if err := gc.RestoreToolsets(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ts, err := gc.Toolset("mini"); err != nil || ts.Source() != gateway.ToolsetSourceAPI {
		t.Errorf("a new replica: %v, %v", ts, err)
	}
	if err := ga.DeleteToolset(t.Context(), "mini"); err != nil {
		t.Fatal(err)
	}
	until("B drops the removed toolset", func() bool { _, err := gb.Toolset("mini"); return utcp.CodeOf(err) == utcp.CodeNotFound })
}
