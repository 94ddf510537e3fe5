package utcpmanual

import (
	"bytes"
	"encoding/json"
)

var (
	emptySchema = json.RawMessage(`{}`)
)

// clientSchema returns a tool's inputs or outputs schema in a form the
// UTCP clients' own schema model accepts. The TypeScript client validates
// a few JSON Schema keywords by kind and rejects the whole manual when
// one tool breaks them, so: an absent or non-object schema becomes {}
// (true) or {"not": {}} (false); boolean subschemas under properties and
// items become those objects; a checked keyword holding the wrong kind of
// value (a draft-3 "required": true, a "type" naming no JSON type, a
// string "minimum") is left out. Leaving a keyword out only loosens what
// the client believes; the gateway still validates every call against
// the tool's real schema. A schema needing no change is returned as it
// is.
func clientSchema(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "true", "{}":
		return emptySchema
	case "false":
		return json.RawMessage(`{"not":{}}`)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return emptySchema
	}
	m, ok := v.(map[string]any)
	if !ok {
		return emptySchema
	}
	if !fixSchema(m, 0) {
		return raw
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return emptySchema
	}
	return json.RawMessage(bytes.TrimSpace(b.Bytes()))
}

// subschema returns v as a schema object, and whether it had to change
// (a boolean or another non-object value).
func subschema(v any) (map[string]any, bool) {
	switch x := v.(type) {
	case map[string]any:
		return x, false
	case bool:
		if !x {
			return map[string]any{"not": map[string]any{}}, true
		}
	}
	return map[string]any{}, true
}

// fixSchema applies clientSchema's rules to m in place and reports
// whether anything changed. Nesting deeper than maxKeyDepth*4 is left as
// it is.
func fixSchema(m map[string]any, depth int) bool {
	if depth > maxKeyDepth*4 {
		return false
	}
	changed := false
	drop := func(k string) {
		delete(m, k)
		changed = true
	}
	for k, v := range m {
		switch k {
		case "$schema", "$id", "title", "description", "format", "pattern":
			if _, ok := v.(string); !ok {
				drop(k)
			}
		case "minimum", "maximum", "minLength", "maxLength":
			if _, ok := v.(json.Number); !ok {
				drop(k)
			}
		case "enum", "examples":
			if _, ok := v.([]any); !ok {
				drop(k)
			}
		case "required":
			list, ok := v.([]any)
			for _, x := range list {
				if _, isStr := x.(string); !isStr {
					ok = false
				}
			}
			if !ok {
				drop(k)
			}
		case "type":
			switch t := v.(type) {
			case string:
				if _, known := typeNames[t]; !known {
					drop(k)
				}
			case []any:
				for _, x := range t {
					if _, isStr := x.(string); !isStr {
						drop(k)
						break
					}
				}
			default:
				drop(k)
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				drop(k)
				break
			}
			for name, p := range props {
				s, c := subschema(p)
				if c {
					props[name] = s
					changed = true
				}
				if fixSchema(s, depth+1) {
					changed = true
				}
			}
		case "items":
			switch x := v.(type) {
			case []any:
				for i, p := range x {
					s, c := subschema(p)
					if c {
						x[i] = s
						changed = true
					}
					if fixSchema(s, depth+1) {
						changed = true
					}
				}
			default:
				s, c := subschema(x)
				if c {
					m[k] = s
					changed = true
				}
				if fixSchema(s, depth+1) {
					changed = true
				}
			}
		case "additionalProperties":
			switch x := v.(type) {
			case bool:
			case map[string]any:
				if fixSchema(x, depth+1) {
					changed = true
				}
			default:
				drop(k)
			}
		}
	}
	return changed
}
