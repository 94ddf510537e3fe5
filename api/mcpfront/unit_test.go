package mcpfront

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/utcp"
)

func TestNames(t *testing.T) {
	long := "m." + strings.Repeat("x", 200)
	tools := func(names ...string) []*utcp.Tool {
		out := make([]*utcp.Tool, len(names))
		for i, n := range names {
			out[i] = &utcp.Tool{Name: n}
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		in    []string
		short bool
		check func(t *testing.T, got []string)
	}{
		{"qualified names fit", []string{"demo.add", "demo.server.tool-1"}, false, func(t *testing.T, got []string) {
			if diff := cmp.Diff([]string{"demo.add", "demo.server.tool-1"}, got); diff != "" {
				t.Error(diff)
			}
		}},
		{"invalid characters are mangled", []string{"demo.get weather", "demo.get_weather", "demo.überblick"}, false, func(t *testing.T, got []string) {
			if got[1] != "demo.get_weather" {
				t.Errorf("a valid name changed: %q", got[1])
			}
			if !strings.HasPrefix(got[0], "demo.get_weather_") || len(got[0]) != len("demo.get_weather_")+8 {
				t.Errorf("mangled name %q", got[0])
			}
			if !strings.HasPrefix(got[2], "demo.__berblick_") {
				t.Errorf("mangled name %q", got[2])
			}
		}},
		{"too long", []string{long}, false, func(t *testing.T, got []string) {
			if len(got[0]) != MaxNameLength || !ValidName(got[0]) {
				t.Errorf("name %q (%d bytes)", got[0], len(got[0]))
			}
		}},
		{"short names while unique", []string{"a.add", "b.add", "a.echo", "b.srv.tool", "srv.tool"}, true, func(t *testing.T, got []string) {
			want := []string{"a.add", "b.add", "echo", "b.srv.tool", "tool"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Error(diff)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Names(tools(tc.in...), tc.short)
			seen := map[string]bool{}
			for _, n := range got {
				if !ValidName(n) {
					t.Errorf("invalid MCP name %q", n)
				}
				if seen[n] {
					t.Errorf("name %q given twice", n)
				}
				seen[n] = true
			}
			tc.check(t, got)
			if again := Names(tools(tc.in...), tc.short); !cmp.Equal(again, got) {
				t.Errorf("names are not stable: %v then %v", got, again)
			}
		})
	}
}

func TestMCPTool(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tool          utcp.Tool
		in, out, anno string
		desc          string
	}{
		{name: "plain", tool: utcp.Tool{Name: "m.t", Description: "d", Inputs: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`), Outputs: json.RawMessage(`{"type":"object"}`)},
			in: `{"type":"object","properties":{"x":{"type":"string"}}}`, out: `{"type":"object"}`, anno: `null`, desc: "d"},
		{name: "no schemas", tool: utcp.Tool{Name: "m.t"}, in: `{"type":"object"}`, out: `null`, anno: `null`, desc: "The tool m.t (its manual gives no description)."},
		{name: "untyped input, array output", tool: utcp.Tool{Name: "m.t", Description: "d", Inputs: json.RawMessage(`{"properties":{}}`), Outputs: json.RawMessage(`{"type":"array"}`)},
			in: `{"properties":{},"type":"object"}`, out: `null`, anno: `null`, desc: "d"},
		{name: "string input", tool: utcp.Tool{Name: "m.t", Description: "d", Inputs: json.RawMessage(`{"type":"string"}`)}, in: `{"type":"object"}`, out: `null`, anno: `null`, desc: "d"},
		{name: "annotations from tags", tool: utcp.Tool{Name: "m.t", Description: "d", Tags: []string{"mcp", "read_only", "idempotent", "open_world"}},
			in: `{"type":"object"}`, out: `null`, anno: `{"idempotentHint":true,"openWorldHint":true,"readOnlyHint":true}`, desc: "d"},
		{name: "destructive", tool: utcp.Tool{Name: "m.t", Description: "d", Tags: []string{"destructive"}},
			in: `{"type":"object"}`, out: `null`, anno: `{"destructiveHint":true,"idempotentHint":false,"readOnlyHint":false}`, desc: "d"},
		{name: "http GET", tool: utcp.Tool{Name: "m.t", Description: "d", ToolCallTemplate: &utcp.CallTemplate{Type: "http", Raw: json.RawMessage(`{"call_template_type":"http","http_method":"get"}`)}},
			in: `{"type":"object"}`, out: `null`, anno: `{"idempotentHint":false,"readOnlyHint":true}`, desc: "d"},
		{name: "http DELETE", tool: utcp.Tool{Name: "m.t", Description: "d", ToolCallTemplate: &utcp.CallTemplate{Type: "http", Raw: json.RawMessage(`{"call_template_type":"http","http_method":"DELETE"}`)}},
			in: `{"type":"object"}`, out: `null`, anno: `{"destructiveHint":true,"idempotentHint":false,"readOnlyHint":false}`, desc: "d"},
		{name: "http POST", tool: utcp.Tool{Name: "m.t", Description: "d", ToolCallTemplate: &utcp.CallTemplate{Type: "http", Raw: json.RawMessage(`{"call_template_type":"http","http_method":"POST"}`)}},
			in: `{"type":"object"}`, out: `null`, anno: `null`, desc: "d"},
		{name: "MCP metadata", tool: utcp.Tool{Name: "m.s.t", Description: "d", Tags: []string{"read_only"},
			MCP: json.RawMessage(`{"title":"T","annotations":{"readOnlyHint":false,"idempotentHint":true}}`)},
			in: `{"type":"object"}`, out: `null`, anno: `{"idempotentHint":true,"readOnlyHint":false}`, desc: "d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt := MCPTool("n", &tc.tool)
			js := func(v any) string {
				if v == nil {
					return "null"
				}
				b, _ := json.Marshal(v)
				return string(b)
			}
			if got := js(mt.InputSchema); got != tc.in {
				t.Errorf("input schema %s, want %s", got, tc.in)
			}
			if got := js(mt.OutputSchema); got != tc.out {
				t.Errorf("output schema %s, want %s", got, tc.out)
			}
			var anno any
			if mt.Annotations != nil {
				anno = mt.Annotations
			}
			if got := js(anno); got != tc.anno {
				t.Errorf("annotations %s, want %s", got, tc.anno)
			}
			if mt.Description != tc.desc {
				t.Errorf("description %q", mt.Description)
			}
		})
	}
}

func TestResult(t *testing.T) {
	for _, tc := range []struct {
		name       string
		value      any
		text       []string
		structured string
	}{
		{"object", map[string]any{"a": json.Number("1"), "h": "<b>"}, []string{`{"a":1,"h":"<b>"}`}, `{"a":1,"h":"\u003cb\u003e"}`},
		{"raw object", json.RawMessage(`{"x": [1, 2]}`), []string{`{"x":[1,2]}`}, `{"x":[1,2]}`},
		{"string", "hello", []string{"hello"}, ""},
		{"number", json.Number("42"), []string{"42"}, ""},
		{"array", []any{"a", true}, []string{`["a",true]`}, ""},
		{"null", nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Result(tc.value)
			var texts []string
			for _, c := range res.Content {
				texts = append(texts, c.(*mcp.TextContent).Text)
			}
			if diff := cmp.Diff(tc.text, texts); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			got := ""
			if res.StructuredContent != nil {
				b, _ := json.Marshal(res.StructuredContent)
				got = string(b)
			}
			if got != tc.structured {
				t.Errorf("structuredContent %s, want %s", got, tc.structured)
			}
			if res.IsError {
				t.Error("isError set")
			}
		})
	}
}

func TestNamingNative(t *testing.T) {
	tools := []*utcp.Tool{{Name: "a.add"}, {Name: "m.srv.add"}, {Name: "m.srv.echo"}, {Name: "m.other.echo"}, {Name: "b.echo"}}
	got := Naming{Short: true, Native: []string{"m.srv"}}.Names(tools)
	// The native names win; a short name they take falls back to the
	// qualified name, never to a mangled one.
	want := []string{"a.add", "add", "echo", "other.echo", "b.echo"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if c := nativeCollisions([]string{"m.srv"}, tools, got); len(c) != 0 {
		t.Errorf("collisions %v, want none", c)
	}
	both := Naming{Native: []string{"m.srv", "m.other"}}.Names(tools)
	if c := nativeCollisions([]string{"m.srv", "m.other"}, tools, both); len(c) != 1 || !strings.Contains(c[0], "m.other.echo") {
		t.Errorf("collisions %v, want m.other.echo's", c)
	}
}

// TestPlainTextResult: the decoder of plain text results gives what the
// SDK's decoder gives (compared as the JSON the front sends), and leaves
// every other shape to it.
func TestPlainTextResult(t *testing.T) {
	sdkDecode := func(raw string) string {
		res := &mcp.CallToolResult{}
		if err := json.Unmarshal([]byte(raw), res); err != nil {
			t.Fatalf("SDK decoding %s: %v", raw, err)
		}
		var structured struct {
			S json.RawMessage `json:"structuredContent"`
		}
		if json.Unmarshal([]byte(raw), &structured) == nil && len(structured.S) > 0 && string(structured.S) != "null" {
			res.StructuredContent = structured.S
		} else {
			res.StructuredContent = nil
		}
		if res.Content == nil {
			res.Content = []mcp.Content{}
		}
		out, _ := json.Marshal(res)
		return string(out)
	}
	for _, raw := range []string{
		`{"content":[{"type":"text","text":"Echo: hi"}]}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b \u00e9\n"}],"isError":true}`,
		`{"content":[],"isError":false}`,
		`{"content":null}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":{"sum":3, "z":[1,2]}}`,
		`{"content":[{"type":"text","text":"x"}],"structuredContent":null}`,
		` { "isError" : null , "content" : [ { "text" : "q\"\\\u00e9" , "type" : "text" } ] } `,
	} {
		res, ok := plainTextResult(json.RawMessage(raw))
		if !ok {
			t.Errorf("plainTextResult(%s) declined a plain text result", raw)
			continue
		}
		got, _ := json.Marshal(res)
		if want := sdkDecode(raw); string(got) != want {
			t.Errorf("plainTextResult(%s) = %s, the SDK decodes %s", raw, got, want)
		}
	}
	for _, raw := range []string{
		`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`,
		`{"content":[{"type":"text","text":"x","_meta":{"k":1}}]}`,
		`{"content":[{"type":"text","text":"x"}],"_meta":{"k":1}}`,
		`{"content":[{"type":"text","text":3}]}`,
		`{"content":[{"type":"text"}]}`,
		`{"content":{"type":"text","text":"x"}}`,
		`{"content":[],"other":1}`,
		`[1]`,
		`not json`,
		`{"content":[{"type":"text","text":"x","text":"y"}]}`,
		`{"content":[],"content":[]}`,
		`{"content":[{"type":"text","text":"x"}`,
	} {
		if _, ok := plainTextResult(json.RawMessage(raw)); ok {
			t.Errorf("plainTextResult(%s) took a result that is not plain text", raw)
		}
	}
}
