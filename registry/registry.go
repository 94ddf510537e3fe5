// Package registry is utcpd's canonical registry of tools: every manual the
// daemon has registered and the tools discovered in it, under their
// qualified names ("manual.tool", or "manual.server.tool" for MCP). One
// Registry serves every front; it resolves names, lists tools and runs the
// UTCP tool search (python-utcp's tag_and_description_word_match).
//
// The package also owns the Store interface through which registered
// manuals are persisted (implementations live in store/ and
// registry/memstore), and its conformance suite (registry/storetest).
//
// The registry never performs discovery or I/O: callers discover a manual
// first and then hand the result to Add or Replace, which only index it.
// It imports only the standard library and package utcp.
package registry

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/utcpd/utcpd/utcp"
)

// Tool is one registered tool. A Tool is immutable once it has been handed
// to Add or Replace: neither the caller nor the registry may modify it or
// its Def afterwards, and the registry returns the same pointer to every
// reader.
type Tool struct {
	// Name is the qualified name: "manual.tool", or "manual.server.tool"
	// for MCP. It always starts with Manual + ".".
	Name string
	// Manual is the name of the manual the tool belongs to.
	Manual string
	// Def is the tool's definition. Def.Name == Name.
	Def *utcp.Tool
	// Ext belongs to the registry's user (the gateway keeps the compiled
	// input schema and the parsed tool template there). The registry never
	// reads or writes it.
	Ext any
}

// ShortName returns the tool's name without its manual prefix: "tool" for
// "manual.tool", "server.tool" for "manual.server.tool". It is the name
// an unqualified Resolve matches.
func (t *Tool) ShortName() string { return t.Name[len(t.Manual)+1:] }

// Manual is one registered manual and the tools discovered in it. Like
// Tool it is immutable once handed to Add or Replace; a refresh builds a
// new Manual and calls Replace.
type Manual struct {
	// Name is the manual's name: non-empty, made only of [A-Za-z0-9_]
	// (utcp.SanitizeName(Name) == Name), so it never contains a dot.
	Name string
	// Template is the manual call template. The registry does not read it.
	Template *utcp.CallTemplate
	// Source says where the manual came from: "config", "dir" or "api".
	// The registry does not interpret it.
	Source string
	// Registered is when the manual was first registered; Refreshed when
	// its tools were last discovered. The registry does not interpret them.
	Registered, Refreshed time.Time
	// Tools are the manual's tools in discovery order. Their names are
	// distinct and each has Manual == Name.
	Tools []*Tool
	// Ext belongs to the registry's user; the registry never touches it.
	Ext any
}

// Source values for Manual.Source.
const (
	SourceConfig = "config" // from the daemon's configuration file
	SourceDir    = "dir"    // from the manuals directory
	SourceAPI    = "api"    // registered through the admin API
)

// Default search weights, python-utcp's defaults.
const (
	DefaultTagWeight         = 3.0
	DefaultDescriptionWeight = 1.0
)

// Option configures a Registry.
type Option func(*options)

type options struct {
	tagWeight, descWeight float64
}

// WithSearchWeights sets the weights of the tag and description matches
// in Search (python-utcp's tag_weight and description_weight; defaults 3
// and 1). Both must be finite and non-negative: New panics otherwise, so
// configuration code validates them first.
func WithSearchWeights(tag, desc float64) Option {
	return func(o *options) { o.tagWeight, o.descWeight = tag, desc }
}

// Registry holds the registered manuals and their tools. It is safe for
// concurrent use. Reads (Resolve, Search, listing) take a shared lock;
// Add, Replace and Remove take the exclusive lock only to update the
// in-memory indexes, after all per-tool preprocessing is done, so readers
// wait at most for that short update and never for discovery.
type Registry struct {
	tagWeight, descWeight float64

	mu      sync.RWMutex
	manuals map[string]*manualState
	order   []*manualState // by seq: registration order
	nextSeq uint64
	ntools  int

	byName  map[string]*entry   // qualified name → tool
	byShort map[string][]*entry // short name → tools, in registration order

	slots []*entry // slot → tool, nil when free
	free  []int32  // free slots
	dying []bool   // remove's scratch: slots being removed (all false between calls)

	descIdx    map[string]*posting    // distinct description word (>2 runes) → slots
	tagIdx     map[string]*tagPosting // lowercased tag → slots having it
	tagWordIdx map[string]*posting    // word of a tag → slots having a tag with it
	maxTagLen  int                    // longest lowercased tag in bytes (never shrinks)

	scratch sync.Pool // *scratch
}

