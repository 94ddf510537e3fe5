package registry_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
)

// searchFixture: scores below are computed by hand with python-utcp's
// algorithm (tag weight 3, description weight 1).
func searchFixture(t *testing.T, opts ...registry.Option) *registry.Registry {
	r := registry.New(opts...)
	mustAdd(t, r,
		manual("m",
			def{"weather", "Get the current weather for a city", []string{"weather", "api"}},
			def{"forecast", "Weather forecast for the next days", []string{"Weather Forecast"}},
			def{"calc", "Add two numbers", []string{"math"}},
		),
		manual("n",
			def{"echo", "Echo the input back", []string{"test", "Debug Tools"}},
			def{"noop", "", nil},
		),
	)
	return r
}

func TestSearch(t *testing.T) {
	all := []string{"m.weather", "m.forecast", "m.calc", "n.echo", "n.noop"}
	tests := []struct {
		name  string
		query string
		limit int
		tags  []string
		want  []string
	}{
		// weather: tag "weather" is a substring (+3), desc "weather" (+1) = 4.
		// forecast: tag "weather forecast" not a substring, but its word
		// "weather" is a query word (+3), desc "weather" (+1) = 4.
		// Tie: registration order. Zero scores follow in registration order.
		{"tag_substring_and_word", "weather in Berlin", 0, nil, all},
		// echo: tag "debug tools" is a substring of the query (+3).
		{"multiword_tag_substring", "Debug tools please", 0, nil, []string{"n.echo", "m.weather", "m.forecast", "m.calc", "n.noop"}},
		// calc: tag math (+3), desc add (+1), numbers (+1) = 5; echo: tag test (+3).
		{"mixed", "a math test: add numbers", 0, nil, []string{"m.calc", "n.echo", "m.weather", "m.forecast", "n.noop"}},
		// Substring, not word: "api" is inside "rapid" (+3 for weather).
		// Substring, not word: "api" is inside "rapid" (+3 for weather, as
		// much as calc's "math"; registration order breaks the tie).
		{"substring_inside_word", "rapid math", 2, nil, []string{"m.weather", "m.calc"}},
		// Description words must be longer than 2 characters; "for" and
		// "the" count: weather 2, forecast 2, echo 1 ("the").
		{"short_words", "for the", 0, nil, []string{"m.weather", "m.forecast", "n.echo", "m.calc", "n.noop"}},
		{"two_letter_words_ignored", "a to of", 0, nil, all},
		// Distinct description words count once, however often the query or
		// the description repeats them ("echo" is in the description once
		// and in the query twice; desc words: echo, the, input, back).
		{"distinct_words", "echo echo ECHO back", 0, nil, []string{"n.echo", "m.weather", "m.forecast", "m.calc", "n.noop"}},
		// Punctuation separates words; case is ignored.
		{"punctuation", "CITY,weather!!!", 1, nil, []string{"m.weather"}},
		{"empty_query", "", 0, nil, all},
		{"no_match", "zzz", 0, nil, all},
		{"limit", "weather", 1, nil, []string{"m.weather"}},
		{"limit_above_count", "weather", 50, nil, all},
		{"limit_zero_is_unlimited", "", 0, nil, all},
		{"limit_negative_is_unlimited", "", -1, nil, all},
		{"limit_into_zero_scores", "math", 3, nil, []string{"m.calc", "m.weather", "m.forecast"}},
		// any_of_tags_required: case-insensitive exact tag match.
		{"tag_filter", "", 0, []string{"WEATHER"}, []string{"m.weather"}},
		{"tag_filter_any_of", "", 0, []string{"math", "Test"}, []string{"m.calc", "n.echo"}},
		{"tag_filter_multiword", "", 0, []string{"weather forecast"}, []string{"m.forecast"}},
		{"tag_filter_ranks", "echo", 0, []string{"math", "test"}, []string{"n.echo", "m.calc"}},
		{"tag_filter_limit", "", 1, []string{"math", "test"}, []string{"m.calc"}},
		{"tag_filter_excludes_scored", "add numbers weather", 0, []string{"test"}, []string{"n.echo"}},
		{"tag_filter_unknown", "weather", 0, []string{"nope"}, []string{}},
		{"tag_filter_partly_unknown", "", 0, []string{"nope", "api"}, []string{"m.weather"}},
	}
	r := searchFixture(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toolNames(r.Search(tc.query, tc.limit, tc.tags))
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Search(%q, %d, %q) (-want +got):\n%s", tc.query, tc.limit, tc.tags, d)
			}
		})
	}
}

