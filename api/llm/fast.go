package llm

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/utcpd/utcpd/utcp"
)

// This file is the fast path of exportOne: the input schema is parsed
// once into a flat tree over its bytes (no map[string]any, no boxed
// values), the provider's rewrite builds a small output tree referring to
// the source where values pass through unchanged, and that is encoded
// with object keys sorted, strings escaped as encoding/json does, and
// sub-trees already in that canonical form copied as they are. The
// result is byte for byte that of the map-based path (exportOneMap),
// which remains the reference and the fallback for every input the fast
// path does not take (no object at the root, invalid JSON, trailing data,
// very deep nesting): encode_test.go and the fuzz target compare the two.

// nkind is the kind of a JSON value.
type nkind uint8

const (
	nNull nkind = iota
	nFalse
	nTrue
	nNumber
	nString
	nArray
	nObject
)

// node is one value of a parsed document. Object members carry their key.
type node struct {
	ks, ke   int32 // raw span of the member key (object members only), quotes included
	kd       int32 // 1 + index of the decoded key in tree.keys, or 0: the key needs no unquoting
	start    int32 // raw span of the value in the source
	end      int32
	first    int32 // first child, or -1
	next     int32 // next sibling, or -1
	count    int32 // number of children
	kind     nkind
	canon    bool // the raw span is the value's canonical encoding
	decode   bool // string: the contents need unquoting
	keyCanon bool // the raw key is the canonical encoding of the key
	sorted   bool // object: keys strictly increasing
}

// tree is a parsed document.
type tree struct {
	src   []byte
	nodes []node
	keys  [][]byte // decoded keys that needed unquoting
	space bool     // whitespace between tokens somewhere
}

// maxParseDepth bounds the nesting the fast path parses; deeper documents
// go to the map-based path.
const maxParseDepth = 512

// parse parses src, which must hold exactly one JSON value (no leading or
// trailing space). It reports false for anything else.
func (t *tree) parse(src []byte) bool {
	t.src, t.nodes, t.keys, t.space = src, t.nodes[:0], t.keys[:0], false
	_, end, ok := t.value(0, 0)
	return ok && end == len(src)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skip returns the position after the whitespace at pos.
func (t *tree) skip(pos int) int {
	p := pos
	for p < len(t.src) && isSpace(t.src[p]) {
		p++
	}
	if p != pos {
		t.space = true
	}
	return p
}

// value parses the value at pos, returning its node and the position after it.
func (t *tree) value(pos, depth int) (int32, int, bool) {
	if pos >= len(t.src) || depth > maxParseDepth {
		return -1, pos, false
	}
	idx := int32(len(t.nodes))
	t.nodes = append(t.nodes, node{start: int32(pos), first: -1, next: -1, canon: true})
	src := t.src
	switch c := src[pos]; {
	case c == '{':
		return t.object(idx, pos, depth)
	case c == '[':
		return t.array(idx, pos, depth)
	case c == '"':
		end, dec, canon, ok := t.str(pos)
		if !ok {
			return -1, pos, false
		}
		n := &t.nodes[idx]
		n.kind, n.end, n.decode, n.canon = nString, int32(end), dec, canon
		return idx, end, true
	case c == 't' || c == 'f' || c == 'n':
		lit, kind := "null", nNull
		if c == 't' {
			lit, kind = "true", nTrue
		} else if c == 'f' {
			lit, kind = "false", nFalse
		}
		if !bytes.HasPrefix(src[pos:], []byte(lit)) {
			return -1, pos, false
		}
		n := &t.nodes[idx]
		n.kind, n.end = kind, int32(pos+len(lit))
		return idx, pos + len(lit), true
	default:
		i := pos
		if src[i] == '-' {
			i++
		}
		digits := func() bool {
			s := i
			for i < len(src) && src[i] >= '0' && src[i] <= '9' {
				i++
			}
			return i > s
		}
		switch {
		case i < len(src) && src[i] == '0':
			i++
		case i < len(src) && src[i] >= '1' && src[i] <= '9':
			digits()
		default:
			return -1, pos, false
		}
		if i < len(src) && src[i] == '.' {
			i++
			if !digits() {
				return -1, pos, false
			}
		}
		if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
			i++
			if i < len(src) && (src[i] == '+' || src[i] == '-') {
				i++
			}
			if !digits() {
				return -1, pos, false
			}
		}
		n := &t.nodes[idx]
		n.kind, n.end = nNumber, int32(i)
		return idx, i, true
	}
}

var (
	lineSep = []byte("\u2028")
	paraSep = []byte("\u2029")
)

