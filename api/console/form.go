package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// A tool's input form is built from its input schema: a tree of fields,
// rendered by the "field" template (assets/form.html) and read back into
// arguments by the console's script, which walks the same tree (each
// field's data-kind and data-name).

// Field kinds.
const (
	kindObject  = "object"
	kindArray   = "array"
	kindString  = "string"
	kindNumber  = "number"
	kindInteger = "integer"
	kindBoolean = "boolean"
	kindEnum    = "enum"
	kindJSON    = "json" // any other schema: the value typed as JSON
)

// Limits of a generated form: deeper or larger schemas fall back to JSON
// fields.
const (
	maxFormDepth  = 8
	maxFormFields = 400
	maxRefDepth   = 16
)

// field is one input of a generated form.
type field struct {
	Kind        string
	Name        string // the property name ("" for the root and array items)
	Label       string
	Required    bool
	Nullable    bool
	Description string
	// Value is the initial value of a leaf input (the schema's default);
	// for kindJSON a JSON text. Checked is a required boolean's default.
	Value   string
	Checked bool
	// Options are an enum's choices, each value JSON-encoded.
	Options []option
	// Fields are an object's properties in schema order.
	Fields []*field
	// Item is an array's item field; MinItems how many the form starts
	// with.
	Item     *field
	MinItems int
	// Step, Min, Max, Pattern, Placeholder shape a leaf input.
	Step, Min, Max, Pattern, Placeholder string
	// Multiline makes a string field a textarea.
	Multiline bool
	// Open is an object's additionalProperties, typed as JSON.
	Open bool
}

type option struct {
	Value, Label string
	Selected     bool
}

// ordered is a JSON object with its keys in document order.
type ordered struct {
	keys []string
	vals map[string]any
}

