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
// built from a snapshot of the registry's tools on the first BM25
// search after a change (gen is the registry's mutation count it was
// built at), outside the registry's lock: a search, a call or a
// registration never waits for it.
type bm25Index struct {
	gen      uint64
	docs     []*entry // the indexed tools; postings point into it
	postings map[string][]bm25Posting
	lens     [][bm25Fields]float32 // by doc
	avg      [bm25Fields]float64
}

type bm25Posting struct {
	doc int32
	tf  [bm25Fields]float32
}

// bm25 returns an index of the registry: the current one, built now if
// the registry changed since the last, or the last one while another
// search is building its successor.
func (r *Registry) bm25() *bm25Index {
	r.mu.RLock()
	gen := r.mutations
	idx := r.bm25Idx.Load()
	if idx != nil && idx.gen == gen {
		r.mu.RUnlock()
		return idx
	}
	docs := make([]*entry, 0, r.ntools)
	for _, ms := range r.order {
		docs = append(docs, ms.entries...)
	}
	r.mu.RUnlock()
	if idx != nil && !r.bm25Mu.TryLock() {
		return idx // being rebuilt: a tool registered a moment ago may be missing
	}
	if idx == nil {
		r.bm25Mu.Lock()
	}
	defer r.bm25Mu.Unlock()
	if cur := r.bm25Idx.Load(); cur != nil && cur.gen >= gen {
		return cur
	}
	idx = buildBM25(gen, docs)
	r.bm25Idx.Store(idx)
	return idx
}

// buildBM25 indexes docs, the registry's tools at mutation count gen.
func buildBM25(gen uint64, docs []*entry) *bm25Index {
	idx := &bm25Index{gen: gen, docs: docs, postings: map[string][]bm25Posting{}, lens: make([][bm25Fields]float32, len(docs))}
	var sum [bm25Fields]float64
	tf := map[string]*[bm25Fields]float32{}
	for d, e := range docs {
		clear(tf)
		count := func(f int, s string) {
			bm25Terms(s, func(t string) {
				c := tf[t]
				if c == nil {
					c = &[bm25Fields]float32{}
					tf[t] = c
				}
				c[f]++
				idx.lens[d][f]++
			})
		}
		count(0, strings.TrimPrefix(e.tool.Name, e.tool.Manual+"."))
		count(1, e.tool.Def.Description)
		for _, tag := range e.tool.Def.Tags {
			count(2, tag)
		}
		for t, c := range tf {
			idx.postings[t] = append(idx.postings[t], bm25Posting{doc: int32(d), tf: *c})
		}
		for f := range bm25Fields {
			sum[f] += float64(idx.lens[d][f])
		}
	}
	for f := range bm25Fields {
		if len(docs) > 0 {
			idx.avg[f] = max(sum[f]/float64(len(docs)), 1)
		}
	}
	return idx
}

// searchBM25 is Search with StrategyBM25: the query's terms (bm25Terms)
// score each tool by BM25F, sum over the distinct query terms of
// idf(t) * tf'/(k1 + tf'), where tf' adds the term's count in each field
// times the field's weight, normalised by the field's length against its
// average (b), and idf(t) = ln(1 + (N - df + 0.5)/(df + 0.5)). The tags
// filter, the order of equal scores and the zero-score tail are those of
// the default strategy, and so is scope (SearchIn): a tool outside it is
// neither scored nor listed.
func (r *Registry) searchBM25(scope Scope, query string, limit int, tags []string) []*Tool {
	var terms []string
	bm25Terms(query, func(t string) {
		if !slices.Contains(terms, t) {
			terms = append(terms, t)
		}
	})
	idx := r.bm25()
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.ntools == 0 {
		return nil
	}
	var allowed map[*entry]bool
	if len(tags) > 0 {
		allowed = map[*entry]bool{}
		for _, t := range tags {
			if p := r.tagIdx[strings.ToLower(t)]; p != nil {
				for _, slot := range p.slots {
					allowed[r.slots[slot]] = true
				}
			}
		}
		if len(allowed) == 0 {
			return nil
		}
	}
	// live: the tool is still registered (the index may be a moment
	// older than the registry), passes the tags filter and is in scope.
	live := func(e *entry) bool {
		return r.manuals[e.tool.Manual] == e.ms && (allowed == nil || allowed[e]) && allows(scope, e)
	}
	scores := make([]float64, len(idx.docs))
	var hits []scored
	var hitDocs []int32
	n := float64(len(idx.docs))
	for _, t := range terms {
		ps := idx.postings[t]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			var w float64
			for f := range bm25Fields {
				if p.tf[f] == 0 {
					continue
				}
				norm := 1 - bm25B[f] + bm25B[f]*float64(idx.lens[p.doc][f])/idx.avg[f]
				w += bm25Weight[f] * float64(p.tf[f]) / norm
			}
			if scores[p.doc] == 0 {
				hitDocs = append(hitDocs, p.doc)
			}
			scores[p.doc] += idf * w / (bm25K1 + w)
		}
	}
	hit := make(map[*entry]bool, len(hitDocs))
	for _, d := range hitDocs {
		if e := idx.docs[d]; live(e) {
			hits = append(hits, scored{e: e, score: scores[d], ord: e.order()})
			hit[e] = true
		}
	}
	hits = rank(hits, limit)
	want := r.ntools
	if limit > 0 {
		want = min(want, limit)
	}
	out := make([]*Tool, 0, min(want, len(hits)+16))
	for _, h := range hits {
		out = append(out, h.e.tool)
	}
	// Zero-score tools, in registration order.
	for _, ms := range r.order {
		for _, e := range ms.entries {
			if len(out) >= want {
				return out
			}
			if !hit[e] && (allowed == nil || allowed[e]) && allows(scope, e) {
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
