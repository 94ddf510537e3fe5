package registry

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Search ranks the registered tools against query with python-utcp's
// default strategy, tag_and_description_word_match, and returns at most
// limit of them, best first. A registry made WithSearchStrategy(
// StrategyBM25) ranks by BM25F instead (searchBM25), with the same tags
// filter, tie order and zero-score tail.
//
// The query is lowercased and split into the set of its \w+ words (Python's
// Unicode \w: letters, numbers, underscore). When tags is non-empty only
// tools having at least one of those tags (compared case-insensitively) are
// considered. A tool's score is the sum of:
//
//   - for each of its tags, duplicates included: the tag weight if the
//     lowercased tag is a substring of the lowercased query (an empty tag
//     always is), otherwise the tag weight once if any word of the tag is
//     a query word;
//   - the description weight for each distinct word of its lowercased
//     description that is longer than 2 characters and is a query word.
//
// Tools are sorted by score, descending; equal scores keep registration
// order (manual registration order, then discovery order). Tools scoring
// zero are still returned, after the others, in registration order, so an
// empty query lists every tool.
//
// Unlike python-utcp, which raises on a negative limit and returns nothing
// for 0, limit <= 0 here means no limit. Python lowercases with full
// Unicode case mapping and Go with simple mapping; the two differ only for
// a handful of characters (such as U+0130).
//
// Search touches only the tools an index ties to a query word or tag, so
// its cost grows with the number of matching tools and limit, not with
// the size of the registry (except for limit <= 0, which returns them all).
func (r *Registry) Search(query string, limit int, tags []string) []*Tool {
	return r.SearchIn(nil, query, limit, tags)
}

// SearchIn is Search within scope: the tools scope does not allow are
// not considered (the limit counts the tools returned). A nil scope is
// Search.
func (r *Registry) SearchIn(scope Scope, query string, limit int, tags []string) []*Tool {
	if r.strategy == StrategyBM25 {
		return r.searchBM25(scope, query, limit, tags)
	}
	ql := strings.ToLower(query)
	qwords := map[string]struct{}{}
	var qlist []string
	eachWord(ql, func(w string) {
		if _, ok := qwords[w]; !ok {
			qwords[w] = struct{}{}
			qlist = append(qlist, w)
		}
	})

	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.ntools == 0 {
		return nil
	}
	s := r.getScratch()
	defer r.putScratch(s)
	gen := s.gen
	sl := s.slots

	// any_of_tags_required
	filtered := false
	var allowed []int32
	for _, t := range tags {
		filtered = true
		p := r.tagIdx[strings.ToLower(t)]
		if p == nil {
			continue
		}
		for _, slot := range p.slots {
			if x := &sl[slot]; x.allow != gen {
				x.allow = gen
				allowed = append(allowed, slot)
			}
		}
	}
	if filtered && len(allowed) == 0 {
		return nil
	}

	// Tags: find the lowercased tags that are substrings of the query, then
	// score every tool holding one of them or a tag sharing a query word.
	matched := r.substringTags(ql)
	scoreTags := func(slot int32) {
		x := &sl[slot]
		if (filtered && x.allow != gen) || x.tagSeen == gen {
			return
		}
		x.tagSeen = gen
		n := int32(0)
		for _, ti := range r.slots[slot].tags {
			if _, ok := matched[ti]; ok {
				n++
				continue
			}
			for _, w := range ti.words {
				if _, ok := qwords[w]; ok {
					n++
					break
				}
			}
		}
		if n > 0 {
			if x.mark != gen {
				x.mark, x.descHits = gen, 0
				s.touched = append(s.touched, slot)
			}
			x.tagHits = n
		}
	}
	for ti := range matched {
		for _, slot := range r.tagIdx[ti.lower].slots {
			scoreTags(slot)
		}
	}
	for _, w := range qlist {
		if p := r.tagWordIdx[w]; p != nil {
			for _, slot := range p.slots {
				scoreTags(slot)
			}
		}
	}

	// Description: postings hold each tool once per distinct word, and the
	// query words are distinct, so counting postings counts distinct words.
	for _, w := range qlist {
		if utf8.RuneCountInString(w) <= 2 {
			continue
		}
		p := r.descIdx[w]
		if p == nil {
			continue
		}
		for _, slot := range p.slots {
			x := &sl[slot]
			if filtered && x.allow != gen {
				continue
			}
			if x.mark != gen {
				x.mark, x.tagHits, x.descHits = gen, 0, 0
				s.touched = append(s.touched, slot)
			}
			x.descHits++
		}
	}

	// Rank the scored tools. A score is computed from the hit counts so that
	// equal counts give bit-identical scores.
	hits := s.hits[:0]
	for _, slot := range s.touched {
		x := &sl[slot]
		sc := r.tagWeight*float64(x.tagHits) + r.descWeight*float64(x.descHits)
		// (a tool outside scope is never positive, so the zero-score
		// pass below skips it too)
		if e := r.slots[slot]; sc > 0 && allows(scope, e) {
			x.positive = gen
			hits = append(hits, scored{e: e, score: sc, ord: e.order()})
		}
	}
	hits = rank(hits, limit)
	s.hits = hits

	n := r.ntools
	if filtered {
		n = len(allowed)
	}
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]*Tool, 0, n)
	for _, h := range hits {
		out = append(out, h.e.tool)
	}
	if len(out) >= n {
		return out
	}

	// Zero-score tools, in registration order.
	zero := func(e *entry) bool { return sl[e.slot].positive != gen && allows(scope, e) }
	if filtered {
		es := make([]*entry, 0, len(allowed))
		for _, slot := range allowed {
			if e := r.slots[slot]; zero(e) {
				es = append(es, e)
			}
		}
		slices.SortFunc(es, func(a, b *entry) int {
			if less(a, b) {
				return -1
			}
			return 1
		})
		for _, e := range es {
			if len(out) >= n {
				break
			}
			out = append(out, e.tool)
		}
		return out
	}
	for _, ms := range r.order {
		for _, e := range ms.entries {
			if len(out) >= n {
				return out
			}
			if zero(e) {
				out = append(out, e.tool)
			}
		}
	}
	return out
}

