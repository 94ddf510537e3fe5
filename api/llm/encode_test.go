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
		params := geminiSchema(m, m, 0, new(geminiBudget))
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

// schemaGen writes random schemas as JSON text, drawing its choices from
// a byte string (zeros once that is used up), so that the fuzzer can steer
// it. The text is written by hand: duplicate keys, escapes, odd numbers,
// whitespace and keywords of the wrong type all occur.
type schemaGen struct {
	data []byte
	b    []byte
}

func (g *schemaGen) n(k int) int {
	if len(g.data) == 0 {
		return 0
	}
	c := g.data[0]
	g.data = g.data[1:]
	return int(c) % k
}

var genKeys = []string{
	"type", "properties", "required", "items", "anyOf", "oneOf", "allOf", "enum", "const", "format",
	"$ref", "$defs", "definitions", "description", "title", "nullable", "default", "example", "examples",
	"minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "minProperties", "additionalProperties",
	"propertyOrdering", "pattern", "$schema", "$id", "uniqueItems", "not", "x-extra", "a", "b", "z",
	`typ\u0065`, `prop\/x`, "é", `\u00e9`, "\u2028k", "tab\\tk", "A", "", "\xffk", "\xef\xbf\xbdk",
}

var genStrings = []string{
	"object", "string", "integer", "number", "boolean", "array", "null", "date-time", "email", "uri",
	"int32", "double", "enum", "#/$defs/a", "#/definitions/b", "#/$defs/missing", "#/properties/a", "#/", "#",
	"a", "b", "z", "é", `obj\u0065ct`, `n\u0075ll`, "\u2028", `q\"x`, `<&>`, "\xff", `\u00e9`, `\ud800`, "",
}

var genNumbers = []string{"0", "1", "-1", "2", "3.0", "1e2", "-0", "1.5", "1e400", "9007199254740993", "12345678901234567890", "0.5e-3", "100"}

func (g *schemaGen) space() {
	if g.n(8) == 0 {
		g.b = append(g.b, " \n\t\r"[g.n(4)])
	}
}

func (g *schemaGen) str(list []string) {
	g.b = append(g.b, '"')
	g.b = append(g.b, list[g.n(len(list))]...)
	g.b = append(g.b, '"')
}

// value writes any JSON value, schemas likelier.
func (g *schemaGen) value(depth int) {
	switch g.n(9) {
	case 0:
		g.b = append(g.b, []string{"null", "true", "false"}[g.n(3)]...)
	case 1:
		g.b = append(g.b, genNumbers[g.n(len(genNumbers))]...)
	case 2, 3:
		g.str(genStrings)
	case 4:
		g.list(depth, func() { g.value(depth + 1) })
	default:
		g.schema(depth)
	}
}

func (g *schemaGen) list(depth int, elem func()) {
	g.b = append(g.b, '[')
	g.space()
	if depth < 6 {
		for i := range g.n(4) {
			if i > 0 {
				g.b = append(g.b, ',')
				g.space()
			}
			elem()
			g.space()
		}
	}
	g.b = append(g.b, ']')
}

// schema writes an object whose keys are mostly schema keywords, with
// values mostly of the type the keyword expects.
func (g *schemaGen) schema(depth int) {
	g.b = append(g.b, '{')
	g.space()
	n := 0
	if depth < 6 && len(g.data) > 0 {
		n = 1 + g.n(6)
	}
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
			g.space()
		}
		var k string
		switch {
		case depth == 0 && i == 0:
			k = "properties" // the root mostly has properties
		case depth == 0 && i == 1:
			k = "type"
		default:
			k = genKeys[g.n(len(genKeys))]
		}
		g.b = append(g.b, '"')
		g.b = append(g.b, k...)
		g.b = append(g.b, '"')
		g.space()
		g.b = append(g.b, ':')
		g.space()
		if g.n(6) == 0 {
			g.value(depth + 1)
			continue
		}
		switch k {
		case "type":
			if g.n(3) == 0 {
				g.list(depth, func() { g.str(genStrings[:8]) })
			} else {
				g.str(genStrings[:8])
			}
		case "properties", "$defs", "definitions":
			g.b = append(g.b, '{')
			for j := range g.n(5) {
				if j > 0 {
					g.b = append(g.b, ',')
				}
				g.str([]string{"a", "b", "z", "é", `a\u0062`, "ab", "loc", "a", `\u00e9`, "\xff", "\xef\xbf\xbd"})
				g.b = append(g.b, ':')
				g.schema(depth + 1)
			}
			g.b = append(g.b, '}')
		case "required", "propertyOrdering", "enum":
			g.list(depth, func() {
				if g.n(4) == 0 {
					g.value(depth + 1)
				} else {
					g.str([]string{"a", "b", "z", "é", "loc", "x"})
				}
			})
		case "anyOf", "oneOf", "allOf", "examples":
			g.list(depth, func() { g.schema(depth + 1) })
		case "items", "not", "additionalProperties":
			g.schema(depth + 1)
		case "$ref":
			g.str(genStrings[13:19])
		case "nullable", "uniqueItems":
			g.b = append(g.b, []string{"true", "false"}[g.n(2)]...)
		case "minimum", "maximum", "minItems", "maxItems", "minLength", "maxLength", "minProperties":
			g.b = append(g.b, genNumbers[g.n(len(genNumbers))]...)
		default:
			g.value(depth + 1)
		}
		g.space()
	}
	g.b = append(g.b, '}')
}

