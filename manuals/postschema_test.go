package manuals

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validates reports whether v validates against schema.
func validates(t *testing.T, schema json.RawMessage, v any) bool {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("test:out.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("test:out.json")
	if err != nil {
		t.Fatalf("compiling %s: %v", schema, err)
	}
	b, _ := json.Marshal(v)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst) == nil
}

// TestProcessedSchemaKeepsResultsValid: a result valid against a tool's
// output schema stays valid against the processed schema once
// post-processed, where the original schema would refuse it.
func TestProcessedSchemaKeepsResultsValid(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["id","secret","items"],"minProperties":3,
		"properties":{"id":{"type":"integer"},"secret":{"type":"string"},
		"items":{"type":"array","minItems":1,"items":{"type":"object","required":["secret"],"properties":{"secret":{"type":"string"}}}}},
		"$defs":{"properties":{"type":"object","required":["secret"]}}}`)
	value := map[string]any{"id": 1, "secret": "s", "items": []any{map[string]any{"secret": "x"}}}
	if !validates(t, schema, value) {
		t.Fatal("the fixture value does not validate against its schema")
	}
	f := &FilterDict{ExcludeKeys: []string{"secret"}}
	pps := []PostProcessor{f}
	out := ApplyPostProcessors(pps, "m.t", "m", value)
	if validates(t, schema, out) {
		t.Fatal("the filtered value still validates against the original schema: the test shows nothing")
	}
	processed := ProcessedSchema(pps, "m.t", "m", schema)
	if processed == nil {
		t.Fatal("ProcessedSchema = nil for exclude_keys on a plain schema")
	}
	if !validates(t, processed, out) {
		t.Errorf("the filtered value %v does not validate against the processed schema %s", out, processed)
	}
	var doc map[string]any
	_ = json.Unmarshal(processed, &doc)
	if _, ok := doc["properties"].(map[string]any)["secret"]; ok {
		t.Errorf("processed schema still lists the excluded property: %s", processed)
	}
	if _, ok := doc["$defs"].(map[string]any)["properties"]; !ok {
		t.Errorf("a definition named \"properties\" was lost: %s", processed)
	}

	// A processor that does not apply leaves the schema alone.
	scoped := []PostProcessor{&FilterDict{ExcludeKeys: []string{"secret"}, ToolFilter: ToolFilter{OnlyIncludeTools: []string{"other"}}}}
	if got := ProcessedSchema(scoped, "m.t", "m", schema); !bytes.Equal(got, schema) {
		t.Errorf("a processor for another tool changed the schema: %s", got)
	}
	if PostProcessorsApply(scoped, "m.t", "m") || !PostProcessorsApply(pps, "m.t", "m") {
		t.Error("PostProcessorsApply disagrees with the tool filters")
	}
}

func TestProcessedSchemaGivesUp(t *testing.T) {
	for _, c := range []struct {
		name   string
		pp     PostProcessor
		schema string
		keep   bool
	}{
		{"only_include_keys", &FilterDict{OnlyIncludeKeys: []string{"a"}}, `{"type":"object"}`, false},
		{"exclude with not", &FilterDict{ExcludeKeys: []string{"a"}}, `{"type":"object","not":{"required":["b"]}}`, false},
		{"exclude with const", &FilterDict{ExcludeKeys: []string{"a"}}, `{"type":"object","properties":{"x":{"const":{"a":1}}}}`, false},
		{"exclude with a tuple", &FilterDict{ExcludeKeys: []string{"a"}}, `{"type":"array","items":[{"type":"object"}]}`, false},
		{"exclude, property named enum", &FilterDict{ExcludeKeys: []string{"a"}}, `{"type":"object","properties":{"enum":{"type":"string"}}}`, true},
		{"limit_strings with pattern", &LimitStrings{Limit: 3}, `{"type":"object","properties":{"s":{"type":"string","pattern":"^a+$"}}}`, false},
		{"limit_strings with minLength", &LimitStrings{Limit: 3}, `{"type":"object","properties":{"s":{"minLength":5}}}`, false},
		{"limit_strings, plain", &LimitStrings{Limit: 3}, `{"type":"object","properties":{"s":{"type":"string","maxLength":10,"format":"uri"}}}`, true},
		{"not an object", &LimitStrings{Limit: 3}, `true`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ProcessedSchema([]PostProcessor{c.pp}, "m.t", "m", json.RawMessage(c.schema))
			if (got != nil) != c.keep {
				t.Errorf("ProcessedSchema = %s, want kept: %v", got, c.keep)
			}
		})
	}
	if got := ProcessedSchema([]PostProcessor{&FilterDict{}}, "m.t", "m", nil); got != nil {
		t.Errorf("an empty schema became %s", got)
	}
}
