package manuals

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/utcpd/utcpd/utcp"
)

// member is one key/value pair of a JSON object, in document order.
type member struct {
	key string
	val json.RawMessage
}

// object is a JSON object that remembers its key order. Duplicate keys
// are kept in members; lookups see the last one, as encoding/json does.
type object struct {
	members []member
	pos     map[string]int // key → index of its last member; nil when stale
}

// parseObject decodes raw, which must be a JSON object.
func parseObject(raw []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object, got %s", jsonKind(raw))
	}
	o := &object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.members = append(o.members, member{key: key, val: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON object")
	}
	return o, nil
}

func (o *object) index(key string) int {
	if o.pos == nil {
		o.pos = make(map[string]int, len(o.members))
		for i, m := range o.members {
			o.pos[m.key] = i
		}
	}
	if i, ok := o.pos[key]; ok {
		return i
	}
	return -1
}

func (o *object) get(key string) (json.RawMessage, bool) {
	if i := o.index(key); i >= 0 {
		return o.members[i].val, true
	}
	return nil, false
}

func (o *object) has(key string) bool { return o.index(key) >= 0 }

// set replaces the value of key in place, or appends key.
func (o *object) set(key string, val json.RawMessage) {
	if i := o.index(key); i >= 0 {
		o.members[i].val = val
		return
	}
	o.members = append(o.members, member{key: key, val: val})
	o.pos = nil
}

// rename gives every member named from the name to, in place.
func (o *object) rename(from, to string) {
	for i := range o.members {
		if o.members[i].key == from {
			o.members[i].key = to
		}
	}
	o.pos = nil
}

// remove deletes every member named key.
func (o *object) remove(key string) {
	out := o.members[:0]
	for _, m := range o.members {
		if m.key != key {
			out = append(out, m)
		}
	}
	o.members = out
	o.pos = nil
}

// keys returns the distinct keys in order of first appearance.
func (o *object) keys() []string {
	seen := make(map[string]bool, len(o.members))
	var out []string
	for _, m := range o.members {
		if !seen[m.key] {
			seen[m.key] = true
			out = append(out, m.key)
		}
	}
	return out
}

// duplicates returns the keys that appear more than once.
func (o *object) duplicates() []string {
	count := map[string]int{}
	var out []string
	for _, m := range o.members {
		count[m.key]++
		if count[m.key] == 2 {
			out = append(out, m.key)
		}
	}
	return out
}

