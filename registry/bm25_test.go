package registry_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

func TestSearchBM25(t *testing.T) {
	r := registry.New(registry.WithSearchStrategy(registry.StrategyBM25))
	mustAdd(t, r,
		manual("gh",
			def{"repos_list_for_org", "List organization repositories", []string{"repos"}},
			def{"issues_create", "Create an issue", []string{"issues"}},
			def{"pullsMerge", "Merge a pull request", []string{"pulls"}},
			def{"issues_list", "List issues assigned to the authenticated user", []string{"issues"}},
		),
		manual("n",
			def{"noop", "", nil},
		),
	)
	search := func(q string, limit int, tags ...string) []string { return toolNames(r.Search(q, limit, tags)) }
	tests := []struct {
		query string
		limit int
		tags  []string
		want  []string
	}{
		// Name terms (camelCase, '_') and stemmed description words.
		{"merge pull requests", 1, nil, []string{"gh.pullsMerge"}},
		{"create a new issue", 1, nil, []string{"gh.issues_create"}},
		{"repositories of an organization", 1, nil, []string{"gh.repos_list_for_org"}},
		// Rarer terms weigh more: "assigned" is in one tool only.
		{"issues assigned", 2, nil, []string{"gh.issues_list", "gh.issues_create"}},
		// Zero scores follow in registration order; an empty query lists all.
		{"", 0, nil, []string{"gh.repos_list_for_org", "gh.issues_create", "gh.pullsMerge", "gh.issues_list", "n.noop"}},
		{"merge", 0, nil, []string{"gh.pullsMerge", "gh.repos_list_for_org", "gh.issues_create", "gh.issues_list", "n.noop"}},
		// The tags filter, as the default strategy's.
		{"merge", 0, []string{"ISSUES"}, []string{"gh.issues_create", "gh.issues_list"}},
		{"merge", 0, []string{"none"}, []string{}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, search(tc.query, tc.limit, tc.tags...)); diff != "" {
			t.Errorf("Search(%q, %d, %v) (-want +got):\n%s", tc.query, tc.limit, tc.tags, diff)
		}
	}
	// The index follows registrations and removals.
	mustAdd(t, r, manual("z", def{"zebra", "Feed the zebras", nil}))
	if got := search("zebra", 1); len(got) != 1 || got[0] != "z.zebra" {
		t.Errorf("after Add: %v", got)
	}
	if _, err := r.Remove("z"); err != nil {
		t.Fatal(err)
	}
	if got := search("zebra", 0); len(got) != 5 || got[0] == "z.zebra" {
		t.Errorf("after Remove: %v", got)
	}
}

type onlyScope map[string]bool

func (s onlyScope) Allows(def *utcp.Tool) bool { return s[def.Name] }

// SearchIn with bm25: a tool outside the scope is neither scored nor
// listed, not even in the zero-score tail.
func TestSearchBM25Scope(t *testing.T) {
	r := registry.New(registry.WithSearchStrategy(registry.StrategyBM25))
	mustAdd(t, r, manual("gh",
		def{"pulls_merge", "Merge a pull request", nil},
		def{"repos_delete", "Delete a repository", nil},
		def{"issues_create", "Create an issue", nil},
	))
	sc := onlyScope{"gh.pulls_merge": true, "gh.issues_create": true}
	for q, want := range map[string][]string{
		"delete a repository": {"gh.pulls_merge", "gh.issues_create"},
		"merge":               {"gh.pulls_merge", "gh.issues_create"},
		"create issue":        {"gh.issues_create", "gh.pulls_merge"},
	} {
		if diff := cmp.Diff(want, toolNames(r.SearchIn(sc, q, 0, nil))); diff != "" {
			t.Errorf("SearchIn(%q) (-want +got):\n%s", q, diff)
		}
	}
}

// Under -race: searches while manuals come and go rebuild the index
// safely.
func TestSearchBM25Concurrent(t *testing.T) {
	r := registry.New(registry.WithSearchStrategy(registry.StrategyBM25))
	mustAdd(t, r, manual("a", def{"get_weather", "Weather for a city", []string{"weather"}}))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 50 {
				if got := r.Search("weather city", 1, nil); len(got) != 1 || got[0].Name != "a.get_weather" {
					t.Errorf("search %d: %v", i, toolNames(got))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			mustAdd(t, r, manual("b", def{"noise", "Something else", nil}))
			if _, err := r.Remove("b"); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
}

func TestUnknownStrategyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New took an unknown strategy")
		}
	}()
	registry.New(registry.WithSearchStrategy("in_mem_embeddings"))
}

// BenchmarkSearchBM25_100k is BenchmarkSearch100k's limit10 case with
// StrategyBM25 over the same 100,000 tools; ms-build is the first
// search after a change, which builds the index.
//
//	go test -run '^$' -bench SearchBM25 -benchmem ./registry/
func BenchmarkSearchBM25_100k(b *testing.B) {
	c := loadCorpus()
	r := registry.New(registry.WithSearchStrategy(registry.StrategyBM25))
	for _, m := range c.manuals {
		if err := r.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	r.Search("warm", 1, nil)
	build := time.Since(start)
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = c.vocab[2+i%20] + " " + c.vocab[(i*7919)%len(c.vocab)] + " " + c.tags[i%len(c.tags)]
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if len(r.Search(queries[i%len(queries)], 10, nil)) == 0 {
			b.Fatal("no results")
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(build.Microseconds())/1000, "ms-build")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}