// str scans the string at pos. decode reports escapes or invalid UTF-8
// (the decoded string differs from the contents); canon that the source
// is what appendString writes for the decoded string.
func (t *tree) str(pos int) (end int, decode, canon, ok bool) {
	src := t.src
	esc, high := false, false
	i := pos + 1
	for {
		for i < len(src) && plainByte[src[i]] {
			i++
		}
		if i >= len(src) {
			return 0, false, false, false
		}
		c := src[i]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			esc = true
			i++
			if i >= len(src) {
				return 0, false, false, false
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(src) {
					return 0, false, false, false
				}
				for _, h := range src[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false, false, false
					}
				}
				i += 5
			default:
				return 0, false, false, false
			}
		case c < 0x20:
			return 0, false, false, false
		default:
			if c >= utf8.RuneSelf {
				high = true
			}
			i++
		}
	}
	decode, canon = esc, !esc
	if high {
		content := src[pos+1 : i]
		if !utf8.Valid(content) {
			decode, canon = true, false
		} else if bytes.Contains(content, lineSep) || bytes.Contains(content, paraSep) {
			canon = false
		}
	}
	return i + 1, decode, canon, true
}

// plainByte marks the bytes a string scan passes over without a look:
// printable ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote decodes a string token the scanner accepted, as encoding/json does.
func unquote(raw []byte) []byte {
	var s string
	_ = json.Unmarshal(raw, &s) // cannot fail: raw is a valid string token
	return []byte(s)
}

func (t *tree) object(idx int32, pos, depth int) (int32, int, bool) {
	src := t.src
	canon, sorted := true, true
	var count int32
	last := int32(-1)
	var prev []byte
	p := t.skip(pos + 1)
	canon = canon && p == pos+1
	pos = p
	if pos < len(src) && src[pos] == '}' {
		pos++
	} else {
		for {
			if pos >= len(src) || src[pos] != '"' {
				return -1, pos, false
			}
			kend, kdec, kcanon, ok := t.str(pos)
			if !ok {
				return -1, pos, false
			}
			key, kd := src[pos+1:kend-1], int32(0)
			if kdec {
				key = unquote(src[pos:kend])
				t.keys = append(t.keys, key)
				kd = int32(len(t.keys))
			}
			ks := int32(pos)
			p = t.skip(kend)
			if p >= len(src) || src[p] != ':' {
				return -1, pos, false
			}
			q := t.skip(p + 1)
			canon = canon && p == kend && q == p+1
			child, end, ok := t.value(q, depth+1)
			if !ok {
				return -1, pos, false
			}
			c := &t.nodes[child]
			c.ks, c.ke, c.kd, c.keyCanon = ks, int32(kend), kd, kcanon
			canon = canon && c.canon && kcanon
			if count > 0 && bytes.Compare(prev, key) >= 0 {
				sorted = false
			}
			prev = key
			if last < 0 {
				t.nodes[idx].first = child
			} else {
				t.nodes[last].next = child
			}
			last = child
			count++
			pos = t.skip(end)
			canon = canon && pos == end
			if pos >= len(src) {
				return -1, pos, false
			}
			if src[pos] == '}' {
				pos++
				break
			}
			if src[pos] != ',' {
				return -1, pos, false
			}
			p = t.skip(pos + 1)
			canon = canon && p == pos+1
			pos = p
		}
	}
	n := &t.nodes[idx]
	n.kind, n.end, n.count, n.sorted, n.canon = nObject, int32(pos), count, sorted, canon && sorted
	return idx, pos, true
}

func (t *tree) array(idx int32, pos, depth int) (int32, int, bool) {
	src := t.src
	canon := true
	var count int32
	last := int32(-1)
	p := t.skip(pos + 1)
	canon = canon && p == pos+1
	pos = p
	if pos < len(src) && src[pos] == ']' {
		pos++
	} else {
		for {
			child, end, ok := t.value(pos, depth+1)
			if !ok {
				return -1, pos, false
			}
			canon = canon && t.nodes[child].canon
			if last < 0 {
				t.nodes[idx].first = child
			} else {
				t.nodes[last].next = child
			}
			last = child
			count++
			pos = t.skip(end)
			canon = canon && pos == end
			if pos >= len(src) {
				return -1, pos, false
			}
			if src[pos] == ']' {
				pos++
				break
			}
			if src[pos] != ',' {
				return -1, pos, false
			}
			p = t.skip(pos + 1)
			canon = canon && p == pos+1
			pos = p
		}
	}
	n := &t.nodes[idx]
	n.kind, n.end, n.count, n.canon = nArray, int32(pos), count, canon
	return idx, pos, true
}

// key returns the decoded key of member c.
func (t *tree) key(c int32) []byte {
	nd := &t.nodes[c]
	if nd.kd > 0 {
		return t.keys[nd.kd-1]
	}
	return t.src[nd.ks+1 : nd.ke-1]
}

// member returns the member of object n named k (the last one, as a
// decoder keeps), or -1.
func (t *tree) member(n int32, k string) int32 {
	r := int32(-1)
	for c := t.nodes[n].first; c >= 0; c = t.nodes[c].next {
		if string(t.key(c)) == k {
			r = c
		}
	}
	return r
}

// strBytes returns the decoded value of string node n.
func (t *tree) strBytes(n int32) []byte {
	nd := &t.nodes[n]
	if nd.decode {
		return unquote(t.src[nd.start:nd.end])
	}
	return t.src[nd.start+1 : nd.end-1]
}

