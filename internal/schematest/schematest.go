// Package schematest checks, for tests, that a schema utcpd lists is valid
// JSON Schema 2020-12 in the strict sense clients apply: it validates
// against the 2020-12 meta-schema (compiled offline from the copy the
// jsonschema library embeds), it compiles as a 2020-12 schema (so every
// $ref resolves inside the document), and it uses no keyword outside the
// 2020-12 vocabularies (the OpenAPI leftovers nullable, discriminator,
// example, xml, externalDocs and x-… are what the meta-schema lets pass but
// strict validators such as Ajv reject or misread).
package schematest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MetaSchemaURL is the 2020-12 meta-schema's URL.
const MetaSchemaURL = "https://json-schema.org/draft/2020-12/schema"

var (
	metaOnce sync.Once
	meta     *jsonschema.Schema
	metaErr  error
)

// metaSchema compiles the 2020-12 meta-schema once, from the copy the
// jsonschema library embeds (no network).
func metaSchema() (*jsonschema.Schema, error) {
	metaOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.UseLoader(noLoader{})
		meta, metaErr = c.Compile(MetaSchemaURL)
	})
	return meta, metaErr
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schematest loads no remote schema", url)
}

// Keywords are the keywords of the 2020-12 vocabularies (core, applicator,
// unevaluated, validation, meta-data, format-annotation, content).
var Keywords = []string{
	"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
	"prefixItems", "items", "contains", "additionalProperties", "properties", "patternProperties",
	"dependentSchemas", "propertyNames", "if", "then", "else", "allOf", "anyOf", "oneOf", "not",
	"unevaluatedItems", "unevaluatedProperties",
	"type", "const", "enum", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
	"maxProperties", "minProperties", "required", "dependentRequired",
	"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
	"format",
	"contentEncoding", "contentMediaType", "contentSchema",
}

// Check reports why raw (a JSON document) is not a valid JSON Schema
// 2020-12 schema, or nil: the meta-schema's verdict (Meta), then the
// compiler's (Compile), then the first keyword outside Keywords (Unknown).
func Check(raw []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := Meta(doc); err != nil {
		return err
	}
	if err := Compile(doc); err != nil {
		return err
	}
	return Unknown(doc, "")
}

// Meta validates the decoded schema doc (decoded by
// jsonschema.UnmarshalJSON, numbers as json.Number) against the 2020-12
// meta-schema.
func Meta(doc any) error {
	m, err := metaSchema()
	if err != nil {
		return fmt.Errorf("compiling the 2020-12 meta-schema: %w", err)
	}
	if err := m.Validate(doc); err != nil {
		return fmt.Errorf("against the 2020-12 meta-schema: %w", err)
	}
	return nil
}

// Compile compiles the decoded schema doc as a 2020-12 schema with no
// remote references, which also fails on a $ref that does not resolve
// inside doc.
func Compile(doc any) error {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource("urn:schematest:doc", doc); err != nil {
		return fmt.Errorf("adding the schema: %w", err)
	}
	if _, err := c.Compile("urn:schematest:doc"); err != nil {
		return fmt.Errorf("compiling as 2020-12: %w", err)
	}
	return nil
}

// Unknown returns an error naming the first keyword (in a depth-first walk
// with sorted keys) of the decoded schema v that is not one of Keywords;
// ptr is v's JSON pointer, used in the message.
func Unknown(v any, ptr string) error {
	var first error
	walk(v, ptr, func(at, k string) bool {
		first = fmt.Errorf("at %s: %q is not a JSON Schema 2020-12 keyword", at, k)
		return false
	})
	return first
}

// UnknownKeywords returns the distinct keywords of the decoded schema v
// that are not one of Keywords, sorted.
func UnknownKeywords(v any) []string {
	var out []string
	walk(v, "", func(_, k string) bool {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
		return true
	})
	slices.Sort(out)
	return out
}

// walk calls found(pointer, keyword) for every keyword of schema v (and
// its subschemas, depth-first, keys sorted) that is not one of Keywords,
// until found returns false. It reports whether to go on.
func walk(v any, ptr string, found func(at, k string) bool) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return true // a boolean schema, or the meta-schema's verdict stands
	}
	for _, k := range sorted(m) {
		at := ptr + "/" + escape(k)
		if !slices.Contains(Keywords, k) {
			if !found(at, k) {
				return false
			}
			continue
		}
		switch k {
		case "properties", "patternProperties", "$defs", "dependentSchemas":
			sub, _ := m[k].(map[string]any)
			for _, n := range sorted(sub) {
				if !walk(sub[n], at+"/"+escape(n), found) {
					return false
				}
			}
		case "prefixItems", "allOf", "anyOf", "oneOf":
			list, _ := m[k].([]any)
			for i, s := range list {
				if !walk(s, fmt.Sprintf("%s/%d", at, i), found) {
					return false
				}
			}
		case "items", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
			"unevaluatedItems", "unevaluatedProperties", "contentSchema":
			if !walk(m[k], at, found) {
				return false
			}
		}
	}
	return true
}

func sorted(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
