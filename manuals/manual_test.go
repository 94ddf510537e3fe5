package manuals

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

const manualV11 = `{
  "manual_version": "1.0.0",
  "utcp_version": "1.1.0",
  "tools": [
    {
      "name": "get_weather",
      "description": "Get current weather for a location",
      "tags": ["weather", "forecast"],
      "average_response_size": 512,
      "inputs": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "units": {"type": "string", "enum": ["metric","imperial"]}},
        "required": ["location"]
      },
      "outputs": {"type": "object", "properties": {"temperature": {"type": "number"}}},
      "tool_call_template": {
        "call_template_type": "http",
        "url": "https://api.example.com/weather/{location}",
        "http_method": "GET",
        "auth": {"auth_type": "api_key", "api_key": "${WEATHER_API_KEY}", "var_name": "appid", "location": "query"}
      }
    }
  ]
}`

const manualV01 = `{
  "version": "1.0",
  "tools": [{
    "name": "everything_get",
    "description": "...",
    "tags": ["articles"],
    "inputs": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    "outputs": {"type": "object"},
    "tool_provider": {
      "provider_type": "http",
      "url": "https://newsapi.org/v2/everything",
      "http_method": "GET",
      "content_type": "application/json",
      "auth": {"auth_type": "api_key", "api_key": "$NEWS_API_KEY", "var_name": "X-Api-Key"}
    }
  }]
}`

func TestParseManualV11(t *testing.T) {
	m, ws, err := ParseManual([]byte(manualV11))
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 0 {
		t.Errorf("unexpected warnings: %v", ws)
	}
	if m.UTCPVersion != "1.1.0" || m.ManualVersion != "1.0.0" || len(m.Tools) != 1 {
		t.Fatalf("manual = %+v", m)
	}
	tool := m.Tools[0]
	if tool.Name != "get_weather" || tool.Description == "" || *tool.AverageResponseSize != 512 {
		t.Errorf("tool = %+v", tool)
	}
	if diff := cmp.Diff([]string{"weather", "forecast"}, tool.Tags); diff != "" {
		t.Error(diff)
	}
	assertJSON(t, tool.Inputs, `{"type":"object","properties":{"location":{"type":"string"},"units":{"type":"string","enum":["metric","imperial"]}},"required":["location"]}`)
	ct := tool.ToolCallTemplate
	if ct == nil || ct.Type != "http" || ct.Auth == nil || ct.Auth.APIKey != "${WEATHER_API_KEY}" || ct.Auth.Location != "query" {
		t.Fatalf("template = %+v", ct)
	}
	assertJSON(t, ct.Raw, `{"call_template_type":"http","url":"https://api.example.com/weather/{location}","http_method":"GET",
		"auth":{"auth_type":"api_key","api_key":"${WEATHER_API_KEY}","var_name":"appid","location":"query"}}`)
}

