package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
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
