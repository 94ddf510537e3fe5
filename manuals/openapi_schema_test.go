package manuals_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/schematest"
	"github.com/utcpd/utcpd/manuals"
)

// oasSchemaComponents are the named schemas the fragments below refer to.
const oasSchemaComponents = `{
  "S": {"type": "object", "properties": {"id": {"type": "integer"}}},
  "Tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}},
  "Self": {"allOf": [{"$ref": "#/components/schemas/Self"}]},
  "Odd": {"type": "object", "properties": {"even": {"$ref": "#/components/schemas/Even"}}},
  "Even": {"type": "object", "properties": {"odd": {"$ref": "#/components/schemas/Odd"}}}
}`

// convertedOutput converts a document with one GET operation whose 200
// response has schema (a JSON fragment) and returns the tool's outputs,
// after checking they are valid JSON Schema 2020-12.
func convertedOutput(t *testing.T, version, schema string) any {
	t.Helper()
	var doc string
	if strings.HasPrefix(version, "2") {
		doc = `{"swagger": "2.0", "host": "api.example.com", "definitions": ` + strings.ReplaceAll(oasSchemaComponents, "#/components/schemas/", "#/definitions/") +
			`, "paths": {"/x": {"get": {"operationId": "x", "responses": {"200": {"description": "ok", "schema": ` + schema + `}}}}}}`
	} else {
		doc = `{"openapi": "` + version + `", "servers": [{"url": "https://api.example.com"}], "components": {"schemas": ` + oasSchemaComponents +
			`}, "paths": {"/x": {"get": {"operationId": "x", "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": ` + schema + `}}}}}}}}`
	}
	m, err := manuals.ParseOpenAPI([]byte(doc), manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 1 {
		t.Fatalf("%d tools", len(m.Tools))
	}
	if err := schematest.Check(m.Tools[0].Outputs); err != nil {
		t.Errorf("outputs %s: %v", m.Tools[0].Outputs, err)
	}
	var out any
	if err := json.Unmarshal(m.Tools[0].Outputs, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

// TestOpenAPISchemaTranslation checks each rule that turns an OpenAPI 3.0
// or Swagger 2.0 schema into JSON Schema 2020-12, and that OpenAPI 3.1's
// 2020-12 schemas pass unchanged.
func TestOpenAPISchemaTranslation(t *testing.T) {
	const s = `{"type": "object", "properties": {"id": {"type": "integer"}}}` // components S, resolved
	for _, tc := range []struct {
		name, version, schema, want string
	}{
		// nullable (OAS 3.0)
		{"nullable with type", "3.0.3", `{"type": "string", "nullable": true}`, `{"type": ["string", "null"]}`},
		{"nullable with type and enum", "3.0.3", `{"type": "string", "enum": ["a", "b"], "nullable": true}`,
			`{"type": ["string", "null"], "enum": ["a", "b", null]}`},
		{"nullable enum without type", "3.0.3", `{"enum": ["a"], "nullable": true}`, `{"enum": ["a", null]}`},
		{"nullable enum already holding null", "3.0.3", `{"type": "string", "enum": ["a", null], "nullable": true}`,
			`{"type": ["string", "null"], "enum": ["a", null]}`},
		{"nullable allOf $ref (GitHub's pattern)", "3.0.3",
			`{"nullable": true, "description": "d", "title": "T", "allOf": [{"$ref": "#/components/schemas/S"}]}`,
			`{"description": "d", "title": "T", "anyOf": [{"allOf": [` + s + `]}, {"type": "null"}]}`},
		{"nullable oneOf", "3.0.3", `{"nullable": true, "oneOf": [{"type": "string"}, {"type": "integer"}]}`,
			`{"anyOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "null"}]}`},
		{"nullable next to $ref", "3.0.3", `{"$ref": "#/components/schemas/S", "nullable": true}`,
			`{"type": ["object", "null"], "properties": {"id": {"type": "integer"}}}`},
		{"nullable with type and allOf", "3.0.3", `{"type": "object", "nullable": true, "allOf": [{"$ref": "#/components/schemas/S"}]}`,
			`{"anyOf": [{"type": "object", "allOf": [` + s + `]}, {"type": "null"}]}`},
		{"nullable const", "3.0.3", `{"const": "x", "nullable": true}`, `{"anyOf": [{"const": "x"}, {"type": "null"}]}`},
		{"nullable without constraints", "3.0.3", `{"nullable": true, "description": "any"}`, `{"description": "any"}`},
		{"nullable false", "3.0.3", `{"type": "string", "nullable": false}`, `{"type": "string"}`},
		{"nested nullable", "3.0.3", `{"type": "array", "items": {"type": "integer", "nullable": true}}`,
			`{"type": "array", "items": {"type": ["integer", "null"]}}`},

		// exclusiveMinimum / exclusiveMaximum (booleans in 3.0 and 2.0)
		{"exclusiveMinimum true", "3.0.3", `{"type": "integer", "minimum": 0, "exclusiveMinimum": true}`,
			`{"type": "integer", "exclusiveMinimum": 0}`},
		{"exclusiveMaximum false", "3.0.3", `{"type": "number", "maximum": 10, "exclusiveMaximum": false}`,
			`{"type": "number", "maximum": 10}`},
		{"exclusiveMinimum true without minimum", "3.0.3", `{"type": "number", "exclusiveMinimum": true}`, `{"type": "number"}`},

		// example, examples
		{"example", "3.0.3", `{"type": "string", "example": "x"}`, `{"type": "string", "examples": ["x"]}`},
		{"nested example", "3.0.3", `{"type": "object", "properties": {"a": {"type": "integer", "example": 1}}, "example": {"a": 1}}`,
			`{"type": "object", "properties": {"a": {"type": "integer", "examples": [1]}}, "examples": [{"a": 1}]}`},
		{"example and examples merged", "3.1.0", `{"type": "string", "example": "x", "examples": ["y", "x"]}`,
			`{"type": "string", "examples": ["y", "x"]}`},

		// OpenAPI-only keywords and extensions
		{"discriminator, xml, externalDocs, x-", "3.0.3",
			`{"oneOf": [{"type": "string"}], "discriminator": {"propertyName": "kind"}, "xml": {"name": "p"},
			  "externalDocs": {"url": "https://docs.example.com"}, "x-internal": true, "x-github": {"a": 1}}`,
			`{"oneOf": [{"type": "string"}]}`},
		{"a property named like a keyword stays", "3.0.3", `{"type": "object", "properties": {"nullable": {"type": "boolean"}, "x-id": {"type": "string"}}}`,
			`{"type": "object", "properties": {"nullable": {"type": "boolean"}, "x-id": {"type": "string"}}}`},
		{"invalid keyword values dropped", "3.0.3",
			`{"type": "object", "required": true, "minLength": -1, "maxItems": 1.5, "allOf": [], "pattern": "(?=x)", "multipleOf": 0, "enum": [],
			  "properties": {"a": {"type": "int"}, "b": "string"}}`,
			`{"type": "object", "properties": {"a": {}, "b": {}}}`},
		{"tuple items", "3.0.3", `{"type": "array", "items": [{"type": "string"}], "additionalItems": false}`,
			`{"type": "array", "prefixItems": [{"type": "string"}], "items": false}`},
		{"draft 7 dependencies", "3.0.3", `{"type": "object", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}`,
			`{"type": "object", "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["d"]}}}`},

		// $ref
		{"recursive $ref into $defs", "3.0.3", `{"$ref": "#/components/schemas/Tree"}`,
			`{"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
			  "$defs": {"Tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}}`},
		{"mutual recursion", "3.0.3", `{"$ref": "#/components/schemas/Odd"}`,
			`{"type": "object", "properties": {"even": {"type": "object", "properties": {"odd": {"$ref": "#/$defs/Odd"}}}},
			  "$defs": {"Odd": {"type": "object", "properties": {"even": {"type": "object", "properties": {"odd": {"$ref": "#/$defs/Odd"}}}}}}}`},
		{"a cycle on the same instance is cut", "3.0.3", `{"$ref": "#/components/schemas/Self"}`,
			`{"allOf": [{"$comment": "unresolved $ref #/components/schemas/Self (refers to itself)"}]}`},

		// Swagger 2.0
		{"type file", "2.0", `{"type": "file"}`, `{"type": "string", "format": "binary"}`},
		{"x-nullable", "2.0", `{"type": "string", "x-nullable": true}`, `{"type": ["string", "null"]}`},
		{"2.0 discriminator is a string", "2.0", `{"type": "object", "discriminator": "kind", "properties": {"kind": {"type": "string"}}}`,
			`{"type": "object", "properties": {"kind": {"type": "string"}}}`},
		{"2.0 exclusiveMaximum", "2.0", `{"type": "number", "maximum": 5, "exclusiveMaximum": true}`, `{"type": "number", "exclusiveMaximum": 5}`},
		{"2.0 recursive definitions", "2.0", `{"$ref": "#/definitions/Tree"}`,
			`{"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
			  "$defs": {"Tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}}}}`},

		// OpenAPI 3.1: JSON Schema 2020-12 already
		{"3.1 passes through", "3.1.0",
			`{"type": "object", "required": ["n"], "additionalProperties": false, "unevaluatedProperties": false,
			  "dependentRequired": {"n": ["c"]}, "properties": {
			    "n": {"type": ["integer", "null"], "exclusiveMinimum": 0, "examples": [1]},
			    "t": {"type": "array", "prefixItems": [{"type": "string"}], "items": false, "minItems": 1},
			    "c": {"const": "x", "deprecated": true, "readOnly": true},
			    "u": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
			    "m": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "propertyNames": {"maxLength": 10}},
			    "s": {"type": "string", "contentMediaType": "application/json", "contentEncoding": "base64", "pattern": "^[a-z]+$"}}}`,
			`{"type": "object", "required": ["n"], "additionalProperties": false, "unevaluatedProperties": false,
			  "dependentRequired": {"n": ["c"]}, "properties": {
			    "n": {"type": ["integer", "null"], "exclusiveMinimum": 0, "examples": [1]},
			    "t": {"type": "array", "prefixItems": [{"type": "string"}], "items": false, "minItems": 1},
			    "c": {"const": "x", "deprecated": true, "readOnly": true},
			    "u": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
			    "m": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "propertyNames": {"maxLength": 10}},
			    "s": {"type": "string", "contentMediaType": "application/json", "contentEncoding": "base64", "pattern": "^[a-z]+$"}}}`},
		{"3.1 drops OpenAPI's own keywords", "3.1.0", `{"type": "string", "example": "x", "xml": {"attribute": true}, "x-order": 1}`,
			`{"type": "string", "examples": ["x"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := convertedOutput(t, tc.version, tc.schema)
			if diff := cmp.Diff(decodeJSON(t, tc.want), got); diff != "" {
				t.Errorf("%s → (-want +got):\n%s", tc.schema, diff)
			}
		})
	}
}

// TestSwagger2ParameterSchemas checks the Swagger 2.0 rules for non-body
// parameters: type file, collectionFormat (a serialisation hint, not a
// schema keyword), x-nullable and boolean exclusive bounds.
func TestSwagger2ParameterSchemas(t *testing.T) {
	doc := `{"swagger": "2.0", "host": "api.example.com", "paths": {"/x": {
	  "get": {"operationId": "q", "parameters": [
	    {"name": "ids", "in": "query", "type": "array", "collectionFormat": "csv", "items": {"type": "array", "collectionFormat": "pipes", "items": {"type": "integer"}}},
	    {"name": "n", "in": "query", "type": "number", "minimum": 1, "exclusiveMinimum": true, "x-nullable": true},
	    {"name": "tag", "in": "header", "type": "string", "x-nullable": true, "enum": ["a"]}],
	    "responses": {"200": {"description": "ok"}}},
	  "post": {"operationId": "upload", "consumes": ["multipart/form-data"], "parameters": [
	    {"name": "file", "in": "formData", "type": "file", "required": true, "description": "the file"},
	    {"name": "note", "in": "formData", "type": "string", "allowEmptyValue": true}],
	    "responses": {"200": {"description": "ok"}}}}}}`
	m, err := manuals.ParseOpenAPI([]byte(doc), manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"q": `{"type": "object", "properties": {
		  "ids": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
		  "n": {"type": ["number", "null"], "exclusiveMinimum": 1},
		  "tag": {"type": ["string", "null"], "enum": ["a", null]}}}`,
		"upload": `{"type": "object", "required": ["body"], "properties": {"body": {"type": "object", "required": ["file"], "properties": {
		  "file": {"type": "string", "format": "binary", "description": "the file"},
		  "note": {"type": "string"}}}}}`,
	}
	for _, tool := range m.Tools {
		if err := schematest.Check(tool.Inputs); err != nil {
			t.Errorf("%s inputs: %v", tool.Name, err)
		}
		var got any
		if err := json.Unmarshal(tool.Inputs, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(decodeJSON(t, want[tool.Name]), got); diff != "" {
			t.Errorf("%s inputs (-want +got):\n%s", tool.Name, diff)
		}
	}
}

// TestOpenAPIMethodTags checks the tags that become MCP annotations: GET
// is read_only, DELETE destructive, other methods neither, after the
// operation's own tags and without repeating one.
func TestOpenAPIMethodTags(t *testing.T) {
	doc := `{"openapi": "3.0.3", "servers": [{"url": "https://api.example.com"}], "paths": {
	  "/a": {"get": {"operationId": "get", "tags": ["pets"]}, "delete": {"operationId": "del", "tags": ["destructive"]},
	         "post": {"operationId": "post"}, "put": {"operationId": "put"}, "patch": {"operationId": "patch", "tags": ["read_only"]}}}}`
	m, err := manuals.ParseOpenAPI([]byte(doc), manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, tool := range m.Tools {
		got[tool.Name] = tool.Tags
	}
	want := map[string][]string{
		"get": {"pets", "read_only"}, "del": {"destructive"}, "post": {}, "put": {}, "patch": {"read_only"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
}

// TestOpenAPIConvertedSchemasAreValid runs the converter over the other
// tests' documents and checks every schema with schematest.
func TestOpenAPIConvertedSchemasAreValid(t *testing.T) {
	for _, doc := range []string{oas3Doc, swagger2Doc} {
		m, err := manuals.ParseOpenAPI([]byte(doc), manuals.OpenAPIOptions{SpecURL: "https://docs.example.com/o.json"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range m.Tools {
			for _, raw := range []json.RawMessage{tool.Inputs, tool.Outputs} {
				if len(raw) > 0 {
					if err := schematest.Check(raw); err != nil {
						t.Errorf("%s: %s: %v", tool.Name, raw, err)
					}
				}
			}
		}
	}
}
