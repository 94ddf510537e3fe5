package registry

import (
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search strategies (tool_search_strategy_type).
const (
	// StrategyWordMatch is python-utcp's tag_and_description_word_match,
	// the default (Search's documentation).
	StrategyWordMatch = "tag_and_description_word_match"
	// StrategyBM25 ranks by BM25F over three fields of each tool: its
	// name (without the manual prefix), its description and its tags
	// (searchBM25).
	StrategyBM25 = "bm25"
)

// WithSearchStrategy selects the ranking of Search: StrategyWordMatch
// (the default, also for "") or StrategyBM25. New panics on another
// value, so configuration code validates it first (KnownStrategy).
func WithSearchStrategy(s string) Option {
	return func(o *options) { o.strategy = s }
}

// KnownStrategy reports whether s is a strategy WithSearchStrategy takes.
func KnownStrategy(s string) bool { return s == "" || s == StrategyWordMatch || s == StrategyBM25 }

// The BM25F parameters: k1, and each field's weight and length
// normalisation b (field order: name, description, tags). They were
// chosen by hand before the labelled GitHub query set was measured and
// not tuned on it (docs/benchmarks.md).
const bm25K1 = 1.2

var (
	bm25Weight = [bm25Fields]float64{3, 1, 2}
	bm25B      = [bm25Fields]float64{0.3, 0.75, 0.3}
)

const bm25Fields = 3

// bm25Index is the inverted index of the registered tools for BM25F,
// built from the registry's tools on the first BM25 search after a
// change (gen is the registry's mutation count it was built at).
type bm25Index struct {
	gen      uint64
	postings map[string][]bm25Posting
	lens     [][bm25Fields]float32 // by slot
	avg      [bm25Fields]float64
	n        int
}

type bm25Posting struct {
	slot int32
	tf   [bm25Fields]float32
}

// bm25 returns the current index, building it when the registry changed.
// r.mu is held for reading.
func (r *Registry) bm25() *bm25Index {
	if idx := r.bm25Idx.Load(); idx != nil && idx.gen == r.mutations {
		return idx
	}
	r.bm25Mu.Lock()
	defer r.bm25Mu.Unlock()
	if idx := r.bm25Idx.Load(); idx != nil && idx.gen == r.mutations {
		return idx
	}
	idx := &bm25Index{gen: r.mutations, postings: map[string][]bm25Posting{}, lens: make([][bm25Fields]float32, len(r.slots))}
	var sum [bm25Fields]float64
	tf := map[string]*[bm25Fields]float32{}
	for slot, e := range r.slots {
		if e == nil {
			continue
		}
		idx.n++
		clear(tf)
		count := func(f int, s string) {
			bm25Terms(s, func(t string) {
				c := tf[t]
				if c == nil {
					c = &[bm25Fields]float32{}
					tf[t] = c
				}
				c[f]++
				idx.lens[slot][f]++
			})
		}
		count(0, strings.TrimPrefix(e.tool.Name, e.tool.Manual+"."))
		count(1, e.tool.Def.Description)
		for _, tag := range e.tool.Def.Tags {
			count(2, tag)
		}
		for t, c := range tf {
			idx.postings[t] = append(idx.postings[t], bm25Posting{slot: int32(slot), tf: *c})
		}
		for f := range bm25Fields {
			sum[f] += float64(idx.lens[slot][f])
		}
	}
	for f := range bm25Fields {
		if idx.n > 0 {
			idx.avg[f] = max(sum[f]/float64(idx.n), 1)
		}
	}
	r.bm25Idx.Store(idx)
	return idx
}

// searchBM25 is Search with StrategyBM25: the query's terms (bm25Terms)
// score each tool by BM25F, sum over the distinct query terms of
// idf(t) * tf'/(k1 + tf'), where tf' adds the term's count in each field
// times the field's weight, normalised by the field's length against its
// average (b), and idf(t) = ln(1 + (N - df + 0.5)/(df + 0.5)). The tags
// filter, the order of equal scores and the zero-score tail are those of
// the default strategy.
func (r *Registry) searchBM25(query string, limit int, tags []string) []*Tool {
	var terms []string
	bm25Terms(query, func(t string) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	})
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.ntools == 0 {
		return nil
	}
	var allowed []bool
	if len(tags) > 0 {
		allowed = make([]bool, len(r.slots))
		found := false
		for _, t := range tags {
			if p := r.tagIdx[strings.ToLower(t)]; p != nil {
				for _, slot := range p.slots {
					allowed[slot], found = true, true
				}
			}
		}
		if !found {
			return nil
		}
	}
	idx := r.bm25()
	scores := make([]float64, len(r.slots))
	var hits []scored
	for _, t := range terms {
		ps := idx.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (float64(idx.n)-df+0.5)/(df+0.5))
		for _, p := range ps {
			if allowed != nil && !allowed[p.slot] {
				continue
			}
			var w float64
			for f := range bm25Fields {
				if p.tf[f] == 0 {
					continue
				}
				norm := 1 - bm25B[f] + bm25B[f]*float64(idx.lens[p.slot][f])/idx.avg[f]
				w += bm25Weight[f] * float64(p.tf[f]) / norm
			}
			if scores[p.slot] == 0 {
				e := r.slots[p.slot]
				hits = append(hits, scored{e: e, ord: e.order()})
			}
			scores[p.slot] += idf * w / (bm25K1 + w)
		}
	}
	for i := range hits {
		hits[i].score = scores[hits[i].e.slot]
	}
	cmp := func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.ord < b.ord:
			return -1
		case a.ord > b.ord:
			return 1
		}
		return 0
	}
	if limit > 0 && len(hits) > limit {
		hits = topK(hits, limit, cmp)
	} else {
		slices.SortFunc(hits, cmp)
	}
	n := r.ntools
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]*Tool, 0, min(n, len(hits)+16))
	for _, h := range hits {
		out = append(out, h.e.tool)
	}
	// Zero-score tools, in registration order.
	for _, ms := range r.order {
		for _, e := range ms.entries {
			if len(out) >= n {
				return out
			}
			if scores[e.slot] == 0 && (allowed == nil || allowed[e.slot]) {
				out = append(out, e.tool)
			}
		}
	}
	return out
}

