package manuals

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

const configV11 = `{
  "variables": {"weather__api_API_KEY": "abc", "PORT": 8080},
  "load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": ".env"}],
  "tool_repository": {"tool_repository_type": "in_memory"},
  "tool_search_strategy": {"tool_search_strategy_type": "tag_and_description_word_match", "tag_weight": 4, "description_weight": 0.5},
  "post_processing": [
    {"tool_post_processor_type": "filter_dict", "exclude_keys": ["_links"], "only_include_manuals": ["github"]},
    {"tool_post_processor_type": "limit_strings", "limit": 100, "exclude_tools": ["a.b"]},
    {"tool_post_processor_type": "limit_strings"}
  ],
  "manual_call_templates": [
    {"name": "weather_api", "call_template_type": "http", "url": "https://api.example.com/utcp", "http_method": "GET"},
    {"name": "local-manual", "call_template_type": "file", "file_path": "manuals/local.json"},
    {"call_template_type": "cli", "commands": [{"command": "tool --utcp"}]}
  ],
  "gateway": {"listen": "127.0.0.1:8787", "anything": [1, 2]}
}`

func TestParseConfigV11(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "utcpd.json")
	cfg, err := ParseConfig(path, []byte(configV11), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Path != path || cfg.Dir != dir {
		t.Errorf("Path, Dir = %q, %q", cfg.Path, cfg.Dir)
	}
	if diff := cmp.Diff(map[string]string{"weather__api_API_KEY": "abc", "PORT": "8080"}, cfg.Variables); diff != "" {
		t.Errorf("variables: %s", diff)
	}
	if diff := cmp.Diff([]Loader{{Type: "dotenv", EnvFilePath: filepath.Join(dir, ".env"), File: path, Line: 3, Path: "load_variables_from[0]",
		Location: path + ":3: load_variables_from[0]"}}, cfg.Loaders); diff != "" {
		t.Errorf("loaders: %s", diff)
	}
	if cfg.ToolRepository.Type != "in_memory" {
		t.Errorf("repository = %+v", cfg.ToolRepository)
	}
	s := cfg.SearchStrategy
	if s.Type != DefaultSearchStrategyType || s.TagWeight != 4 || s.DescriptionWeight != 0.5 || len(s.Raw) == 0 {
		t.Errorf("search strategy = %+v", s)
	}
	wantPP := []PostProcessor{
		&FilterDict{ExcludeKeys: []string{"_links"}, ToolFilter: ToolFilter{OnlyIncludeManuals: []string{"github"}}},
		&LimitStrings{Limit: 100, ToolFilter: ToolFilter{ExcludeTools: []string{"a.b"}}},
		&LimitStrings{Limit: DefaultStringLimit},
	}
	if diff := cmp.Diff(wantPP, cfg.PostProcessors); diff != "" {
		t.Errorf("post processors: %s", diff)
	}
	assertJSON(t, cfg.Gateway, `{"listen":"127.0.0.1:8787","anything":[1,2]}`)

	type tmpl struct{ Name, Type, Location, Raw string }
	var got []tmpl
	for _, mt := range cfg.ManualCallTemplates {
		got = append(got, tmpl{mt.Name, mt.Type, mt.Location, string(mt.Raw)})
	}
	want := []tmpl{
		{"weather_api", "http", path + ":12: manual_call_templates[0]",
			`{"name":"weather_api","call_template_type":"http","url":"https://api.example.com/utcp","http_method":"GET"}`},
		{"local_manual", "file", path + ":13: manual_call_templates[1]",
			`{"name":"local_manual","call_template_type":"file","file_path":"` + filepath.Join(dir, "manuals/local.json") + `"}`},
		{"cli_3", "cli", path + ":14: manual_call_templates[2]",
			`{"call_template_type":"cli","commands":[{"command":"tool --utcp"}],"name":"cli_3"}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("templates (-want +got):\n%s", diff)
	}
	// Only notices: sanitised name, resolved path, generated name.
	for _, w := range cfg.Warnings {
		if w.Kind != WarnNotice {
			t.Errorf("unexpected warning %v", w)
		}
	}
	if len(cfg.Warnings) != 3 {
		t.Errorf("warnings = %v", cfg.Warnings)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig("", []byte(`{}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ToolRepository.Type != DefaultToolRepositoryType || cfg.SearchStrategy.Type != DefaultSearchStrategyType ||
		cfg.SearchStrategy.TagWeight != 3 || cfg.SearchStrategy.DescriptionWeight != 1 || cfg.Gateway != nil ||
		len(cfg.ManualCallTemplates) != 0 || cfg.Variables == nil {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestParseConfigLegacy(t *testing.T) {
	dir := t.TempDir()
	providers := `[
  {"name": "openlibrary", "provider_type": "http", "http_method": "GET", "url": "https://openlibrary.org/static/openapi.json"},
  {"name": "newsapi", "provider_type": "text", "file_path": "./newsapi_manual.json"},
  {"name": "my_cli", "provider_type": "cli", "command_name": "my-command --utcp-info", "working_dir": "/data", "env_vars": {"K": "$KEY"}}
]`
	if err := os.WriteFile(filepath.Join(dir, "providers.json"), []byte(providers), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgText := `{
  "providers_file_path": "providers.json",
  "providers": [{"name": "inline", "type": "http_stream", "url": "https://s", "method": "POST"}],
  "load_variables_from": [{"type": "dotenv", "env_file_path": "vars.env"}]
}`
	path := filepath.Join(dir, "config.json")
	cfg, err := ParseConfig(path, []byte(cfgText), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var names []string
	for _, mt := range cfg.ManualCallTemplates {
		got[mt.Name] = string(mt.Raw)
		names = append(names, mt.Name)
	}
	if diff := cmp.Diff([]string{"inline", "openlibrary", "newsapi", "my_cli"}, names); diff != "" {
		t.Errorf("order: %s", diff)
	}
	assertJSON(t, []byte(got["inline"]), `{"name":"inline","call_template_type":"streamable_http","url":"https://s","http_method":"POST"}`)
	assertJSON(t, []byte(got["openlibrary"]), `{"name":"openlibrary","call_template_type":"http","http_method":"GET","url":"https://openlibrary.org/static/openapi.json"}`)
	assertJSON(t, []byte(got["newsapi"]), `{"name":"newsapi","call_template_type":"file","file_path":"`+filepath.Join(dir, "newsapi_manual.json")+`"}`)
	assertJSON(t, []byte(got["my_cli"]), `{"name":"my_cli","call_template_type":"cli","commands":[{"command":"my-command --utcp-info"}],"working_dir":"/data","env_vars":{"K":"$KEY"}}`)
	if cfg.ManualCallTemplates[1].Location != filepath.Join(dir, "providers.json")+":2: [0]" {
		t.Errorf("location = %q", cfg.ManualCallTemplates[1].Location)
	}
	if len(cfg.Loaders) != 1 || cfg.Loaders[0].EnvFilePath != filepath.Join(dir, "vars.env") {
		t.Errorf("loaders = %+v", cfg.Loaders)
	}
	for _, w := range cfg.Warnings {
		if w.StrictError() {
			t.Errorf("legacy config gave a strict warning: %v", w)
		}
	}
	// Strict mode accepts legacy syntax: it is not an unknown field.
	if _, err := ParseConfig(path, []byte(cfgText), Options{Strict: true}); err != nil {
		t.Errorf("strict: %v", err)
	}
}

func TestParseConfigProvidersFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	_, err := ParseConfig(path, []byte(`{"providers_file_path": "missing.json"}`), Options{})
	if codeOf(err) != utcp.CodeInvalidConfig || !strings.Contains(err.Error(), "c.json:1: providers_file_path: cannot read providers file") {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte("[\n {\"name\": }\n]"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ParseConfig(path, []byte(`{"providers_file_path": "bad.json"}`), Options{})
	if codeOf(err) != utcp.CodeInvalidConfig || !strings.Contains(err.Error(), "bad.json:2:11: malformed JSON") {
		t.Errorf("malformed providers file: %v", err)
	}
}

func TestParseConfigReadFileOption(t *testing.T) {
	files := map[string]string{"/etc/utcpd/p.json": `{"providers":[{"name":"a","provider_type":"http","url":"u"}]}`}
	opts := Options{ReadFile: func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}}
	cfg, err := ParseConfig("/etc/utcpd/utcpd.json", []byte(`{"providers_file_path":"p.json"}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ManualCallTemplates) != 1 || cfg.ManualCallTemplates[0].Path != "providers[0]" {
		t.Errorf("templates = %+v", cfg.ManualCallTemplates)
	}
}

func TestParseConfigMalformedJSON(t *testing.T) {
	tests := []struct {
		name, in             string
		line, col            int
		wantMessageSubstring string
	}{
		{"trailing comma", "{\n  \"variables\": {\"a\": \"b\",}\n}", 2, 26, "utcpd.json:2:26: malformed JSON: invalid character '}'"},
		{"unterminated", "{\n  \"manual_call_templates\": [\n", 3, 1, "utcpd.json:3:1: malformed JSON: unexpected end of JSON input"},
		{"garbage", "{} x", 1, 4, "utcpd.json:1:4: malformed JSON: invalid character 'x' after top-level value"},
		{"unicode column", "{\"ä\": tru}", 1, 10, "utcpd.json:1:10:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("utcpd.json", []byte(tc.in), Options{})
			var ue *utcp.Error
			if !errors.As(err, &ue) || ue.Code != utcp.CodeInvalidConfig {
				t.Fatalf("err = %v, want invalid_config", err)
			}
			if !strings.Contains(ue.Message, tc.wantMessageSubstring) {
				t.Errorf("message = %q, want %q", ue.Message, tc.wantMessageSubstring)
			}
			if ue.Details["file"] != "utcpd.json" || ue.Details["line"] != tc.line || ue.Details["column"] != tc.col {
				t.Errorf("details = %v", ue.Details)
			}
		})
	}
}

func TestParseConfigSemanticErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		code utcp.Code
		want []string // each problem's String()
	}{
		{
			name: "name not a string",
			in:   "{\"manual_call_templates\": [\n  {\"name\": \"a\", \"call_template_type\": \"http\"},\n  {\"name\": 5, \"call_template_type\": \"http\"}\n]}",
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:3: manual_call_templates[1].name: must be a string, got a number"},
		},
		{
			name: "missing type",
			in:   "{\"manual_call_templates\": [\n  {\"name\": \"a\", \"url\": \"u\"}\n]}",
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:2: manual_call_templates[0].call_template_type: a call template needs call_template_type"},
		},
		{
			name: "template not an object",
			in:   `{"manual_call_templates": ["x"]}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: manual_call_templates[0]: a call template must be a JSON object, got a string"},
		},
		{
			name: "templates not an array",
			in:   `{"manual_call_templates": {}}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: manual_call_templates: must be an array of call templates, got an object"},
		},
		{
			name: "variable not a string",
			in:   `{"variables": {"A": {"x": 1}}}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: variables.A: a variable must be a string, got an object"},
		},
		{
			name: "bad loader type",
			in:   `{"load_variables_from": [{"variable_loader_type": "dotenvv", "env_file_path": ".env"}]}`,
			code: utcp.CodeInvalidConfig,
			want: []string{`c.json:1: load_variables_from[0].variable_loader_type: unknown variable loader type "dotenvv" (valid: dotenv) (did you mean "dotenv"?)`},
		},
		{
			name: "loader without path",
			in:   `{"load_variables_from": [{"variable_loader_type": "dotenv"}]}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: load_variables_from[0].env_file_path: a dotenv loader needs env_file_path, a non-empty string"},
		},
		{
			name: "bad post-processor",
			in:   `{"post_processing": [{"tool_post_processor_type": "limit_string"}, {"tool_post_processor_type": "limit_strings", "limit": -1}]}`,
			code: utcp.CodeInvalidConfig,
			want: []string{
				`c.json:1: post_processing[0].tool_post_processor_type: unknown tool_post_processor_type "limit_string" (valid: filter_dict, limit_strings) (did you mean "limit_strings"?)`,
				"c.json:1: post_processing[1]: limit: must be a non-negative integer, got -1",
			},
		},
		{
			name: "filter_dict list of wrong type",
			in:   `{"post_processing": [{"tool_post_processor_type": "filter_dict", "exclude_keys": "x"}]}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: post_processing[0]: field exclude_keys: expected []string, got JSON string"},
		},
		{
			name: "weights",
			in:   `{"tool_search_strategy": {"tag_weight": "high"}}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: tool_search_strategy.tag_weight: must be a number, got a string"},
		},
		{
			name: "top level scalar",
			in:   `"x"`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: a configuration must be a JSON object or an array of providers, got a string"},
		},
		{
			name: "a manual given as config",
			in:   `{"utcp_version": "1.1.0", "tools": []}`,
			code: utcp.CodeInvalidConfig,
			want: []string{"c.json:1: this is a UTCP manual, not a client configuration; point a file call template at it from manual_call_templates"},
		},
		{
			name: "duplicate names after sanitising",
			in: `{"manual_call_templates": [
  {"name": "my-api", "call_template_type": "http", "url": "a"},
  {"name": "other", "call_template_type": "http", "url": "b"},
  {"name": "my_api", "call_template_type": "http", "url": "c"}
]}`,
			code: utcp.CodeManualExists,
			want: []string{`c.json:4: manual_call_templates[2].name: manual name "my_api" (written "my_api") is already used by c.json:2: manual_call_templates[0] (written "my-api"); manual names must be unique after sanitising`},
		},
		{
			name: "several problems at once",
			in: `{"manual_call_templates": [
  {"name": "a", "call_template_type": "http"},
  {"name": "a", "call_template_type": "http"},
  {"name": "b"}
],
"variables": []}`,
			code: utcp.CodeManualExists,
			want: []string{
				`c.json:3: manual_call_templates[1].name: manual name "a" (written "a") is already used by c.json:2: manual_call_templates[0] (written "a"); manual names must be unique after sanitising`,
				"c.json:4: manual_call_templates[2].call_template_type: a call template needs call_template_type",
				"c.json:6: variables: variables must be a JSON object, got an array",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("c.json", []byte(tc.in), Options{})
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if cfg != nil {
				t.Error("config returned with an error")
			}
			if codeOf(err) != tc.code {
				t.Errorf("code = %s, want %s (%v)", codeOf(err), tc.code, err)
			}
			var got []string
			for _, p := range ProblemsOf(err) {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if len(tc.want) == 1 && err.Error() != tc.want[0] {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestParseConfigErrorChain(t *testing.T) {
	in := `{"manual_call_templates": [{"call_template_type": 1}, {"name":"a","call_template_type":"http"}, {"name":"a","call_template_type":"http"}]}`
	_, err := ParseConfig("c.json", []byte(in), Options{})
	if !errors.Is(err, &utcp.Error{Code: utcp.CodeManualExists}) || !errors.Is(err, &utcp.Error{Code: utcp.CodeInvalidConfig}) {
		t.Errorf("error chain lacks a code: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "2 problems:\n  c.json:1: ") {
		t.Errorf("message = %q", err.Error())
	}
}

func TestParseConfigUnknownFields(t *testing.T) {
	in := `{
  "manual_call_template": [],
  "varaibles": {},
  "tool_search_strategy": {"tool_search_strategy_type": "tag_and_description_word_match", "tag_wieght": 2},
  "tool_repository": {"tool_repository_type": "redis", "url": "x"},
  "post_processing": [{"tool_post_processor_type": "limit_strings", "limt": 5}],
  "load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": ".env", "optinal": true}],
  "manual_call_templates": [
    {"name": "a", "call_template_type": "http", "url": "u", "http_methd": "GET", "metadata": {}},
    {"name": "b", "call_template_type": "custom", "whatever": 1}
  ]
}`
	cfg, err := ParseConfig("c.json", []byte(in), Options{Parser: fakeParser{}})
	if err != nil {
		t.Fatal(err)
	}
	type finding struct {
		Kind       WarningKind
		Line       int
		Path       string
		Suggestion string
	}
	var got []finding
	for _, w := range cfg.Warnings {
		got = append(got, finding{w.Kind, w.Line, w.Path, w.Suggestion})
	}
	want := []finding{
		{WarnUnknownField, 2, "manual_call_template", "manual_call_templates"},
		{WarnUnknownField, 3, "varaibles", "variables"},
		{WarnUnknownField, 7, "load_variables_from[0].optinal", "optional"},
		{WarnUnknownValue, 5, "tool_repository.tool_repository_type", ""},
		{WarnUnknownField, 4, "tool_search_strategy.tag_wieght", "tag_weight"},
		{WarnUnknownField, 6, "post_processing[0].limt", "limit"},
		{WarnUnknownField, 9, "manual_call_templates[0].http_methd", "http_method"},
		{WarnUnknownField, 9, "manual_call_templates[0].metadata", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	w := cfg.Warnings[0]
	if s := w.String(); s != `c.json:2: manual_call_template: unknown field "manual_call_template" ignored (did you mean "manual_call_templates"?)` {
		t.Errorf("String() = %q", s)
	}
	if cfg.ToolRepository.Type != "redis" {
		t.Errorf("repository type = %q", cfg.ToolRepository.Type)
	}

	// Strict mode: every one of them is an error, all reported at once.
	_, err = ParseConfig("c.json", []byte(in), Options{Strict: true, Parser: fakeParser{}})
	if codeOf(err) != utcp.CodeInvalidConfig {
		t.Fatalf("strict err = %v", err)
	}
	if ps := ProblemsOf(err); len(ps) != len(want) {
		t.Errorf("strict problems = %d, want %d: %v", len(ps), len(want), err)
	}
	if !strings.Contains(err.Error(), `c.json:3: varaibles: unknown field "varaibles" ignored (did you mean "variables"?)`) {
		t.Errorf("strict message = %s", err)
	}
}

func TestParseConfigWithParser(t *testing.T) {
	in := `{"manual_call_templates": [
  {"name": "a", "call_template_type": "http", "url": "u", "timeout": 5, "hedaers": {}},
  {"name": "b", "call_template_type": "nosuch"}
]}`
	cfg, err := ParseConfig("c.json", []byte(in), Options{Parser: fakeParser{}})
	if err != nil {
		t.Fatal(err)
	}
	// timeout is known to this parser; the unknown type is left to
	// Validate.
	if diff := cmp.Diff([]string{"unknown_field manual_call_templates[0].hedaers"}, warningPaths(cfg.Warnings)); diff != "" {
		t.Errorf("warnings: %s", diff)
	}
	if cfg.Warnings[0].Suggestion != "headers" {
		t.Errorf("suggestion = %q", cfg.Warnings[0].Suggestion)
	}
}

func TestParseConfigBareArrayAndYAML(t *testing.T) {
	cfg, err := ParseConfig("p.json", []byte(`[{"name":"x","provider_type":"http","url":"u"}]`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ManualCallTemplates) != 1 || cfg.ManualCallTemplates[0].Path != "[0]" || cfg.ManualCallTemplates[0].Type != "http" {
		t.Errorf("templates = %+v", cfg.ManualCallTemplates)
	}

	yml := `# utcpd configuration
variables:
  github_TOKEN: abc
manual_call_templates:
  - name: github
    call_template_type: http
    url: https://api.github.com/utcp
  - name: files
    call_template_type: file
    file_path: m.yaml
    colour: blue
gateway:
  listen: 127.0.0.1:0
`
	cfg, err = ParseConfig("/srv/utcpd.yaml", []byte(yml), Options{Parser: fakeParser{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ManualCallTemplates) != 2 || cfg.ManualCallTemplates[1].Location != "/srv/utcpd.yaml:8: manual_call_templates[1]" {
		t.Errorf("templates = %+v", cfg.ManualCallTemplates)
	}
	assertJSON(t, cfg.ManualCallTemplates[1].Raw, `{"name":"files","call_template_type":"file","file_path":"/srv/m.yaml","colour":"blue"}`)
	w, ok := findWarning(cfg.Warnings, "manual_call_templates[1].colour")
	if !ok || w.Line != 11 {
		t.Errorf("colour warning = %+v (%v)", w, cfg.Warnings)
	}
	assertJSON(t, cfg.Gateway, `{"listen":"127.0.0.1:0"}`)

	_, err = ParseConfig("c.yaml", []byte("a: [\n"), Options{})
	if codeOf(err) != utcp.CodeInvalidConfig || !strings.Contains(err.Error(), "c.yaml:") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestParseConfigFilePathResolution(t *testing.T) {
	in := `{"manual_call_templates": [
  {"name":"rel","call_template_type":"file","file_path":"a/b.json"},
  {"name":"abs","call_template_type":"file","file_path":"/x/y.json"},
  {"name":"var","call_template_type":"file","file_path":"${DIR}/y.json"},
  {"name":"notfile","call_template_type":"http","url":"u","file_path":"rel"}
]}`
	cfg, err := ParseConfig("/etc/utcpd/utcpd.json", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/utcpd/a/b.json", "/x/y.json", "${DIR}/y.json", "rel"}
	for i, mt := range cfg.ManualCallTemplates {
		var m struct {
			FilePath string `json:"file_path"`
		}
		_ = json.Unmarshal(mt.Raw, &m)
		if m.FilePath != want[i] {
			t.Errorf("%s: file_path = %q, want %q", mt.Name, m.FilePath, want[i])
		}
	}
	// Without a file there is no folder: paths stay relative.
	cfg, err = ParseConfig("", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg.ManualCallTemplates[0].Raw), `"a/b.json"`) {
		t.Errorf("raw = %s", cfg.ManualCallTemplates[0].Raw)
	}
}

func TestParseConfigGeneratedNamesAvoidTaken(t *testing.T) {
	in := `{"manual_call_templates": [{"call_template_type":"http","url":"a"}, {"name":"http_1","call_template_type":"http","url":"b"}]}`
	cfg, err := ParseConfig("", []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{cfg.ManualCallTemplates[0].Name, cfg.ManualCallTemplates[1].Name}; !cmp.Equal(got, []string{"http_1_2", "http_1"}) {
		t.Errorf("names = %v", got)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "utcpd.json")
	if err := os.WriteFile(path, []byte(`{"manual_call_templates":[{"name":"a","call_template_type":"http","url":"u"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, Options{})
	if err != nil || len(cfg.ManualCallTemplates) != 1 {
		t.Fatalf("LoadConfig = %+v, %v", cfg, err)
	}
	_, err = LoadConfig(filepath.Join(dir, "nope.json"), Options{})
	if codeOf(err) != utcp.CodeInvalidConfig || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestPublicRegistry loads the public UTCP registry (testdata, see its
// README): 240 legacy v0.1 providers load with no error, their ordinary
// v0.1 field metadata draws no warning, and CheckConfig's warnings,
// summarised, are a handful of lines.
func TestPublicRegistry(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("testdata", "utcp-public-registry-v0.1.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path, Options{Parser: fakeParser{}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cfg.ManualCallTemplates); n != 240 {
		t.Fatalf("templates = %d, want 240", n)
	}
	types := map[string]int{}
	names := map[string]bool{}
	for _, mt := range cfg.ManualCallTemplates {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(mt.Raw, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"provider_type", "metadata"} {
			if _, ok := m[k]; ok {
				t.Errorf("%s still has %s", mt.Name, k)
			}
		}
		types[mt.Type]++
		names[mt.Name] = true
		if mt.Line == 0 {
			t.Errorf("%s has no line", mt.Name)
		}
	}
	if diff := cmp.Diff(map[string]int{"http": 239, "file": 1}, types); diff != "" {
		t.Errorf("types: %s", diff)
	}
	if len(names) != 240 {
		t.Errorf("%d distinct names", len(names))
	}
	// newsapi is a text provider with file_path: file, made absolute.
	for _, mt := range cfg.ManualCallTemplates {
		if mt.Name == "newsapi" {
			assertJSON(t, mt.Raw, `{"name":"newsapi","call_template_type":"file","file_path":`+strconv.Quote(filepath.Join(filepath.Dir(path), "newsapi_manual.json"))+`}`)
		}
	}
	// The warnings: the bare list, 240 renames, newsapi's text → file
	// and its relative file_path; none about metadata, and none that
	// strict mode refuses.
	if n := len(cfg.Warnings); n != 243 {
		t.Errorf("%d warnings, want 243", n)
	}
	for _, w := range cfg.Warnings {
		if w.StrictError() || strings.Contains(w.Path, "metadata") || w.File != path || w.Line == 0 {
			t.Errorf("warning %+v", w)
		}
	}
	if _, err := LoadConfig(path, Options{Strict: true, Parser: fakeParser{}}); err != nil {
		t.Errorf("strict: %v", err)
	}
	// CheckConfig's problems, summarised: four lines.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ccfg, ps := CheckConfig(path, data, Options{Strict: true, Parser: fakeParser{}})
	if ccfg == nil || len(ccfg.ManualCallTemplates) != 240 || len(ccfg.Rejected) != 0 {
		t.Fatalf("CheckConfig: %+v", ccfg)
	}
	var lines []string
	for _, p := range Summarize(ps) {
		if p.Severity != SeverityWarning {
			t.Errorf("error: %v", p)
		}
		lines = append(lines, strings.TrimPrefix(p.String(), "warning: "+path+":"))
	}
	want := []string{
		"1: the file is a bare list of providers (UTCP v0.1); read as manual_call_templates",
		"4: [*].provider_type: 240 providers: legacy field provider_type renamed to call_template_type",
		"20: [1].provider_type: legacy text template with file_path is call_template_type file in UTCP v1.1",
		fmt.Sprintf("21: [1].file_path: relative file_path %q resolved to %q", "./newsapi_manual.json", filepath.Join(filepath.Dir(path), "newsapi_manual.json")),
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("summarised warnings (-want +got):\n%s", diff)
	}
}

func TestPrepareTemplate(t *testing.T) {
	tm, ws, err := PrepareTemplate(json.RawMessage(`{"name":"my api","provider_type":"text","file_path":"m.json"}`), "/base")
	if err != nil {
		t.Fatal(err)
	}
	if tm.Name != "my_api" || tm.Type != "file" {
		t.Errorf("template = %+v", tm)
	}
	assertJSON(t, tm.Raw, `{"name":"my_api","call_template_type":"file","file_path":"/base/m.json"}`)
	if diff := cmp.Diff([]string{"legacy provider_type", "legacy provider_type", "notice file_path", "notice name"}, warningPaths(ws)); diff != "" {
		t.Errorf("warnings: %s", diff)
	}
	for _, in := range []string{`{"call_template_type":"http"}`, `{"name":"a"}`, `{"name":1,"call_template_type":"http"}`, `[]`, `{`} {
		if _, _, err := PrepareTemplate(json.RawMessage(in), ""); codeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("%s: err = %v", in, err)
		}
	}
}