// manualState is a registered manual with its index bookkeeping.
type manualState struct {
	m       *Manual
	seq     uint64 // registration order; kept by Replace
	entries []*entry
	// words are the distinct description words of the manual's tools
	// (entry.desc indexes them), until the manual is inserted.
	words []string
	// The postings the manual's tools are in, each once, for removal.
	descPostings    []*posting
	tagWordPostings []*posting
	tagPostings     []*tagPosting
}

// entry is one registered tool with its precomputed search data.
type entry struct {
	tool *Tool
	ms   *manualState
	idx  int32 // position in the manual's discovery order
	slot int32
	tags []*tagInfo // lowercased tags, duplicates kept (python scores each)
	// desc holds the entry's distinct description words, as indexes into
	// its manualState's words, until the entry is inserted; nil afterwards.
	desc []int32
}

// tagInfo is an interned lowercased tag and its distinct words.
type tagInfo struct {
	lower string
	words []string
}

// posting is the list of slots an index key points at. Index maps hold
// pointers so that appending never re-assigns (and re-keys) a map entry.
type posting struct {
	key   string // the map key, for deletion
	slots []int32
	owner *manualState // the manual that last listed this posting (insert's dedup mark)
}

type tagPosting struct {
	info  *tagInfo
	slots []int32
	owner *manualState
}

// New returns an empty Registry.
func New(opts ...Option) *Registry {
	o := options{tagWeight: DefaultTagWeight, descWeight: DefaultDescriptionWeight}
	for _, opt := range opts {
		opt(&o)
	}
	for _, w := range []float64{o.tagWeight, o.descWeight} {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			panic(fmt.Sprintf("registry: search weight %v must be finite and non-negative", w))
		}
	}
	return &Registry{
		tagWeight:  o.tagWeight,
		descWeight: o.descWeight,
		manuals:    map[string]*manualState{},
		byName:     map[string]*entry{},
		byShort:    map[string][]*entry{},
		descIdx:    map[string]*posting{},
		tagIdx:     map[string]*tagPosting{},
		tagWordIdx: map[string]*posting{},
	}
}

// Add registers m and its tools. It fails, leaving the registry unchanged,
// with a *utcp.Error of code manual_exists when a manual of that name is
// registered, and of code invalid_manual when m is malformed: a name that
// is empty or not made of [A-Za-z0-9_], a nil tool or definition, a tool
// whose Manual is not m.Name, whose Name does not start with m.Name + "."
// or differs from Def.Name, or two tools with the same name (Details
// "duplicates" lists them; DropDuplicates keeps the first of each
// instead). m and its tools must not be modified after Add returns nil.
func (r *Registry) Add(m *Manual) error {
	ms, err := r.prepare(m)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.manuals[m.Name]; ok {
		return utcp.NewError(utcp.CodeManualExists,
			"manual %q is already registered; deregister it first or use a different name", m.Name).
			WithDetail("manual", m.Name)
	}
	r.nextSeq++
	ms.seq = r.nextSeq
	r.insert(ms)
	r.order = append(r.order, ms)
	return nil
}

// Replace registers m, replacing the manual of the same name atomically if
// there is one, and returns the manual it replaced (nil if none). Readers
// see either the old tools or the new ones, never a mix. A replaced manual
// keeps its place in registration order (the tie-break of Search); a
// manual registered by Replace goes last. The validation errors are those
// of Add (never manual_exists); on error the registry is unchanged.
func (r *Registry) Replace(m *Manual) (old *Manual, err error) {
	ms, err := r.prepare(m)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.manuals[m.Name]
	if !ok {
		r.nextSeq++
		ms.seq = r.nextSeq
		r.insert(ms)
		r.order = append(r.order, ms)
		return nil, nil
	}
	r.remove(prev)
	ms.seq = prev.seq
	r.insert(ms)
	i := r.orderIndex(prev)
	r.order[i] = ms
	return prev.m, nil
}

