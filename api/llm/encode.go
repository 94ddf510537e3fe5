package llm

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// This file encodes the decoded schemas and the tool definitions without
// reflection. The output is byte for byte what marshal (encoding/json
// without HTML escaping) gives: object keys sorted, strings escaped the
// same way; encode_test.go checks it.

// appendJSON appends the encoding of v. Values of other types than those
// decodeSchema and the rewrites produce go through marshal.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case json.Number:
		// decodeSchema's numbers are valid literals; anything else is
		// left to marshal.
		if n := len(v); n == 0 || v[n-1] < '0' || v[n-1] > '9' || v[0] != '-' && (v[0] < '0' || v[0] > '9') || !json.Valid([]byte(v)) {
			break
		}
		return append(b, v...), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case []any:
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, x); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does
// without HTML escaping: '"' and '\\' escaped, control characters as
// \b \f \n \r \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029
// as \u2028 and \u2029, everything else as it is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFunction appends one tool definition: for OpenAI
// {"type":"function","function":{"name","description","parameters","strict"}},
// for Anthropic {"name","description","input_schema"}, for Gemini
// {"name","description","parameters"} — the encodings of OpenAITool,
// AnthropicTool and GeminiFunction. params must be compact JSON; for
// Gemini, empty params are left out.
func appendFunction(b []byte, p Provider, name, description string, params []byte, strict bool) []byte {
	b = appendFunctionHead(b, p, name, description)
	if p != Gemini || len(params) > 0 {
		if p == Anthropic {
			b = append(b, `,"input_schema":`...)
		} else {
			b = append(b, `,"parameters":`...)
		}
		b = append(b, params...)
	}
	return appendFunctionTail(b, p, strict)
}

// appendFunctionHead appends a tool definition up to its schema: the
// opening, the name and the description.
func appendFunctionHead(b []byte, p Provider, name, description string) []byte {
	if p == OpenAI {
		b = append(b, `{"type":"function","function":`...)
	}
	b = append(b, `{"name":`...)
	b = appendString(b, name)
	if description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, description)
	}
	return b
}

// appendFunctionTail closes what appendFunctionHead opened, after the
// schema member.
func appendFunctionTail(b []byte, p Provider, strict bool) []byte {
	if p == OpenAI {
		if strict {
			b = append(b, `,"strict":true`...)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
