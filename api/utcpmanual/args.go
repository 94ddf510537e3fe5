package utcpmanual

import (
	"bytes"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// Limits of the query decoding, against requests built to exhaust memory.
const (
	// maxKeyDepth is the most bracket segments one query key may have.
	maxKeyDepth = 32
	// maxIndex bounds an array index written as a key segment ("k[7]").
	maxIndex = 10000
	// maxRefHops bounds how many $ref a schema lookup follows.
	maxRefHops = 32
)

// schema is a tool's input JSON Schema, decoded, with the root its local
// $ref pointers resolve against. The zero value is "no schema": every
// argument is untyped.
type schema struct {
	root any
	node map[string]any
}

// parseSchema decodes raw (numbers as json.Number). Anything that is not
// a JSON object gives the empty schema.
func parseSchema(raw json.RawMessage) schema {
	if len(bytes.TrimSpace(raw)) == 0 {
		return schema{}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return schema{}
	}
	m, _ := v.(map[string]any)
	return schema{root: v}.at(m)
}

// at returns the schema node m under the same root, with its $ref
// followed (local "#/..." pointers only).
func (s schema) at(m map[string]any) schema {
	for range maxRefHops {
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			break
		}
		target, ok := pointer(s.root, strings.TrimPrefix(ref, "#")).(map[string]any)
		if !ok {
			break
		}
		m = target
	}
	return schema{root: s.root, node: m}
}

// pointer resolves a JSON pointer (RFC 6901) inside doc; nil when it does
// not resolve.
func pointer(doc any, p string) any {
	if p == "" {
		return doc
	}
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	cur := doc
	for tok := range strings.SplitSeq(p[1:], "/") {
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// branches returns the node's allOf, anyOf and oneOf subschemas.
func (s schema) branches() []schema {
	var out []schema
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := s.node[k].([]any)
		for _, b := range list {
			if m, ok := b.(map[string]any); ok {
				out = append(out, s.at(m))
			}
		}
	}
	return out
}

// typeSet is the JSON types a schema admits, as far as utcpd needs to
// know them to restore a query string value.
type typeSet uint8

const (
	tString typeSet = 1 << iota
	tInteger
	tNumber
	tBoolean
	tObject
	tArray
	tNull
)

var typeNames = map[string]typeSet{"string": tString, "integer": tInteger, "number": tNumber,
	"boolean": tBoolean, "object": tObject, "array": tArray, "null": tNull}

// types returns the types the schema admits: its "type" (a name or a
// list), else the kinds of its enum or const values, else the union of
// its allOf/anyOf/oneOf branches. 0 means untyped.
func (s schema) types() typeSet { return s.typesDepth(0) }

func (s schema) typesDepth(depth int) typeSet {
	if s.node == nil || depth > maxRefHops {
		return 0
	}
	var ts typeSet
	switch t := s.node["type"].(type) {
	case string:
		ts = typeNames[t]
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok {
				ts |= typeNames[name]
			}
		}
	}
	if ts != 0 {
		return ts
	}
	values, _ := s.node["enum"].([]any)
	if c, ok := s.node["const"]; ok {
		values = append(values, c)
	}
	for _, v := range values {
		ts |= kindOf(v)
	}
	if ts != 0 {
		return ts
	}
	for _, b := range s.branches() {
		ts |= b.typesDepth(depth + 1)
	}
	if ts == 0 {
		if _, ok := s.node["properties"]; ok {
			ts = tObject
		} else if _, ok := s.node["items"]; ok {
			ts = tArray
		}
	}
	return ts
}

// kindOf is the JSON type of a decoded value.
func kindOf(v any) typeSet {
	switch x := v.(type) {
	case string:
		return tString
	case bool:
		return tBoolean
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return tInteger | tNumber
		}
		return tNumber
	case map[string]any:
		return tObject
	case []any:
		return tArray
	case nil:
		return tNull
	}
	return 0
}

// property returns the schema of the object property name: from
// "properties" (here or in a branch), else a schema-valued
// "additionalProperties"; the empty schema when none says.
func (s schema) property(name string) schema { return s.propertyDepth(name, 0) }

func (s schema) propertyDepth(name string, depth int) schema {
	if s.node == nil || depth > maxRefHops {
		return schema{}
	}
	if props, ok := s.node["properties"].(map[string]any); ok {
		if m, ok := props[name].(map[string]any); ok {
			return s.at(m)
		}
	}
	for _, b := range s.branches() {
		if p := b.propertyDepth(name, depth+1); p.node != nil {
			return p
		}
	}
	if m, ok := s.node["additionalProperties"].(map[string]any); ok {
		return s.at(m)
	}
	return schema{}
}

