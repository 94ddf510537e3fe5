package manuals

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
)

// This file turns the schemas of an OpenAPI document into JSON Schema
// 2020-12 (the rules are listed on ConvertOpenAPI, "Schemas").

// oasSimpleTypes are JSON Schema's type names.
var oasSimpleTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// oasNullableKeeps are the annotations that stay on the outer schema when
// a nullable schema is wrapped in anyOf [schema, {"type": "null"}].
var oasNullableKeeps = []string{"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}

// jsonSchema returns the already resolved OpenAPI schema v (a fresh copy:
// see expand) as a JSON Schema 2020-12 schema. It builds new maps and
// leaves v's data values (enum, const, default, examples) as they are.
func (c *oasConverter) jsonSchema(v any) any {
	switch x := v.(type) {
	case bool:
		return x
	case map[string]any:
		return c.schemaObject(x)
	}
	return map[string]any{} // not a schema: accept anything, as an absent one does
}

// schemaMap is jsonSchema for a value that must stay an object.
func (c *oasConverter) schemaMap(v map[string]any) map[string]any {
	if m, ok := c.jsonSchema(v).(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

func (c *oasConverter) schemaObject(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	var examples []any
	for _, k := range oasSortedKeys(m) {
		v := m[k]
		switch k {
		case "type":
			if t := oasType(v); t != nil {
				out[k] = t
			}
		case "enum":
			if list, ok := v.([]any); ok && len(list) > 0 {
				out[k] = list
			}
		case "examples":
			examples = append(slices.Clone(oasExampleValues(v)), examples...)
		case "example":
			examples = append(examples, v)
		case "const", "default":
			out[k] = v
		case "multipleOf":
			if f, ok := oasNumber(v); ok && f > 0 {
				out[k] = v
			}
		case "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum":
			if _, ok := oasNumber(v); ok {
				out[k] = v
			}
		case "maxLength", "minLength", "maxItems", "minItems", "maxContains", "minContains", "maxProperties", "minProperties":
			if f, ok := oasNumber(v); ok && f >= 0 && f == math.Trunc(f) {
				out[k] = v
			}
		case "pattern":
			if s, ok := v.(string); ok && oasRegexp(s) {
				out[k] = s
			} else if ok {
				c.warn("schema pattern %q dropped: not a regular expression the gateway can check", s)
			}
		case "title", "description", "format", "$comment", "contentEncoding", "contentMediaType":
			if s, ok := v.(string); ok {
				out[k] = s
			}
		case "uniqueItems", "deprecated", "readOnly", "writeOnly":
			if b, ok := v.(bool); ok {
				out[k] = b
			}
		case "required":
			if names := oasStrings(v); len(names) > 0 {
				out[k] = names
			}
		case "dependentRequired":
			if deps := oasDependentRequired(v); len(deps) > 0 {
				out[k] = deps
			}
		case "properties", "dependentSchemas":
			if props, ok := v.(map[string]any); ok {
				conv := make(map[string]any, len(props))
				for name, s := range props {
					conv[name] = c.jsonSchema(s)
				}
				out[k] = conv
			}
		case "patternProperties":
			if props, ok := v.(map[string]any); ok {
				conv := make(map[string]any, len(props))
				for re, s := range props {
					if oasRegexp(re) {
						conv[re] = c.jsonSchema(s)
					}
				}
				out[k] = conv
			}
		case "items":
			switch x := v.(type) {
			case []any: // a tuple (draft 4 to 2019-09, Swagger's Items list)
				if len(x) > 0 {
					out["prefixItems"] = c.schemaList(x)
				}
				if extra, ok := m["additionalItems"]; ok {
					out["items"] = c.jsonSchema(extra)
				}
			case map[string]any, bool:
				out[k] = c.jsonSchema(x)
			}
		case "prefixItems", "allOf", "anyOf", "oneOf":
			if list, ok := v.([]any); ok && len(list) > 0 {
				if k == "prefixItems" && out[k] != nil {
					continue // from a tuple items
				}
				out[k] = c.schemaList(list)
			}
		case "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
			"unevaluatedItems", "unevaluatedProperties", "contentSchema":
			switch v.(type) {
			case map[string]any, bool:
				out[k] = c.jsonSchema(v)
			}
		case "dependencies": // draft 7: arrays are dependentRequired, schemas dependentSchemas
			deps, _ := v.(map[string]any)
			for _, name := range oasSortedKeys(deps) {
				switch d := deps[name].(type) {
				case []any:
					req, _ := out["dependentRequired"].(map[string]any)
					if req == nil {
						req = map[string]any{}
						out["dependentRequired"] = req
					}
					req[name] = oasStrings(d)
				case map[string]any, bool:
					sch, _ := out["dependentSchemas"].(map[string]any)
					if sch == nil {
						sch = map[string]any{}
						out["dependentSchemas"] = sch
					}
					sch[name] = c.jsonSchema(d)
				}
			}
		case "$ref":
			// Every reference of the document was resolved; what is left
			// points into the root's $defs (a recursive schema).
			if s, ok := v.(string); ok && strings.HasPrefix(s, oasDefsPrefix) {
				out[k] = s
			}
		default:
			// nullable, x-nullable (read below), discriminator, xml,
			// externalDocs, x-… extensions, $id, $schema, $anchor,
			// $dynamicRef, $dynamicAnchor, $vocabulary, $defs and
			// definitions (their references were resolved), the OAS 2
			// parameter keys (collectionFormat, allowEmptyValue) and
			// anything else that is not a 2020-12 keyword: dropped.
		}
	}

	// OAS 3.0 and Swagger 2.0: exclusiveMinimum/Maximum are booleans
	// qualifying minimum/maximum; 2020-12's are the bounds themselves.
	for _, b := range [][2]string{{"exclusiveMinimum", "minimum"}, {"exclusiveMaximum", "maximum"}} {
		flag, ok := m[b[0]].(bool)
		if !ok {
			continue
		}
		if bound, has := out[b[1]]; flag && has {
			out[b[0]] = bound
			delete(out, b[1])
		}
	}
	// Swagger 2.0: type file is a file's content.
	if out["type"] == "file" {
		out["type"] = "string"
		if _, ok := out["format"]; !ok {
			out["format"] = "binary"
		}
	}
	if vals := oasDedupe(examples); len(vals) > 0 {
		out["examples"] = vals
	}
	if m["nullable"] == true || m["x-nullable"] == true {
		return oasNullable(out)
	}
	return out
}

func (c *oasConverter) schemaList(list []any) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = c.jsonSchema(s)
	}
	return out
}

// oasNullable makes the converted schema s also accept null (OAS 3.0
// nullable: true, Swagger's x-nullable: true). A schema whose keywords
// could each reject null on their own (allOf, anyOf, oneOf, not, const,
// $ref, if) becomes anyOf [s, {"type": "null"}], keeping its annotations
// outside; otherwise null joins its type (a union) and its enum, if any;
// a schema with neither already accepts null.
func oasNullable(s map[string]any) map[string]any {
	for _, k := range []string{"allOf", "anyOf", "oneOf", "not", "const", "$ref", "if"} {
		if _, ok := s[k]; ok {
			inner := make(map[string]any, len(s))
			outer := map[string]any{}
			for key, v := range s {
				if slices.Contains(oasNullableKeeps, key) {
					outer[key] = v
				} else {
					inner[key] = v
				}
			}
			outer["anyOf"] = []any{inner, map[string]any{"type": "null"}}
			return outer
		}
	}
	switch t := s["type"].(type) {
	case string:
		if t != "null" {
			s["type"] = []any{t, "null"}
		}
	case []any:
		if !slices.Contains(t, any("null")) {
			s["type"] = append(slices.Clone(t), "null")
		}
	}
	if list, ok := s["enum"].([]any); ok && !slices.Contains(list, nil) {
		s["enum"] = append(slices.Clone(list), nil)
	}
	return s
}

// oasType returns a type keyword's value as 2020-12 allows it (a type
// name, or a list of distinct ones), with Swagger's "file" kept for
// schemaObject to rewrite; nil when nothing valid is left.
func oasType(v any) any {
	valid := func(s string) bool { return s == "file" || slices.Contains(oasSimpleTypes, s) }
	switch x := v.(type) {
	case string:
		if valid(x) {
			return x
		}
	case []any:
		var out []any
		for _, e := range x {
			s, ok := e.(string)
			if s == "file" {
				s = "string"
			}
			if ok && valid(s) && !slices.Contains(out, any(s)) {
				out = append(out, s)
			}
		}
		switch len(out) {
		case 0:
		case 1:
			return out[0]
		default:
			return out
		}
	}
	return nil
}

// oasNumber reads a JSON number (json.Number as decoded, or a Go number
// from a document built in code).
func oasNumber(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// oasRegexp reports whether the gateway's validator (Go's regexp, RE2)
// compiles pattern: a pattern it cannot compile would make it skip the
// tool's whole input schema.
func oasRegexp(pattern string) bool {
	_, err := regexp.Compile(pattern)
	return err == nil
}

// oasStrings returns the distinct strings of a list (others dropped).
func oasStrings(v any) []any {
	list, _ := v.([]any)
	if names, ok := v.([]string); ok { // built by the converter itself
		list = make([]any, len(names))
		for i, n := range names {
			list[i] = n
		}
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok && !slices.Contains(out, any(s)) {
			out = append(out, s)
		}
	}
	return out
}

func oasDependentRequired(v any) map[string]any {
	deps, _ := v.(map[string]any)
	out := make(map[string]any, len(deps))
	for name, d := range deps {
		if _, ok := d.([]any); ok {
			out[name] = oasStrings(d)
		}
	}
	return out
}

// oasExampleValues reads an examples value: a list (JSON Schema), a map
// of Example Objects (OAS 3 parameters and media types: their values),
// or a single value.
func oasExampleValues(v any) []any {
	switch ex := v.(type) {
	case []any:
		return ex
	case map[string]any:
		var vals []any
		for _, name := range oasSortedKeys(ex) {
			if em, ok := ex[name].(map[string]any); ok {
				if val, ok := em["value"]; ok {
					vals = append(vals, val)
				}
			}
		}
		return vals
	case nil:
		return nil
	}
	return []any{v}
}

// oasDedupe drops repeated values (by canonical JSON) and values that do
// not encode.
func oasDedupe(vals []any) []any {
	seen := map[string]bool{}
	var out []any
	for _, v := range vals {
		b, err := json.Marshal(v) // map keys are sorted: canonical enough
		if err != nil || seen[string(b)] {
			continue
		}
		seen[string(b)] = true
		out = append(out, v)
	}
	return out
}