// genSchema returns a random schema drawn from data.
func genSchema(data []byte) []byte {
	g := &schemaGen{data: data}
	g.schema(0)
	return g.b
}

// exportFast is the fast path alone; ok false means the input is left to
// the map-based path.
func exportFast(p Provider, t *utcp.Tool, name string, opts ExportOptions) (out []byte, ok bool) {
	r := getRewriter()
	defer r.release()
	return r.appendFast(nil, p, t, name, opts)
}

var exportVariants = []struct {
	p      Provider
	strict bool
}{{OpenAI, false}, {OpenAI, true}, {Anthropic, false}, {Gemini, false}}

// checkSame reports a difference between exportOne and the encoding/json
// reference for schema, and whether the fast path took the schema.
func checkSame(t *testing.T, schema []byte) (fast bool) {
	t.Helper()
	tool := &utcp.Tool{Name: "m.t", Description: "d", Inputs: json.RawMessage(schema)}
	for _, v := range exportVariants {
		opts := ExportOptions{Strict: v.strict}
		want, wantErr := referenceExportOne(v.p, tool, "m__t", opts)
		got, err := exportOne(v.p, tool, "m__t", opts)
		if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s strict=%v, schema %s:\n got %s, %v\nwant %s, %v", v.p, v.strict, schema, got, err, want, wantErr)
		}
		if _, ok := exportFast(v.p, tool, "m__t", opts); ok {
			fast = true
		}
	}
	return fast
}

// The fast path gives the reference's bytes on random schemas, and takes
// nearly all of them.
func TestExportFastMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fast := 0
	const n = 3000
	for range n {
		data := make([]byte, 64+rng.IntN(3000))
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		if checkSame(t, genSchema(data)) {
			fast++
		}
	}
	if fast < n*9/10 {
		t.Errorf("the fast path took %d of %d generated schemas", fast, n)
	}
	for _, tool := range encodeTools() {
		checkSame(t, tool.Inputs)
	}
	// Past the depth limit, and past the budget of Gemini's $ref inlining.
	for _, k := range []string{"items", "anyOf", "properties"} {
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{"p":`)
		for range 40 {
			switch k {
			case "items":
				b.WriteString(`{"type":"array","items":`)
			case "anyOf":
				b.WriteString(`{"anyOf":[{"type":"null"},`)
			default:
				b.WriteString(`{"type":"object","properties":{"p":`)
			}
		}
		b.WriteString(`{"type":"string"}`)
		for range 40 {
			switch k {
			case "items":
				b.WriteString(`}`)
			case "anyOf":
				b.WriteString(`]}`)
			default:
				b.WriteString(`}}`)
			}
		}
		b.WriteString(`}}`)
		if !checkSame(t, []byte(b.String())) {
			t.Errorf("the fast path did not take the %s chain", k)
		}
	}
	checkSame(t, []byte(`{"$defs":{"a":{"description":"d","anyOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}},"properties":{"x":{"$ref":"#/$defs/a"},"y":{"$ref":"#/$defs/a","description":"y"}}}`))
	// Inputs the fast path leaves to the map-based one.
	for _, s := range []string{``, `null`, `true`, `[1]`, `{"a":1} x`, `{"a":1}{`, `{"a":01}`, `{"a":"\x01"}`, `{"a":tru}`, strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600)} {
		if checkSame(t, []byte(s)) {
			t.Errorf("the fast path took %q", s)
		}
	}
}

// FuzzExportOne compares exportOne with the encoding/json reference on
// the fuzzer's bytes taken as a schema and on a schema generated from
// them.
func FuzzExportOne(f *testing.F) {
	for _, tool := range encodeTools() {
		f.Add([]byte(tool.Inputs))
	}
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":["string","null"],"enum":["x",null]}},"required":["a"]}`))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSame(t, data)
		checkSame(t, genSchema(data))
	})
}

func TestStrictDropped(t *testing.T) {
	for k := range openAIStrictDropped {
		if !strictDropped(k) {
			t.Errorf("strictDropped(%q) = false", k)
		}
	}
	for _, k := range append(genKeys, "type", "properties", "items", "anyOf", "format", "$ref", "enum", "required") {
		if strictDropped(k) != openAIStrictDropped[k] {
			t.Errorf("strictDropped(%q) = %v", k, strictDropped(k))
		}
	}
}

// BenchmarkExportOneFast is the fast path on one tool of
// BenchmarkExport10k, per variant, and the parse alone.
func BenchmarkExportOneFast(b *testing.B) {
	tool := &utcp.Tool{Name: "m.t", Description: "A tool that does something useful with its arguments and returns a result.",
		Inputs: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what to look for","minLength":1},` +
			`"limit":{"type":"integer","minimum":1,"maximum":100,"default":10},"tags":{"type":"array","items":{"type":"string"}},` +
			`"options":{"type":"object","properties":{"exact":{"type":"boolean"},"lang":{"type":"string","enum":["en","fr","de"]}}}},"required":["query"]}`)}
	r := getRewriter()
	defer r.release()
	for _, v := range exportVariants {
		b.Run(fmt.Sprintf("%s/strict=%v", v.p, v.strict), func(b *testing.B) {
			var out []byte
			for b.Loop() {
				var ok bool
				if out, ok = r.appendFast(out[:0], v.p, tool, "m__t", ExportOptions{Strict: v.strict}); !ok {
					b.Fatal("not taken")
				}
			}
		})
	}
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			if !r.t.parse(tool.Inputs) {
				b.Fatal("not parsed")
			}
		}
	})
}
