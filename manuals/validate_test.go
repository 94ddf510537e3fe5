package manuals

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "utcpd.json")
	in := `{
  "load_variables_from": [
    {"variable_loader_type": "dotenv", "env_file_path": "missing.env"},
    {"variable_loader_type": "dotenv", "env_file_path": "also-missing.env", "optional": true}
  ],
  "tool_serch_strategy": {},
  "manual_call_templates": [
    {"name": "ok", "call_template_type": "http", "url": "https://x"},
    {"name": "nourl", "call_template_type": "http"},
    {"name": "grpc", "call_template_type": "grpc", "host": "h"},
    {"name": "typo", "call_template_type": "http", "url": "https://x", "header_feilds": ["a"]},
    {"name": "protos", "call_template_type": "http", "url": "https://x", "allowed_communication_protocols": ["http", "htpp"]}
  ]
}`
	cfg, err := ParseConfig(path, []byte(in), Options{Parser: fakeParser{}})
	if err != nil {
		t.Fatal(err)
	}
	type finding struct {
		Severity   Severity
		Code       utcp.Code
		Line       int
		Path       string
		Suggestion string
	}
	summarize := func(ps []Problem) []finding {
		var out []finding
		for _, p := range ps {
			out = append(out, finding{p.Severity, p.Code, p.Line, p.Path, p.Suggestion})
		}
		return out
	}
	want := []finding{
		{SeverityError, utcp.CodeInvalidConfig, 3, "load_variables_from[0]", ""},
		{SeverityWarning, "", 6, "tool_serch_strategy", "tool_search_strategy"},
		{SeverityError, utcp.CodeInvalidTemplate, 9, "manual_call_templates[1]", ""},
		{SeverityError, utcp.CodeInvalidTemplate, 10, "manual_call_templates[2]", ""},
		// Reported once although both ParseConfig and Validate find it
		// with the parser.
		{SeverityWarning, "", 11, "manual_call_templates[3].header_feilds", "header_fields"},
		{SeverityWarning, "", 12, "manual_call_templates[4].allowed_communication_protocols[1]", "http"},
	}
	ps := Validate(cfg, fakeParser{}, false)
	if diff := cmp.Diff(want, summarize(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
		for _, p := range ps {
			t.Log(p)
		}
	}
	for _, p := range ps {
		if p.File != path {
			t.Errorf("problem without file: %v", p)
		}
	}

	// Strict: the warnings become errors.
	for _, p := range Validate(cfg, fakeParser{}, true) {
		if p.Severity != SeverityError || p.Code == "" {
			t.Errorf("strict: %v", p)
		}
	}

	// The optional loader is fine once the required one exists.
	if err := os.WriteFile(filepath.Join(dir, "missing.env"), []byte("A=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := summarize(Validate(cfg, fakeParser{}, false)); len(got) != len(want)-1 {
		t.Errorf("after creating the dotenv file: %v", got)
	}
}

func TestValidateMessages(t *testing.T) {
	cfg, err := ParseConfig("c.json", []byte(`{"manual_call_templates":[{"name":"x","call_template_type":"http"}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ps := Validate(cfg, fakeParser{}, false)
	if len(ps) != 1 || ps[0].String() != "c.json:1: manual_call_templates[0]: manual x: http: field url is required" {
		t.Errorf("problems = %v", ps)
	}
	if Validate(nil, fakeParser{}, false) != nil {
		t.Error("nil config")
	}
}

func TestCheckVariables(t *testing.T) {
	in := `{"variables": {"github_TOKEN": "t"},
"manual_call_templates": [
  {"name": "github", "call_template_type": "http", "url": "https://api.github.com", "headers": {"Authorization": "Bearer ${TOKEN}"}},
  {"name": "web_scraper", "call_template_type": "http", "url": "https://x/$API_KEY"}
]}`
	cfg, err := ParseConfig("c.json", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	if err != nil {
		t.Fatal(err)
	}
	ps := CheckVariables(cfg, r)
	if len(ps) != 1 || ps[0].Code != utcp.CodeVariableNotFound || ps[0].Path != "manual_call_templates[1]" ||
		ps[0].Message != "manual web_scraper needs variable web__scraper_API_KEY, which is not set in the config variables, a dotenv file or the environment" {
		t.Errorf("problems = %v", ps)
	}
}

func TestValidateManual(t *testing.T) {
	m, _, err := ParseManual([]byte(`{"utcp_version":"1.1.0","tools":[
	  {"name":"a","tool_call_template":{"call_template_type":"http","url":"u","hedaers":{}}},
	  {"name":"b","tool_call_template":{"call_template_type":"sse","url":"u"}},
	  {"name":"c"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ValidateManual(m, fakeParser{}, false) {
		got = append(got, p.String())
	}
	want := []string{
		`warning: tools[0].tool_call_template.hedaers: unknown field "hedaers" ignored (did you mean "headers"?)`,
		`tools[1].tool_call_template: tool b: unknown call_template_type "sse" (valid types: cli, file, http)`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A template built without Raw is marshalled from its fields.
	m2 := &utcp.Manual{Tools: []utcp.Tool{{Name: "x", ToolCallTemplate: &utcp.CallTemplate{Type: "http"}}}}
	if ps := ValidateManual(m2, fakeParser{}, false); len(ps) != 1 || ps[0].Code != utcp.CodeInvalidTemplate {
		t.Errorf("problems = %v", ps)
	}
}
