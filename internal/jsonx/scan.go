package jsonx

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The scanner below walks JSON that json.Valid has accepted, to read a
// message's or a result's top-level fields without decoding the rest:
// the MCP paths use it to skip the SDK's decoder (and its 32 KiB buffer
// per value) for the shapes they meet on every call. On bytes that are
// not valid JSON its results mean nothing.

// SkipSpace returns the index of the first byte at or after i that is
// not JSON white space.
func SkipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the valid JSON value starting at d[i] and
// how deeply it nests objects and arrays (0 for a scalar).
func SkipValue(d []byte, i int) (end, depth int) {
	level := 0
	for ; i < len(d); i++ {
		switch d[i] {
		case '"':
			i = skipString(d, i)
			if level == 0 {
				return i, depth
			}
			i--
			continue
		case '{', '[':
			level++
			depth = max(depth, level)
			continue
		case '}', ']':
			level--
			if level == 0 {
				return i + 1, depth
			}
			continue
		}
		if level == 0 {
			// A number or a literal.
			j := i
			for j < len(d) && !delimiter(d[j]) {
				j++
			}
			return j, 0
		}
	}
	return i, depth
}

func delimiter(b byte) bool {
	switch b {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// skipString returns the index past the string starting at d[i].
func skipString(d []byte, i int) int {
	for i++; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// EachField calls fn with each key and value (its bytes) of the valid
// JSON object starting at d[i], in order. It returns false as soon as fn
// does, for a key with an escape (its bytes are not its text) or one
// repeated (encoding/json keeps the last, which the caller would have to
// mirror), and when d[i] is no object; true once the object ends.
func EachField(d []byte, i int, fn func(key, value []byte) bool) bool {
	if i >= len(d) || d[i] != '{' {
		return false
	}
	var seenBuf [8][]byte
	seen := seenBuf[:0]
	for i++; ; {
		i = SkipSpace(d, i)
		if i >= len(d) {
			return false
		}
		if d[i] == '}' {
			return true
		}
		if d[i] == ',' {
			i = SkipSpace(d, i+1)
		}
		ks := i + 1
		ke := ks
		for ke < len(d) && d[ke] != '"' {
			if d[ke] == '\\' {
				return false
			}
			ke++
		}
		if ke >= len(d) {
			return false
		}
		key := d[ks:ke]
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return false
			}
		}
		seen = append(seen, key)
		vs := SkipSpace(d, SkipSpace(d, ke+1)+1)
		ve, _ := SkipValue(d, vs)
		if !fn(key, d[vs:ve]) {
			return false
		}
		i = ve
	}
}

// EachElement calls fn with each element (its bytes) of the valid JSON
// array starting at d[i]; false as soon as fn is, or when d[i] is no
// array.
func EachElement(d []byte, i int, fn func(value []byte) bool) bool {
	if i >= len(d) || d[i] != '[' {
		return false
	}
	for i = SkipSpace(d, i+1); i < len(d) && d[i] != ']'; {
		end, _ := SkipValue(d, i)
		if !fn(d[i:end]) {
			return false
		}
		i = SkipSpace(d, end)
		if i < len(d) && d[i] == ',' {
			i = SkipSpace(d, i+1)
		}
	}
	return i < len(d)
}

// PlainString returns the text of a JSON string without escapes; false
// for anything else.
func PlainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// PlainText is the text of a JSON string without escapes and of valid
// UTF-8, as json.Unmarshal reads it; false for any other value (which
// json.Unmarshal may still read: an escape, or bytes it would replace).
func PlainText(v []byte) (string, bool) {
	text, ok := PlainString(v)
	if !ok || !utf8.Valid(text) {
		return "", false
	}
	return string(text), true
}

// TextBlock returns the text of an MCP text content block,
// {"type":"text","text":"..."} with its keys in either order; false for
// any other block (another type, more fields, a text that is not a
// string).
func TextBlock(block []byte) (string, bool) {
	var typ, text []byte
	if !EachField(block, 0, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		default:
			return false
		}
		return true
	}) || string(typ) != `"text"` || len(text) == 0 || text[0] != '"' {
		return "", false
	}
	if body, plain := PlainString(text); plain {
		return string(body), true
	}
	var t string
	if json.Unmarshal(text, &t) != nil {
		return "", false
	}
	return t, true
}

// Unescaped reports whether encoding/json writes s as it is between its
// quotes: ASCII without control characters, '"' or '\\', and, when
// escapeHTML (json.Marshal; not an Encoder with SetEscapeHTML(false)),
// without '<', '>' or '&'. The encoders that write strings themselves
// on a hot path use it to keep their output byte for byte encoding/json's.
func Unescaped(s string, escapeHTML bool) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x80 || c == '"' || c == '\\':
			return false
		case escapeHTML && (c == '<' || c == '>' || c == '&'):
			return false
		}
	}
	return true
}

// AppendMarshaledString appends s to b as json.Marshal writes it: as it
// is between quotes when Unescaped (with HTML escaping), else through
// json.Marshal itself, so that the bytes are always its own.
func AppendMarshaledString(b []byte, s string) []byte {
	if Unescaped(s, true) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	m, _ := json.Marshal(s) // a string always encodes
	return append(b, m...)
}

// AppendTextBlock appends the MCP text content block of text, the i-th
// of a list (a comma before all but the first), as json.Marshal writes
// the go-sdk's TextContent without annotations or _meta.
func AppendTextBlock(b []byte, i int, text string) []byte {
	if i > 0 {
		b = append(b, ',')
	}
	b = append(b, `{"type":"text","text":`...)
	b = AppendMarshaledString(b, text)
	return append(b, '}')
}

// AppendMarshaledRaw appends raw as json.Marshal writes a
// json.RawMessage: compacted. False, b as it was, when raw does not
// compact or holds what json.Marshal would escape in it (<, >, &,
// U+2028, U+2029).
func AppendMarshaledRaw(b, raw []byte) ([]byte, bool) {
	if bytes.ContainsAny(raw, "<>&\u2028\u2029") {
		return b, false
	}
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, raw) != nil {
		return b, false
	}
	return buf.Bytes(), true
}
