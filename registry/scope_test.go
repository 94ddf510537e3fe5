package registry_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// randomRegistry registers a few manuals with short, colliding tool
// names (unqualified names ambiguous across manuals, MCP-like dotted
// ones, names with "/"), and returns its manuals' definitions too.
func randomRegistry(t *testing.T, rng *rand.Rand) (*registry.Registry, []*registry.Manual) {
	t.Helper()
	r := registry.New()
	words := []string{"add", "echo", "list", "repos/delete", "repos/list", "srv.add", "srv.echo", "get"}
	tags := []string{"math", "admin", "read"}
	var ms []*registry.Manual
	for i := range 1 + rng.IntN(5) {
		name := []string{"demo", "github", "m", "other", "demo2"}[i]
		var defs []def
		seen := map[string]bool{}
		for range rng.IntN(6) {
			w := words[rng.IntN(len(words))]
			if seen[w] {
				continue
			}
			seen[w] = true
			var tg []string
			if rng.IntN(2) == 0 {
				tg = append(tg, tags[rng.IntN(len(tags))])
			}
			defs = append(defs, def{name: w, desc: "does " + w + " things", tags: tg})
		}
		m := manual(name, defs...)
		mustAdd(t, r, m)
		ms = append(ms, m)
	}
	return r, ms
}

// randomScope draws tool globs (inclusions and exclusions), manuals and
// tags; sometimes none of them (every tool).
func randomScope(t *testing.T, rng *rand.Rand) *gateway.Scope {
	t.Helper()
	globs := []string{"demo.*", "github.*", "!github.repos/delete", "*.add", "!*.srv.*", "m.srv.*", "*", "!demo.echo", "?.*", "github.repos/*", "other.get", "!demo.*", "!*", "dem*", "m.*", "*.srv.add", "!gith*"}
	var tools, manuals, tags []string
	for range rng.IntN(4) {
		tools = append(tools, globs[rng.IntN(len(globs))])
	}
	if rng.IntN(4) == 0 {
		manuals = append(manuals, []string{"demo", "github", "m"}[rng.IntN(3)])
	}
	if rng.IntN(5) == 0 {
		tags = append(tags, []string{"math", "READ"}[rng.IntN(2)])
	}
	sc, err := gateway.NewScope(tools, manuals, tags)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// within is the registry as a scope sees it: the same manuals, in the
// same order, holding only the tools sc allows (a manual left without
// tools is not registered).
func within(t *testing.T, ms []*registry.Manual, sc *gateway.Scope) *registry.Registry {
	t.Helper()
	r := registry.New()
	for _, m := range ms {
		var keep []*registry.Tool
		for _, tl := range m.Tools {
			if sc.Allows(tl.Def) {
				keep = append(keep, tl)
			}
		}
		if len(keep) > 0 {
			mustAdd(t, r, &registry.Manual{Name: m.Name, Source: m.Source, Tools: keep})
		}
	}
	return r
}

// answer is a resolution's outcome as a front shows it: the tool's name,
// or the error's code, message and details.
func answer(tl *registry.Tool, err error) string {
	if err == nil {
		return "ok " + tl.Name
	}
	var ue *utcp.Error
	if !asUTCP(err, &ue) {
		return "error " + err.Error()
	}
	b, _ := json.Marshal(map[string]any{"code": ue.Code, "message": ue.Message, "details": ue.Details})
	return string(b)
}

func asUTCP(err error, out **utcp.Error) bool {
	e, ok := err.(*utcp.Error)
	*out = e
	return ok
}

// TestNamedKeyScopeProperty: for random scopes over random registries,
// listing and calling agree (every listed tool resolves, every tool that
// resolves is listed: listing ⊇ callable and callable ⊇ listing), and
// the scoped registry answers every name, listed, hidden, unqualified or
// unknown, exactly as a registry holding only the scope's tools would:
// a hidden tool's refusal is byte for byte a missing tool's, its
// suggestions included, and search ranks as if the others were not there.
func TestNamedKeyScopeProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 1))
	for iter := range 400 {
		r, ms := randomRegistry(t, rng)
		sc := randomScope(t, rng)
		if rng.IntN(3) == 0 {
			sc = sc.Narrow(randomScope(t, rng)) // a key's scope narrowed by a toolset
		}
		small := within(t, ms, sc)
		listed := map[string]bool{}
		for _, tl := range r.ToolsIn(sc) {
			listed[tl.Name] = true
		}
		if diff := cmp.Diff(toolNames(small.Tools()), toolNames(r.ToolsIn(sc))); diff != "" {
			t.Fatalf("#%d %v: listing (-within +scoped):\n%s", iter, sc, diff)
		}
		// MayAllowManual never rules out a manual with a tool in scope.
		for _, m := range ms {
			for _, tl := range m.Tools {
				if sc.Allows(tl.Def) && !sc.MayAllowManual(m.Name) {
					t.Fatalf("#%d %v: %s is allowed, but its manual is ruled out", iter, sc, tl.Name)
				}
			}
		}
		var names []string
		for _, tl := range r.Tools() {
			names = append(names, tl.Name, tl.ShortName())
			callable := false
			if got, err := r.ResolveIn(sc, tl.Name); err == nil {
				callable = got == tl
			}
			if callable != listed[tl.Name] {
				t.Fatalf("#%d %v: %s listed %v, callable %v", iter, sc, tl.Name, listed[tl.Name], callable)
			}
		}
		names = append(names, "demo.nope", "nope", "github.repos/deleted", "srv.ad", "ghost.add", "", "demo")
		for _, n := range names {
			want, got := answer(small.Resolve(n)), answer(r.ResolveIn(sc, n))
			if got != want {
				t.Fatalf("#%d %v: %q:\n got %s\nwant %s", iter, sc, n, got, want)
			}
		}
		for _, q := range []string{"", "add things", "math", "repos list"} {
			for _, limit := range []int{0, 1, 3} {
				want, got := toolNames(small.Search(q, limit, nil)), toolNames(r.SearchIn(sc, q, limit, nil))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("#%d %v: search %q limit %d (-within +scoped):\n%s", iter, sc, q, limit, diff)
				}
			}
			want, got := toolNames(small.Search(q, 0, []string{"read"})), toolNames(r.SearchIn(sc, q, 0, []string{"read"}))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("#%d %v: search %q by tag (-within +scoped):\n%s", iter, sc, q, diff)
			}
		}
	}
}