// encode writes o as compact JSON, keeping key order and dropping
// duplicate keys (the last value wins).
func (o *object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for i, m := range o.members {
		if o.index(m.key) != i {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(appendJSONString(nil, m.key))
		b.WriteByte(':')
		if err := json.Compact(&b, m.val); err != nil {
			b.Write(m.val)
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// appendJSONString appends s as a JSON string, without HTML escaping.
func appendJSONString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// marshalJSON encodes v without HTML escaping and without a trailing
// newline.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// jsonKind names the JSON type of raw for messages: object, array,
// string, number, boolean, null.
func jsonKind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func isNull(raw []byte) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeArray splits a JSON array into its elements.
func decodeArray(raw []byte) ([]json.RawMessage, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	return items, nil
}

// decodeString decodes a JSON string.
func decodeString(raw []byte) (string, bool) {
	var s string
	if len(raw) == 0 || bytes.TrimSpace(raw)[0] != '"' {
		return "", false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// decodeScalarString decodes a JSON string, number or boolean as text.
func decodeScalarString(raw []byte) (string, bool) {
	if s, ok := decodeString(raw); ok {
		return s, true
	}
	t := string(bytes.TrimSpace(raw))
	switch {
	case t == "true" || t == "false":
		return t, true
	case t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9'):
		return t, true
	}
	return "", false
}

// ---- JSON paths ----

var simpleKey = regexp.MustCompile(`^[A-Za-z0-9_\-$]+$`)

// joinKey returns the JSON path of key inside the object at base.
func joinKey(base, key string) string {
	if !simpleKey.MatchString(key) {
		return base + "[" + strconv.Quote(key) + "]"
	}
	if base == "" {
		return key
	}
	return base + "." + key
}

// joinIndex returns the JSON path of element i of the array at base.
func joinIndex(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

// joinPath appends a relative path (as made by joinKey/joinIndex from "")
// to base.
func joinPath(base, rel string) string {
	switch {
	case rel == "":
		return base
	case base == "":
		return rel
	case rel[0] == '[':
		return base + rel
	}
	return base + "." + rel
}

// parentPath strips the last segment of a path made by joinKey/joinIndex.
// It is best effort for quoted keys that contain brackets.
func parentPath(p string) string {
	if p == "" {
		return ""
	}
	if strings.HasSuffix(p, "]") {
		if strings.HasSuffix(p, `"]`) {
			if i := strings.LastIndex(p, `["`); i >= 0 {
				return p[:i]
			}
		}
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
		return ""
	}
	if i := strings.LastIndexAny(p, ".]"); i >= 0 {
		if p[i] == ']' {
			return p[:i+1]
		}
		return p[:i]
	}
	return ""
}

// ---- documents: JSON or YAML, with a path → line index ----

// maxFileSize caps files read on behalf of a configuration.
const maxFileSize = 32 << 20

// document is a decoded input document: its JSON text and the line of
// every JSON path in the original file.
type document struct {
	json  []byte
	lines map[string]int
}

// line returns the line of path, or of its nearest ancestor that has one,
// 0 if none.
func (d *document) line(path string) int {
	if d == nil || d.lines == nil {
		return 0
	}
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// firstByte returns the first byte of data that is not JSON whitespace, 0
// if none.
func firstByte(data []byte) byte {
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// isYAMLName reports whether a file name has a YAML extension.
func isYAMLName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return true
	}
	return false
}

// loadDocument decodes data as JSON or YAML. YAML is used when preferYAML
// is set, or when data does not start like JSON and name does not end in
// .json. Failures are *utcp.Error with the given code, naming name, line
// and column; withLines builds the path → line index.
func loadDocument(name string, data []byte, code utcp.Code, preferYAML, withLines bool) (*document, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	fb := firstByte(data)
	if fb == 0 {
		return nil, locErr(code, name, 0, 0, "the document is empty")
	}
	useYAML := preferYAML || (fb != '{' && fb != '[' && strings.ToLower(filepath.Ext(name)) != ".json")
	if !useYAML {
		if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
			return nil, jsonSyntaxError(code, name, data, err)
		}
		d := &document{json: data}
		if withLines {
			d.lines = jsonLines(data)
		}
		return d, nil
	}
	return loadYAML(name, data, code, withLines)
}

// locErr builds an error located at name:line:col; the operand of a %w
// in format is its cause.
func locErr(code utcp.Code, name string, line, col int, format string, args ...any) *utcp.Error {
	f := fmt.Errorf(format, args...)
	msg := f.Error()
	loc := name
	if line > 0 {
		loc += ":" + strconv.Itoa(line)
		if col > 0 {
			loc += ":" + strconv.Itoa(col)
		}
	}
	if loc != "" {
		msg = loc + ": " + msg
	}
	e := &utcp.Error{Code: code, Message: msg, Err: errors.Unwrap(f)}
	if name != "" {
		e.WithDetail("file", name)
	}
	if line > 0 {
		e.WithDetail("line", line)
	}
	if col > 0 {
		e.WithDetail("column", col)
	}
	return e
}

// jsonSyntaxError describes a decoding failure of data with its position.
func jsonSyntaxError(code utcp.Code, name string, data []byte, err error) *utcp.Error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset)
		if off > 0 && off <= len(data) && !strings.HasPrefix(se.Error(), "unexpected end") {
			off-- // Offset counts the offending byte
		}
		line, col := position(data, off)
		e := locErr(code, name, line, col, "malformed JSON: %v", se)
		e.Err = err
		return e
	}
	e := locErr(code, name, 0, 0, "malformed JSON: %v", err)
	e.Err = err
	return e
}

// position returns the 1-based line and column (in characters) of byte
// offset off in data.
func position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	start := bytes.LastIndexByte(data[:off], '\n') + 1
	return line, utf8.RuneCount(data[start:off]) + 1
}

// jsonLines maps the JSON path of every value in data (valid JSON) to the
// line its key (object members) or its first character (array elements)
// is on.
func jsonLines(data []byte) map[string]int {
	type frame struct {
		obj       bool
		path      string
		idx       int
		key       string
		expectKey bool
	}
	nl := newlineOffsets(data)
	lineAt := func(off int) int { return sort.SearchInts(nl, off) + 1 }
	lines := map[string]int{"": lineAt(tokenStart(data, 0))}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return lines
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		start := tokenStart(data, before)
		var path string
		if len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.obj {
				if top.expectKey {
					top.key, _ = tok.(string)
					top.expectKey = false
					lines[joinKey(top.path, top.key)] = lineAt(start)
					continue
				}
				path = joinKey(top.path, top.key)
				top.expectKey = true
			} else {
				path = joinIndex(top.path, top.idx)
				top.idx++
				lines[path] = lineAt(start)
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{obj: d == '{', path: path, expectKey: true})
		}
	}
}