// isStr reports whether node n is the string s.
func (t *tree) isStr(n int32, s string) bool {
	return t.nodes[n].kind == nString && string(t.strBytes(n)) == s
}

// okind is the kind of an output value.
type okind uint8

const (
	oSrc okind = iota // the source value src, re-encoded
	oKey              // the key of source member src, as a string
	oLit              // the JSON text lit
	oStr              // the string str
	oObj              // an object of mem
	oArr              // an array of elems
)

// oval is a value of the output tree.
type oval struct {
	kind  okind
	src   int32
	lit   []byte
	str   string
	mem   []omember
	elems []oval
}

// omember is a member of an output object: a source member's key (ksrc)
// or a constant one.
type omember struct {
	key  []byte // decoded, for sorting and lookups
	ksrc int32  // the source member whose key this is, or -1
	val  oval
}

// bump hands out slices of one growing buffer, reset for every tool.
type bump[T any] struct{ buf []T }

func (a *bump[T]) take(n int) []T {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]T, 0, max(256, 2*cap(a.buf), n))
	}
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l : l+n]
}

// rewriter holds the buffers of the fast path; one per goroutine at a time.
type rewriter struct {
	t      tree
	ints   bump[int32]
	mems   bump[omember]
	vals   bump[oval]
	out    []byte
	budget int // see geminiBudget
}

var rewriters = sync.Pool{New: func() any { return new(rewriter) }}

// Constant keys and literals.
var (
	kAnyOf    = []byte("anyOf")
	kType     = []byte("type")
	kProps    = []byte("properties")
	kRequired = []byte("required")
	kAddProps = []byte("additionalProperties")
	kEnum     = []byte("enum")
	kExample  = []byte("example")
	kNullable = []byte("nullable")
	litFalse  = []byte("false")
	litTrue   = []byte("true")
	litNull   = []byte("null")
)

// getRewriter returns a rewriter from the pool; release it after use.
func getRewriter() *rewriter { return rewriters.Get().(*rewriter) }

// exportOne encodes one tool's definition into a new slice: the fast
// path when it takes the schema, else exportOneMap.
func (r *rewriter) exportOne(p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
	if b, ok := r.appendFast(r.out[:0], p, t, name, opts); ok {
		r.out = b
		return bytes.Clone(b), nil
	}
	return exportOneMap(p, t, name, opts)
}

// appendTool appends one tool's definition to b, as exportOne encodes it.
func (r *rewriter) appendTool(b []byte, p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
	if out, ok := r.appendFast(b, p, t, name, opts); ok {
		return out, nil
	}
	frag, err := exportOneMap(p, t, name, opts)
	return append(b, frag...), err
}

// appendFast appends one tool's definition through the fast path, or
// reports false (b unchanged) when the schema is left to exportOneMap:
// not an object, not valid JSON, followed by more data, or nested deeper
// than maxParseDepth.
func (r *rewriter) appendFast(b []byte, p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, bool) {
	raw := bytes.TrimSpace(t.Inputs)
	if len(raw) == 0 || raw[0] != '{' {
		return b, false
	}
	defer r.reset()
	if !r.t.parse(raw) {
		return b, false
	}
	strict := p == OpenAI && opts.Strict
	b = appendFunctionHead(b, p, name, t.Description)
	switch {
	case p == Gemini:
		r.budget = geminiBudget
		params := r.gemini(0, 0, 0)
		params.mem = set(params.mem, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: "OBJECT"}})
		if i := find(params.mem, kProps); i >= 0 && len(params.mem[i].val.mem) > 0 {
			b = append(b, `,"parameters":`...)
			b = r.appendOval(b, &params)
		}
	case strict:
		params := r.strict(0, 0, true)
		b = append(b, `,"parameters":`...)
		b = r.appendOval(b, &params)
	case r.passThrough():
		if p == Anthropic {
			b = append(b, `,"input_schema":`...)
		} else {
			b = append(b, `,"parameters":`...)
		}
		b = r.compact(b)
	default:
		params := r.objectRoot()
		if p == Anthropic {
			b = append(b, `,"input_schema":`...)
		} else {
			b = append(b, `,"parameters":`...)
		}
		b = r.appendOval(b, &params)
	}
	return appendFunctionTail(b, p, strict), true
}

// reset empties the buffers of one tool.
func (r *rewriter) reset() {
	r.t.src = nil
	r.ints.buf, r.mems.buf, r.vals.buf = r.ints.buf[:0], r.mems.buf[:0], r.vals.buf[:0]
}

// release resets r and returns it to the pool, unless a huge schema grew
// its buffers.
func (r *rewriter) release() {
	r.reset()
	if cap(r.out) > 1<<20 || cap(r.t.nodes) > 1<<16 || cap(r.mems.buf) > 1<<16 || cap(r.vals.buf) > 1<<16 {
		return
	}
	rewriters.Put(r)
}

