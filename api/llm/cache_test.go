package llm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/api/llm"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/text"
	"github.com/utcpd/utcpd/utcp"
)

// variants are the distinct renderings of a tool.
var variants = []struct {
	p      llm.Provider
	strict bool
}{{llm.OpenAI, false}, {llm.OpenAI, true}, {llm.Anthropic, false}, {llm.Gemini, false}}

// cold is the uncached export of tools named over all.
func cold(t *testing.T, p llm.Provider, tools, all []*utcp.Tool, strict bool) []byte {
	t.Helper()
	qs := make([]string, len(all))
	for i, tl := range all {
		qs[i] = tl.Name
	}
	out, err := llm.Export(p, tools, llm.NewNames(qs), llm.ExportOptions{Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cached(t *testing.T, c *llm.Cache, p llm.Provider, tools, all []*utcp.Tool, strict bool) []byte {
	t.Helper()
	out, err := c.Export(p, tools, all, llm.ExportOptions{Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The cached exports, the first (rendering) and the following (from the
// cache), are byte for byte the uncached ones, for the whole set and for a
// selection of it; enough tools to take the parallel path.
func TestCacheSameBytes(t *testing.T) {
	all := append(testTools(), benchTools(700)...)
	subset := []*utcp.Tool{all[len(all)-1], all[3], all[0]}
	var c llm.Cache
	for _, v := range variants {
		want := cold(t, v.p, all, all, v.strict)
		wantSub := cold(t, v.p, subset, all, v.strict)
		for round := range 3 {
			if got := cached(t, &c, v.p, all, all, v.strict); !bytes.Equal(got, want) {
				t.Fatalf("%s strict=%v round %d: cached export differs from the cold one:\n got %.300s\nwant %.300s", v.p, v.strict, round, got, want)
			}
			if got := cached(t, &c, v.p, subset, all, v.strict); !bytes.Equal(got, wantSub) {
				t.Fatalf("%s strict=%v round %d: cached selection differs:\n got %s\nwant %s", v.p, v.strict, round, got, wantSub)
			}
		}
	}
	// A tool outside the set is rendered (not kept), named by FunctionName.
	extra := &utcp.Tool{Name: "other.tool", Description: "Outside.", Inputs: json.RawMessage(`{"type":"object","properties":{"z":{"type":"string"}}}`)}
	for _, v := range variants {
		want := cold(t, v.p, []*utcp.Tool{extra, all[0]}, all, v.strict)
		if got := cached(t, &c, v.p, []*utcp.Tool{extra, all[0]}, all, v.strict); !bytes.Equal(got, want) {
			t.Errorf("%s strict=%v: a tool outside the set: got %s\nwant %s", v.p, v.strict, got, want)
		}
	}
	// The name mapping is the one of the set.
	n := c.Names(all)
	for _, tl := range all {
		if q, ok := n.Qualified(n.Provider(tl.Name)); !ok || q != tl.Name {
			t.Errorf("%s does not map back: %q, %v", tl.Name, q, ok)
		}
	}
	// An empty set.
	for _, v := range variants {
		want := cold(t, v.p, nil, nil, v.strict)
		if got := cached(t, &c, v.p, nil, nil, v.strict); !bytes.Equal(got, want) {
			t.Errorf("%s: empty export %s, want %s", v.p, got, want)
		}
	}
}

// A tool replaced by one of the same name with another schema and
// description (a new pointer, as the registry hands out) is rendered
// again; the others keep their renderings; going back to the first set
// gives its bytes again.
func TestCacheReplacedTool(t *testing.T) {
	first := testTools()
	var c llm.Cache
	for _, v := range variants {
		cached(t, &c, v.p, first, first, v.strict)
	}
	i := slices.IndexFunc(first, func(tl *utcp.Tool) bool { return tl.Name == "weather.forecast" })
	second := slices.Clone(first)
	second[i] = &utcp.Tool{Name: "weather.forecast", Description: "Replaced tool.", Inputs: json.RawMessage(`{"type":"object","properties":{"replaced_prop":{"type":"string","minLength":2}},"required":["replaced_prop"]}`)}
	for _, v := range variants {
		got := cached(t, &c, v.p, second, second, v.strict)
		if want := cold(t, v.p, second, second, v.strict); !bytes.Equal(got, want) {
			t.Errorf("%s strict=%v: after the replacement:\n got %s\nwant %s", v.p, v.strict, got, want)
		}
		if !bytes.Contains(got, []byte("replaced_prop")) || !bytes.Contains(got, []byte("Replaced tool.")) || bytes.Contains(got, []byte("Forecast for a city.")) {
			t.Errorf("%s strict=%v: the replaced tool was not rendered again: %s", v.p, v.strict, got)
		}
	}
	for _, v := range variants {
		if got, want := cached(t, &c, v.p, first, first, v.strict), cold(t, v.p, first, first, v.strict); !bytes.Equal(got, want) {
			t.Errorf("%s strict=%v: back to the first set:\n got %s\nwant %s", v.p, v.strict, got, want)
		}
	}
	// A removed tool is gone from the export, and a bad schema stays an
	// error on every call.
	third := slices.Delete(slices.Clone(first), i, i+1)
	bad := append(slices.Clone(third), &utcp.Tool{Name: "m.bad", Inputs: json.RawMessage(`[1]`)})
	for _, v := range variants {
		if got := cached(t, &c, v.p, third, third, v.strict); bytes.Contains(got, []byte("weather__forecast")) {
			t.Errorf("%s: removed tool still exported", v.p)
		}
		for range 2 {
			if _, err := c.Export(v.p, bad, bad, llm.ExportOptions{Strict: v.strict}); err == nil || !strings.Contains(err.Error(), "m.bad") {
				t.Errorf("%s strict=%v: bad schema: err %v", v.p, v.strict, err)
			}
		}
	}
	if _, err := c.Export("mistral", third, third, llm.ExportOptions{}); err == nil {
		t.Error("unknown provider accepted")
	}
}

// collidingA and collidingB share the first 32 bits of SHA-256 and the
// same plain rendering, so they get the same 8-digit hashed name.
const (
	collidingA = "m.t?/??///?/?/?//?/????"
	collidingB = "m.t/?/??////?/?/?//????"
)

// A tool keeps its pointer but its function name changes with the set (a
// colliding name registered before it): it is rendered again with the new
// name, and calls of that name find it.
func TestCacheNameChange(t *testing.T) {
	if llm.FunctionName(collidingA) != llm.FunctionName(collidingB) {
		t.Fatalf("the fixture names no longer collide: %s %s", llm.FunctionName(collidingA), llm.FunctionName(collidingB))
	}
	a := &utcp.Tool{Name: collidingA, Description: "A.", Inputs: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`)}
	b := &utcp.Tool{Name: collidingB, Description: "B.", Inputs: json.RawMessage(`{"type":"object","properties":{"y":{"type":"string"}}}`)}
	var c llm.Cache
	one := []*utcp.Tool{a}
	both := []*utcp.Tool{b, a}
	for _, v := range variants {
		before := cached(t, &c, v.p, one, one, v.strict)
		if !bytes.Contains(before, []byte(`"`+llm.FunctionName(collidingA)+`"`)) {
			t.Fatalf("%s: a alone is not named %s: %s", v.p, llm.FunctionName(collidingA), before)
		}
		after := cached(t, &c, v.p, both, both, v.strict)
		if want := cold(t, v.p, both, both, v.strict); !bytes.Equal(after, want) {
			t.Errorf("%s strict=%v: after the collision:\n got %s\nwant %s", v.p, v.strict, after, want)
		}
		nameA := c.Names(both).Provider(collidingA)
		if nameA == llm.FunctionName(collidingA) || !bytes.Contains(after, []byte(`"`+nameA+`"`)) {
			t.Errorf("%s: a kept its old name: %s", v.p, after)
		}
		if q, ok := c.Names(both).Qualified(nameA); !ok || q != collidingA {
			t.Errorf("Qualified(%s) = %q, %v", nameA, q, ok)
		}
		// And back: a alone gets its short name again.
		if got := cached(t, &c, v.p, one, one, v.strict); !bytes.Equal(got, before) {
			t.Errorf("%s: a alone again:\n got %s\nwant %s", v.p, got, before)
		}
	}
}

// Concurrent exports of every variant over alternating sets all give the
// uncached bytes (run with -race).
func TestCacheConcurrent(t *testing.T) {
	first := append(testTools(), benchTools(300)...)
	second := slices.Clone(first)
	second[0] = &utcp.Tool{Name: first[0].Name, Description: "Changed.", Inputs: json.RawMessage(`{"type":"object","properties":{"w":{"type":"number"}}}`)}
	second = second[:len(second)-5]
	sets := [][]*utcp.Tool{first, second}
	want := map[string][]byte{}
	for si, set := range sets {
		for _, v := range variants {
			want[fmt.Sprint(si, v.p, v.strict)] = cold(t, v.p, set, set, v.strict)
		}
	}
	var c llm.Cache
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 12 {
				si := (w + i) % 2
				v := variants[(w+i)%len(variants)]
				out, err := c.Export(v.p, sets[si], sets[si], llm.ExportOptions{Strict: v.strict})
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(out, want[fmt.Sprint(si, v.p, v.strict)]) {
					t.Errorf("worker %d: set %d %s strict=%v differs from the cold export", w, si, v.p, v.strict)
				}
			}
		})
	}
	wg.Wait()
}

// The export route serves from the Handler's cache: after the manual is
// replaced with a changed schema, the route shows the new tool, with the
// bytes of the one-off ExportTools; after it is removed, the tool is gone.
func TestExportRouteAfterChange(t *testing.T) {
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	register := func(schema string, replace bool) {
		t.Helper()
		content := `{"utcp_version":"1.1.0","manual_version":"1","tools":[
		 {"name":"doc","description":"Returns text.","inputs":` + schema + `,"tool_call_template":{"call_template_type":"text","content":"hi"}},
		 {"name":"other","description":"Other.","inputs":{"type":"object","properties":{"n":{"type":"integer"}}},"tool_call_template":{"call_template_type":"text","content":"x"}}]}`
		raw, _ := json.Marshal(map[string]any{"name": "m", "call_template_type": "text", "content": content})
		if _, err := g.RegisterManual(t.Context(), raw, gateway.RegisterOptions{Replace: replace}); err != nil {
			t.Fatal(err)
		}
	}
	register(`{"type":"object","properties":{"first_prop":{"type":"string"}}}`, false)
	rt := httpx.NewRouter()
	llm.New(llm.Options{Gateway: g}).Register(rt, nil)
	hs := httptest.NewServer(rt)
	t.Cleanup(hs.Close)
	e := &env{url: hs.URL}
	check := func(present, absent string) {
		t.Helper()
		for _, v := range variants {
			q := llm.ExportQuery{Options: llm.ExportOptions{Strict: v.strict}}
			want, err := llm.ExportTools(t.Context(), g, v.p, q)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				st, body := e.do(t, "GET", fmt.Sprintf("/v1/export/%s?strict=%v", v.p, v.strict), "", "")
				if st != 200 || !bytes.Equal(body, want) {
					t.Fatalf("%s strict=%v: %d %s\nwant %s", v.p, v.strict, st, body, want)
				}
				if present != "" && !bytes.Contains(body, []byte(present)) || absent != "" && bytes.Contains(body, []byte(absent)) {
					t.Errorf("%s strict=%v: want %q and not %q in %s", v.p, v.strict, present, absent, body)
				}
			}
		}
	}
	check("first_prop", "second_prop")
	register(`{"type":"object","properties":{"second_prop":{"type":"boolean"}},"required":["second_prop"]}`, true)
	check("second_prop", "first_prop")
	if err := g.DeregisterManual(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	check("", "m__doc")
}

// BenchmarkExport10kCached is the steady state of repeated polling: the
// same 10,000 tools exported again through a warm Cache.
func BenchmarkExport10kCached(b *testing.B) {
	tools := benchTools(10000)
	for _, v := range variants {
		b.Run(fmt.Sprintf("%s/strict=%v", v.p, v.strict), func(b *testing.B) {
			var c llm.Cache
			opts := llm.ExportOptions{Strict: v.strict}
			if _, err := c.Export(v.p, tools, tools, opts); err != nil {
				b.Fatal(err)
			}
			var out json.RawMessage
			for b.Loop() {
				var err error
				if out, err = c.Export(v.p, tools, tools, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes/export")
		})
	}
}

// BenchmarkExport10kAfterChange is the first export after a change of the
// set: one of the 10,000 tools replaced (a new pointer) before every
// export, so the name mapping is computed again and that tool rendered.
func BenchmarkExport10kAfterChange(b *testing.B) {
	tools := benchTools(10000)
	for _, v := range variants {
		b.Run(fmt.Sprintf("%s/strict=%v", v.p, v.strict), func(b *testing.B) {
			var c llm.Cache
			opts := llm.ExportOptions{Strict: v.strict}
			set := slices.Clone(tools)
			if _, err := c.Export(v.p, set, set, opts); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i = (i + 1) % len(set)
				d := *set[i]
				set[i] = &d
				if _, err := c.Export(v.p, set, set, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestExportPiecesSameBytes: the streamed export (what GET /v1/export
// writes) is byte for byte the uncached export, with the length it
// announces, for every variant, the whole set, a selection and no tools.
func TestExportPiecesSameBytes(t *testing.T) {
	all := append(testTools(), benchTools(700)...)
	var c llm.Cache
	for _, v := range variants {
		for _, sel := range [][]*utcp.Tool{all, {all[5], all[0]}, nil} {
			want := cold(t, v.p, sel, all, v.strict)
			for round := range 2 {
				n, write, err := c.ExportPieces(v.p, sel, all, llm.ExportOptions{Strict: v.strict})
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				write(&got)
				if !bytes.Equal(got.Bytes(), want) || n != len(want) {
					t.Fatalf("%s strict=%v round %d (%d tools): streamed %d bytes (announced %d), want %d:\n got %.300s\nwant %.300s",
						v.p, v.strict, round, len(sel), got.Len(), n, len(want), got.Bytes(), want)
				}
			}
		}
	}
}

// TestNamedKeyCacheKeepsSeveralSets: exports alternating between the tool
// sets of two API key scopes keep both sets' mappings (the same *Names
// each time, no rebuild) and give each set's cold bytes; a ninth set
// pushes out the oldest.
func TestNamedKeyCacheKeepsSeveralSets(t *testing.T) {
	all := append(testTools(), benchTools(50)...)
	a, b := all[:20], all[10:]
	var c llm.Cache
	na, nb := c.Names(a), c.Names(b)
	for round := range 3 {
		if c.Names(a) != na || c.Names(b) != nb {
			t.Fatalf("round %d: a set's mapping was rebuilt", round)
		}
		for _, v := range variants {
			for _, set := range [][]*utcp.Tool{a, b} {
				if got, want := cached(t, &c, v.p, set, set, v.strict), cold(t, v.p, set, set, v.strict); !bytes.Equal(got, want) {
					t.Fatalf("%s strict=%v round %d: cached export differs from the cold one", v.p, v.strict, round)
				}
			}
		}
	}
	for i := range 8 {
		c.Names(all[i : i+30])
	}
	if c.Names(a) == na {
		t.Error("nine sets are kept")
	}
}