// scored is a tool with its search score.
type scored struct {
	e     *entry
	score float64
	ord   uint64 // e.order()
}

// topK returns the k best of hits (by cmp, best first), sorted. It
// reorders hits.
func topK(hits []scored, k int, cmp func(a, b scored) int) []scored {
	// hits[:k] is a heap whose root is the worst of the k best so far.
	worse := func(i, j int) bool { return cmp(hits[i], hits[j]) > 0 }
	down := func(i, n int) {
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			c := l
			if r := l + 1; r < n && worse(r, l) {
				c = r
			}
			if !worse(c, i) {
				return
			}
			hits[i], hits[c] = hits[c], hits[i]
			i = c
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i, k)
	}
	for i := k; i < len(hits); i++ {
		if cmp(hits[i], hits[0]) < 0 {
			hits[0] = hits[i]
			down(0, k)
		}
	}
	top := hits[:k]
	slices.SortFunc(top, cmp)
	return top
}

// substringTags returns the registered lowercased tags that are substrings
// of ql. It either enumerates the substrings of ql (bounded by the longest
// tag) and looks each up, or tests every distinct tag, whichever is
// cheaper. r.mu is held for reading.
func (r *Registry) substringTags(ql string) map[*tagInfo]struct{} {
	var out map[*tagInfo]struct{}
	add := func(ti *tagInfo) {
		if out == nil {
			out = map[*tagInfo]struct{}{}
		}
		out[ti] = struct{}{}
	}
	if p := r.tagIdx[""]; p != nil {
		add(p.info)
	}
	if len(r.tagIdx) == 0 || ql == "" {
		return out
	}
	span := min(len(ql), r.maxTagLen)
	if len(r.tagIdx) <= len(ql)*span {
		for t, p := range r.tagIdx {
			if t != "" && strings.Contains(ql, t) {
				add(p.info)
			}
		}
		return out
	}
	for i := 0; i < len(ql); i++ {
		if !utf8.RuneStart(ql[i]) {
			continue
		}
		end := min(len(ql), i+span)
		for j := i + 1; j <= end; j++ {
			if j < len(ql) && !utf8.RuneStart(ql[j]) {
				continue
			}
			if p, ok := r.tagIdx[ql[i:j]]; ok {
				add(p.info)
			}
		}
	}
	return out
}

// scratch is the per-search working memory. slots is indexed by registry
// slot; a field of slots[i] is valid only where its stamp equals gen, so
// nothing needs clearing between searches.
type scratch struct {
	gen     uint32
	slots   []slotScratch
	touched []int32
	hits    []scored
}

// slotScratch is one tool's search state; one struct per slot keeps a
// tool's fields on one cache line.
type slotScratch struct {
	mark     uint32 // touched: tagHits and descHits are valid
	tagSeen  uint32 // tag score computed
	allow    uint32 // passes the tag filter
	positive uint32 // scored above zero
	tagHits  int32
	descHits int32
}

// getScratch returns a scratch sized for r.slots with a fresh generation.
// r.mu is held for reading.
func (r *Registry) getScratch() *scratch {
	s, _ := r.scratch.Get().(*scratch)
	if s == nil {
		s = &scratch{}
	}
	if n := len(r.slots); len(s.slots) < n {
		s.slots = make([]slotScratch, n+n/4)
		s.gen = 0
	}
	s.gen++
	if s.gen == 0 { // wrapped: stale stamps could collide
		clear(s.slots)
		s.gen = 1
	}
	s.touched = s.touched[:0]
	return s
}

// putScratch returns s to the pool without references to tools.
func (r *Registry) putScratch(s *scratch) {
	clear(s.hits[:cap(s.hits)])
	s.hits = s.hits[:0]
	r.scratch.Put(s)
}

// byScore orders hits best first: higher score, then registration order.
func byScore(a, b scored) int {
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

// rank returns hits ordered by byScore, only the best limit of them when
// limit > 0 (a partial selection, not a full sort).
func rank(hits []scored, limit int) []scored {
	if limit > 0 && len(hits) > limit {
		return topK(hits, limit, byScore)
	}
	slices.SortFunc(hits, byScore)
	return hits
}
