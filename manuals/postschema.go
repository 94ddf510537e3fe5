package manuals

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Applier is implemented by post-processors that apply to some calls
// only (FilterDict and LimitStrings, through their ToolFilter). A
// post-processor without it applies to every call.
type Applier interface {
	// Applies reports whether the processor applies to a call of tool
	// (the qualified name) of manual.
	Applies(tool, manual string) bool
}

// SchemaProcessor is implemented by post-processors that can describe
// their effect on a tool's output schema.
type SchemaProcessor interface {
	// ProcessSchema returns the output schema of a tool whose results
	// the processor transforms: a schema that every transformed result
	// that validated against schema still validates against, or nil when
	// the processor cannot say (the tool is then listed without an
	// output schema). schema is not empty and not modified.
	ProcessSchema(schema json.RawMessage) json.RawMessage
}

// PostProcessorsApply reports whether any of pps applies to a call of
// tool of manual.
func PostProcessorsApply(pps []PostProcessor, tool, manual string) bool {
	for _, p := range pps {
		if a, ok := p.(Applier); !ok || a.Applies(tool, manual) {
			return true
		}
	}
	return false
}

// ProcessedSchema is the output schema of tool (of manual) after pps: the
// schema itself when none applies or it is empty, else the schema as
// each applying processor's ProcessSchema makes it, nil as soon as one
// cannot say (or does not implement SchemaProcessor). Listing the
// processed schema keeps the promise an output schema makes: a result
// the tool returned valid stays valid once post-processed.
func ProcessedSchema(pps []PostProcessor, tool, manual string, schema json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(schema)) == 0 {
		return schema
	}
	for _, p := range pps {
		if a, ok := p.(Applier); ok && !a.Applies(tool, manual) {
			continue
		}
		sp, ok := p.(SchemaProcessor)
		if !ok {
			return nil
		}
		if schema = sp.ProcessSchema(schema); schema == nil {
			return nil
		}
	}
	return schema
}

// ProcessSchema returns schema for a filter_dict processor: without
// only_include_keys, every excluded key is taken out of every
// "properties", "required" and "dependentRequired" of the schema, at any
// depth, and "minProperties", "minItems" and "minContains" (which a
// removed member or a dropped emptied element could break) are removed.
// A schema using keywords whose meaning a removed member could flip
// (not, if/then/else, const, enum, contains, dependentSchemas,
// prefixItems, tuple items, $dynamicRef), one with only_include_keys,
// and one that is not a JSON object, give nil. A processor that removes
// nothing returns schema itself.
func (f *FilterDict) ProcessSchema(schema json.RawMessage) json.RawMessage {
	if len(f.ExcludeKeys) == 0 && len(f.OnlyIncludeKeys) == 0 {
		return schema
	}
	if len(f.OnlyIncludeKeys) > 0 {
		return nil
	}
	doc, ok := decodeSchema(schema)
	if !ok {
		return nil
	}
	if schemaUses(doc, "not", "if", "then", "else", "const", "enum", "contains", "dependentSchemas", "prefixItems", "$dynamicRef", "$recursiveRef") || tupleItems(doc) {
		return nil
	}
	out, _ := f.excludeSchema(doc).(map[string]any)
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// excludeSchema is the walk of ProcessSchema.
func (f *FilterDict) excludeSchema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch k {
			case "minProperties", "minItems", "minContains":
				continue
			case "properties", "dependentRequired":
				if m, ok := e.(map[string]any); ok {
					pm := make(map[string]any, len(m))
					for name, sub := range m {
						if slices.Contains(f.ExcludeKeys, name) {
							continue
						}
						if k == "dependentRequired" {
							pm[name] = f.withoutExcluded(sub)
						} else {
							pm[name] = f.excludeSchema(sub)
						}
					}
					out[k] = pm
					continue
				}
			case "required":
				out[k] = f.withoutExcluded(e)
				continue
			case "$defs", "definitions", "patternProperties":
				if m, ok := e.(map[string]any); ok {
					dm := make(map[string]any, len(m))
					for name, sub := range m {
						dm[name] = f.excludeSchema(sub)
					}
					out[k] = dm
					continue
				}
			case "examples", "default", "description", "title", "$comment":
				out[k] = e // values, not schemas
				continue
			}
			out[k] = f.excludeSchema(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = f.excludeSchema(e)
		}
		return out
	}
	return v
}

// withoutExcluded returns a list of names without the excluded keys.
func (f *FilterDict) withoutExcluded(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok && slices.Contains(f.ExcludeKeys, s) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// ProcessSchema returns schema for a limit_strings processor: unchanged
// unless it uses a keyword a shortened string could break (pattern,
// minLength, const, enum, not, if/then/else, contentEncoding,
// contentSchema, $dynamicRef), in which case nil. format is an
// annotation in JSON Schema 2020-12 and does not count.
func (l *LimitStrings) ProcessSchema(schema json.RawMessage) json.RawMessage {
	doc, ok := decodeSchema(schema)
	if !ok {
		return nil
	}
	if schemaUses(doc, "pattern", "minLength", "const", "enum", "not", "if", "then", "else", "contentEncoding", "contentSchema", "$dynamicRef", "$recursiveRef") {
		return nil
	}
	return schema
}

// decodeSchema decodes a schema that is a JSON object.
func decodeSchema(schema json.RawMessage) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var doc map[string]any
	if dec.Decode(&doc) != nil || doc == nil {
		return nil, false
	}
	return doc, true
}

// schemaUses reports whether any of keywords appears as a keyword
// anywhere in the schema. Members of "properties", "patternProperties",
// "$defs", "definitions" and "dependentRequired" are names, not
// keywords; the values under them are schemas (or name lists) and are
// searched.
func schemaUses(v any, keywords ...string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch k {
			case "properties", "patternProperties", "$defs", "definitions", "dependentRequired":
				if m, ok := e.(map[string]any); ok {
					for _, sub := range m {
						if schemaUses(sub, keywords...) {
							return true
						}
					}
					continue
				}
			case "examples", "default", "description", "title", "$comment":
				continue // values, not schemas
			}
			if slices.Contains(keywords, k) || schemaUses(e, keywords...) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if schemaUses(e, keywords...) {
				return true
			}
		}
	}
	return false
}

// tupleItems reports whether the schema uses "items" as an array (a
// draft-07 tuple) anywhere.
func tupleItems(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if _, isList := e.([]any); isList && k == "items" {
				return true
			}
			if k == "examples" || k == "default" {
				continue
			}
			if tupleItems(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if tupleItems(e) {
				return true
			}
		}
	}
	return false
}