func TestSearchWeights(t *testing.T) {
	// Tag weight 1, description weight 5: forecast (tag word 1 + desc
	// "weather", "forecast" 10 = 11) beats weather (tag 1 + desc 5 = 6).
	r := searchFixture(t, registry.WithSearchWeights(1, 5))
	got := toolNames(r.Search("weather forecast", 2, nil))
	if d := cmp.Diff([]string{"m.forecast", "m.weather"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// Zero weights: everything scores zero, registration order.
	r = searchFixture(t, registry.WithSearchWeights(0, 0))
	got = toolNames(r.Search("debug tools math", 0, nil))
	if d := cmp.Diff([]string{"m.weather", "m.forecast", "m.calc", "n.echo", "n.noop"}, got); d != "" {
		t.Errorf("zero weights (-want +got):\n%s", d)
	}
	for _, w := range [][2]float64{{-1, 1}, {1, -1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New with weights %v did not panic", w)
				}
			}()
			registry.New(registry.WithSearchWeights(w[0], w[1]))
		}()
	}
}

func TestSearchQuirks(t *testing.T) {
	r := registry.New()
	mustAdd(t, r,
		manual("q",
			def{"plain", "", nil},
			// Each tag entry scores, duplicates included (python iterates the
			// list): "x" and "X" both match → 6.
			def{"dup_tags", "", []string{"x", "X"}},
			// An empty tag is a substring of every query → 3, always.
			def{"empty_tag", "", []string{""}},
			// Unicode words and case folding.
			def{"unicode", "Übersetze Text ins Deutsche", []string{"Sprache"}},
			// A tag with several words scores once even if several match.
			def{"multi", "", []string{"alpha beta"}},
			// Two-character words do not count, in characters not bytes
			// ("éé" is 4 bytes); three-character ones do ("ééé").
			def{"short_unicode", "éé ééé", nil},
		),
	)
	tests := []struct {
		query string
		limit int
		want  []string
	}{
		{"x", 2, []string{"q.dup_tags", "q.empty_tag"}},
		{"", 1, []string{"q.empty_tag"}},
		{"ÜBERSETZE", 2, []string{"q.empty_tag", "q.unicode"}},         // 3 vs 1
		{"sprache übersetze", 2, []string{"q.unicode", "q.empty_tag"}}, // 4 vs 3
		{"beta alpha", 1, []string{"q.empty_tag"}},                     // multi 3 = empty_tag 3: registration order
		{"beta alpha x", 3, []string{"q.dup_tags", "q.empty_tag", "q.multi"}},
		{"éé", 2, []string{"q.empty_tag", "q.plain"}},
		{"ÉÉÉ", 2, []string{"q.empty_tag", "q.short_unicode"}},
	}
	for _, tc := range tests {
		got := toolNames(r.Search(tc.query, tc.limit, nil))
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("Search(%q, %d) (-want +got):\n%s", tc.query, tc.limit, d)
		}
	}
}

func TestSearchRegistrationOrder(t *testing.T) {
	r := registry.New()
	d := def{name: "t", desc: "same words", tags: []string{"same"}}
	mustAdd(t, r, manual("z", d), manual("a", d), manual("m", d))
	want := []string{"z.t", "a.t", "m.t"}
	if got := toolNames(r.Search("same", 0, nil)); !slices.Equal(got, want) {
		t.Errorf("ties = %v, want registration order %v", got, want)
	}
	// Replace keeps a manual's place; Remove + Add moves it last.
	if _, err := r.Replace(manual("z", d)); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(r.Search("same", 0, nil)); !slices.Equal(got, want) {
		t.Errorf("after Replace = %v, want %v", got, want)
	}
	if _, err := r.Remove("z"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, r, manual("z", d))
	want = []string{"a.t", "m.t", "z.t"}
	if got := toolNames(r.Search("same", 0, nil)); !slices.Equal(got, want) {
		t.Errorf("after Remove+Add = %v, want %v", got, want)
	}
	if got := toolNames(r.Search("nothing", 2, nil)); !slices.Equal(got, want[:2]) {
		t.Errorf("zero scores = %v, want %v", got, want[:2])
	}
}

// pyWord is Python's \w+ for the characters the fixtures use.
var pyWord = regexp.MustCompile(`[\p{L}\p{N}_]+`)

