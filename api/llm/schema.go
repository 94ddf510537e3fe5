package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// maxDepth bounds schema recursion (and $ref inlining for Gemini).
const maxDepth = 32

// geminiBudget bounds the schema nodes one tool's Gemini conversion
// produces: inlining $refs can multiply a small schema exponentially
// (a definition whose anyOf refers to itself three times), which the
// depth limit alone lets grow to 3^16 nodes. Past the budget, $refs are
// left unconstrained.
const geminiBudget = 20000

// decodeSchema parses a tool's input schema. An empty or null schema is an
// object with no properties.
func decodeSchema(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "true" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the input schema is not a JSON object: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// objectRoot makes m the root of a function's parameters: type object
// and a properties object.
func objectRoot(m map[string]any) map[string]any {
	delete(m, "$schema")
	delete(m, "$id")
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"].(map[string]any); !ok {
		m["properties"] = map[string]any{}
	}
	return m
}

// openAIStrictDropped are the keywords OpenAI's strict mode (Structured
// Outputs) does not support; they are removed everywhere.
var openAIStrictDropped = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "default": true, "examples": true,
	"allOf": true, "not": true, "if": true, "then": true, "else": true,
	"dependentRequired": true, "dependentSchemas": true, "patternProperties": true,
	"unevaluatedProperties": true, "unevaluatedItems": true, "propertyNames": true,
	"minProperties": true, "maxProperties": true, "contains": true, "minContains": true,
	"maxContains": true, "uniqueItems": true, "prefixItems": true, "minLength": true,
	"maxLength": true, "readOnly": true, "writeOnly": true, "deprecated": true,
	"contentEncoding": true, "contentMediaType": true, "additionalItems": true,
}

// openAIFormats are the string formats strict mode supports.
var openAIFormats = map[string]bool{
	"date-time": true, "time": true, "date": true, "duration": true, "email": true,
	"hostname": true, "ipv4": true, "ipv6": true, "uuid": true,
}