// bm25Stop are query words too common to rank by.
var bm25Stop = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "for": true, "to": true, "in": true, "on": true, "and": true,
	"or": true, "is": true, "are": true, "be": true, "by": true, "with": true, "from": true, "at": true, "as": true,
	"it": true, "its": true, "this": true, "that": true, "my": true, "me": true, "i": true, "how": true, "do": true,
	"can": true, "what": true, "which": true, "all": true, "into": true, "about": true, "will": true, "you": true,
}

// bm25Terms calls fn with each term of s: runs of letters and digits,
// split further at camelCase boundaries ("listForOrg" → list, for, org;
// "HTTPServer" → http, server), lowercased, stop words dropped, and
// stemmed lightly (bm25Stem). Separators are everything else: '.', '/',
// '_', '-', spaces, punctuation.
func bm25Terms(s string, fn func(string)) {
	emit := func(w string) {
		w = strings.ToLower(w)
		if w == "" || bm25Stop[w] {
			return
		}
		fn(bm25Stem(w))
	}
	start := -1
	var prev rune
	for i, c := range s {
		word := unicode.IsLetter(c) || unicode.IsDigit(c)
		if !word {
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
			prev = c
			continue
		}
		if start < 0 {
			start = i
		} else if unicode.IsUpper(c) {
			// A lower-to-upper step starts a word; so does the last
			// capital of a run followed by a lower-case letter.
			next, _ := utf8.DecodeRuneInString(s[i+utf8.RuneLen(c):])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && unicode.IsLower(next)) {
				emit(s[start:i])
				start = i
			}
		}
		prev = c
	}
	if start >= 0 {
		emit(s[start:])
	}
}

// bm25Stem strips common English suffixes so that "repositories",
// "listing" and "created" meet "repository", "list" and "create": ies →
// y, a plural s, ing and ed (keeping at least 3 letters), then a final
// e. It is deliberately light: no dictionary, no irregular forms.
func bm25Stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 4 && strings.HasSuffix(w, "sses"):
		w = w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:n-1]
	}
	n = len(w)
	switch {
	case n > 6 && strings.HasSuffix(w, "ing"):
		w = w[:n-3]
	case n > 5 && strings.HasSuffix(w, "ed"):
		w = w[:n-2]
	}
	if n = len(w); n > 3 && strings.HasSuffix(w, "e") {
		w = w[:n-1]
	}
	return w
}