// passThrough reports what passThrough reports for the source: a root
// with type "object" (as written), an object of properties, and neither
// $schema nor $id.
func (r *rewriter) passThrough() bool {
	t := &r.t
	ty := t.member(0, "type")
	if ty < 0 || string(t.src[t.nodes[ty].start:t.nodes[ty].end]) != `"object"` {
		return false
	}
	if pr := t.member(0, "properties"); pr < 0 || t.nodes[pr].kind != nObject {
		return false
	}
	return t.member(0, "$schema") < 0 && t.member(0, "$id") < 0
}

// compact appends the source without whitespace between tokens, as
// json.Compact does.
func (r *rewriter) compact(b []byte) []byte {
	src := r.t.src
	if !r.t.space {
		return append(b, src...)
	}
	start, inStr := 0, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case isSpace(c):
			b = append(b, src[start:i]...)
			start = i + 1
		}
	}
	return append(b, src[start:]...)
}

// distinct returns the members of object n sorted by key, one per key
// (the last, as a decoder keeps).
func (r *rewriter) distinct(n int32) []int32 {
	nodes := r.t.nodes
	nd := &nodes[n]
	s := r.ints.take(int(nd.count))
	for c := nd.first; c >= 0; c = nodes[c].next {
		s = append(s, c)
	}
	if nd.sorted {
		return s
	}
	// Insertion sort, stable: duplicates keep their source order.
	for i := 1; i < len(s); i++ {
		x := s[i]
		j := i
		for j > 0 && bytes.Compare(r.t.key(s[j-1]), r.t.key(x)) > 0 {
			s[j] = s[j-1]
			j--
		}
		s[j] = x
	}
	out := s[:0]
	for i, c := range s {
		if i+1 < len(s) && bytes.Equal(r.t.key(c), r.t.key(s[i+1])) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// find returns the index of the member named key, or -1.
func find(mem []omember, key []byte) int {
	for i := range mem {
		if bytes.Equal(mem[i].key, key) {
			return i
		}
	}
	return -1
}

// set replaces the member named m.key, or appends m.
func set(mem []omember, m omember) []omember {
	if i := find(mem, m.key); i >= 0 {
		mem[i] = m
		return mem
	}
	return append(mem, m)
}

func (r *rewriter) srcMember(c int32) omember {
	return omember{key: r.t.key(c), ksrc: c, val: oval{kind: oSrc, src: c}}
}

// srcElems returns the elements of source array n as output values,
// with room for extra more.
func (r *rewriter) srcElems(n int32, extra int) []oval {
	nd := &r.t.nodes[n]
	out := r.vals.take(int(nd.count) + extra)
	for c := nd.first; c >= 0; c = r.t.nodes[c].next {
		out = append(out, oval{kind: oSrc, src: c})
	}
	return out
}

// objectRoot is objectRoot over the source root.
func (r *rewriter) objectRoot() oval {
	t := &r.t
	mem := r.distinct(0)
	out := r.mems.take(len(mem) + 2)
	hasType, hasProps := false, false
	for _, c := range mem {
		nd := &t.nodes[c]
		switch string(t.key(c)) {
		case "$schema", "$id":
			continue
		case "type":
			hasType = true
		case "properties":
			hasProps = true
			if nd.kind != nObject {
				out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oObj}})
				continue
			}
		}
		out = append(out, r.srcMember(c))
	}
	if !hasType {
		out = append(out, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: "object"}})
	}
	if !hasProps {
		out = append(out, omember{key: kProps, ksrc: -1, val: oval{kind: oObj}})
	}
	return oval{kind: oObj, mem: out}
}

