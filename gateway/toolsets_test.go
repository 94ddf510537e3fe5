package gateway_test

import (
	"context"
	"slices"
	"testing"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

// TestToolsetView follows a toolset over a live gateway: the members by
// globs and tags, a manual registered later joining, the listed names
// mapping back to the real ones, the guard and the audit record seeing
// the real name and the toolset, and a name outside the toolset never
// reaching the guard.
func TestToolsetView(t *testing.T) {
	f, url := serveFixture(t)
	log := &auditLog{}
	var seen []string
	g := newGateway(t, gateway.Options{Audit: log, Guard: guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		seen = append(seen, c.Qualified)
		return guard.Verdict{Decision: guard.Allow}, nil
	})})
	register(t, g, httpManual("demo", url+"/utcp"))
	if err := g.SetToolsets(map[string]gateway.ToolsetSpec{
		"mini": {Include: []string{"demo.a*", "late.add"}, Tags: []string{"stream"}, Exclude: []string{"demo.count"},
			Rename: map[string]string{"demo.add": "plus", "late.add": "late_plus"}, Hidden: map[string]map[string]any{"demo.add": {"b": 2}}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	ts, err := g.Toolset("mini")
	if err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, m := range ts.Members() {
			out = append(out, m.Listed+"="+m.Qualified)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"plus=demo.add"}) {
		t.Fatalf("members %v, want [plus=demo.add] (count excluded though tagged stream)", got)
	}
	register(t, g, httpManual("late", url+"/utcp"))
	if got := names(); !slices.Equal(got, []string{"late.count=late.count", "late_plus=late.add", "plus=demo.add"}) {
		t.Fatalf("members after a later manual: %v (late.count by its stream tag)", got)
	}
	res, err := ts.CallTool(t.Context(), "plus", map[string]any{"a": 1}, gateway.CallOptions{Front: "test"})
	if err != nil || res.Value.(map[string]any)["sum"] == nil {
		t.Fatalf("plus: %v %v", res, err)
	}
	if r := log.last(t); r.Tool != "demo.add" || r.Qualified != "demo.add" || r.Toolset != "mini" {
		t.Errorf("audit record %+v, want demo.add through mini", r)
	}
	calls := f.Calls()
	for _, name := range []string{"demo.add", "demo.echo", "late.add", "count", "demo.count"} {
		if _, err := ts.CallTool(t.Context(), name, nil, gateway.CallOptions{}); utcp.CodeOf(err) != utcp.CodeToolNotFound {
			t.Errorf("%s through mini: %v, want tool_not_found", name, err)
		}
	}
	if _, err := ts.CallTool(t.Context(), "plus", map[string]any{"a": 1, "b": 5}, gateway.CallOptions{}); utcp.CodeOf(err) != utcp.CodeInvalidArguments {
		t.Errorf("plus with the hidden b: %v", err)
	}
	if f.Calls() != calls || !slices.Equal(seen, []string{"demo.add"}) {
		t.Errorf("refused calls reached the guard (%v) or the backend", seen)
	}
	if _, err := g.Toolset("nope"); utcp.CodeOf(err) != utcp.CodeNotFound {
		t.Errorf("unknown toolset: %v", err)
	}
	if _, err := g.PutToolset(t.Context(), "mini", gateway.ToolsetSpec{Include: []string{"x"}}, false); utcp.CodeOf(err) != utcp.CodeManualReadOnly {
		t.Errorf("PUT over a config toolset: %v", err)
	}
}
