package registry_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

const (
	benchManuals = 1000
	benchTools   = 100
)

// benchCorpus is a synthetic 1,000 × 100 tool set: descriptions of 8–30
// words drawn from a 5,000-word vocabulary with a Zipf distribution (so a
// few words appear in most descriptions, as "the" and "get" do), and 1–4
// tags from 300 (a fifth of them two words long). Tool names repeat across
// manuals (every manual has a "get_0"), so unqualified names are mostly
// ambiguous, as in real deployments.
type benchCorpus struct {
	manuals []*registry.Manual
	vocab   []string
	tags    []string
}

var (
	corpusOnce sync.Once
	corpus     *benchCorpus
)

func loadCorpus() *benchCorpus {
	corpusOnce.Do(func() {
		rng := rand.New(rand.NewPCG(7, 11))
		word := func() string {
			const letters = "abcdefghijklmnopqrstuvwxyz"
			b := make([]byte, 3+rng.IntN(8))
			for i := range b {
				b[i] = letters[rng.IntN(len(letters))]
			}
			return string(b)
		}
		c := &benchCorpus{}
		for range 5000 {
			c.vocab = append(c.vocab, word())
		}
		for i := range 300 {
			t := word()
			if i%5 == 0 {
				t += " " + word()
			}
			c.tags = append(c.tags, t)
		}
		zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 5)), 1.1, 2, uint64(len(c.vocab)-1))
		verbs := []string{"get", "list", "create", "update", "delete", "search"}
		for m := range benchManuals {
			name := fmt.Sprintf("manual_%04d", m)
			man := &registry.Manual{Name: name, Source: registry.SourceConfig}
			for i := range benchTools {
				words := make([]string, 8+rng.IntN(23))
				for j := range words {
					words[j] = c.vocab[zipf.Uint64()]
				}
				words[0] = strings.ToUpper(words[0][:1]) + words[0][1:]
				tags := make([]string, 1+rng.IntN(4))
				for j := range tags {
					tags[j] = c.tags[rng.IntN(len(c.tags))]
				}
				d := &utcp.Tool{
					Name:        fmt.Sprintf("%s_%d", verbs[i%len(verbs)], i/len(verbs)),
					Description: strings.Join(words, " ") + ".",
					Tags:        tags,
				}
				man.Tools = append(man.Tools, registry.NewTool(name, d, nil))
			}
			c.manuals = append(c.manuals, man)
		}
		corpus = c
	})
	return corpus
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func buildRegistry(tb testing.TB, c *benchCorpus) *registry.Registry {
	r := registry.New()
	for _, m := range c.manuals {
		if err := r.Add(m); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// BenchmarkAdd100k registers 1,000 manuals of 100 tools into an empty
// registry per op. MB-index is the heap the registry itself holds after
// the op (the corpus excluded); MB-total the whole live heap.
func BenchmarkAdd100k(b *testing.B) {
	c := loadCorpus()
	base := heapInUse()
	var r *registry.Registry
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r = buildRegistry(b, c)
	}
	b.StopTimer()
	total := heapInUse()
	b.ReportMetric(float64(total-base)/(1<<20), "MB-index")
	b.ReportMetric(float64(total)/(1<<20), "MB-total")
	if r.Len() != benchManuals*benchTools {
		b.Fatalf("Len = %d", r.Len())
	}
}

// BenchmarkReplace100k replaces one manual of 100 tools in a full registry.
func BenchmarkReplace100k(b *testing.B) {
	c := loadCorpus()
	r := buildRegistry(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := r.Replace(c.manuals[i%len(c.manuals)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	c := loadCorpus()
	r := buildRegistry(b, c)
	unique := registry.NewTool("solo", &utcp.Tool{Name: "only_here", Description: "x"}, nil)
	if err := r.Add(&registry.Manual{Name: "solo", Tools: []*registry.Tool{unique}}); err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name    string
		names   []string
		wantErr utcp.Code
	}{
		{"qualified", []string{"manual_0500.get_3", "manual_0001.list_0", "manual_0999.search_15"}, ""},
		{"unqualified", []string{"only_here"}, ""},
		{"ambiguous", []string{"get_3"}, utcp.CodeAmbiguousTool},
		{"miss_with_suggestions", []string{"manual_0500.get_x3"}, utcp.CodeToolNotFound},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := range b.N {
				_, err := r.Resolve(tc.names[i%len(tc.names)])
				if utcp.CodeOf(err) != tc.wantErr {
					b.Fatalf("Resolve: %v", err)
				}
			}
		})
	}
	b.Run("qualified_parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := r.Resolve("manual_0500.get_3"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// BenchmarkSearch100k searches the 100k-tool registry with a fixed set of
// queries (a mix of common and rare vocabulary words and tag words, 2–6
// words each). Besides ns/op (the mean) it reports the p50 and p99 latency
// of single searches.
func BenchmarkSearch100k(b *testing.B) {
	c := loadCorpus()
	r := buildRegistry(b, c)
	rng := rand.New(rand.NewPCG(13, 17))
	queries := make([]string, 64)
	for i := range queries {
		var ws []string
		for range 2 + rng.IntN(5) {
			switch rng.IntN(4) {
			case 0: // a common word
				ws = append(ws, c.vocab[2+rng.IntN(20)])
			case 1:
				ws = append(ws, c.tags[rng.IntN(len(c.tags))])
			default: // any word
				ws = append(ws, c.vocab[rng.IntN(len(c.vocab))])
			}
		}
		queries[i] = strings.Join(ws, " ")
	}
	cases := []struct {
		name  string
		limit int
		tags  []string
	}{
		{"limit10", 10, nil},
		{"limit100", 100, nil},
		{"tags_limit10", 10, []string{c.tags[1], strings.ToUpper(c.tags[2])}},
		{"unlimited", 0, nil},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			for i := range b.N {
				start := time.Now()
				res := r.Search(queries[i%len(queries)], tc.limit, tc.tags)
				lat = append(lat, time.Since(start))
				if len(res) == 0 {
					b.Fatal("no results")
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
		})
	}
	b.Run("empty_query_limit10", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if len(r.Search("", 10, nil)) != 10 {
				b.Fatal("short result")
			}
		}
	})
}