// strict is openAIStrict over source node n; root applies objectRoot
// first.
func (r *rewriter) strict(n int32, depth int, root bool) oval {
	if depth > maxDepth {
		return oval{kind: oObj}
	}
	t := &r.t
	if t.nodes[n].kind != nObject {
		return oval{kind: oSrc, src: n}
	}
	mem := r.distinct(n)
	out := r.mems.take(len(mem) + 4)
	var anyOf []oval
	hasAnyOf, hasType, hasProps := false, false, false
	for _, c := range mem {
		nd := &t.nodes[c]
		k := string(t.key(c))
		switch {
		case strictDropped(k):
		case k == "additionalProperties":
		case k == "format":
			if nd.kind == nString && openAIFormats[string(t.strBytes(c))] {
				out = append(out, r.srcMember(c))
			}
		case k == "anyOf" || k == "oneOf":
			if nd.kind == nArray {
				anyOf = r.grow(anyOf, int(nd.count))
				hasAnyOf = true
				for e := nd.first; e >= 0; e = t.nodes[e].next {
					anyOf = append(anyOf, r.strict(e, depth+1, false))
				}
			}
		case k == "properties" || k == "$defs" || k == "definitions":
			if k == "properties" && root {
				hasProps = true
			}
			if nd.kind == nObject {
				kids := r.distinct(c)
				conv := r.mems.take(len(kids))
				for _, kid := range kids {
					conv = append(conv, omember{key: t.key(kid), ksrc: kid, val: r.strict(kid, depth+1, false)})
				}
				out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oObj, mem: conv}})
			} else if k == "properties" && root {
				out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oObj}})
			}
		case k == "items":
			if nd.kind != nArray {
				out = append(out, omember{key: t.key(c), ksrc: c, val: r.strict(c, depth+1, false)})
			}
		default:
			if k == "type" {
				hasType = true
			}
			out = append(out, r.srcMember(c))
		}
	}
	if root && !hasType {
		out = append(out, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: "object"}})
	}
	if root && !hasProps {
		out = append(out, omember{key: kProps, ksrc: -1, val: oval{kind: oObj}})
	}
	if hasAnyOf {
		out = append(out, omember{key: kAnyOf, ksrc: -1, val: oval{kind: oArr, elems: anyOf}})
	}
	if !r.isObjectSchema(out) {
		return oval{kind: oObj, mem: out}
	}
	pi := find(out, kProps)
	var props []omember
	if pi >= 0 {
		props = out[pi].val.mem
	}
	rq := t.member(n, "required")
	rset := r.requiredSet(rq)
	req := r.vals.take(len(props))
	for i := range props {
		// props are sorted by key and distinct (see distinct).
		req = append(req, oval{kind: oKey, src: props[i].ksrc})
		if !r.required(rq, rset, props[i].key) {
			props[i].val = r.nullable(props[i].val)
		}
	}
	if pi < 0 {
		out = append(out, omember{key: kProps, ksrc: -1, val: oval{kind: oObj}})
	}
	out = set(out, omember{key: kRequired, ksrc: -1, val: oval{kind: oArr, elems: req}})
	out = append(out, omember{key: kAddProps, ksrc: -1, val: oval{kind: oLit, lit: litFalse}})
	if find(out, kType) < 0 {
		out = append(out, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: "object"}})
	}
	return oval{kind: oObj, mem: out}
}

// required reports whether name is listed in rq, the source's required
// member (or -1); big lists go through a set built once.
func (r *rewriter) required(rq int32, set map[string]bool, name []byte) bool {
	t := &r.t
	if rq < 0 || t.nodes[rq].kind != nArray {
		return false
	}
	if set != nil {
		return set[string(name)]
	}
	for e := t.nodes[rq].first; e >= 0; e = t.nodes[e].next {
		if t.nodes[e].kind == nString && bytes.Equal(t.strBytes(e), name) {
			return true
		}
	}
	return false
}

// requiredSet returns the set of the strings in rq when it is a long list.
func (r *rewriter) requiredSet(rq int32) map[string]bool {
	t := &r.t
	if rq < 0 || t.nodes[rq].kind != nArray || t.nodes[rq].count <= 16 {
		return nil
	}
	m := make(map[string]bool, t.nodes[rq].count)
	for e := t.nodes[rq].first; e >= 0; e = t.nodes[e].next {
		if t.nodes[e].kind == nString {
			m[string(t.strBytes(e))] = true
		}
	}
	return m
}

// typeOf classifies the type member of an output object as the rewrites
// see it: 's' a string (its value returned), 'a' a list, 'n' absent or
// null, 0 anything else.
func (r *rewriter) typeOf(mem []omember) (byte, []byte) {
	i := find(mem, kType)
	if i < 0 {
		return 'n', nil
	}
	v := &mem[i].val
	switch v.kind {
	case oStr:
		return 's', []byte(v.str)
	case oArr:
		return 'a', nil
	case oSrc:
		switch r.t.nodes[v.src].kind {
		case nString:
			return 's', r.t.strBytes(v.src)
		case nArray:
			return 'a', nil
		case nNull:
			return 'n', nil
		}
	}
	return 0, nil
}

// listHas reports whether the list v holds the string s (s != "") or
// null (s == "").
func (r *rewriter) listHas(v *oval, s string) bool {
	check := func(e *oval) bool {
		switch e.kind {
		case oStr:
			return s != "" && e.str == s
		case oLit:
			return s == "" && bytes.Equal(e.lit, litNull)
		case oSrc:
			if s == "" {
				return r.t.nodes[e.src].kind == nNull
			}
			return r.t.isStr(e.src, s)
		}
		return false
	}
	if v.kind == oArr {
		for i := range v.elems {
			if check(&v.elems[i]) {
				return true
			}
		}
		return false
	}
	for c := r.t.nodes[v.src].first; c >= 0; c = r.t.nodes[c].next {
		if check(&oval{kind: oSrc, src: c}) {
			return true
		}
	}
	return false
}

// grow returns list with room for n more elements.
func (r *rewriter) grow(list []oval, n int) []oval {
	if cap(list)-len(list) >= n {
		return list
	}
	return append(r.vals.take(len(list)+n), list...)
}

