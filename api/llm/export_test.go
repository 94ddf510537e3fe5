package llm_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/utcpd/utcpd/api/llm"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestNames(t *testing.T) {
	long := "m." + strings.Repeat("x", 70)
	tests := []struct {
		q, want string // want "" means: the hashed form
	}{
		{"weather.get_forecast", "weather__get_forecast"},
		{"m.server.tool-x", "m__server__tool-x"},
		{"add", "add"},
		{"m.a__b", ""},
		{"m._a", ""},
		{"m_.a", ""},
		{"m..a", ""},
		{"m.tool/x", ""},
		{"m.outil_é", ""},
		{long, ""},
	}
	var qs []string
	for _, tc := range tests {
		qs = append(qs, tc.q)
	}
	n := llm.NewNames(qs)
	seen := map[string]string{}
	for _, tc := range tests {
		p := n.Provider(tc.q)
		if !validName.MatchString(p) {
			t.Errorf("%q → %q: not a valid provider name", tc.q, p)
		}
		if tc.want != "" && p != tc.want {
			t.Errorf("%q → %q, want %q", tc.q, p, tc.want)
		}
		if tc.want == "" && !strings.Contains(p, "___") {
			t.Errorf("%q → %q, want the hashed form", tc.q, p)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%q and %q both map to %q", tc.q, other, p)
		}
		seen[p] = tc.q
		if q, ok := n.Qualified(p); !ok || q != tc.q {
			t.Errorf("Qualified(%q) = %q, %v; want %q", p, q, ok, tc.q)
		}
		if p != llm.FunctionName(tc.q) {
			t.Errorf("FunctionName(%q) is not stable", tc.q)
		}
	}
	// A plain name outside the set still decodes; hashed ones do not.
	if q, ok := n.Qualified("other__tool"); !ok || q != "other.tool" {
		t.Errorf("Qualified(other__tool) = %q, %v", q, ok)
	}
	for _, p := range []string{"x___deadbeef", "bad name", ""} {
		if q, ok := n.Qualified(p); ok {
			t.Errorf("Qualified(%q) = %q, want not found", p, q)
		}
	}
	// Stable across sets.
	if a, b := llm.NewNames([]string{long}).Provider(long), n.Provider(long); a != b {
		t.Errorf("the hashed form depends on the set: %q vs %q", a, b)
	}
}