// item returns the schema of the array element at index i: "prefixItems"
// or a list-valued "items" (tuples), else "items"; the empty schema when
// none says.
func (s schema) item(i int) schema {
	if s.node == nil {
		return schema{}
	}
	for _, k := range []string{"prefixItems", "items"} {
		if list, ok := s.node[k].([]any); ok && i < len(list) {
			if m, ok := list[i].(map[string]any); ok {
				return s.at(m)
			}
		}
	}
	if m, ok := s.node["items"].(map[string]any); ok {
		return s.at(m)
	}
	for _, b := range s.branches() {
		if it := b.item(i); it.node != nil {
			return it
		}
	}
	return schema{}
}

// propertyNames returns the names of the top-level properties, sorted.
func (s schema) propertyNames() []string {
	props, _ := s.node["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// BodyField returns the body_field the manual gives a tool whose input
// schema is inputs: the first property, by sorted name, whose schema
// admits only objects (or null), else the first admitting only arrays (or
// null), so that this argument travels as the JSON request body, exactly;
// else "body" (or "_body", "__body", ... when the tool has a property of
// that name), which no declared argument uses. A property whose name
// holds "$" is never chosen (UTCP clients substitute variables in every
// string of a call template).
func BodyField(inputs json.RawMessage) string {
	return parseSchema(inputs).bodyField()
}

func (s schema) bodyField() string {
	names := s.propertyNames()
	for _, want := range []typeSet{tObject, tArray} {
		for _, n := range names {
			if strings.ContainsAny(n, "${}") || strings.TrimSpace(n) != n || n == "" {
				continue
			}
			if ts := s.property(n).types(); ts&want != 0 && ts&^(want|tNull) == 0 {
				return n
			}
		}
	}
	field := "body"
	for slices.Contains(names, field) {
		field = "_" + field
	}
	return field
}

// qnode is one key path of a query string, as a tree: either leaf values
// or children (never both).
type qnode struct {
	vals  []string
	list  bool // the values came as "key[]"
	kids  map[string]*qnode
	order []string
}

func (n *qnode) child(k string) *qnode {
	if n.kids == nil {
		n.kids = map[string]*qnode{}
	}
	c := n.kids[k]
	if c == nil {
		c = &qnode{}
		n.kids[k] = c
		n.order = append(n.order, k)
	}
	return c
}

// splitKey splits "name[a][b]" into "name" and ["a", "b"] ("name[]"
// gives [""]); a key that is not of that form is one plain name.
func splitKey(key string) (string, []string) {
	i := strings.IndexByte(key, '[')
	if i <= 0 || !strings.HasSuffix(key, "]") {
		return key, nil
	}
	base, rest := key[:i], key[i:]
	var segs []string
	for rest != "" {
		if rest[0] != '[' {
			return key, nil
		}
		j := strings.IndexByte(rest, ']')
		if j < 0 {
			return key, nil
		}
		seg := rest[1:j]
		if strings.ContainsAny(seg, "[") {
			return key, nil
		}
		segs = append(segs, seg)
		rest = rest[j+1:]
	}
	return base, segs
}

// decodeArgs turns a call's query string into the tool's arguments,
// restoring their JSON types from the tool's input schema s. The rules
// (documented in docs/utcp-manual.md):
//
//   - "k=v" is argument k. A declared property's type decides what v
//     becomes: integer and number take a JSON number (kept as
//     json.Number), boolean takes true or false (any case), object and
//     array take JSON text, string takes v as it is; with several types,
//     the first of integer, number, boolean, object, array, null that v
//     fits wins, then string. An untyped argument stays a string, and a
//     value that fits none of the types is passed on unchanged (the
//     gateway's input validation then reports it).
//   - "k[]=v" (repeated) is an array, each element typed by the items
//     schema; "k=v" repeated is too when the schema admits arrays, and a
//     single "k=v" for an array-only argument is a one-element array
//     unless v is a JSON array.
//   - "k[a][b]=v" is the object {"a": {"b": v}}; a segment that is an
//     array index ("k[0][a]=v") builds an array where the schema says
//     array, or when untyped and the indices run 0..n-1. Missing indices
//     are null (axios leaves null elements out).
func decodeArgs(q url.Values, s schema) (map[string]any, error) {
	if len(q) == 0 {
		return nil, nil
	}
	root := &qnode{}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		base, segs := key, []string(nil)
		if s.property(key).node == nil {
			base, segs = splitKey(key)
		}
		if len(segs) > maxKeyDepth {
			return nil, badArg(base, "the query key %q is nested more than %d levels deep", key, maxKeyDepth)
		}
		list := len(segs) > 0 && segs[len(segs)-1] == ""
		if list {
			segs = segs[:len(segs)-1]
		}
		n := root.child(base)
		for _, seg := range segs {
			if seg == "" {
				return nil, badArg(base, "the query key %q has \"[]\" before its end", key)
			}
			if n.vals != nil {
				return nil, badArg(base, "the query key %q nests inside a value given as %q", key, base)
			}
			n = n.child(seg)
		}
		if n.kids != nil {
			return nil, badArg(base, "the query key %q gives a value where other keys nest fields", key)
		}
		n.vals = append(n.vals, q[key]...)
		n.list = n.list || list
	}
	args := make(map[string]any, len(root.order))
	for _, name := range root.order {
		v, err := toValue(root.kids[name], s.property(name), name)
		if err != nil {
			return nil, err
		}
		args[name] = v
	}
	return args, nil
}

// badArg is the invalid_request error of a query argument that cannot be
// read.
func badArg(arg, format string, a ...any) error {
	return httpx.Errorf(utcp.CodeInvalidRequest, format, a...).WithDetail("argument", arg)
}

// toValue converts one query tree node to a JSON value typed by s; arg
// names the top-level argument for errors.
func toValue(n *qnode, s schema, arg string) (any, error) {
	ts := s.types()
	if n.kids != nil {
		indices, isIndexed := indexKeys(n.order)
		asArray := isIndexed && (ts&tArray != 0 && ts&tObject == 0 || ts == 0 && contiguous(indices))
		if asArray {
			size := slices.Max(indices) + 1
			out := make([]any, size)
			for k, i := range indices {
				v, err := toValue(n.kids[n.order[k]], s.item(i), arg)
				if err != nil {
					return nil, err
				}
				out[i] = v
			}
			return out, nil
		}
		out := make(map[string]any, len(n.order))
		for _, k := range n.order {
			v, err := toValue(n.kids[k], s.property(k), arg)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	if n.list || len(n.vals) > 1 {
		if !n.list && ts != 0 && ts&tArray == 0 {
			return nil, badArg(arg, "the argument %q is given %d times but is not an array", arg, len(n.vals))
		}
		out := make([]any, len(n.vals))
		for i, v := range n.vals {
			out[i] = scalar(v, s.item(i).types())
		}
		return out, nil
	}
	v := n.vals[0]
	if ts&^tNull == tArray && !looksJSON(v, '[') {
		return []any{scalar(v, s.item(0).types())}, nil
	}
	return scalar(v, ts), nil
}

// indexKeys reports whether every key is an array index, and the indices.
func indexKeys(keys []string) ([]int, bool) {
	out := make([]int, len(keys))
	for i, k := range keys {
		if k == "" || len(k) > 1 && k[0] == '0' {
			return nil, false
		}
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 || n >= maxIndex {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// contiguous reports whether the indices are exactly 0..len-1.
func contiguous(indices []int) bool {
	seen := make([]bool, len(indices))
	for _, i := range indices {
		if i >= len(seen) || seen[i] {
			return false
		}
		seen[i] = true
	}
	return true
}

// scalar converts one query string value to the first of the types ts
// admits that it fits (see decodeArgs).
func scalar(v string, ts typeSet) any {
	if ts == 0 {
		return v
	}
	if ts&(tInteger|tNumber) != 0 && isJSONNumber(v) {
		return json.Number(v)
	}
	if ts&tBoolean != 0 {
		switch {
		case strings.EqualFold(v, "true"):
			return true
		case strings.EqualFold(v, "false"):
			return false
		}
	}
	if ts&tObject != 0 && looksJSON(v, '{') || ts&tArray != 0 && looksJSON(v, '[') {
		if x, ok := decodeJSON(v); ok {
			return x
		}
	}
	if ts&tNull != 0 && ts&tString == 0 && (v == "null" || v == "") {
		return nil
	}
	return v
}

// looksJSON reports whether v, trimmed, starts with open.
func looksJSON(v string, open byte) bool {
	t := strings.TrimSpace(v)
	return t != "" && t[0] == open
}

// decodeJSON decodes exactly one JSON value (numbers as json.Number).
func decodeJSON(v string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil || dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false
	}
	return x, true
}

// isJSONNumber reports whether v is a JSON number literal.
func isJSONNumber(v string) bool {
	if v == "" || v[0] != '-' && (v[0] < '0' || v[0] > '9') || v[len(v)-1] < '0' || v[len(v)-1] > '9' {
		return false
	}
	return json.Valid([]byte(v))
}