// Remove deregisters the manual called name and its tools and returns it.
// It fails with a *utcp.Error of code manual_not_found when there is no
// such manual.
func (r *Registry) Remove(name string) (*Manual, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms, ok := r.manuals[name]
	if !ok {
		return nil, utcp.NewError(utcp.CodeManualNotFound, "manual %q is not registered", name).
			WithDetail("manual", name)
	}
	r.remove(ms)
	i := r.orderIndex(ms)
	r.order = slices.Delete(r.order, i, i+1)
	return ms.m, nil
}

// Manual returns the registered manual called name.
func (r *Registry) Manual(name string) (*Manual, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ms, ok := r.manuals[name]
	if !ok {
		return nil, false
	}
	return ms.m, true
}

// Manuals returns every registered manual, sorted by name. The slice is
// the caller's; the manuals are shared and must not be modified.
func (r *Registry) Manuals() []*Manual {
	r.mu.RLock()
	out := make([]*Manual, 0, len(r.manuals))
	for _, ms := range r.manuals {
		out = append(out, ms.m)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Manual) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Tools returns every registered tool, ordered by manual name and then by
// discovery order within the manual. The slice is the caller's.
func (r *Registry) Tools() []*Tool {
	ms := r.Manuals()
	r.mu.RLock()
	n := r.ntools
	r.mu.RUnlock()
	out := make([]*Tool, 0, n)
	for _, m := range ms {
		out = append(out, m.Tools...)
	}
	return out
}

// Len returns the number of registered tools.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ntools
}

// Resolve finds the tool a caller means by name, in constant time:
//
//   - A registered qualified name resolves to its tool.
//   - A name whose part before the first dot is a registered manual is
//     qualified: if that manual has no tool of exactly that name, the
//     result is tool_not_found, even when another manual has a tool whose
//     short name is name (the qualified reading always wins, so adding a
//     tool to a manual can never silently redirect a name elsewhere).
//   - Any other name is unqualified and is compared with every tool's
//     short name (the whole part after "manual.", so "server.tool" for an
//     MCP tool "manual.server.tool"; the last segment alone is not
//     indexed). It resolves while exactly one tool has that short name;
//     with several, the error has code ambiguous_tool and Details
//     "candidates" lists their qualified names, sorted.
//
// When nothing matches, the error has code tool_not_found and Details
// "did_you_mean" lists up to 5 qualified names close to name (empty when
// none is close, or name is longer than 256 bytes). Suggestions cost time
// linear in the number of distinct short names, on the miss path only and
// mostly outside the lock. Errors are *utcp.Error.
func (r *Registry) Resolve(name string) (*Tool, error) { return r.ResolveIn(nil, name) }

// Scope limits the tools a caller may see and call (gateway.Scope is
// one). A nil Scope allows every tool. Allows must be fast, safe for
// concurrent use and must not call back into the Registry.
type Scope interface {
	// Allows reports whether the caller may see and call the tool def.
	Allows(def *utcp.Tool) bool
}

// ManualScope may be implemented by a Scope that can rule out a whole
// manual: MayAllowManual returns false only when the scope allows none
// of the manual's tools, whatever they are (a true answer promises
// nothing). The registry then skips the manual's tools.
type ManualScope interface {
	MayAllowManual(manual string) bool
}

// mayAllow reports whether sc may allow some tool of the manual name.
func mayAllow(sc Scope, name string) bool {
	if ms, ok := sc.(ManualScope); ok {
		return ms.MayAllowManual(name)
	}
	return true
}

// allows reports whether sc allows e's tool.
func allows(sc Scope, e *entry) bool { return sc == nil || sc.Allows(e.tool.Def) }

// visible reports whether sc allows at least one tool of ms: a manual
// none of whose tools is in scope does not exist for the caller.
func visible(sc Scope, ms *manualState) bool {
	if sc == nil {
		return true
	}
	if !mayAllow(sc, ms.m.Name) {
		return false
	}
	for _, e := range ms.entries {
		if allows(sc, e) {
			return true
		}
	}
	return false
}

