package gateway_test

import (
	"testing"

	"github.com/utcpd/utcpd/gateway"
)

// TestSearchStrategyBM25: Options.SearchStrategy "bm25" ranks
// search_tools by BM25F (stemmed name terms: "sleeping" finds sleep),
// where the default word match finds nothing and lists in registration
// order; a strategy the registry does not implement keeps the default.
func TestSearchStrategyBM25(t *testing.T) {
	_, base := serveFixture(t)
	first := func(strategy string) string {
		g := newGateway(t, gateway.Options{SearchStrategy: strategy})
		register(t, g, httpManual("demo", base+"/utcp"))
		got := g.SearchTools(t.Context(), "sleeping", 1, nil)
		if len(got) != 1 {
			t.Fatalf("%s: %d results", strategy, len(got))
		}
		return got[0].Name
	}
	if got := first("bm25"); got != "demo.sleep" {
		t.Errorf("bm25: %s first, want demo.sleep", got)
	}
	for _, s := range []string{"", "tag_and_description_word_match", "in_mem_embeddings"} {
		if got := first(s); got != "demo.echo" {
			t.Errorf("%q: %s first, want demo.echo (no match: registration order)", s, got)
		}
	}
}
