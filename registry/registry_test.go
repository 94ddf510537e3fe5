package registry_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// def is a compact tool definition for fixtures.
type def struct {
	name string // unqualified
	desc string
	tags []string
}

func manual(name string, defs ...def) *registry.Manual {
	m := &registry.Manual{Name: name, Source: registry.SourceAPI}
	for _, d := range defs {
		m.Tools = append(m.Tools, registry.NewTool(name, &utcp.Tool{Name: d.name, Description: d.desc, Tags: d.tags}, nil))
	}
	return m
}

func tools(names ...string) []def {
	out := make([]def, len(names))
	for i, n := range names {
		out[i] = def{name: n}
	}
	return out
}

func mustAdd(t *testing.T, r *registry.Registry, ms ...*registry.Manual) {
	t.Helper()
	for _, m := range ms {
		if err := r.Add(m); err != nil {
			t.Fatalf("Add(%s): %v", m.Name, err)
		}
	}
}

func toolNames(ts []*registry.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func code(err error) utcp.Code { return utcp.CodeOf(err) }

func details(err error) map[string]any {
	var ue *utcp.Error
	if errors.As(err, &ue) {
		return ue.Details
	}
	return nil
}

func TestQualifiedName(t *testing.T) {
	tests := []struct{ manual, tool, want string }{
		{"weather", "get", "weather.get"},
		{"weather", "weather.get", "weather.get"},
		{"weather", "weatherget", "weather.weatherget"},
		{"weather", "weather", "weather.weather"},
		{"mcp", "server.tool", "mcp.server.tool"},
		{"mcp", "other.server.tool", "mcp.other.server.tool"},
		{"m", "", "m."},
	}
	for _, tc := range tests {
		if got := registry.QualifiedName(tc.manual, tc.tool); got != tc.want {
			t.Errorf("QualifiedName(%q, %q) = %q, want %q", tc.manual, tc.tool, got, tc.want)
		}
	}
}

func TestSplitName(t *testing.T) {
	tests := []struct {
		in           string
		manual, rest string
		ok           bool
	}{
		{"weather.get", "weather", "get", true},
		{"mcp.server.tool", "mcp", "server.tool", true},
		{"plain", "", "", false},
		{".tool", "", "", false},
		{"manual.", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range tests {
		m, r, ok := registry.SplitName(tc.in)
		if m != tc.manual || r != tc.rest || ok != tc.ok {
			t.Errorf("SplitName(%q) = %q, %q, %v; want %q, %q, %v", tc.in, m, r, ok, tc.manual, tc.rest, tc.ok)
		}
	}
}

func TestNewToolAndDropDuplicates(t *testing.T) {
	d := &utcp.Tool{Name: "echo", Tags: []string{"x"}}
	tool := registry.NewTool("m", d, 42)
	if tool.Name != "m.echo" || tool.Def.Name != "m.echo" || tool.Manual != "m" || tool.Ext != 42 || tool.ShortName() != "echo" {
		t.Errorf("NewTool = %+v (def %+v)", tool, tool.Def)
	}
	if d.Name != "echo" {
		t.Errorf("NewTool modified its argument: %q", d.Name)
	}

	a, b, a2, c, b2 := registry.NewTool("m", &utcp.Tool{Name: "a"}, 1), registry.NewTool("m", &utcp.Tool{Name: "b"}, 1),
		registry.NewTool("m", &utcp.Tool{Name: "a"}, 2), registry.NewTool("m", &utcp.Tool{Name: "c"}, 1), registry.NewTool("m", &utcp.Tool{Name: "b"}, 2)
	in := []*registry.Tool{a, b, a2, c, b2, a2}
	kept, dropped := registry.DropDuplicates(in)
	if d := cmp.Diff([]string{"m.a", "m.b", "m.c"}, toolNames(kept)); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if kept[0] != a || kept[1] != b {
		t.Error("DropDuplicates did not keep the first occurrences")
	}
	if d := cmp.Diff([]string{"m.a", "m.b"}, dropped); d != "" {
		t.Errorf("dropped (-want +got):\n%s", d)
	}
	if len(in) != 6 || in[2] != a2 {
		t.Error("DropDuplicates modified its argument")
	}
	same, none := registry.DropDuplicates([]*registry.Tool{a, b})
	if len(same) != 2 || none != nil {
		t.Errorf("no duplicates: kept %v dropped %v", toolNames(same), none)
	}
}

func TestAddInvalid(t *testing.T) {
	good := func() *registry.Manual { return manual("m", tools("a", "b")...) }
	tests := []struct {
		name   string
		mutate func(m *registry.Manual) *registry.Manual
		want   utcp.Code
	}{
		{"nil_manual", func(*registry.Manual) *registry.Manual { return nil }, utcp.CodeInvalidManual},
		{"empty_name", func(m *registry.Manual) *registry.Manual { m.Name = ""; return m }, utcp.CodeInvalidManual},
		{"dotted_name", func(m *registry.Manual) *registry.Manual {
			return manual("my.manual", tools("a")...)
		}, utcp.CodeInvalidManual},
		{"hyphen_name", func(m *registry.Manual) *registry.Manual {
			return manual("my-manual", tools("a")...)
		}, utcp.CodeInvalidManual},
		{"nil_tool", func(m *registry.Manual) *registry.Manual { m.Tools[1] = nil; return m }, utcp.CodeInvalidManual},
		{"nil_def", func(m *registry.Manual) *registry.Manual { m.Tools[1].Def = nil; return m }, utcp.CodeInvalidManual},
		{"wrong_manual", func(m *registry.Manual) *registry.Manual { m.Tools[0].Manual = "other"; return m }, utcp.CodeInvalidManual},
		{"unqualified_tool", func(m *registry.Manual) *registry.Manual {
			m.Tools[0].Name, m.Tools[0].Def.Name = "a", "a"
			return m
		}, utcp.CodeInvalidManual},
		{"prefix_without_dot", func(m *registry.Manual) *registry.Manual {
			m.Tools[0].Name, m.Tools[0].Def.Name = "mx", "mx"
			return m
		}, utcp.CodeInvalidManual},
		{"empty_short_name", func(m *registry.Manual) *registry.Manual {
			m.Tools[0].Name, m.Tools[0].Def.Name = "m.", "m."
			return m
		}, utcp.CodeInvalidManual},
		{"def_name_differs", func(m *registry.Manual) *registry.Manual { m.Tools[0].Def.Name = "m.other"; return m }, utcp.CodeInvalidManual},
		{"ok", func(m *registry.Manual) *registry.Manual { return m }, ""},
		{"no_tools", func(m *registry.Manual) *registry.Manual { m.Tools = nil; return m }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := registry.New()
			err := r.Add(tc.mutate(good()))
			if got := code(err); got != tc.want {
				t.Fatalf("Add: %v (code %q), want code %q", err, got, tc.want)
			}
			_, err = r.Replace(tc.mutate(good()))
			if got := code(err); got != tc.want {
				t.Fatalf("Replace: %v (code %q), want code %q", err, got, tc.want)
			}
			if tc.want != "" && (r.Len() != 0 || len(r.Manuals()) != 0) {
				t.Errorf("failed Add left %d tools, %d manuals", r.Len(), len(r.Manuals()))
			}
		})
	}
}

func TestAddDuplicateTools(t *testing.T) {
	r := registry.New()
	err := r.Add(manual("m", tools("a", "b", "a", "c", "b", "a")...))
	if code(err) != utcp.CodeInvalidManual {
		t.Fatalf("Add with duplicates: %v, want invalid_manual", err)
	}
	if d := cmp.Diff([]string{"m.a", "m.b"}, details(err)["duplicates"]); d != "" {
		t.Errorf("duplicates detail (-want +got):\n%s", d)
	}
	if r.Len() != 0 {
		t.Errorf("rejected manual registered %d tools", r.Len())
	}
	// The documented alternative: keep the first of each.
	m := manual("m", tools("a", "b", "a", "c")...)
	m.Tools, _ = registry.DropDuplicates(m.Tools)
	mustAdd(t, r, m)
	if d := cmp.Diff([]string{"m.a", "m.b", "m.c"}, toolNames(r.Tools())); d != "" {
		t.Errorf("Tools (-want +got):\n%s", d)
	}
}

func TestAddExists(t *testing.T) {
	r := registry.New()
	mustAdd(t, r, manual("m", tools("a")...))
	err := r.Add(manual("m", tools("b")...))
	if code(err) != utcp.CodeManualExists {
		t.Fatalf("second Add: %v, want manual_exists", err)
	}
	if d := cmp.Diff([]string{"m.a"}, toolNames(r.Tools())); d != "" {
		t.Errorf("Tools after refused Add (-want +got):\n%s", d)
	}
}

// fixture registers manuals whose names exercise every Resolve rule.
func fixture(t *testing.T) *registry.Registry {
	r := registry.New()
	mustAdd(t, r,
		manual("weather", tools("get_forecast", "get_current", "echo")...),
		manual("tools", tools("echo", "add")...),
		// MCP: manual.server.tool.
		manual("mcp", tools("github.create_issue", "fs.read_file", "fs.write.v2")...),
		// A manual named like an MCP server of another manual.
		manual("github", tools("list_repos")...),
		// A manual whose name is the short name of another tool.
		manual("add", tools("sum")...),
	)
	return r
}

func TestResolve(t *testing.T) {
	r := fixture(t)
	tests := []struct {
		name     string
		want     string    // resolved tool, "" for an error
		code     utcp.Code // expected error code
		details  string    // detail key to compare
		wantList []string  // expected detail value
	}{
		{name: "weather.get_forecast", want: "weather.get_forecast"},
		{name: "get_forecast", want: "weather.get_forecast"},
		{name: "add", want: "tools.add"}, // a manual called "add" does not make "add" qualified: no dot
		{name: "add.sum", want: "add.sum"},
		{name: "sum", want: "add.sum"},
		{name: "mcp.github.create_issue", want: "mcp.github.create_issue"},
		{name: "mcp.fs.write.v2", want: "mcp.fs.write.v2"},
		{name: "fs.read_file", want: "mcp.fs.read_file"}, // unqualified MCP short name
		{name: "fs.write.v2", want: "mcp.fs.write.v2"},
		{name: "list_repos", want: "github.list_repos"},
		{name: "echo", code: utcp.CodeAmbiguousTool, details: "candidates", wantList: []string{"tools.echo", "weather.echo"}},
		// Qualified by a registered manual: no fallback to short names, even
		// though mcp has a tool whose short name is exactly this.
		{name: "github.create_issue", code: utcp.CodeToolNotFound, details: "did_you_mean",
			wantList: []string{"mcp.github.create_issue"}},
		// Only the whole part after the manual is a short name.
		{name: "create_issue", code: utcp.CodeToolNotFound, details: "did_you_mean", wantList: []string{"mcp.github.create_issue"}},
		{name: "weather.get_forcast", code: utcp.CodeToolNotFound, details: "did_you_mean",
			wantList: []string{"weather.get_forecast", "weather.get_current", "weather.echo"}},
		{name: "get_forcast", code: utcp.CodeToolNotFound, details: "did_you_mean", wantList: []string{"weather.get_forecast", "weather.get_current"}},
		{name: "Weather.Get_Forecast", code: utcp.CodeToolNotFound, details: "did_you_mean",
			wantList: []string{"weather.get_forecast", "weather.get_current", "weather.echo"}},
		{name: "unknown.tool", code: utcp.CodeToolNotFound, details: "did_you_mean", wantList: []string{}},
		{name: "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz", code: utcp.CodeToolNotFound, details: "did_you_mean", wantList: []string{}},
		{name: "", code: utcp.CodeToolNotFound},
		{name: "weather.", code: utcp.CodeToolNotFound},
		{name: "weather", code: utcp.CodeToolNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := r.Resolve(tc.name)
			if tc.want != "" {
				if err != nil {
					t.Fatalf("Resolve(%q): %v", tc.name, err)
				}
				if tool.Name != tc.want {
					t.Fatalf("Resolve(%q) = %q, want %q", tc.name, tool.Name, tc.want)
				}
				return
			}
			if tool != nil {
				t.Errorf("Resolve(%q) returned tool %q with error", tc.name, tool.Name)
			}
			if code(err) != tc.code {
				t.Fatalf("Resolve(%q): %v (code %q), want code %q", tc.name, err, code(err), tc.code)
			}
			if tc.details != "" {
				if d := cmp.Diff(tc.wantList, details(err)[tc.details]); d != "" {
					t.Errorf("Details[%q] (-want +got):\n%s", tc.details, d)
				}
			}
		})
	}
}

func TestRemoveAndReplace(t *testing.T) {
	r := fixture(t)
	if _, err := r.Remove("nope"); code(err) != utcp.CodeManualNotFound {
		t.Fatalf("Remove(nope): %v, want manual_not_found", err)
	}
	old, err := r.Remove("tools")
	if err != nil || old.Name != "tools" {
		t.Fatalf("Remove(tools) = %v, %v", old, err)
	}
	// "echo" is no longer ambiguous; tools.add is gone so "add" is unknown.
	if tool, err := r.Resolve("echo"); err != nil || tool.Name != "weather.echo" {
		t.Errorf("Resolve(echo) after Remove = %v, %v", tool, err)
	}
	if _, err := r.Resolve("tools.add"); code(err) != utcp.CodeToolNotFound {
		t.Errorf("Resolve(tools.add) after Remove: %v", err)
	}
	if _, err := r.Resolve("add"); code(err) != utcp.CodeToolNotFound {
		t.Errorf("Resolve(add) after Remove: %v", err)
	}
	if _, ok := r.Manual("tools"); ok {
		t.Error("Manual(tools) still found")
	}

	// Replace an existing manual: new tools in, old ones out, returned.
	prev, _ := r.Manual("weather")
	got, err := r.Replace(manual("weather", tools("echo", "radar")...))
	if err != nil || got != prev {
		t.Fatalf("Replace(weather) = %v, %v; want the previous manual", got, err)
	}
	if _, err := r.Resolve("weather.get_forecast"); code(err) != utcp.CodeToolNotFound {
		t.Errorf("old tool resolves after Replace: %v", err)
	}
	if tool, err := r.Resolve("radar"); err != nil || tool.Name != "weather.radar" {
		t.Errorf("Resolve(radar) = %v, %v", tool, err)
	}
	// Replace of a new name registers it.
	if got, err := r.Replace(manual("fresh", tools("x")...)); err != nil || got != nil {
		t.Errorf("Replace(fresh) = %v, %v; want nil, nil", got, err)
	}
	want := []string{"add.sum", "fresh.x", "github.list_repos", "mcp.github.create_issue", "mcp.fs.read_file", "mcp.fs.write.v2", "weather.echo", "weather.radar"}
	if d := cmp.Diff(want, toolNames(r.Tools())); d != "" {
		t.Errorf("Tools (-want +got):\n%s", d)
	}
	if r.Len() != len(want) {
		t.Errorf("Len = %d, want %d", r.Len(), len(want))
	}
	var names []string
	for _, m := range r.Manuals() {
		names = append(names, m.Name)
	}
	if d := cmp.Diff([]string{"add", "fresh", "github", "mcp", "weather"}, names); d != "" {
		t.Errorf("Manuals (-want +got):\n%s", d)
	}
	// Everything removed: the registry is empty and reusable.
	for _, n := range names {
		if _, err := r.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	if r.Len() != 0 || len(r.Tools()) != 0 || len(r.Search("echo", 0, nil)) != 0 {
		t.Errorf("registry not empty: %d tools", r.Len())
	}
	mustAdd(t, r, manual("again", tools("echo")...))
	if tool, err := r.Resolve("echo"); err != nil || tool.Name != "again.echo" {
		t.Errorf("Resolve after re-adding = %v, %v", tool, err)
	}
}

func TestToolIdentity(t *testing.T) {
	r := registry.New()
	m := manual("m", tools("a")...)
	m.Tools[0].Ext = "compiled"
	mustAdd(t, r, m)
	tool, err := r.Resolve("m.a")
	if err != nil {
		t.Fatal(err)
	}
	if tool != m.Tools[0] || tool.Ext != "compiled" {
		t.Error("Resolve did not return the registered *Tool")
	}
	got, _ := r.Manual("m")
	if got != m {
		t.Error("Manual did not return the registered *Manual")
	}
}

func TestConcurrent(t *testing.T) {
	r := registry.New()
	mustAdd(t, r, manual("stable", def{name: "tool", desc: "always here", tags: []string{"keep"}}))
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 100)
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 200 {
				name := fmt.Sprintf("w%d_%d", w, i%5)
				m := manual(name, def{name: "tool", desc: "churning tool here", tags: []string{"churn"}}, def{name: "other"})
				switch i % 3 {
				case 0:
					_ = r.Add(m) // may exist
				case 1:
					if _, err := r.Replace(m); err != nil {
						errs <- err
					}
				case 2:
					_, _ = r.Remove(name) // may be absent
				}
			}
		}()
	}
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if tool, err := r.Resolve("stable.tool"); err != nil || tool.Name != "stable.tool" {
					errs <- fmt.Errorf("Resolve(stable.tool) = %v, %v", tool, err)
					return
				}
				_, _ = r.Resolve("tool") // ambiguous or not, never a race
				_, _ = r.Resolve("w0_1.tool")
				_, _ = r.Resolve("w0_1.nope") // miss path: suggestions
				if res := r.Search("here", 3, nil); len(res) == 0 {
					errs <- errors.New("Search returned nothing")
					return
				}
				if res := r.Search("", 0, []string{"keep"}); len(res) != 1 || res[0].Name != "stable.tool" {
					errs <- fmt.Errorf("Search by tag = %v", toolNames(res))
					return
				}
				_ = r.Tools()
				_ = r.Manuals()
				_ = r.Len()
			}
		}()
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Indexes are consistent after the churn: every tool resolves, and
	// search finds exactly the registered tools.
	all := r.Tools()
	if len(all) != r.Len() {
		t.Errorf("Tools has %d, Len %d", len(all), r.Len())
	}
	for _, tool := range all {
		if got, err := r.Resolve(tool.Name); err != nil || got != tool {
			t.Errorf("Resolve(%s) = %v, %v", tool.Name, got, err)
		}
	}
	if got := len(r.Search("", 0, nil)); got != len(all) {
		t.Errorf("Search('') returned %d tools, want %d", got, len(all))
	}
}
