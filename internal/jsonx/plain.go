package jsonx

import (
	"encoding/json"
	"unicode/utf8"
)

// maxPlainNesting bounds the nesting DecodePlain handles itself.
const maxPlainNesting = 64

// DecodePlain decodes b when it holds exactly one JSON value (white
// space around it allowed) of plain form: strings without escapes and of
// valid UTF-8, objects without duplicate keys, at most 64 levels deep.
// The value is exactly what encoding/json decodes with UseNumber
// (map[string]any, []any, json.Number, string, bool, nil; every string
// copied out of b); ok is false for anything else, valid JSON or not,
// which the caller then hands to encoding/json. It spares the call path a
// json.Decoder and its buffer.
func DecodePlain(b []byte) (v any, ok bool) {
	d := plainDecoder{data: b}
	if v, ok = d.value(0); !ok {
		return nil, false
	}
	d.ws()
	return v, d.pos == len(d.data)
}

type plainDecoder struct {
	data []byte
	pos  int
}

func (d *plainDecoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// consume skips white space and then c, reporting whether c was there.
func (d *plainDecoder) consume(c byte) bool {
	d.ws()
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *plainDecoder) literal(s string) bool {
	if len(d.data)-d.pos >= len(s) && string(d.data[d.pos:d.pos+len(s)]) == s {
		d.pos += len(s)
		return true
	}
	return false
}

// str reads a string without escapes, of valid UTF-8, after white space.
func (d *plainDecoder) str() (string, bool) {
	if !d.consume('"') {
		return "", false
	}
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		d.pos++
	}
	return "", false
}

// value reads one JSON value at d.pos (white space skipped).
func (d *plainDecoder) value(depth int) (any, bool) {
	if depth > maxPlainNesting {
		return nil, false
	}
	d.ws()
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		d.pos++
		m := map[string]any{}
		if d.consume('}') {
			return m, true
		}
		for {
			k, ok := d.str()
			if !ok || !d.consume(':') {
				return nil, false
			}
			if _, dup := m[k]; dup {
				return nil, false
			}
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			if d.consume(',') {
				continue
			}
			if d.consume('}') {
				return m, true
			}
			return nil, false
		}
	case c == '[':
		d.pos++
		a := make([]any, 0)
		if d.consume(']') {
			return a, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			a = append(a, v)
			if d.consume(',') {
				continue
			}
			if d.consume(']') {
				return a, true
			}
			return nil, false
		}
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case d.literal("true"):
		return true, true
	case d.literal("false"):
		return false, true
	case d.literal("null"):
		return nil, true
	}
	return nil, false
}

// number reads a number literal of the JSON grammar.
func (d *plainDecoder) number() (any, bool) {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	if d.pos < len(d.data) && d.data[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return nil, false
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(d.data[start:d.pos]), true
}
