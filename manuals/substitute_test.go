package manuals

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

// testResolver resolves from a fixed map (no config, no environment).
func testResolver(t *testing.T, vars map[string]string) *Resolver {
	t.Helper()
	r, err := NewResolver(nil, ResolverOptions{LookupEnv: envMap(vars)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSubstitute(t *testing.T) {
	r := testResolver(t, map[string]string{
		"web__scraper_API_KEY": "k3y",
		"web__scraper_HOST":    "api.example.com",
		"web__scraper_Q":       `a "quoted" <value> & more`,
		"API_KEY":              "bare",
		"github_TOKEN":         "tok",
	})
	tests := []struct {
		name, ns, in, want string
	}{
		{"braces", "web_scraper", `{"url":"https://${HOST}/x"}`, `{"url":"https://api.example.com/x"}`},
		{"bare dollar", "web_scraper", `{"auth":{"auth_type":"api_key","api_key":"$API_KEY"}}`, `{"auth":{"auth_type":"api_key","api_key":"k3y"}}`},
		{"several in one string", "web_scraper", `{"url":"https://$HOST/?k=${API_KEY}&k2=$API_KEY"}`, `{"url":"https://api.example.com/?k=k3y&k2=k3y"}`},
		{"value needing escapes", "web_scraper", `{"headers":{"X":"${Q}"}}`, `{"headers":{"X":"a \"quoted\" <value> & more"}}`},
		{"no namespace uses bare key", "", `{"url":"$API_KEY"}`, `{"url":"bare"}`},
		{"keys are never substituted", "web_scraper", `{"headers":{"$API_KEY":"${API_KEY}"}}`, `{"headers":{"$API_KEY":"k3y"}}`},
		{"nested arrays and objects", "github", `{"config":{"mcpServers":{"s":{"args":["--token","$TOKEN"],"env":{"T":"${TOKEN}"}}}}}`,
			`{"config":{"mcpServers":{"s":{"args":["--token","tok"],"env":{"T":"tok"}}}}}`},
		{"non-strings untouched", "github", `{"port":8080,"ok":true,"n":null,"f":1.50,"s":"$TOKEN"}`, `{"port":8080,"ok":true,"n":null,"f":1.50,"s":"tok"}`},
		{"$$ escape", "github", `{"a":"cost: $$5","b":"$$TOKEN","c":"$$$TOKEN","d":"$$${TOKEN}"}`, `{"a":"cost: $5","b":"$TOKEN","c":"$tok","d":"$tok"}`},
		{"lone dollars kept", "github", `{"a":"$","b":"a $ b","c":"${","d":"${}","e":"${a-b}","f":"$-x","g":"${TOKEN"}`,
			`{"a":"$","b":"a $ b","c":"${","d":"${}","e":"${a-b}","f":"$-x","g":"${TOKEN"}`},
		{"$ref skipped", "github", `{"a":"#/$ref","b":"$ref $TOKEN","c":"#/$ref/x $TOKEN"}`, `{"a":"#/$ref","b":"$ref $TOKEN","c":"#/$ref/x $TOKEN"}`},
		{"escaped dollar in JSON", "github", `{"a":"\u0024TOKEN"}`, `{"a":"tok"}`},
		{"top-level string", "github", `"$TOKEN"`, `"tok"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Substitute(json.RawMessage(tc.in), tc.ns, r)
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, got, tc.want)
		})
	}
}

func TestSubstituteRefSemantics(t *testing.T) {
	// "$refresh_token" is substituted: the $ref rule needs a non-word
	// character (or the end) after "ref".
	r := testResolver(t, map[string]string{"m_refresh_token": "R"})
	got, err := Substitute(json.RawMessage(`{"a":"$refresh_token"}`), "m", r)
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, got, `{"a":"R"}`)
}

func TestSubstituteSkipList(t *testing.T) {
	r := testResolver(t, map[string]string{"m_K": "v"})
	in := `{
  "call_template_type": "cli",
  "commands": [
    {"command": "cd $HOME && git status", "append_to_final_output": false},
    {"command": "echo \"Found: $CMD_1_OUTPUT\" ${K}", "append_to_final_output": true}
  ],
  "env_vars": {"TOKEN": "${K}", "PS": "$$HOME"},
  "query": "query Repo($owner: String!) { repository(owner: $owner) { id } }",
  "message": {"op": "search", "q": "$q"},
  "message_template": "$x",
  "request_data_template": "READ $chan",
  "content": "{\"$schema\": \"x\"}",
  "inputs": {"properties": {"a": {"$ref": "#/$defs/a", "default": "$K"}}},
  "outputs": {"$schema": "$K"},
  "description": "costs $5",
  "headers": {"query": "$K", "description": "$K", "message": "$K"}
}`
	got, err := Substitute(json.RawMessage(in), "m", r)
	if err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	_ = json.Unmarshal([]byte(in), &before)
	_ = json.Unmarshal(got, &after)
	// Everything on the skip-list is untouched, byte for byte as a value.
	for _, k := range []string{"commands", "query", "message", "message_template", "request_data_template", "content", "inputs", "outputs", "description"} {
		if diff := cmp.Diff(before[k], after[k]); diff != "" {
			t.Errorf("%s changed: %s", k, diff)
		}
	}
	// Other fields are substituted, including nested keys that share a
	// skip-list name but are not at the template's top level.
	if diff := cmp.Diff(map[string]any{"TOKEN": "v", "PS": "$HOME"}, after["env_vars"]); diff != "" {
		t.Errorf("env_vars: %s", diff)
	}
	if diff := cmp.Diff(map[string]any{"query": "v", "description": "v", "message": "v"}, after["headers"]); diff != "" {
		t.Errorf("headers: %s", diff)
	}
	// RequiredVariables follows the same rules.
	if diff := cmp.Diff([]string{"m_K"}, RequiredVariables(json.RawMessage(in), "m")); diff != "" {
		t.Errorf("RequiredVariables: %s", diff)
	}
}

func TestSubstituteMissing(t *testing.T) {
	r := testResolver(t, map[string]string{"API_KEY": "bare key must not be used"})
	_, err := Substitute(json.RawMessage(`{"url":"https://x","auth":{"auth_type":"api_key","api_key":"${API_KEY}"}}`), "web_scraper", r)
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeVariableNotFound {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, &utcp.Error{Code: utcp.CodeVariableNotFound}) {
		t.Error("errors.Is(variable_not_found) is false")
	}
	want := "variable web__scraper_API_KEY not found (referenced as ${API_KEY} at auth.api_key of manual web_scraper); " +
		"set web__scraper_API_KEY in the config variables, a dotenv file or the environment"
	if ue.Message != want {
		t.Errorf("message = %q\nwant      %q", ue.Message, want)
	}
	wantDetails := map[string]any{
		"variable": "web__scraper_API_KEY", "variables": []string{"web__scraper_API_KEY"},
		"path": "auth.api_key", "namespace": "web_scraper",
	}
	if diff := cmp.Diff(wantDetails, ue.Details); diff != "" {
		t.Errorf("details: %s", diff)
	}
	if strings.Contains(err.Error(), "bare key") {
		t.Error("a value leaked into the error")
	}

	// Several missing variables are all named.
	_, err = Substitute(json.RawMessage(`{"a":"$X","b":["${Y}","$X"]}`), "m", r)
	if !errors.As(err, &ue) {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"m_X", "m_Y"}, ue.Details["variables"]); diff != "" {
		t.Error(diff)
	}
	if !strings.Contains(ue.Message, "m_X ($X at a), m_Y (${Y} at b[0]), m_X ($X at b[1])") {
		t.Errorf("message = %q", ue.Message)
	}

	// A nil resolver resolves nothing.
	if _, err := Substitute(json.RawMessage(`{"a":"$X"}`), "", nil); codeOf(err) != utcp.CodeVariableNotFound {
		t.Errorf("nil resolver: %v", err)
	}
}

func TestSubstituteNothingToDo(t *testing.T) {
	r := testResolver(t, nil)
	for _, in := range []string{
		`{"call_template_type":"http","url":"https://x","headers":{"A":"b"}}`,
		`{"commands":[{"command":"echo $HOME"}]}`, // only in skipped fields
		`{"a":"price $ 5"}`,
		`not even JSON`, // no '$': returned as is
	} {
		raw := json.RawMessage(in)
		got, err := Substitute(raw, "m", r)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if len(got) == 0 || &got[0] != &raw[0] {
			t.Errorf("%s: a copy was returned", in)
		}
	}
	raw := json.RawMessage(`{"call_template_type":"http","url":"https://api.example.com/v1/items","http_method":"GET","headers":{"Accept":"application/json"}}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := Substitute(raw, "manual", r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Substitute without variables allocates %v times", allocs)
	}
}

func TestSubstituteInvalidJSON(t *testing.T) {
	if _, err := Substitute(json.RawMessage(`{"a":"$X"`), "", testResolver(t, nil)); codeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("err = %v", err)
	}
}

func TestSubstituteKeepsOtherBytes(t *testing.T) {
	r := testResolver(t, map[string]string{"m_K": "v"})
	in := "{\n  \"b\": 1.50,\n  \"a\": \"$K\",\n  \"c\": \"\\u00e9 <&>\"\n}"
	got, err := Substitute(json.RawMessage(in), "m", r)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"b\": 1.50,\n  \"a\": \"v\",\n  \"c\": \"\\u00e9 <&>\"\n}"; string(got) != want {
		t.Errorf("got %s", got)
	}
}

func TestRequiredVariables(t *testing.T) {
	tests := []struct {
		ns, in string
		want   []string
	}{
		{"web_scraper", `{"url":"https://$HOST/${PATH}","auth":{"api_key":"$API_KEY"},"h":{"x":"$HOST"}}`,
			[]string{"web__scraper_API_KEY", "web__scraper_HOST", "web__scraper_PATH"}},
		{"", `{"a":"$A $$B","b":"$refresh","c":"$C #/$ref"}`, []string{"A", "refresh"}},
		{"m", `{"a":"none"}`, nil},
		{"m", `{"a":"$broken`, nil},
		{"m", `{"query":"$id","description":"$x","commands":[{"command":"$y"}],"inputs":{"d":"$z"}}`, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, RequiredVariables(json.RawMessage(tc.in), tc.ns)); diff != "" {
			t.Errorf("%s: %s", tc.in, diff)
		}
	}
}

func TestHasVariables(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`{"a":"$X"}`, true},
		{`{"a":"${X}"}`, true},
		{`{"a":"$$"}`, true},
		{`{"a":"\u0024X"}`, true},
		{`{"a":"$\u0041"}`, true},
		{`{"a":"$ 5"}`, false},
		{`{"a":"5$"}`, false},
		{`{"a":"x"}`, false},
		{``, false},
	}
	for _, tc := range tests {
		if got := HasVariables([]byte(tc.in)); got != tc.want {
			t.Errorf("HasVariables(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func BenchmarkSubstitute(b *testing.B) {
	r, _ := NewResolver(nil, ResolverOptions{LookupEnv: envMap(map[string]string{"m_TOKEN": "t"})})
	plain := json.RawMessage(`{"call_template_type":"http","url":"https://api.example.com/v1/items","http_method":"GET","headers":{"Accept":"application/json"}}`)
	vars := json.RawMessage(`{"call_template_type":"http","url":"https://api.example.com/v1/items","http_method":"GET","headers":{"Authorization":"Bearer ${TOKEN}"}}`)
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			_, _ = Substitute(plain, "m", r)
		}
	})
	b.Run("one", func(b *testing.B) {
		for b.Loop() {
			_, _ = Substitute(vars, "m", r)
		}
	})
}
