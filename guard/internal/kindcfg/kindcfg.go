// Package kindcfg holds what the guard kinds share: strict decoding of a
// guard's configuration section, durations written as strings, and tool
// name globs. It is internal to guard/.
package kindcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Decode decodes a guard's configuration section into dst (a pointer to a
// struct) strictly:
//
//   - The section must be a JSON object; an empty section or null counts
//     as {}.
//   - Every field, at any depth, must be one dst knows by its exact json
//     tag (encoding/json alone would accept any letter case). Unknown and
//     duplicated fields are one error that names all of them, with their
//     paths and the closest known names.
//   - Two fields are accepted besides dst's own: "kind", which must equal
//     kind when present, and "name", the guard's name in the chain, which
//     the guard does not use.
//   - Values must have the right JSON types, and nothing may follow the
//     object.
func Decode(raw json.RawMessage, kind string, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return fmt.Errorf("the configuration must be a JSON object")
	}
	if !json.Valid(raw) {
		// Let encoding/json say where.
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("invalid JSON: %w", err)
		}
		return fmt.Errorf("invalid JSON")
	}
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("kindcfg: dst must be a pointer to a struct, not %v", t)
	}
	var p problems
	var top map[string]json.RawMessage
	p.walkStruct(raw, t.Elem(), "", map[string]reflect.Type{"kind": nil, "name": nil}, func(key string, v json.RawMessage) {
		if top == nil {
			top = map[string]json.RawMessage{}
		}
		top[key] = v
	})
	if err := p.err(); err != nil {
		return err
	}
	if k, ok := top["kind"]; ok {
		var s string
		if err := json.Unmarshal(k, &s); err != nil {
			return fmt.Errorf("field kind must be a string")
		}
		if s != kind {
			return fmt.Errorf("field kind is %q, but this is the configuration of a %q guard", s, kind)
		}
	}
	if n, ok := top["name"]; ok {
		var s string
		if err := json.Unmarshal(n, &s); err != nil {
			return fmt.Errorf("field name must be a string")
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %s: want %s, got a JSON %s", te.Field, jsonKind(te.Type), te.Value)
		}
		return err
	}
	return nil
}

// jsonKind names the JSON shape a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Duration]() {
		return "a duration string such as \"5s\""
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// problems collects unknown and duplicate fields.
type problems struct {
	unknown []string // "path" (did you mean ...)
	dups    []string
	invalid []string // values a self-decoding type refused
}

func (p *problems) err() error {
	if len(p.unknown) == 0 && len(p.dups) == 0 && len(p.invalid) == 0 {
		return nil
	}
	parts := append([]string(nil), p.invalid...)
	if len(p.unknown) == 1 {
		parts = append(parts, "unknown field "+p.unknown[0])
	} else if len(p.unknown) > 1 {
		parts = append(parts, "unknown fields "+strings.Join(p.unknown, ", "))
	}
	if len(p.dups) > 0 {
		parts = append(parts, "duplicated fields "+strings.Join(p.dups, ", "))
	}
	return errors.New(strings.Join(parts, "; "))
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walk checks raw against type t at path.
func (p *problems) walk(raw json.RawMessage, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if len(raw) == 0 {
		return
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		// Opaque: the type decodes itself. Decode it here too, so that
		// its error names the field.
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			p.invalid = append(p.invalid, fmt.Sprintf("field %s: %v", path, err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		p.walkStruct(raw, t, path, nil, nil)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 || raw[0] != '[' {
			return
		}
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return
		}
		for i, e := range elems {
			p.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String || raw[0] != '{' {
			return
		}
		eachField(raw, func(key string, v json.RawMessage) {
			p.walk(v, t.Elem(), path+"["+strconv.Quote(key)+"]")
		})
	}
}

// walkStruct checks the fields of the object raw against struct type t;
// extra lists further accepted names (checked by the caller, which sees
// them through seen).
func (p *problems) walkStruct(raw json.RawMessage, t reflect.Type, path string, extra map[string]reflect.Type, seen func(string, json.RawMessage)) {
	if raw[0] != '{' {
		return // a type error, which encoding/json reports
	}
	fields := structFields(t)
	known := make([]string, 0, len(fields)+len(extra))
	for name := range fields {
		known = append(known, name)
	}
	for name := range extra {
		known = append(known, name)
	}
	sort.Strings(known)
	keys := map[string]bool{}
	eachField(raw, func(key string, v json.RawMessage) {
		fp := key
		if path != "" {
			fp = path + "." + key
		}
		if keys[key] {
			p.dups = append(p.dups, strconv.Quote(fp))
			return
		}
		keys[key] = true
		if ft, ok := fields[key]; ok {
			p.walk(v, ft, fp)
			return
		}
		if _, ok := extra[key]; ok {
			if seen != nil {
				seen(key, v)
			}
			return
		}
		msg := strconv.Quote(fp)
		if near := utcp.Closest(key, known, 2); len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", near[0])
		}
		p.unknown = append(p.unknown, msg)
	})
}

// structFields maps the JSON names of t's exported fields to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[name] = f.Type
	}
	return out
}

// eachField calls fn for every member of the JSON object raw, in order,
// duplicates included. raw must be valid JSON.
func eachField(raw json.RawMessage, fn func(key string, v json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return
		}
		fn(key, v)
	}
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("5s", "250ms", "1m30s"). It must not be negative.
type Duration time.Duration

// UnmarshalJSON parses a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}
