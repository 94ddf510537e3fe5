package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// referenceExportOne is the encoding through encoding/json (the first
// implementation): the hand-written encoder must give the same bytes.
func referenceExportOne(p Provider, t *utcp.Tool, name string, opts ExportOptions) ([]byte, error) {
	if p != Gemini && !(p == OpenAI && opts.Strict) {
		if raw, ok := passThrough(t.Inputs); ok {
			if p == OpenAI {
				return marshal(OpenAITool{Type: "function", Function: OpenAIFunction{Name: name, Description: t.Description, Parameters: raw}})
			}
			return marshal(AnthropicTool{Name: name, Description: t.Description, InputSchema: raw})
		}
	}
	m, err := decodeSchema(t.Inputs)
	if err != nil {
		return nil, err
	}
	switch p {
	case OpenAI:
		params := objectRoot(m)
		if opts.Strict {
			params, _ = openAIStrict(params, 0).(map[string]any)
		}
		raw, err := marshal(params)
		if err != nil {
			return nil, err
		}
		return marshal(OpenAITool{Type: "function", Function: OpenAIFunction{Name: name, Description: t.Description, Parameters: raw, Strict: opts.Strict}})
	case Anthropic:
		raw, err := marshal(objectRoot(m))
		if err != nil {
			return nil, err
		}
		return marshal(AnthropicTool{Name: name, Description: t.Description, InputSchema: raw})
	default:
		params := geminiSchema(m, m, 0)
		params["type"] = "OBJECT"
		fn := GeminiFunction{Name: name, Description: t.Description}
		if props, _ := params["properties"].(map[string]any); len(props) > 0 {
			if fn.Parameters, err = marshal(params); err != nil {
				return nil, err
			}
		}
		return marshal(fn)
	}
}

// awkward are strings every escaping rule applies to.
var awkward = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnl\nrc\rbs\bff\f", "\x00\x01\x1f\x7f",
	"é ü 日本 🙂", "\u2028 and \u2029", "bad \xff utf8 \xc3", "\xe2\x80", "emoji at end 🙂\xf0\x9f",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	cases := append([]string(nil), awkward...)
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0x2027, 0x2028, 0x2029, 0x202a, 0xfffd, 0xffff, 0x10000, utf8.MaxRune} {
		cases = append(cases, string(r))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		want, err := marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, false, "s", json.Number("-1.5e3"), int64(-42), []any{}, map[string]any{},
		[]any{nil, "x", json.Number("0"), map[string]any{"b": 1.5, "a": []string{"<&>"}}},
		map[string]any{"z": true, "a": map[string]any{"\u2028": "\x00"}, "m": []any{int64(1), json.Number("2")}, "<": "&"},
		json.Number(""), json.Number(" 1"), float64(3.25), 7, // types and values left to marshal
	}
	for _, v := range values {
		want, wantErr := marshal(v)
		got, err := appendJSON(nil, v)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Errorf("%#v: got %s, %v; want %s, %v", v, got, err, want, wantErr)
		}
	}
}

// encodeTools are tools whose schemas take every path of the rewrites.
func encodeTools() []*utcp.Tool {
	var out []*utcp.Tool
	for _, ft := range fixture.Tools() {
		ft.Name = "demo." + ft.Name
		out = append(out, &ft)
	}
	schemas := []string{
		``, `null`, `true`, `{}`, `{"type":"object"}`,
		"{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"type\": \"string\", \"description\": \"<b>&\u2028\"}}\n}",
		`{"type":"object","properties":{"q":{"type":"string","minLength":1,"default":"x"},"n":{"type":["integer","null"],"minimum":1.5e2,"maximum":-3}},"required":["q"],"$schema":"x"}`,
		`{"properties":{"x":{"type":"string","format":"uri"},"e":{"enum":["a",null,1]},"c":{"const":"k"}},"$id":"i"}`,
		`{"type":"object","properties":{"loc":{"$ref":"#/$defs/loc","description":"Where"},"s":{"oneOf":[{"type":"string"},{"type":"null"}]},"t":{"type":"array","items":[{"type":"string"}],"minItems":2,"maxItems":3.0,"prefixItems":[]}},"$defs":{"loc":{"type":"object","properties":{"lat":{"type":"number","format":"double"}},"required":["lat"],"additionalProperties":false}},"examples":[{"a":1}]}`,
		`{"type":"object","properties":{"o":{"type":"object","properties":{"p":{"type":"boolean"}},"allOf":[{"required":["p"]}],"patternProperties":{"^x":{}},"propertyOrdering":["p",1]},"r":{"$ref":"#/definitions/missing"},"u":{"anyOf":[{"$ref":"#/definitions/x~1y"}]}},"definitions":{"x/y":{"type":"integer","format":"int64","example":5}}}`,
		`{"type":"object","properties":{"tab\there":{"type":"string","title":"quote \" \\ bad \xff"}}}`,
	}
	for i, s := range schemas {
		desc := awkward[i%len(awkward)]
		out = append(out, &utcp.Tool{Name: fmt.Sprintf("m.t%d", i), Description: desc, Inputs: json.RawMessage(s)})
	}
	return out
}

// exportOne gives exactly the bytes of the encoding/json implementation,
// for every provider and strict variant.
func TestExportOneMatchesReference(t *testing.T) {
	for _, tool := range encodeTools() {
		for _, c := range []struct {
			p      Provider
			strict bool
		}{{OpenAI, false}, {OpenAI, true}, {Anthropic, false}, {Gemini, false}} {
			opts := ExportOptions{Strict: c.strict}
			for _, name := range []string{FunctionName(tool.Name), "name\"<&>"} {
				want, wantErr := referenceExportOne(c.p, tool, name, opts)
				got, err := exportOne(c.p, tool, name, opts)
				if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
					t.Errorf("%s %s strict=%v:\n got %s, %v\nwant %s, %v", tool.Name, c.p, c.strict, got, err, want, wantErr)
				}
			}
		}
	}
	// A schema that is not an object is an error either way.
	bad := &utcp.Tool{Name: "m.bad", Inputs: json.RawMessage(`[1]`)}
	for _, p := range Providers {
		if _, err := exportOne(p, bad, "m__bad", ExportOptions{}); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("%s: err %v", p, err)
		}
	}
}