// openAIStrict rewrites a schema as OpenAI's strict mode requires: every
// object lists all its properties in required (sorted), the originally
// optional ones made nullable, and has additionalProperties false;
// oneOf becomes anyOf; unsupported keywords and formats are removed.
func openAIStrict(n any, depth int) any {
	m, ok := n.(map[string]any)
	if !ok || depth > maxDepth {
		if depth > maxDepth {
			return map[string]any{}
		}
		return n
	}
	out := make(map[string]any, len(m)+2)
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch {
		case openAIStrictDropped[k]:
		case k == "additionalProperties":
		case k == "format":
			if s, ok := v.(string); ok && openAIFormats[s] {
				out[k] = s
			}
		case k == "anyOf" || k == "oneOf":
			if list, ok := v.([]any); ok {
				conv := make([]any, 0, len(list))
				if prev, ok := out["anyOf"].([]any); ok {
					conv = prev
				}
				for _, s := range list {
					conv = append(conv, openAIStrict(s, depth+1))
				}
				out["anyOf"] = conv
			}
		case k == "properties" || k == "$defs" || k == "definitions":
			if props, ok := v.(map[string]any); ok {
				conv := make(map[string]any, len(props))
				for name, s := range props {
					conv[name] = openAIStrict(s, depth+1)
				}
				out[k] = conv
			}
		case k == "items":
			if _, isList := v.([]any); !isList {
				out[k] = openAIStrict(v, depth+1)
			}
		default:
			out[k] = v
		}
	}
	if !isObjectSchema(out) {
		return out
	}
	props, _ := out["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	required := map[string]bool{}
	if list, ok := m["required"].([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	req := make([]any, len(names))
	for i, name := range names {
		req[i] = name
		if !required[name] {
			props[name] = nullable(props[name])
		}
	}
	out["properties"] = props
	out["required"] = req
	out["additionalProperties"] = false
	if _, ok := out["type"]; !ok {
		out["type"] = "object"
	}
	return out
}

// isObjectSchema reports whether m describes an object.
func isObjectSchema(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	case nil:
		_, ok := m["properties"]
		return ok
	}
	return false
}

// nullable returns schema s that also admits null.
func nullable(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	switch t := m["type"].(type) {
	case string:
		if t != "null" {
			out["type"] = []any{t, "null"}
		}
	case []any:
		if !slices.Contains(t, any("null")) {
			out["type"] = append(slices.Clone(t), "null")
		}
	case nil:
		if list, ok := m["anyOf"].([]any); ok {
			out["anyOf"] = append(slices.Clone(list), map[string]any{"type": "null"})
		} else if _, ok := m["$ref"]; ok {
			return map[string]any{"anyOf": []any{m, map[string]any{"type": "null"}}}
		}
	}
	if list, ok := m["enum"].([]any); ok && !slices.Contains(list, nil) {
		out["enum"] = append(slices.Clone(list), nil)
	}
	return out
}

// geminiFormats are the formats Gemini accepts, by type.
var geminiFormats = map[string]map[string]bool{
	"STRING":  {"enum": true, "date-time": true},
	"NUMBER":  {"float": true, "double": true},
	"INTEGER": {"int32": true, "int64": true},
}

var geminiTypes = map[string]string{
	"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN",
	"array": "ARRAY", "object": "OBJECT", "null": "NULL",
}

// geminiSchema reduces a JSON Schema to Gemini's OpenAPI-3.0 subset
// (genai.Schema): type (upper case), format (those Gemini accepts for the
// type), title, description, nullable, enum (strings only), properties,
// required, items, anyOf (oneOf too), minItems, maxItems, minLength,
// maxLength, minProperties, maxProperties, minimum, maximum, pattern,
// default, example, propertyOrdering. A type list becomes one type plus
// nullable (or anyOf of the types); const becomes a one-value enum;
// local $refs (#/$defs/..., #/definitions/...) are inlined, up to a depth
// limit and a budget of converted nodes (*budget, counted down, starting
// at geminiBudget for a tool), past which the node is left unconstrained;
// everything else is dropped. Keys and properties are visited in sorted
// order, so that the budget runs out at the same place on every run.
func geminiSchema(n any, root map[string]any, depth int, budget *int) map[string]any {
	m, ok := n.(map[string]any)
	if !ok || depth > maxDepth {
		return map[string]any{}
	}
	*budget--
	if ref, ok := m["$ref"].(string); ok {
		target := resolveRef(root, ref)
		if target == nil || *budget <= 0 {
			out := map[string]any{}
			if d, ok := m["description"].(string); ok {
				out["description"] = d
			}
			return out
		}
		out := geminiSchema(target, root, depth+1, budget)
		if d, ok := m["description"].(string); ok {
			out["description"] = d
		}
		return out
	}
	out := make(map[string]any, len(m))
	typ := ""
	switch t := m["type"].(type) {
	case string:
		typ = geminiTypes[t]
	case []any:
		var kinds []string
		for _, x := range t {
			s, _ := x.(string)
			if s == "null" {
				out["nullable"] = true
			} else if g := geminiTypes[s]; g != "" {
				kinds = append(kinds, g)
			}
		}
		switch len(kinds) {
		case 0:
			if out["nullable"] == true {
				typ = "NULL"
				delete(out, "nullable")
			}
		case 1:
			typ = kinds[0]
		default:
			alts := make([]any, len(kinds))
			for i, k := range kinds {
				alts[i] = map[string]any{"type": k}
			}
			out["anyOf"] = alts
		}
	}
	if typ != "" {
		out["type"] = typ
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "description", "title", "pattern":
			if s, ok := v.(string); ok {
				out[k] = s
			}
		case "nullable":
			if b, ok := v.(bool); ok {
				out[k] = b
			}
		case "format":
			if s, ok := v.(string); ok && geminiFormats[typ][s] {
				out[k] = s
			}
		case "enum":
			list, _ := v.([]any)
			strs := make([]any, 0, len(list))
			okAll := len(list) > 0
			for _, e := range list {
				switch e := e.(type) {
				case string:
					strs = append(strs, e)
				case nil:
					out["nullable"] = true
				default:
					okAll = false
				}
			}
			if okAll && len(strs) > 0 {
				out["enum"] = strs
			}
		case "const":
			if s, ok := v.(string); ok {
				out["enum"] = []any{s}
			}
		case "minimum", "maximum":
			if _, ok := number(v); ok {
				out[k] = v
			}
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			if f, ok := number(v); ok && f >= 0 && f == math.Trunc(f) && f < 1<<53 {
				out[k] = int64(f)
			}
		case "properties":
			props, _ := v.(map[string]any)
			conv := make(map[string]any, len(props))
			for _, name := range sortedKeys(props) {
				conv[name] = geminiSchema(props[name], root, depth+1, budget)
			}
			out[k] = conv
		case "items":
			if _, isList := v.([]any); !isList {
				out[k] = geminiSchema(v, root, depth+1, budget)
			}
		case "anyOf", "oneOf":
			list, _ := v.([]any)
			conv, _ := out["anyOf"].([]any)
			for _, s := range list {
				if sm, ok := s.(map[string]any); ok && sm["type"] == "null" && len(sm) == 1 {
					out["nullable"] = true
					continue
				}
				conv = append(conv, geminiSchema(s, root, depth+1, budget))
			}
			if len(conv) > 0 {
				out["anyOf"] = conv
			}
		case "default":
			out[k] = v
		case "example":
			out[k] = v
		case "examples":
			if list, ok := v.([]any); ok && len(list) > 0 {
				if _, has := m["example"]; !has {
					out["example"] = list[0]
				}
			}
		case "propertyOrdering":
			if list, ok := v.([]any); ok {
				out[k] = stringsOf(list)
			}
		}
	}
	if req, ok := m["required"].([]any); ok {
		props, _ := out["properties"].(map[string]any)
		var kept []any
		for _, r := range req {
			if s, ok := r.(string); ok {
				if _, has := props[s]; has {
					kept = append(kept, s)
				}
			}
		}
		if len(kept) > 0 {
			out["required"] = kept
		}
	}
	return out
}

// sortedKeys returns the keys of m in sorted order. The rewrites visit
// keys in that order, so that keywords writing the same output key
// (anyOf and oneOf; enum and const; nullable, enum, anyOf and oneOf for
// Gemini's nullable) combine the same way on every run.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// resolveRef returns the local definition ref points at, or nil.
func resolveRef(root map[string]any, ref string) any {
	path, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = root
	for part := range strings.SplitSeq(path, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func stringsOf(list []any) []any {
	out := make([]any, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
