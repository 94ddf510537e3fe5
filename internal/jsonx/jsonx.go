// Package jsonx holds the JSON helpers the module shares: compact
// encoding without HTML escaping (Marshal), decoding one value with
// numbers kept as json.Number (DecodeValue, DecodeOptional) and its fast
// path for plain JSON (DecodePlain), rendering an argument as text
// (ArgString), whether an object sets a field to null (ExplicitNull), and
// the excerpt of a payload quoted in an error message (Excerpt), and a
// scanner over the fields and elements of valid JSON (EachField,
// EachElement, SkipValue, PlainString, PlainText) and appenders that
// write what json.Marshal writes (AppendMarshaledString, AppendTextBlock,
// AppendMarshaledRaw) for the hot MCP paths.
package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ArgString renders an argument for a URL, query or header: a string as it
// is, a number in plain decimal (no exponent), a boolean as true or false,
// and objects and arrays as compact JSON. It reports false for nil, which
// callers leave out.
func ArgString(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		if strings.ContainsAny(string(x), "eE") {
			if f, err := x.Float64(); err == nil {
				return decimal(f), true
			}
		}
		return string(x), true
	case float64:
		return decimal(x), true
	case float32:
		return decimal(float64(x)), true
	case int:
		return strconv.Itoa(x), true
	case int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), true
	case json.RawMessage:
		var s string
		if json.Unmarshal(x, &s) == nil {
			return s, true
		}
		var buf bytes.Buffer
		if json.Compact(&buf, x) == nil {
			return buf.String(), true
		}
		return string(x), true
	}
	b, err := Marshal(v)
	if err != nil {
		return fmt.Sprint(v), true
	}
	return string(b), true
}

func decimal(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// Marshal encodes v as compact JSON without HTML escaping and without
// a trailing newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeValue decodes b when it holds exactly one JSON value (numbers
// as json.Number) and reports whether it did. Numbers, strings, booleans
// and null take a fast path without a json.Decoder, as most streamed
// events are small; objects and arrays of plain form (see DecodePlain),
// as most response bodies are, are decoded without a json.Decoder and
// without a json.Valid pass.
func DecodeValue(b []byte) (any, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, false
	}
	if c := b[0]; c == '{' || c == '[' {
		// DecodePlain takes exactly one value and nothing else: what it
		// accepts is valid JSON.
		if v, ok := DecodePlain(b); ok {
			return v, true
		}
	}
	if !json.Valid(b) {
		return nil, false
	}
	switch c := b[0]; {
	case c == '-' || c >= '0' && c <= '9':
		return json.Number(b), true
	case c == 't':
		return true, true
	case c == 'f':
		return false, true
	case c == 'n':
		return nil, true
	case c == '"':
		var s string
		if json.Unmarshal(b, &s) != nil {
			return nil, false
		}
		return s, true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// Excerpt returns the start of body, trimmed, for an error message: at
// most 512 bytes, cut at a character boundary, "(empty body)" when blank.
func Excerpt(body []byte) string {
	const max = 512
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(empty body)"
	}
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// DecodeOptional decodes raw as DecodeValue does; empty is nil.
func DecodeOptional(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	v, _ := DecodeValue(raw)
	return v
}

// ExplicitNull reports whether raw, a JSON object, sets field to null
// (rather than leaving it out).
func ExplicitNull(raw json.RawMessage, field string) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	v, ok := probe[field]
	return ok && string(v) == "null"
}
