package front

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// maxFastDepth bounds the nesting appendJSON handles itself; deeper values
// (and cycles, which encoding/json reports) go to encoding/json.
const maxFastDepth = 64

// appendJSON appends v to buf exactly as a json.Encoder with
// SetEscapeHTML(false) writes it, without the trailing newline. The
// values a decoded JSON result is made of (maps, slices, strings,
// json.Number, booleans, nil) are written directly, sparing
// encoding/json's reflection and map-key sorting copies; anything else is
// handed to encoding/json, whose errors are returned as they are.
func appendJSON(buf *bytes.Buffer, v any, depth int) error {
	if depth > maxFastDepth {
		return appendSlow(buf, v)
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		return appendString(buf, x)
	case json.Number:
		if x == "" {
			buf.WriteByte('0')
			return nil
		}
		if !validNumber(string(x)) {
			return appendSlow(buf, x)
		}
		buf.WriteString(string(x))
	case map[string]any:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		var kb [16]string
		keys := kb[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := appendJSON(buf, x[k], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		if x == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendJSON(buf, e, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		return appendSlow(buf, v)
	}
	return nil
}

// appendString appends s as encoding/json writes it. It takes a string,
// not an any, so that a map key is not boxed (one allocation a key).
func appendString(buf *bytes.Buffer, s string) error {
	if !jsonx.Unescaped(s, false) {
		return appendSlow(buf, s)
	}
	buf.WriteByte('"')
	buf.WriteString(s)
	buf.WriteByte('"')
	return nil
}

// appendSlow appends v as encoding/json writes it.
func appendSlow(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}

// validNumber reports whether s is a JSON number literal, which
// encoding/json writes as it is.
func validNumber(s string) bool {
	first, last := s[0], s[len(s)-1]
	return (first == '-' || first >= '0' && first <= '9') && last >= '0' && last <= '9' && json.Valid([]byte(s))
}
