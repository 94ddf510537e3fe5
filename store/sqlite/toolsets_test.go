package sqlite

import (
	"encoding/json"
	"testing"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

var _ gateway.ToolsetStore = (*Store)(nil)

// TestToolsetStore puts, replaces, lists and deletes toolsets, and finds
// them again after the store is closed and opened again.
func TestToolsetStore(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	ctx := t.Context()
	mini := json.RawMessage(`{"include":["demo.add"],"rename":{"demo.add":"plus"}}`)
	for _, put := range []struct {
		name string
		spec json.RawMessage
	}{{"mini", json.RawMessage(`{"include":["x"]}`)}, {"mini", mini}, {"other", json.RawMessage(`{"tags":["t"]}`)}} {
		if err := s.PutToolset(ctx, put.name, put.spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteToolset(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteToolset(ctx, "other"); utcp.CodeOf(err) != utcp.CodeNotFound {
		t.Errorf("deleting a missing toolset: %v, want not_found", err)
	}
	if err := s.PutToolset(ctx, "bad", json.RawMessage(`{`)); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
		t.Errorf("a spec that is not JSON: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	got, err := s.ListToolsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["mini"]) != string(mini) {
		t.Errorf("after reopening: %s, want only mini = %s", got, mini)
	}
}