// complexSchema exercises the rewrite rules.
const complexSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "city": {"type": "string", "description": "City name", "minLength": 1, "maxLength": 80, "default": "Paris", "pattern": "^[A-Z]"},
    "units": {"type": "string", "enum": ["metric", "imperial"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14, "exclusiveMaximum": 15, "multipleOf": 1, "format": "int32"},
    "when": {"type": "string", "format": "date-time"},
    "email": {"type": "string", "format": "email"},
    "uri": {"type": "string", "format": "uri"},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5, "uniqueItems": true},
    "opt": {"type": ["string", "null"], "examples": ["x"]},
    "loc": {"$ref": "#/$defs/loc", "description": "Where"},
    "shape": {"oneOf": [{"type": "string"}, {"type": "number"}]},
    "kind": {"const": "k"},
    "count": {"enum": [1, 2, 3]},
    "meta": {"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1},
    "nested": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "number"}}, "required": ["a"], "allOf": [{"required": ["b"]}]}
  },
  "required": ["city", "loc"],
  "additionalProperties": false,
  "$defs": {"loc": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]}}
}`

func testTools() []*utcp.Tool {
	var out []*utcp.Tool
	for _, ft := range fixture.Tools() {
		ft.Name = "demo." + ft.Name
		out = append(out, &ft)
	}
	out = append(out,
		&utcp.Tool{Name: "weather.forecast", Description: "Forecast for a city.", Inputs: json.RawMessage(complexSchema)},
		&utcp.Tool{Name: "weather.noargs", Description: "No inputs."},
		&utcp.Tool{Name: "odd.name__with.dots", Description: "Odd.", Inputs: json.RawMessage(`{"properties":{"x":{"type":"string"}}}`)},
	)
	return out
}

// generic decodes JSON into any, numbers as float64 (the SDKs' view).
func generic(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// elements splits a JSON array into its elements.
func elements(t *testing.T, data []byte) []json.RawMessage {
	t.Helper()
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("not a JSON array: %v: %s", err, data)
	}
	return list
}

// walk calls fn on every schema object reachable through the schema
// keywords (properties, items, anyOf, $defs).
func walk(s any, fn func(path string, m map[string]any)) {
	var rec func(path string, v any)
	rec = func(path string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fn(path, m)
		for _, k := range []string{"properties", "$defs", "definitions"} {
			if props, ok := m[k].(map[string]any); ok {
				for name, p := range props {
					rec(path+"/"+k+"/"+name, p)
				}
			}
		}
		if it, ok := m["items"]; ok {
			rec(path+"/items", it)
		}
		for _, k := range []string{"anyOf", "oneOf"} {
			if list, ok := m[k].([]any); ok {
				for i, x := range list {
					rec(fmt.Sprintf("%s/%s/%d", path, k, i), x)
				}
			}
		}
	}
	rec("", s)
}

func export(t *testing.T, p llm.Provider, strict bool) []byte {
	t.Helper()
	out, err := llm.Export(p, testTools(), nil, llm.ExportOptions{Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, out)
}

func TestExportOpenAI(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			data := export(t, llm.OpenAI, strict)
			list := elements(t, data)
			if len(list) != len(testTools()) {
				t.Fatalf("%d tools, want %d", len(list), len(testTools()))
			}
			for _, raw := range list {
				var tool openai.ChatCompletionToolUnionParam
				if err := json.Unmarshal(raw, &tool); err != nil {
					t.Fatalf("into openai.ChatCompletionToolUnionParam: %v: %s", err, raw)
				}
				fn := tool.GetFunction()
				if fn == nil || !validName.MatchString(fn.Name) {
					t.Fatalf("no valid function in %s", raw)
				}
				if diff := cmp.Diff(generic(t, raw), generic(t, mustJSON(t, tool))); diff != "" {
					t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
				}
				if got := fn.Strict.Value; got != strict {
					t.Errorf("%s: strict %v", fn.Name, got)
				}
				if !strict {
					continue
				}
				walk(map[string]any(fn.Parameters), func(path string, m map[string]any) {
					for _, k := range []string{"default", "minLength", "maxLength", "uniqueItems", "allOf", "oneOf", "$schema", "examples", "minProperties"} {
						if _, ok := m[k]; ok {
							t.Errorf("%s%s: keyword %s left in strict mode", fn.Name, path, k)
						}
					}
					if f, ok := m["format"]; ok && f != "date-time" && f != "email" {
						t.Errorf("%s%s: format %v left", fn.Name, path, f)
					}
					typ := fmt.Sprint(m["type"])
					if !strings.Contains(typ, "object") {
						return
					}
					if m["additionalProperties"] != false {
						t.Errorf("%s%s: additionalProperties %v", fn.Name, path, m["additionalProperties"])
					}
					props, _ := m["properties"].(map[string]any)
					var names []string
					for n := range props {
						names = append(names, n)
					}
					slices.Sort(names)
					var req []string
					for _, r := range m["required"].([]any) {
						req = append(req, r.(string))
					}
					if !slices.Equal(names, req) {
						t.Errorf("%s%s: required %v, properties %v", fn.Name, path, req, names)
					}
				})
			}
			if strict {
				// Optional properties became nullable, required ones did not.
				var tools []struct {
					Function struct {
						Name       string
						Parameters map[string]any
					}
				}
				_ = json.Unmarshal(data, &tools)
				for _, tl := range tools {
					if tl.Function.Name != "weather__forecast" {
						continue
					}
					props := tl.Function.Parameters["properties"].(map[string]any)
					checks := map[string]string{
						"city":  `"string"`,
						"units": `["string","null"]`,
						"opt":   `["string","null"]`,
						"meta":  `["object","null"]`,
					}
					for name, want := range checks {
						if got := string(mustJSON(t, props[name].(map[string]any)["type"])); got != want {
							t.Errorf("%s: type %s, want %s", name, got, want)
						}
					}
					if got := string(mustJSON(t, props["units"].(map[string]any)["enum"])); got != `["metric","imperial",null]` {
						t.Errorf("units enum %s", got)
					}
					if _, ok := props["shape"].(map[string]any)["anyOf"]; !ok {
						t.Errorf("shape: oneOf not turned into anyOf: %v", props["shape"])
					}
				}
			}
		})
	}
}

func TestExportAnthropic(t *testing.T) {
	data := export(t, llm.Anthropic, false)
	for _, raw := range elements(t, data) {
		var tool anthropic.ToolUnionParam
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatalf("into anthropic.ToolUnionParam: %v: %s", err, raw)
		}
		if tool.OfTool == nil || !validName.MatchString(tool.OfTool.Name) {
			t.Fatalf("not a custom tool: %s", raw)
		}
		if diff := cmp.Diff(generic(t, raw), generic(t, mustJSON(t, tool))); diff != "" {
			t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
		}
		if string(tool.OfTool.InputSchema.Type) != "object" {
			t.Errorf("%s: input_schema type %q", tool.OfTool.Name, tool.OfTool.InputSchema.Type)
		}
	}
}

// geminiKeys are the keys genai.Schema has.
var geminiKeys = map[string]bool{
	"anyOf": true, "default": true, "description": true, "enum": true, "example": true, "format": true,
	"items": true, "maxItems": true, "maxLength": true, "maxProperties": true, "maximum": true,
	"minItems": true, "minLength": true, "minProperties": true, "minimum": true, "nullable": true,
	"pattern": true, "properties": true, "propertyOrdering": true, "required": true, "title": true, "type": true,
}

func TestExportGemini(t *testing.T) {
	data := export(t, llm.Gemini, false)
	var tools []*genai.Tool
	if err := json.Unmarshal(data, &tools); err != nil {
		t.Fatalf("into []*genai.Tool: %v: %s", err, data)
	}
	if diff := cmp.Diff(generic(t, data), generic(t, mustJSON(t, tools))); diff != "" {
		t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
	}
	if len(tools) != 1 || len(tools[0].FunctionDeclarations) != len(testTools()) {
		t.Fatalf("want one tool with %d declarations: %s", len(testTools()), data)
	}
	var generic []map[string][]map[string]any
	_ = json.Unmarshal(data, &generic)
	for _, fd := range generic[0]["functionDeclarations"] {
		name := fd["name"].(string)
		if !validName.MatchString(name) {
			t.Errorf("name %q", name)
		}
		walk(fd["parameters"], func(path string, m map[string]any) {
			for k := range m {
				if !geminiKeys[k] {
					t.Errorf("%s%s: key %q is not in Gemini's schema", name, path, k)
				}
			}
			if ty, ok := m["type"].(string); ok && ty != strings.ToUpper(ty) {
				t.Errorf("%s%s: type %q", name, path, ty)
			}
			if f, ok := m["format"]; ok && f != "date-time" && f != "int32" {
				t.Errorf("%s%s: format %v", name, path, f)
			}
		})
		if name == "weather__forecast" {
			got := string(mustJSON(t, fd["parameters"].(map[string]any)["properties"].(map[string]any)["loc"]))
			want := `{"description":"Where","properties":{"lat":{"type":"NUMBER"},"lon":{"type":"NUMBER"}},"required":["lat","lon"],"type":"OBJECT"}`
			if got != want {
				t.Errorf("$ref not inlined:\n got %s\nwant %s", got, want)
			}
			opt := string(mustJSON(t, fd["parameters"].(map[string]any)["properties"].(map[string]any)["opt"]))
			if opt != `{"example":"x","nullable":true,"type":"STRING"}` {
				t.Errorf("opt: %s", opt)
			}
		}
		if name == "weather__noargs" && fd["parameters"] != nil {
			t.Errorf("noargs has parameters %v", fd["parameters"])
		}
	}
	empty, _ := llm.Export(llm.Gemini, nil, nil, llm.ExportOptions{})
	if got := string(mustJSON(t, empty)); got != "[]" {
		t.Errorf("no tools: %s", got)
	}
}

func TestExportBadSchema(t *testing.T) {
	for _, p := range llm.Providers {
		_, err := llm.Export(p, []*utcp.Tool{{Name: "m.t", Inputs: json.RawMessage(`[1]`)}}, nil, llm.ExportOptions{})
		if err == nil || !strings.Contains(err.Error(), "m.t") {
			t.Errorf("%s: err %v", p, err)
		}
	}
}

// With enough tools to encode them in parallel, the error names the first
// tool whose schema is not an object, whichever worker met it.
func TestExportBadSchemaParallel(t *testing.T) {
	tools := benchTools(1000)
	for _, i := range []int{900, 420} {
		tools[i] = &utcp.Tool{Name: fmt.Sprintf("bad.t%d", i), Inputs: json.RawMessage(`"x"`)}
	}
	for _, p := range llm.Providers {
		_, err := llm.Export(p, tools, nil, llm.ExportOptions{})
		if err == nil || !strings.Contains(err.Error(), "tool bad.t420:") {
			t.Errorf("%s: err %v", p, err)
		}
	}
}

// benchTools returns n tools with realistic schemas.
func benchTools(n int) []*utcp.Tool {
	out := make([]*utcp.Tool, n)
	for i := range out {
		out[i] = &utcp.Tool{
			Name:        fmt.Sprintf("manual%d.tool_%d", i%50, i),
			Description: "A tool that does something useful with its arguments and returns a result.",
			Inputs: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for","minLength":1},` +
				`"limit":{"type":"integer","minimum":1,"maximum":100,"default":10},"tags":{"type":"array","items":{"type":"string"}},` +
				`"options":{"type":"object","properties":{"exact":{"type":"boolean"},"lang":{"type":"string","enum":["en","fr","de"]}}}},"required":["query"]}`),
		}
	}
	return out
}

func BenchmarkExport10k(b *testing.B) {
	tools := benchTools(10000)
	for _, c := range []struct {
		p      llm.Provider
		strict bool
	}{{llm.OpenAI, false}, {llm.OpenAI, true}, {llm.Anthropic, false}, {llm.Gemini, false}} {
		b.Run(fmt.Sprintf("%s/strict=%v", c.p, c.strict), func(b *testing.B) {
			var out json.RawMessage
			for b.Loop() {
				var err error
				if out, err = llm.Export(c.p, tools, nil, llm.ExportOptions{Strict: c.strict}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out)), "bytes/export")
		})
	}
}