// elemsOf returns the elements of list v with room for one more.
func (r *rewriter) elemsOf(v *oval) []oval {
	if v.kind == oArr {
		out := r.vals.take(len(v.elems) + 1)
		return append(out, v.elems...)
	}
	return r.srcElems(v.src, 1)
}

// isList reports whether v is a list.
func (r *rewriter) isList(v *oval) bool {
	return v.kind == oArr || v.kind == oSrc && r.t.nodes[v.src].kind == nArray
}

// isObjectSchema is isObjectSchema over an output object.
func (r *rewriter) isObjectSchema(mem []omember) bool {
	switch kind, s := r.typeOf(mem); kind {
	case 's':
		return string(s) == "object"
	case 'a':
		return r.listHas(&mem[find(mem, kType)].val, "object")
	case 'n':
		return find(mem, kProps) >= 0
	}
	return false
}

// nullObject is {"type":"null"}.
func (r *rewriter) nullObject() oval {
	m := r.mems.take(1)
	return oval{kind: oObj, mem: append(m, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: "null"}})}
}

// nullable is nullable over an output value.
func (r *rewriter) nullable(v oval) oval {
	if v.kind != oObj {
		return v
	}
	// v is a fresh rewrite no one else refers to, and only values of
	// existing members change: it is changed in place.
	m := v.mem
	out := m
	switch kind, s := r.typeOf(m); kind {
	case 's':
		if string(s) != "null" {
			i := find(m, kType)
			elems := append(r.vals.take(2), m[i].val, oval{kind: oStr, str: "null"})
			out[i].val = oval{kind: oArr, elems: elems}
		}
	case 'a':
		i := find(m, kType)
		if !r.listHas(&m[i].val, "null") {
			out[i].val = oval{kind: oArr, elems: append(r.elemsOf(&m[i].val), oval{kind: oStr, str: "null"})}
		}
	case 'n':
		if i := find(m, kAnyOf); i >= 0 && r.isList(&m[i].val) {
			out[i].val = oval{kind: oArr, elems: append(r.elemsOf(&m[i].val), r.nullObject())}
		} else if find(m, []byte("$ref")) >= 0 {
			elems := append(r.vals.take(2), v, r.nullObject())
			return oval{kind: oObj, mem: append(r.mems.take(1), omember{key: kAnyOf, ksrc: -1, val: oval{kind: oArr, elems: elems}})}
		}
	}
	if i := find(m, kEnum); i >= 0 && r.isList(&m[i].val) && !r.listHas(&m[i].val, "") {
		out[i].val = oval{kind: oArr, elems: append(r.elemsOf(&m[i].val), oval{kind: oLit, lit: litNull})}
	}
	return oval{kind: oObj, mem: out}
}

