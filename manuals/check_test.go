package manuals

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

// finding is a Problem reduced to what the tests compare.
type finding struct {
	Severity   Severity
	Code       utcp.Code
	Line       int
	Path       string
	Manual     string
	Suggestion string
}

func findings(ps []Problem) []finding {
	out := make([]finding, 0, len(ps))
	for _, p := range ps {
		out = append(out, finding{p.Severity, p.Code, p.Line, p.Path, p.Manual, p.Suggestion})
	}
	return out
}

// TestCheckConfigEveryProblem: one pass reports every problem of the
// file; a misspelled call_template_type key or an unknown type gets a
// "did you mean" and the rest of its template is still checked; what the
// transport refuses rejects that template alone (Manual set), the rest
// is the file's.
func TestCheckConfigEveryProblem(t *testing.T) {
	in := `{
  "manual_call_templates": [
    {"name": "a", "call_template_typ": "http", "url": "https://a", "http_methd": "GET"},
    {"name": "b", "call_template_type": "htp", "url": "https://b", "hedaers": {}},
    {"name": "c", "call_template_type": "http"},
    {"name": "d", "call_template_type": "http", "url": "https://d", "timeoutt": 1},
    {"name": 7, "call_template_type": "http", "url": "https://e"},
    "not an object",
    {"name": "ok", "call_template_type": "file", "file_path": "/m.json"}
  ],
  "tool_search_strategy": {"tool_search_strategy_type": "tag_and_description_word_match", "tag_weight": "x"}
}`
	cfg, ps := CheckConfig("c.json", []byte(in), Options{Parser: fakeParser{}})
	if cfg == nil {
		t.Fatal("no configuration")
	}
	want := []finding{
		{SeverityError, utcp.CodeInvalidConfig, 3, "manual_call_templates[0].call_template_typ", "", "call_template_type"},
		{SeverityWarning, "", 3, "manual_call_templates[0].http_methd", "", "http_method"},
		{SeverityError, utcp.CodeInvalidTemplate, 4, "manual_call_templates[1].call_template_type", "b", "http"},
		{SeverityWarning, "", 4, "manual_call_templates[1].hedaers", "b", "headers"},
		{SeverityError, utcp.CodeInvalidTemplate, 5, "manual_call_templates[2]", "c", ""},
		{SeverityWarning, "", 6, "manual_call_templates[3].timeoutt", "d", "timeout"},
		{SeverityError, utcp.CodeInvalidConfig, 7, "manual_call_templates[4].name", "", ""},
		{SeverityError, utcp.CodeInvalidConfig, 8, "manual_call_templates[5]", "", ""},
		{SeverityError, utcp.CodeInvalidConfig, 11, "tool_search_strategy.tag_weight", "", ""},
	}
	if diff := cmp.Diff(want, findings(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	var good, rejected []string
	for _, tm := range cfg.ManualCallTemplates {
		good = append(good, tm.Name)
	}
	for _, r := range cfg.Rejected {
		rejected = append(rejected, r.Name)
		if codeOf(r.Err()) == "" || len(ProblemsOf(r.Err())) != len(r.Problems) {
			t.Errorf("%s: Err() = %v", r.Name, r.Err())
		}
	}
	if diff := cmp.Diff([]string{"d", "ok"}, good); diff != "" {
		t.Errorf("usable templates: %s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, rejected); diff != "" {
		t.Errorf("rejected templates: %s", diff)
	}
	if s := ps[0].String(); !strings.Contains(s, `"call_template_typ" is not a field (did you mean "call_template_type"?)`) {
		t.Errorf("first problem: %s", s)
	}

	// Strict: the unknown fields are errors of the file, and every other
	// problem is still there.
	cfg, ps = CheckConfig("c.json", []byte(in), Options{Parser: fakeParser{}, Strict: true})
	for _, p := range ps {
		if strings.HasSuffix(p.Path, "http_methd") || strings.HasSuffix(p.Path, "hedaers") || strings.HasSuffix(p.Path, "timeoutt") {
			if p.Severity != SeverityError || p.Manual != "" {
				t.Errorf("strict: %+v", p)
			}
		}
	}
	if len(ps) != len(want) || len(cfg.ManualCallTemplates) != 2 {
		t.Errorf("strict: %+v, usable %+v", findings(ps), cfg.ManualCallTemplates)
	}

	// ParseConfig still refuses the whole file, with every error.
	_, err := ParseConfig("c.json", []byte(in), Options{Parser: fakeParser{}})
	if ps := ProblemsOf(err); len(ps) == 0 || !strings.Contains(err.Error(), "did you mean") {
		t.Errorf("ParseConfig: %v", err)
	}
}

// TestCheckConfigFileLevel: problems that are not one template's have no
// Manual; an unreadable document gives no configuration.
func TestCheckConfigFileLevel(t *testing.T) {
	cfg, ps := CheckConfig("c.json", []byte(`{"manual_call_templates": [`), Options{})
	if cfg != nil || len(ps) != 1 || ps[0].Code != utcp.CodeInvalidConfig || !strings.Contains(ps[0].String(), "c.json:1") {
		t.Fatalf("malformed: %+v %+v", cfg, ps)
	}
	in := `{"manual_call_templates": [
  {"name": "x", "call_template_type": "file", "file_path": "/a"},
  {"name": "x", "call_template_type": "file", "file_path": "/b"}
], "load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": "/nonexistent/.env"}]}`
	cfg, ps = CheckConfig("c.json", []byte(in), Options{Parser: fakeParser{}})
	want := []finding{
		{SeverityError, utcp.CodeManualExists, 3, "manual_call_templates[1].name", "", ""},
		{SeverityError, utcp.CodeInvalidConfig, 4, "load_variables_from[0]", "", ""},
	}
	if diff := cmp.Diff(want, findings(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if cfg == nil || len(cfg.ManualCallTemplates) != 1 {
		t.Errorf("config: %+v", cfg)
	}
}

// TestPreflight: the checks that need the variables, through the
// parser's CheckTemplate; a missing variable is a warning.
func TestPreflight(t *testing.T) {
	dir := t.TempDir()
	manual := filepath.Join(dir, "m.json")
	if err := os.WriteFile(manual, []byte(`{"utcp_version": "1.1.0", "tools": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in := `{"variables": {"here_PATH": "` + manual + `"}, "manual_call_templates": [
  {"name": "here", "call_template_type": "file", "file_path": "${PATH}"},
  {"name": "gone", "call_template_type": "file", "file_path": "` + filepath.Join(dir, "gone.json") + `"},
  {"name": "novar", "call_template_type": "file", "file_path": "${NOPE}"},
  {"name": "plain", "call_template_type": "http", "url": "http://example.com/utcp"}
]}`
	p := checkingParser{}
	cfg, ps := CheckConfig(filepath.Join(dir, "c.json"), []byte(in), Options{Parser: p})
	if len(ps) != 0 {
		t.Fatalf("CheckConfig: %v", ps)
	}
	vars, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	if err != nil {
		t.Fatal(err)
	}
	want := []finding{
		{SeverityError, utcp.CodeDiscoveryFailed, 3, "manual_call_templates[1]", "gone", ""},
		{SeverityWarning, utcp.CodeVariableNotFound, 4, "manual_call_templates[2]", "novar", ""},
		{SeverityError, utcp.CodeInvalidTemplate, 5, "manual_call_templates[3]", "plain", ""},
	}
	ps = Preflight(cfg, p, vars)
	if diff := cmp.Diff(want, findings(ps)); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// Unknown variables: templates with variables are skipped.
	if ps := Preflight(cfg, p, nil); len(ps) != 2 {
		t.Errorf("without variables: %+v", findings(ps))
	}
}

// checkingParser is fakeParser with a CheckTemplate that refuses a file
// template's missing file and plain http to example.com, as
// *transports.Registry does.
type checkingParser struct{ fakeParser }

func (checkingParser) CheckTemplate(tmpl *utcp.CallTemplate) error {
	var f struct {
		FilePath string `json:"file_path"`
		URL      string `json:"url"`
	}
	_ = json.Unmarshal(tmpl.Raw, &f)
	if tmpl.Type == "file" {
		if _, err := os.Stat(f.FilePath); err != nil {
			return &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: err.Error(), Err: err}
		}
	}
	if strings.HasPrefix(f.URL, "http://example.com") {
		return utcp.NewError(utcp.CodeInvalidTemplate, "plain http")
	}
	return nil
}

func TestSummarize(t *testing.T) {
	var ps []Problem
	for i := range 5 {
		ps = append(ps, Problem{Severity: SeverityWarning, Kind: WarnLegacy, File: "f", Line: 10 + i, Path: joinKey(joinIndex("providers", i), "provider_type"),
			Message: "legacy field provider_type renamed to call_template_type", Manual: "m"})
	}
	ps = append(ps, Problem{Severity: SeverityError, File: "f", Line: 20, Path: "providers[5]", Message: "bad", Manual: "x"})
	for i := range 3 {
		ps = append(ps, Problem{Severity: SeverityWarning, Kind: WarnUnknownField, File: "f", Line: 30 + i, Path: joinKey(joinIndex("manual_call_templates", i), "x"),
			Message: `unknown field "x" ignored`, Manual: "m"})
	}
	got := Summarize(ps)
	var lines []string
	for _, p := range got {
		lines = append(lines, p.String())
	}
	want := []string{
		"warning: f:10: providers[*].provider_type: 5 providers: legacy field provider_type renamed to call_template_type",
		"f:20: providers[5]: bad",
		`warning: f:30: manual_call_templates[0].x: unknown field "x" ignored`,
		`warning: f:31: manual_call_templates[1].x: unknown field "x" ignored`,
		`warning: f:32: manual_call_templates[2].x: unknown field "x" ignored`,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(Summarize(nil)) != 0 {
		t.Error("Summarize(nil)")
	}
}