func TestParseManualV01(t *testing.T) {
	m, ws, err := ParseManual([]byte(manualV01))
	if err != nil {
		t.Fatal(err)
	}
	if m.UTCPVersion != utcp.Version || m.ManualVersion != DefaultManualVersion {
		t.Errorf("versions = %q %q", m.UTCPVersion, m.ManualVersion)
	}
	ct := m.Tools[0].ToolCallTemplate
	if ct == nil || ct.Type != "http" {
		t.Fatalf("template = %+v", ct)
	}
	assertJSON(t, ct.Raw, `{"call_template_type":"http","url":"https://newsapi.org/v2/everything","http_method":"GET","content_type":"application/json",
		"auth":{"auth_type":"api_key","api_key":"$NEWS_API_KEY","var_name":"X-Api-Key"}}`)
	want := []string{"legacy version", "legacy tools[0].tool_provider", "legacy tools[0].tool_provider.provider_type"}
	if diff := cmp.Diff(want, warningPaths(ws)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestParseManualLegacyToolFields(t *testing.T) {
	in := `{"version":"0.1","tools":[
	  {"name":"a","parameters":{"type":"object"},"provider":{"type":"http_stream","url":"https://x","method":"POST"}},
	  {"name":"b","call_template":{"call_template_type":"cli","command_name":"b --x"},"tool_provider":{"provider_type":"http"}}
	]}`
	m, ws, err := ParseManual([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, m.Tools[0].Inputs, `{"type":"object"}`)
	assertJSON(t, m.Tools[0].ToolCallTemplate.Raw, `{"call_template_type":"streamable_http","url":"https://x","http_method":"POST"}`)
	// tool_provider wins over call_template (both legacy; the order is tool_call_template, tool_provider, call_template, provider).
	if got := m.Tools[1].ToolCallTemplate.Type; got != "http" {
		t.Errorf("tool b type = %q", got)
	}
	if _, ok := findWarning(ws, "tools[1].call_template"); !ok {
		t.Errorf("no warning for the ignored call_template: %v", ws)
	}
	if _, ok := findWarning(ws, "tools[0].parameters"); !ok {
		t.Errorf("no warning for parameters: %v", ws)
	}
}

func TestParseManualYAML(t *testing.T) {
	in := `
utcp_version: 1.1
manual_version: "2.0"
tools:
  - name: echo
    description: Echo it back
    tags: [demo]
    inputs:
      type: object
      properties:
        text: {type: string}
    tool_call_template:
      call_template_type: cli
      commands:
        - command: echo UTCP_ARG_text_UTCP_END
`
	m, _, err := ParseManual([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if m.UTCPVersion != "1.1" || m.ManualVersion != "2.0" || m.Tools[0].Name != "echo" {
		t.Errorf("manual = %+v", m)
	}
	assertJSON(t, m.Tools[0].ToolCallTemplate.Raw, `{"call_template_type":"cli","commands":[{"command":"echo UTCP_ARG_text_UTCP_END"}]}`)
}

func TestParseManualUnknownFields(t *testing.T) {
	in := `{"utcp_version":"1.1.0","info":{"title":"x"},"auth":{},"tools":[{"name":"a","descripton":"typo","tool_call_template":{"call_template_type":"http","url":"u"}}]}`
	m, ws, err := ParseManual([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != 1 {
		t.Fatal(m)
	}
	w, ok := findWarning(ws, "tools[0].descripton")
	if !ok || w.Kind != WarnUnknownField || w.Suggestion != "description" {
		t.Errorf("typo warning = %+v (all %v)", w, ws)
	}
	for _, p := range []string{"info", "auth"} {
		if w, ok := findWarning(ws, p); !ok || w.Kind != WarnUnknownField {
			t.Errorf("no unknown-field warning for %s: %v", p, ws)
		}
	}
	if !strings.Contains(w.String(), `(did you mean "description"?)`) {
		t.Errorf("String() = %q", w.String())
	}
}

func TestParseManualErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"malformed JSON", "{\n  \"tools\": [\n    {\"name\": \"a\",}\n  ]\n}", "3:18: malformed JSON"},
		{"truncated", `{"tools": [`, "1:12: malformed JSON: unexpected end"},
		{"not an object", `[1,2]`, "a manual must be a JSON object, got an array"},
		{"no tools", `{"utcp_version":"1.1.0"}`, "tools: a manual needs a tools array"},
		{"tools not array", `{"utcp_version":"1.1.0","tools":{}}`, "tools: must be an array"},
		{"tool not object", `{"tools":[1]}`, "tools[0]: a tool must be a JSON object"},
		{"no name", `{"tools":[{"description":"x"}]}`, "tools[0].name: a tool needs a name"},
		{"name not string", `{"tools":[{"name":5}]}`, "tools[0].name: must be a non-empty string"},
		{"tag not string", `{"tools":[{"name":"a","tags":["x",3]}]}`, "tools[0].tags[1]: must be a string"},
		{"bad size", `{"tools":[{"name":"a","average_response_size":1.5}]}`, "tools[0].average_response_size: must be an integer"},
		{"inputs not object", `{"tools":[{"name":"a","inputs":"x"}]}`, "tools[0].inputs: must be a JSON Schema object"},
		{"template not object", `{"tools":[{"name":"a","tool_call_template":"x"}]}`, "tools[0].tool_call_template: a call template must be a JSON object"},
		{"template auth wrong type", `{"tools":[{"name":"a","tool_call_template":{"call_template_type":"http","auth":"x"}}]}`, "tools[0].tool_call_template: field auth"},
		{"yaml", "tools:\n  - name: a\n   bad: [", "malformed YAML"},
		{"empty", "  \n", "the document is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseManual([]byte(tc.in))
			if codeOf(err) != utcp.CodeInvalidManual {
				t.Fatalf("err = %v, want invalid_manual", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseManualToolWithoutTemplate(t *testing.T) {
	m, _, err := ParseManual([]byte(`{"utcp_version":"1.1.0","tools":[{"name":"a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Tools[0].ToolCallTemplate != nil {
		t.Error("expected nil template")
	}
}

func TestIsManual(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{manualV11, true},
		{manualV01, true},
		{"utcp_version: 1.1.0\ntools: []\n", true},
		{`{"openapi":"3.0.0","paths":{}}`, false},
		{`{"tools":[]}`, false},
		{`{"utcp_version":"1.1.0","tools":{}}`, false},
		{`[{"utcp_version":"1"}]`, false},
		{`{`, false},
		{``, false},
	}
	for _, tc := range tests {
		if got := IsManual([]byte(tc.in)); got != tc.want {
			t.Errorf("IsManual(%.40q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