// referenceSearch is a direct port of python-utcp's
// TagAndDescriptionWordMatchStrategy.search_tools, over tools in
// registration order, with limit <= 0 meaning no limit.
func referenceSearch(tools []*registry.Tool, query string, limit int, anyOf []string, tw, dw float64) []string {
	ql := strings.ToLower(query)
	qwords := map[string]bool{}
	for _, w := range pyWord.FindAllString(ql, -1) {
		qwords[w] = true
	}
	if len(anyOf) > 0 {
		req := map[string]bool{}
		for _, t := range anyOf {
			req[strings.ToLower(t)] = true
		}
		var kept []*registry.Tool
		for _, tool := range tools {
			if slices.ContainsFunc(tool.Def.Tags, func(t string) bool { return req[strings.ToLower(t)] }) {
				kept = append(kept, tool)
			}
		}
		tools = kept
	}
	type ts struct {
		name  string
		score float64
	}
	var scored []ts
	for _, tool := range tools {
		var tagHits, descHits int
		for _, tag := range tool.Def.Tags {
			tl := strings.ToLower(tag)
			if strings.Contains(ql, tl) {
				tagHits++
				continue
			}
			for _, w := range pyWord.FindAllString(tl, -1) {
				if qwords[w] {
					tagHits++
					break
				}
			}
		}
		seen := map[string]bool{}
		for _, w := range pyWord.FindAllString(strings.ToLower(tool.Def.Description), -1) {
			if !seen[w] && qwords[w] && utf8.RuneCountInString(w) > 2 {
				descHits++
			}
			seen[w] = true
		}
		scored = append(scored, ts{tool.Name, tw*float64(tagHits) + dw*float64(descHits)})
	}
	slices.SortStableFunc(scored, func(a, b ts) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	out := []string{}
	for _, s := range scored {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, s.name)
	}
	return out
}

// TestSearchMatchesReference compares Search with the direct port on
// random registries and queries, including removals (slot reuse) and
// replacements.
func TestSearchMatchesReference(t *testing.T) {
	vocab := []string{"get", "set", "the", "weather", "forecast", "city", "api", "user", "list", "create", "delete",
		"file", "read", "write", "a", "of", "to", "Data", "data-set", "ünï", "x_y", "42", "search", "index"}
	tagVocab := []string{"api", "weather", "Files", "data set", "x", "read write", "search", "ünï", "", "get-data"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(list []string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = list[rng.IntN(len(list))]
		}
		return out
	}
	for round := range 20 {
		r := registry.New()
		var order []string // manual registration order
		byName := map[string]*registry.Manual{}
		newManual := func(name string) *registry.Manual {
			var defs []def
			for i := range rng.IntN(8) {
				defs = append(defs, def{
					name: fmt.Sprintf("t%d", i),
					desc: strings.Join(pick(vocab, rng.IntN(10)), pick([]string{" ", ", ", ". "}, 1)[0]),
					tags: pick(tagVocab, rng.IntN(4)),
				})
			}
			return manual(name, defs...)
		}
		for i := range 12 {
			name := fmt.Sprintf("m%02d", (i*7)%12)
			m := newManual(name)
			mustAdd(t, r, m)
			order = append(order, name)
			byName[name] = m
		}
		for range 4 { // churn: remove, replace in place, re-add at the end
			victim := order[rng.IntN(len(order))]
			switch rng.IntN(2) {
			case 0:
				if _, err := r.Remove(victim); err != nil {
					t.Fatal(err)
				}
				order = slices.DeleteFunc(order, func(s string) bool { return s == victim })
				m := newManual(victim)
				mustAdd(t, r, m)
				order = append(order, victim)
				byName[victim] = m
			case 1:
				m := newManual(victim)
				if _, err := r.Replace(m); err != nil {
					t.Fatal(err)
				}
				byName[victim] = m
			}
		}
		var regOrder []*registry.Tool
		for _, n := range order {
			regOrder = append(regOrder, byName[n].Tools...)
		}
		for q := range 40 {
			query := strings.Join(pick(vocab, rng.IntN(5)), pick([]string{" ", ",", "-"}, 1)[0])
			if q%7 == 0 {
				query = strings.ToUpper(query)
			}
			limit := []int{0, 1, 3, 10}[rng.IntN(4)]
			var tags []string
			if rng.IntN(3) == 0 {
				tags = pick(tagVocab, 1+rng.IntN(2))
				if rng.IntN(2) == 0 {
					tags[0] = strings.ToUpper(tags[0])
				}
			}
			want := referenceSearch(regOrder, query, limit, tags, registry.DefaultTagWeight, registry.DefaultDescriptionWeight)
			got := toolNames(r.Search(query, limit, tags))
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("round %d: Search(%q, %d, %q) differs from the python port (-want +got):\n%s", round, query, limit, tags, d)
			}
		}
	}
}

// A long query switches substringTags to scanning; a short one to
// enumerating substrings. Both must agree with the reference.
func TestSearchSubstringStrategies(t *testing.T) {
	r := registry.New()
	var tools []def
	for i := range 50 {
		tools = append(tools, def{name: fmt.Sprintf("t%d", i), tags: []string{fmt.Sprintf("tag%d", i), "common"}})
	}
	mustAdd(t, r, manual("s", tools...))
	all := r.Tools()
	for _, q := range []string{"tag7", "xtag12y", "tag4tag49", strings.Repeat("tag3 ", 40) + "common", "comm", "ommon tag1"} {
		want := referenceSearch(all, q, 5, nil, 3, 1)
		if d := cmp.Diff(want, toolNames(r.Search(q, 5, nil))); d != "" {
			t.Errorf("Search(%q) (-want +got):\n%s", q, d)
		}
	}
}