// TestNamedKeyResolveInUnique: a name ambiguous in the whole registry
// resolves within a scope that holds one of its tools, and a nil scope
// is Resolve.
func TestNamedKeyResolveInUnique(t *testing.T) {
	r := registry.New()
	mustAdd(t, r, manual("a", tools("add")...), manual("b", tools("add")...))
	if _, err := r.Resolve("add"); code(err) != utcp.CodeAmbiguousTool {
		t.Fatalf("unscoped: %v", err)
	}
	sc, _ := gateway.NewScope([]string{"b.*"}, nil, nil)
	got, err := r.ResolveIn(sc, "add")
	if err != nil || got.Name != "b.add" {
		t.Fatalf("scoped: %v %v", got, err)
	}
	if _, err := r.ResolveIn(nil, "add"); code(err) != utcp.CodeAmbiguousTool {
		t.Fatalf("nil scope: %v", err)
	}
	// The hidden a.add is not suggested for a miss.
	_, err = r.ResolveIn(sc, "a.ad")
	if fmt.Sprint(details(err)["did_you_mean"]) != "[b.add]" {
		t.Errorf("suggestions %v", details(err))
	}
}

// BenchmarkResolveIn resolves within a scope over the 100k-tool corpus
// (globs "manual_05*" and "!*.get_3": about 9,900 tools in scope): a
// hit, an unqualified name ambiguous in the registry, a miss (with its
// suggestions drawn from the scope), and a listing and search.
func BenchmarkResolveIn(b *testing.B) {
	r := buildRegistry(b, loadCorpus())
	sc, err := gateway.NewScope([]string{"manual_05*", "!*.get_3"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, tool string
		want       utcp.Code
	}{
		{"qualified", "manual_0500.list_0", ""},
		{"hidden", "manual_0500.get_3", utcp.CodeToolNotFound},
		{"outside_manual", "manual_0100.get_3", utcp.CodeToolNotFound},
		{"miss_with_suggestions", "manual_0500.get_x3", utcp.CodeToolNotFound},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := r.ResolveIn(sc, c.tool); utcp.CodeOf(err) != c.want {
					b.Fatalf("ResolveIn(%s): %v", c.tool, err)
				}
			}
		})
	}
	b.Run("tools_in", func(b *testing.B) {
		for range b.N {
			if n := len(r.ToolsIn(sc)); n == 0 {
				b.Fatal("no tool in scope")
			}
		}
	})
	b.Run("search_in", func(b *testing.B) {
		for range b.N {
			_ = r.SearchIn(sc, "list the things", 10, nil)
		}
	})
}