func (o *ordered) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered decodes JSON keeping object key order (numbers as
// json.Number).
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > 256 {
		return nil, errors.New("the schema nests too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			var a []any
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	}
	return tok, nil
}

// plain converts decoded values (with *ordered objects) to plain JSON
// values for encoding.
func plain(v any) any {
	switch x := v.(type) {
	case *ordered:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = plain(x.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

func jsonText(v any) string {
	b, err := json.Marshal(plain(v))
	if err != nil {
		return ""
	}
	return string(b)
}

// formBuilder builds the fields of one schema.
type formBuilder struct {
	root   *ordered
	fields int
}

// buildForm returns the root field of a tool's input schema (an object;
// a schema that is not one becomes a JSON field).
func buildForm(schema json.RawMessage) *field {
	if len(bytes.TrimSpace(schema)) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	v, err := decodeOrdered(schema)
	o, ok := v.(*ordered)
	if err != nil || !ok {
		return &field{Kind: kindJSON, Label: "arguments", Value: "{}", Description: "the tool's input schema could not be read; type the arguments as a JSON object"}
	}
	b := &formBuilder{root: o}
	f := b.build(o, "arguments", true, 0)
	if f.Kind != kindObject {
		return &field{Kind: kindJSON, Label: "arguments", Value: "{}", Description: f.Description}
	}
	return f
}

// resolve follows a local $ref ("#/$defs/x", "#/definitions/x", any
// JSON pointer into the schema), at most maxRefDepth times.
func (b *formBuilder) resolve(s *ordered) (*ordered, bool) {
	for i := 0; i < maxRefDepth; i++ {
		ref, ok := s.get("$ref")
		if !ok {
			return s, true
		}
		rs, _ := ref.(string)
		target, ok := b.pointer(rs)
		if !ok {
			return s, false
		}
		s = target
	}
	return s, false
}

func (b *formBuilder) pointer(ref string) (*ordered, bool) {
	if ref == "#" {
		return b.root, true
	}
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = b.root
	for _, seg := range strings.Split(p, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		o, ok := cur.(*ordered)
		if !ok {
			return nil, false
		}
		if cur, ok = o.get(seg); !ok {
			return nil, false
		}
	}
	o, ok := cur.(*ordered)
	return o, ok
}

// schemaType returns a schema's type (the first non-null one of a list)
// and whether null is allowed.
func schemaType(s *ordered) (string, bool) {
	t, _ := s.get("type")
	switch x := t.(type) {
	case string:
		return x, x == "null"
	case []any:
		typ, nullable := "", false
		for _, e := range x {
			es, _ := e.(string)
			if es == "null" {
				nullable = true
			} else if typ == "" {
				typ = es
			} else {
				typ = "mixed"
			}
		}
		return typ, nullable
	}
	if _, ok := s.get("properties"); ok {
		return "object", false
	}
	if _, ok := s.get("items"); ok {
		return "array", false
	}
	return "", false
}

func str(s *ordered, k string) string {
	v, _ := s.get(k)
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

func (b *formBuilder) build(s *ordered, name string, required bool, depth int) *field {
	b.fields++
	f := &field{Name: name, Label: name, Required: required}
	rs, ok := b.resolve(s)
	if !ok {
		f.Kind, f.Description = kindJSON, "a schema reference the form cannot follow; type the value as JSON"
		return f
	}
	s = rs
	if t := str(s, "title"); t != "" && name != "" {
		f.Label = name + " (" + t + ")"
	}
	f.Description = str(s, "description")
	def, hasDefault := s.get("default")
	typ, nullable := schemaType(s)
	f.Nullable = nullable

	if e, ok := s.get("enum"); ok {
		if vals, ok := e.([]any); ok && len(vals) > 0 && len(vals) <= 500 {
			f.Kind = kindEnum
			defText := ""
			if hasDefault {
				defText = jsonText(def)
			}
			for _, v := range vals {
				jt := jsonText(v)
				label := jt
				if sv, ok := v.(string); ok {
					label = sv
				}
				f.Options = append(f.Options, option{Value: jt, Label: label, Selected: jt == defText})
			}
			return f
		}
	}
	if cv, ok := s.get("const"); ok {
		jt := jsonText(cv)
		f.Kind, f.Options = kindEnum, []option{{Value: jt, Label: jt, Selected: true}}
		return f
	}
	_, anyOf := s.get("anyOf")
	_, oneOf := s.get("oneOf")
	_, allOf := s.get("allOf")
	if anyOf || oneOf || allOf || typ == "mixed" || typ == "" || depth >= maxFormDepth || b.fields > maxFormFields {
		f.Kind = kindJSON
		if hasDefault {
			f.Value = jsonText(def)
		}
		f.Placeholder = "a JSON value"
		return f
	}
	switch typ {
	case "string":
		f.Kind = kindString
		if dv, ok := def.(string); ok {
			f.Value = dv
		}
		f.Pattern = str(s, "pattern")
		if format := str(s, "format"); format != "" {
			f.Placeholder = format
		}
		// Long text (no short maxLength, a media type) gets a textarea.
		var maxLen int
		_, _ = fmt.Sscan(str(s, "maxLength"), &maxLen)
		f.Multiline = str(s, "contentMediaType") != "" || maxLen > 256
	case "number", "integer":
		f.Kind = kindNumber
		f.Step = "any"
		if typ == "integer" {
			f.Kind, f.Step = kindInteger, "1"
		}
		f.Min, f.Max = str(s, "minimum"), str(s, "maximum")
		if dv, ok := def.(json.Number); ok {
			f.Value = dv.String()
		}
	case "boolean":
		f.Kind = kindBoolean
		if dv, ok := def.(bool); ok {
			f.Checked = dv
			if dv {
				f.Value = "true"
			} else {
				f.Value = "false"
			}
		}
	case "array":
		f.Kind = kindArray
		item := &ordered{vals: map[string]any{}}
		if it, ok := s.get("items"); ok {
			if is, ok := it.(*ordered); ok {
				item = is
			}
		}
		f.Item = b.build(item, "", true, depth+1)
		f.Item.Label = "item"
		if n := str(s, "minItems"); n != "" {
			var k int
			if _, err := fmt.Sscan(n, &k); err == nil && k > 0 && k <= 20 {
				f.MinItems = k
			}
		}
	case "object":
		f.Kind = kindObject
		req := map[string]bool{}
		if rl, ok := s.get("required"); ok {
			if list, ok := rl.([]any); ok {
				for _, e := range list {
					if es, ok := e.(string); ok {
						req[es] = true
					}
				}
			}
		}
		props, _ := s.get("properties")
		po, _ := props.(*ordered)
		if po != nil {
			for _, k := range po.keys {
				ps, ok := po.vals[k].(*ordered)
				if !ok {
					// true/false schemas: any value, or none.
					if pb, _ := po.vals[k].(bool); !pb {
						continue
					}
					ps = &ordered{vals: map[string]any{}}
				}
				f.Fields = append(f.Fields, b.build(ps, k, req[k], depth+1))
			}
		}
		// An object that names no properties (or admits others) takes
		// further properties as a JSON object.
		ap, hasAP := s.get("additionalProperties")
		closed := hasAP && ap == false
		if po == nil || len(po.keys) == 0 {
			f.Open = !closed
		} else if hasAP && !closed {
			f.Open = true
		}
	default:
		f.Kind = kindJSON
	}
	return f
}
