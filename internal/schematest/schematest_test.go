package schematest

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		schema, want string // want: "" valid, else a part of the error
	}{
		{`{"type": "object", "properties": {"a": {"type": ["string", "null"], "examples": ["x"]}}, "$defs": {"T": {"items": {"$ref": "#/$defs/T"}}}}`, ""},
		{`true`, ""},
		{`{"type": "string", "nullable": true}`, `"nullable" is not a JSON Schema 2020-12 keyword`},
		{`{"properties": {"a": {"allOf": [{"example": 1}]}}}`, `at /properties/a/allOf/0/example`},
		{`{"properties": {"nullable": {"type": "boolean"}}}`, ""}, // a property name, not a keyword
		{`{"type": "number", "minimum": 1, "exclusiveMinimum": true}`, "meta-schema"},
		{`{"type": "strin"}`, "meta-schema"},
		{`{"items": {"$ref": "#/$defs/Missing"}}`, "compiling"},
		{`[1]`, "meta-schema"},
	} {
		err := Check([]byte(tc.schema))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.schema, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want one containing %q", tc.schema, err, tc.want)
		}
	}
}

func TestUnknownKeywords(t *testing.T) {
	got := UnknownKeywords(map[string]any{
		"nullable": true, "x-a": 1,
		"properties": map[string]any{"p": map[string]any{"example": 1, "x-a": 2}},
		"enum":       []any{map[string]any{"nullable": true}}, // data, not a schema
	})
	if strings.Join(got, ",") != "example,nullable,x-a" {
		t.Errorf("UnknownKeywords = %v", got)
	}
}