// gemini is geminiSchema over source node n, root being the document's
// root, r.budget the budget.
func (r *rewriter) gemini(n, root int32, depth int) oval {
	t := &r.t
	if depth > maxDepth || t.nodes[n].kind != nObject {
		return oval{kind: oObj}
	}
	r.budget--
	var ref, desc, typ0, example, required int32 = -1, -1, -1, -1, -1
	for c := t.nodes[n].first; c >= 0; c = t.nodes[c].next {
		switch string(t.key(c)) {
		case "$ref":
			ref = c
		case "description":
			desc = c
		case "type":
			typ0 = c
		case "example":
			example = c
		case "required":
			required = c
		}
	}
	if ref >= 0 && t.nodes[ref].kind == nString {
		var out oval
		if target := r.resolveRef(root, t.strBytes(ref)); target >= 0 && r.budget > 0 {
			out = r.gemini(target, root, depth+1)
		} else {
			out = oval{kind: oObj}
		}
		if desc >= 0 && t.nodes[desc].kind == nString {
			out.mem = set(out.mem, r.srcMember(desc))
		}
		return out
	}
	mem := r.distinct(n)
	out := r.mems.take(len(mem) + 4)
	typ := ""
	nullable := 0 // 0 unset, 1 true, 2 false
	var anyOf []oval
	if ti := typ0; ti >= 0 {
		switch t.nodes[ti].kind {
		case nString:
			typ = geminiTypes[string(t.strBytes(ti))]
		case nArray:
			var buf [8]string
			kinds := buf[:0]
			for e := t.nodes[ti].first; e >= 0; e = t.nodes[e].next {
				s := ""
				if t.nodes[e].kind == nString {
					s = string(t.strBytes(e))
				}
				if s == "null" {
					nullable = 1
				} else if g := geminiTypes[s]; g != "" {
					kinds = append(kinds, g)
				}
			}
			switch len(kinds) {
			case 0:
				if nullable == 1 {
					typ = "NULL"
					nullable = 0
				}
			case 1:
				typ = kinds[0]
			default:
				anyOf = r.vals.take(len(kinds))
				for _, k := range kinds {
					m := r.mems.take(1)
					anyOf = append(anyOf, oval{kind: oObj, mem: append(m, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: k}})})
				}
			}
		}
	}
	if typ != "" {
		out = append(out, omember{key: kType, ksrc: -1, val: oval{kind: oStr, str: typ}})
	}
	hasExample := example >= 0
	for _, c := range mem {
		nd := &t.nodes[c]
		switch k := string(t.key(c)); k {
		case "description", "title", "pattern":
			if nd.kind == nString {
				out = append(out, r.srcMember(c))
			}
		case "nullable":
			switch nd.kind {
			case nTrue:
				nullable = 1
			case nFalse:
				nullable = 2
			}
		case "format":
			if nd.kind == nString && geminiFormats[typ][string(t.strBytes(c))] {
				out = append(out, r.srcMember(c))
			}
		case "enum":
			okAll, strs := nd.kind == nArray && nd.count > 0, 0
			if nd.kind == nArray {
				for e := nd.first; e >= 0; e = t.nodes[e].next {
					switch t.nodes[e].kind {
					case nString:
						strs++
					case nNull:
						nullable = 1
					default:
						okAll = false
					}
				}
			}
			if okAll && strs > 0 {
				elems := r.vals.take(strs)
				for e := nd.first; e >= 0; e = t.nodes[e].next {
					if t.nodes[e].kind == nString {
						elems = append(elems, oval{kind: oSrc, src: e})
					}
				}
				out = set(out, omember{key: kEnum, ksrc: -1, val: oval{kind: oArr, elems: elems}})
			}
		case "const":
			if nd.kind == nString {
				elems := append(r.vals.take(1), oval{kind: oSrc, src: c})
				out = set(out, omember{key: kEnum, ksrc: -1, val: oval{kind: oArr, elems: elems}})
			}
		case "minimum", "maximum":
			if nd.kind == nNumber {
				if _, err := strconv.ParseFloat(string(t.src[nd.start:nd.end]), 64); err == nil {
					out = append(out, r.srcMember(c))
				}
			}
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			if nd.kind == nNumber {
				num := t.src[nd.start:nd.end]
				if plainInt(num) {
					out = append(out, r.srcMember(c))
				} else if f, err := strconv.ParseFloat(string(num), 64); err == nil && f >= 0 && f == math.Trunc(f) && f < 1<<53 {
					out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oLit, lit: strconv.AppendInt(nil, int64(f), 10)}})
				}
			}
		case "properties":
			var conv []omember
			if nd.kind == nObject {
				kids := r.distinct(c)
				conv = r.mems.take(len(kids))
				for _, kid := range kids {
					conv = append(conv, omember{key: t.key(kid), ksrc: kid, val: r.gemini(kid, root, depth+1)})
				}
			}
			out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oObj, mem: conv}})
		case "items":
			if nd.kind != nArray {
				out = append(out, omember{key: t.key(c), ksrc: c, val: r.gemini(c, root, depth+1)})
			}
		case "anyOf", "oneOf":
			if nd.kind == nArray {
				anyOf = r.grow(anyOf, int(nd.count))
				for e := nd.first; e >= 0; e = t.nodes[e].next {
					if r.isNullType(e) {
						nullable = 1
						continue
					}
					anyOf = append(anyOf, r.gemini(e, root, depth+1))
				}
			}
		case "default", "example":
			out = append(out, r.srcMember(c))
		case "examples":
			if nd.kind == nArray && nd.count > 0 && !hasExample {
				out = append(out, omember{key: kExample, ksrc: -1, val: oval{kind: oSrc, src: nd.first}})
			}
		case "propertyOrdering":
			if nd.kind == nArray {
				elems := r.vals.take(int(nd.count))
				for e := nd.first; e >= 0; e = t.nodes[e].next {
					if t.nodes[e].kind == nString {
						elems = append(elems, oval{kind: oSrc, src: e})
					}
				}
				out = append(out, omember{key: t.key(c), ksrc: c, val: oval{kind: oArr, elems: elems}})
			}
		}
	}
	if len(anyOf) > 0 {
		out = append(out, omember{key: kAnyOf, ksrc: -1, val: oval{kind: oArr, elems: anyOf}})
	}
	switch nullable {
	case 1:
		out = append(out, omember{key: kNullable, ksrc: -1, val: oval{kind: oLit, lit: litTrue}})
	case 2:
		out = append(out, omember{key: kNullable, ksrc: -1, val: oval{kind: oLit, lit: litFalse}})
	}
	if rq := required; rq >= 0 && t.nodes[rq].kind == nArray {
		var props []omember
		if i := find(out, kProps); i >= 0 {
			props = out[i].val.mem
		}
		var kept []oval
		for e := t.nodes[rq].first; e >= 0; e = t.nodes[e].next {
			if t.nodes[e].kind != nString {
				continue
			}
			s := t.strBytes(e)
			// props are sorted by key (see distinct).
			lo, hi := 0, len(props)
			for lo < hi {
				mid := int(uint(lo+hi) >> 1)
				if bytes.Compare(props[mid].key, s) < 0 {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			if lo < len(props) && bytes.Equal(props[lo].key, s) {
				if kept == nil {
					kept = r.vals.take(int(t.nodes[rq].count))
				}
				kept = append(kept, oval{kind: oSrc, src: e})
			}
		}
		if len(kept) > 0 {
			out = append(out, omember{key: kRequired, ksrc: -1, val: oval{kind: oArr, elems: kept}})
		}
	}
	return oval{kind: oObj, mem: out}
}

// plainInt reports whether num is a non-negative integer literal below
// 2^53 written as strconv.AppendInt writes it.
func plainInt(num []byte) bool {
	if len(num) == 0 || len(num) > 15 {
		return false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// strictDropped reports whether openAIStrictDropped holds k, without
// hashing k (TestStrictDropped checks the two agree).
func strictDropped(k string) bool {
	switch k {
	case "$schema", "$id", "$comment", "default", "examples", "allOf", "not", "if", "then",
		"else", "dependentRequired", "dependentSchemas", "patternProperties",
		"unevaluatedProperties", "unevaluatedItems", "propertyNames", "minProperties",
		"maxProperties", "contains", "minContains", "maxContains", "uniqueItems",
		"prefixItems", "minLength", "maxLength", "readOnly", "writeOnly", "deprecated",
		"contentEncoding", "contentMediaType", "additionalItems":
		return true
	}
	return false
}

// isNullType reports whether source node n is an object whose only key
// is type, with the value "null".
func (r *rewriter) isNullType(n int32) bool {
	t := &r.t
	if t.nodes[n].kind != nObject || t.nodes[n].first < 0 {
		return false
	}
	last := int32(-1)
	for c := t.nodes[n].first; c >= 0; c = t.nodes[c].next {
		if string(t.key(c)) != "type" {
			return false
		}
		last = c
	}
	return t.isStr(last, "null")
}

// resolveRef is resolveRef over the source: the node ref points at, or
// -1 (also when that is null).
func (r *rewriter) resolveRef(root int32, ref []byte) int32 {
	path, ok := strings.CutPrefix(string(ref), "#/")
	if !ok {
		return -1
	}
	cur := root
	for part := range strings.SplitSeq(path, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if r.t.nodes[cur].kind != nObject {
			return -1
		}
		if cur = r.t.member(cur, part); cur < 0 {
			return -1
		}
	}
	if r.t.nodes[cur].kind == nNull {
		return -1
	}
	return cur
}

// appendNode appends the canonical encoding of source node n: what
// appendJSON writes for its decoded value.
func (r *rewriter) appendNode(b []byte, n int32) []byte {
	t := &r.t
	nd := &t.nodes[n]
	if nd.canon {
		return append(b, t.src[nd.start:nd.end]...)
	}
	switch nd.kind {
	case nString:
		return appendString(b, string(t.strBytes(n)))
	case nArray:
		b = append(b, '[')
		for c := nd.first; c >= 0; c = t.nodes[c].next {
			if c != nd.first {
				b = append(b, ',')
			}
			b = r.appendNode(b, c)
		}
		return append(b, ']')
	case nObject:
		b = append(b, '{')
		for i, c := range r.distinct(n) {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.appendKey(b, c)
			b = append(b, ':')
			b = r.appendNode(b, c)
		}
		return append(b, '}')
	}
	return append(b, t.src[nd.start:nd.end]...) // numbers and literals are canonical
}

// appendKey appends the key of source member c as a JSON string.
func (r *rewriter) appendKey(b []byte, c int32) []byte {
	nd := &r.t.nodes[c]
	if nd.keyCanon {
		return append(b, r.t.src[nd.ks:nd.ke]...)
	}
	return appendString(b, string(r.t.key(c)))
}

// appendOval appends the encoding of v, object keys sorted.
func (r *rewriter) appendOval(b []byte, v *oval) []byte {
	switch v.kind {
	case oSrc:
		return r.appendNode(b, v.src)
	case oKey:
		return r.appendKey(b, v.src)
	case oLit:
		return append(b, v.lit...)
	case oStr:
		return appendString(b, v.str)
	case oArr:
		b = append(b, '[')
		for i := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = r.appendOval(b, &v.elems[i])
		}
		return append(b, ']')
	}
	mem := v.mem
	// The order of the members, by key: an insertion sort of indexes (the
	// members are mostly in order already).
	order := r.ints.take(len(mem))
	for i := range mem {
		j := len(order)
		order = append(order, int32(i))
		for ; j > 0 && bytes.Compare(mem[order[j-1]].key, mem[i].key) > 0; j-- {
			order[j] = order[j-1]
		}
		order[j] = int32(i)
	}
	b = append(b, '{')
	for n, i := range order {
		if n > 0 {
			b = append(b, ',')
		}
		if mem[i].ksrc >= 0 {
			b = r.appendKey(b, mem[i].ksrc)
		} else {
			b = append(b, '"')
			b = append(b, mem[i].key...)
			b = append(b, '"')
		}
		b = append(b, ':')
		b = r.appendOval(b, &mem[i].val)
	}
	return append(b, '}')
}