// ResolveIn is Resolve within the scope sc, as if the registry held only
// the tools sc allows: a tool outside sc, and a manual none of whose
// tools is in sc, do not exist, so a name ambiguous in the whole registry
// but unique within sc resolves, and a name outside sc fails exactly as a
// name that no tool has (the same tool_not_found error, with suggestions
// drawn from sc only): the answer tells nothing of what sc hides. A nil
// sc is Resolve.
func (r *Registry) ResolveIn(sc Scope, name string) (*Tool, error) {
	r.mu.RLock()
	if e, ok := r.byName[name]; ok && allows(sc, e) {
		r.mu.RUnlock()
		return e.tool, nil
	}
	if m, _, ok := SplitName(name); ok {
		if ms, known := r.manuals[m]; known && visible(sc, ms) {
			r.mu.RUnlock()
			return nil, r.notFound(sc, name)
		}
	}
	es := r.byShort[name]
	if sc != nil {
		var in []*entry
		for _, e := range es {
			if allows(sc, e) {
				in = append(in, e)
			}
		}
		es = in
	}
	switch len(es) {
	case 0:
		r.mu.RUnlock()
		return nil, r.notFound(sc, name)
	case 1:
		r.mu.RUnlock()
		return es[0].tool, nil
	}
	cands := make([]string, len(es))
	for i, e := range es {
		cands[i] = e.tool.Name
	}
	r.mu.RUnlock()
	sort.Strings(cands)
	shown := cands
	more := ""
	if len(shown) > 10 {
		shown, more = shown[:10], fmt.Sprintf(" and %d more", len(cands)-10)
	}
	return nil, utcp.NewError(utcp.CodeAmbiguousTool,
		"tool name %q is ambiguous; use a qualified name: %s%s", name, strings.Join(shown, ", "), more).
		WithDetail("tool", name).WithDetail("candidates", cands)
}

// ToolsIn returns the tools sc allows, as Tools orders them.
func (r *Registry) ToolsIn(sc Scope) []*Tool {
	if sc == nil {
		return r.Tools()
	}
	var out []*Tool
	for _, m := range r.Manuals() {
		if !mayAllow(sc, m.Name) {
			continue
		}
		for _, t := range m.Tools {
			if sc.Allows(t.Def) {
				out = append(out, t)
			}
		}
	}
	return out
}

const (
	// maxSuggestions is the number of did-you-mean names a miss reports.
	maxSuggestions = 5
	// maxSuggestLen is the longest name suggestions are computed for; edit
	// distance is quadratic and no tool name is that long.
	maxSuggestLen = 256
)

// notFound builds the tool_not_found error with suggestions within sc.
// r.mu must not be held.
func (r *Registry) notFound(sc Scope, name string) error {
	return utcp.NewError(utcp.CodeToolNotFound, "tool %q not found", name).
		WithDetail("tool", name).WithDetail("did_you_mean", r.suggest(sc, name))
}

// suggest returns up to maxSuggestions qualified names for a name that did
// not resolve: first the tools whose short name is exactly name or the
// part of name after its first dot, then the closest by utcp.Closest
// among
//
//   - for a name qualified by a registered manual, that manual's tools;
//   - otherwise the tools of the (up to 3) manual names closest to the
//     name's first segment, and every tool whose short name could be
//     close to name.
//
// Candidates are gathered under the read lock with a cheap lower bound on
// edit distance (length and letter-count difference) that drops the ones
// utcp.Closest would reject; the edit distances are computed after the
// lock is released, so a miss never holds up writers for long.
func (r *Registry) suggest(sc Scope, name string) []string {
	out := []string{}
	if name == "" || len(name) > maxSuggestLen {
		return out
	}
	f := newCloseFilter(name)
	var exact, cands []string
	shortOf := map[string][]string{} // candidate short name → its tools' qualified names
	addShort := func(short string, es []*entry) {
		if _, ok := shortOf[short]; ok {
			return
		}
		qs := make([]string, 0, len(es))
		for _, e := range es {
			if allows(sc, e) {
				qs = append(qs, e.tool.Name)
			}
		}
		if len(qs) == 0 {
			return
		}
		shortOf[short] = qs
		cands = append(cands, short)
	}
	addManual := func(ms *manualState) {
		for _, e := range ms.entries {
			if allows(sc, e) && f.plausible(e.tool.Name) {
				cands = append(cands, e.tool.Name)
			}
		}
	}

	m, rest, qualified := SplitName(name)
	r.mu.RLock()
	if es := r.byShort[name]; len(es) > 0 { // only when name is qualified by a manual
		for _, e := range es {
			if allows(sc, e) {
				exact = append(exact, e.tool.Name)
			}
		}
	}
	if qualified {
		for _, e := range r.byShort[rest] {
			if allows(sc, e) {
				exact = append(exact, e.tool.Name)
			}
		}
	}
	if ms, ok := r.manuals[m]; ok && qualified && visible(sc, ms) {
		addManual(ms)
	} else {
		if qualified {
			names := make([]string, 0, len(r.order))
			for _, ms := range r.order {
				if visible(sc, ms) {
					names = append(names, ms.m.Name)
				}
			}
			for _, c := range utcp.Closest(m, names, 3) {
				if ms, ok := r.manuals[c]; ok {
					addManual(ms)
				}
			}
		}
		for short, es := range r.byShort {
			if f.plausible(short) {
				addShort(short, es)
			}
		}
	}
	r.mu.RUnlock()

	added := map[string]bool{}
	add := func(q string) {
		if !added[q] && len(out) < maxSuggestions {
			added[q] = true
			out = append(out, q)
		}
	}
	for _, q := range exact {
		add(q)
	}
	if len(out) == maxSuggestions || len(cands) == 0 {
		return out
	}
	// Closest breaks ties by candidate order; make it deterministic.
	sort.Strings(cands)
	for _, c := range utcp.Closest(name, cands, maxSuggestions*2) {
		if qs, ok := shortOf[c]; ok {
			for _, q := range qs {
				add(q)
			}
		} else {
			add(c)
		}
	}
	return out
}