// tokenStart skips whitespace and separators from off.
func tokenStart(data []byte, off int) int {
	for off < len(data) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func newlineOffsets(data []byte) []int {
	var out []int
	for i, c := range data {
		if c == '\n' {
			out = append(out, i)
		}
	}
	return out
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// loadYAML decodes a YAML document into JSON and indexes its lines.
func loadYAML(name string, data []byte, code utcp.Code, withLines bool) (d *document, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input in the past; a parser of
		// untrusted documents must not take the daemon down.
		if r := recover(); r != nil {
			d, err = nil, locErr(code, name, 0, 0, "malformed YAML: %v", r)
		}
	}()
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		line := 0
		if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ = strconv.Atoi(m[1])
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		e := locErr(code, name, line, 0, "malformed YAML: %s", msg)
		e.Err = err
		return nil, e
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil, locErr(code, name, 0, 0, "the document is empty")
	}
	var v any
	if err := root.Decode(&v); err != nil {
		e := locErr(code, name, 0, 0, "malformed YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		e.Err = err
		return nil, e
	}
	jv, err := yamlToJSON(v, "")
	if err != nil {
		return nil, locErr(code, name, 0, 0, "YAML value cannot be JSON: %w", err)
	}
	b, err := marshalJSON(jv)
	if err != nil {
		return nil, locErr(code, name, 0, 0, "YAML value cannot be JSON: %w", err)
	}
	d = &document{json: b}
	if withLines {
		d.lines = map[string]int{}
		yamlLines(root.Content[0], "", d.lines, 0)
	}
	return d, nil
}

// yamlToJSON converts a decoded YAML value into JSON-compatible values.
func yamlToJSON(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := yamlToJSON(e, joinKey(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			ks := fmt.Sprint(k)
			c, err := yamlToJSON(e, joinKey(path, ks))
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := yamlToJSON(e, joinIndex(path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: %v is not a JSON number", orTop(path), x)
		}
		return x, nil
	case nil, string, bool, int, int64, uint64, uint, int32:
		return x, nil
	default:
		return fmt.Sprint(x), nil
	}
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

// yamlLines records the line of every path below n.
func yamlLines(n *yaml.Node, path string, lines map[string]int, depth int) {
	if n == nil || depth > 10000 {
		return
	}
	if _, ok := lines[path]; !ok {
		lines[path] = n.Line
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			yamlLines(c, path, lines, depth+1)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinKey(path, k.Value)
			lines[p] = k.Line
			yamlLines(v, p, lines, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			yamlLines(c, joinIndex(path, i), lines, depth+1)
		}
	}
}