// closeFilter rejects, without allocating, candidates whose edit distance
// from a name certainly exceeds utcp.Closest's cut-off (half the name's
// length, at least 2) and that do not contain the name, which Closest
// would accept anyway.
type closeFilter struct {
	lname string
	runes int
	limit int
	ascii bool
	hist  [128]int16
}

func newCloseFilter(name string) *closeFilter {
	f := &closeFilter{lname: strings.ToLower(name), limit: max(len(name)/2, 2)}
	f.runes = utf8.RuneCountInString(f.lname)
	f.ascii = len(f.lname) == f.runes
	if f.ascii {
		for i := 0; i < len(f.lname); i++ {
			f.hist[f.lname[i]]++
		}
	}
	return f
}

// plausible reports whether utcp.Closest could accept c.
func (f *closeFilter) plausible(c string) bool {
	if len(c) > len(f.lname) && containsFold(c, f.lname) {
		return true
	}
	rc := utf8.RuneCountInString(c)
	if rc-f.runes > f.limit || f.runes-rc > f.limit {
		return false
	}
	if !f.ascii || rc != len(c) {
		return true
	}
	// Letter-count ("bag") distance is a lower bound of edit distance:
	// each edit changes the surplus and the deficit by at most one each.
	h := f.hist
	for i := 0; i < len(c); i++ {
		b := c[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		h[b]--
	}
	surplus, deficit := 0, 0
	for _, v := range h {
		if v > 0 {
			deficit += int(v)
		} else {
			surplus -= int(v)
		}
	}
	return max(surplus, deficit) <= f.limit
}

// containsFold reports whether strings.ToLower(s) contains lsub (already
// lowercase), allocating only when s has upper-case letters.
func containsFold(s, lsub string) bool {
	return strings.Contains(strings.ToLower(s), lsub)
}

// prepare validates m and computes every tool's search data. It reads the
// registry only to reuse interned tags, under the read lock.
func (r *Registry) prepare(m *Manual) (*manualState, error) {
	if m == nil {
		return nil, utcp.NewError(utcp.CodeInvalidManual, "manual is nil")
	}
	if m.Name == "" || utcp.SanitizeName(m.Name) != m.Name {
		return nil, utcp.NewError(utcp.CodeInvalidManual,
			"invalid manual name %q: use only letters, digits and _", m.Name).WithDetail("manual", m.Name)
	}
	bad := func(i int, format string, args ...any) error {
		return utcp.NewError(utcp.CodeInvalidManual, "manual %q: tool %d: %s", m.Name, i, fmt.Sprintf(format, args...)).
			WithDetail("manual", m.Name)
	}
	ms := &manualState{m: m, entries: make([]*entry, len(m.Tools))}
	buf := make([]entry, len(m.Tools))
	names := make(map[string]bool, len(m.Tools))
	var dups []string
	// Description words are numbered once per manual (wordID, ms.words);
	// each entry's distinct word numbers are ids[descFrom[i]:descFrom[i+1]].
	wordID := map[string]int32{}
	var lastTool []int32 // word number → last tool index that used it
	var ids []int32
	descFrom := make([]int, len(m.Tools)+1)
	tagSet := map[string]*tagInfo{} // lowercased tag → info, nil until interned
	for i, t := range m.Tools {
		descFrom[i] = len(ids)
		switch {
		case t == nil:
			return nil, bad(i, "nil tool")
		case t.Def == nil:
			return nil, bad(i, "%q has no definition", t.Name)
		case t.Manual != m.Name:
			return nil, bad(i, "%q belongs to manual %q", t.Name, t.Manual)
		case len(t.Name) <= len(m.Name)+1 || t.Name[len(m.Name)] != '.' || !strings.HasPrefix(t.Name, m.Name):
			return nil, bad(i, "name %q does not start with %q", t.Name, m.Name+".")
		case t.Def.Name != t.Name:
			return nil, bad(i, "name %q differs from its definition's name %q", t.Name, t.Def.Name)
		}
		if names[t.Name] {
			if !slices.Contains(dups, t.Name) {
				dups = append(dups, t.Name)
			}
			continue
		}
		names[t.Name] = true
		e := &buf[i]
		e.tool, e.ms, e.idx = t, ms, int32(i)
		if d := t.Def.Description; d != "" {
			ti := int32(i)
			eachWord(strings.ToLower(d), func(w string) {
				if len(w) <= 2*utf8.UTFMax && utf8.RuneCountInString(w) <= 2 {
					return // python counts only words longer than 2 characters
				}
				id, ok := wordID[w]
				if !ok {
					id = int32(len(ms.words))
					wordID[w] = id
					ms.words = append(ms.words, w)
					lastTool = append(lastTool, -1)
				}
				if lastTool[id] != ti {
					lastTool[id] = ti
					ids = append(ids, id)
				}
			})
		}
		for _, tag := range t.Def.Tags {
			tagSet[strings.ToLower(tag)] = nil
		}
		ms.entries[i] = e
	}
	descFrom[len(m.Tools)] = len(ids)
	if len(dups) > 0 {
		sort.Strings(dups)
		return nil, utcp.NewError(utcp.CodeInvalidManual, "manual %q lists tools more than once: %s",
			m.Name, strings.Join(dups, ", ")).WithDetail("manual", m.Name).WithDetail("duplicates", dups)
	}
	// Reuse the tags the registry already knows; make the others.
	if len(tagSet) > 0 {
		r.mu.RLock()
		for lower := range tagSet {
			if p := r.tagIdx[lower]; p != nil {
				tagSet[lower] = p.info
			}
		}
		r.mu.RUnlock()
		for lower, ti := range tagSet {
			if ti == nil {
				lower = strings.Clone(lower)
				tagSet[lower] = &tagInfo{lower: lower, words: distinctWords(lower)}
			}
		}
	}
	for i, e := range ms.entries {
		e.desc = ids[descFrom[i]:descFrom[i+1]:descFrom[i+1]]
		if tags := e.tool.Def.Tags; len(tags) > 0 {
			e.tags = make([]*tagInfo, len(tags))
			for j, tag := range tags {
				e.tags[j] = tagSet[strings.ToLower(tag)]
			}
		}
	}
	return ms, nil
}

// insert indexes ms. r.mu is held for writing; ms.seq is set.
func (r *Registry) insert(ms *manualState) {
	r.manuals[ms.m.Name] = ms
	ms.descPostings = make([]*posting, len(ms.words))
	for id, w := range ms.words {
		p, ok := r.descIdx[w]
		if !ok {
			w = strings.Clone(w)
			p = &posting{key: w}
			r.descIdx[w] = p
		}
		ms.descPostings[id] = p
	}
	ms.words = nil
	var tagWords []string
	for _, e := range ms.entries {
		var slot int32
		if n := len(r.free); n > 0 {
			slot = r.free[n-1]
			r.free = r.free[:n-1]
			r.slots[slot] = e
		} else {
			slot = int32(len(r.slots))
			r.slots = append(r.slots, e)
		}
		e.slot = slot
		r.ntools++
		r.byName[e.tool.Name] = e
		short := e.tool.ShortName()
		r.byShort[short] = insertByOrder(r.byShort[short], e)

		for _, id := range e.desc {
			p := ms.descPostings[id]
			p.slots = append(p.slots, slot)
		}
		e.desc = nil

		tagWords = tagWords[:0]
		for j, ti := range e.tags {
			p, ok := r.tagIdx[ti.lower]
			if !ok {
				p = &tagPosting{info: ti}
				r.tagIdx[ti.lower] = p
				r.maxTagLen = max(r.maxTagLen, len(ti.lower))
			}
			e.tags[j] = p.info // intern (another Add may have made it meanwhile)
			if n := len(p.slots); n == 0 || p.slots[n-1] != slot {
				p.slots = append(p.slots, slot)
			}
			if p.owner != ms {
				p.owner = ms
				ms.tagPostings = append(ms.tagPostings, p)
			}
			for _, w := range p.info.words {
				if !slices.Contains(tagWords, w) {
					tagWords = append(tagWords, w)
				}
			}
		}
		for _, w := range tagWords {
			if p := addSlot(r.tagWordIdx, w, slot); p.owner != ms {
				p.owner = ms
				ms.tagWordPostings = append(ms.tagWordPostings, p)
			}
		}
	}
}

// addSlot appends slot to idx[w] and returns the posting, creating it
// under a clone of w so that keys do not pin the strings they were cut
// from.
func addSlot(idx map[string]*posting, w string, slot int32) *posting {
	p, ok := idx[w]
	if !ok {
		w = strings.Clone(w)
		p = &posting{key: w}
		idx[w] = p
	}
	p.slots = append(p.slots, slot)
	return p
}

// insertByOrder inserts e into es, which is sorted by registration order.
func insertByOrder(es []*entry, e *entry) []*entry {
	i := len(es)
	for i > 0 && less(e, es[i-1]) {
		i--
	}
	return slices.Insert(es, i, e)
}

// less orders entries by registration order.
func less(a, b *entry) bool { return a.order() < b.order() }

// order is the entry's registration order as one number: manual sequence,
// then discovery position.
func (e *entry) order() uint64 { return e.ms.seq<<32 | uint64(uint32(e.idx)) }

// remove unindexes ms. r.mu is held for writing.
func (r *Registry) remove(ms *manualState) {
	delete(r.manuals, ms.m.Name)
	if len(r.dying) < len(r.slots) {
		r.dying = make([]bool, len(r.slots)+len(r.slots)/4)
	}
	for _, e := range ms.entries {
		r.dying[e.slot] = true
	}
	defer func() {
		for _, e := range ms.entries {
			r.dying[e.slot] = false
		}
	}()
	mine := func(slot int32) bool { return r.dying[slot] }
	for _, p := range ms.descPostings {
		if p.slots = slices.DeleteFunc(p.slots, mine); len(p.slots) == 0 {
			delete(r.descIdx, p.key)
		}
	}
	for _, p := range ms.tagWordPostings {
		if p.slots = slices.DeleteFunc(p.slots, mine); len(p.slots) == 0 {
			delete(r.tagWordIdx, p.key)
		}
	}
	for _, p := range ms.tagPostings {
		if p.slots = slices.DeleteFunc(p.slots, mine); len(p.slots) == 0 {
			delete(r.tagIdx, p.info.lower)
		}
	}
	for _, e := range ms.entries {
		delete(r.byName, e.tool.Name)
		short := e.tool.ShortName()
		if es := slices.DeleteFunc(r.byShort[short], func(x *entry) bool { return x == e }); len(es) == 0 {
			delete(r.byShort, short)
		} else {
			r.byShort[short] = es
		}
		r.slots[e.slot] = nil
		r.free = append(r.free, e.slot)
		r.ntools--
	}
}

// orderIndex returns the position of ms in r.order.
func (r *Registry) orderIndex(ms *manualState) int {
	i, found := slices.BinarySearchFunc(r.order, ms.seq, func(m *manualState, seq uint64) int {
		switch {
		case m.seq < seq:
			return -1
		case m.seq > seq:
			return 1
		}
		return 0
	})
	if !found {
		panic("registry: manual missing from registration order")
	}
	return i
}
