package policy_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/guardtest"
	"github.com/utcpd/utcpd/guard/policy"
)

const sample = `{
  "kind": "policy",
  "name": "main",
  "default": "deny",
  "rules": [
    {"name": "no-etc", "tools": ["files.*"], "args": [{"pointer": "/path", "regex": "^/etc/"}],
     "decision": "deny", "reason": "system files are off limits"},
    {"tools": ["files.read", "files.list"], "decision": "allow"},
    {"tools": ["billing.refund"], "args": [{"pointer": "/amount", "equals": 0}], "decision": "allow"},
    {"tools": ["billing.*"], "principals": ["finance-*"], "decision": "allow"},
    {"tools": ["billing.*"], "decision": "review", "reason": "money moves"},
    {"manuals": ["ops"], "protocols": ["cli"], "decision": "review"},
    {"tools": ["*.ping"], "decision": "allow"},
    {"principals": [""], "decision": "deny", "reason": "anonymous"},
    {"tools": ["weather.forecast"], "decision": "allow"}
  ]
}`

func newSample(t testing.TB) guard.Guard {
	t.Helper()
	g, err := policy.New(json.RawMessage(sample), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func sampleCases() []guardtest.Case {
	return []guardtest.Case{
		{Name: "etc_denied", Call: &guard.Call{Tool: "files.read", Qualified: "files.read", Principal: "bob",
			Arguments: map[string]any{"path": "/etc/passwd"}}, Want: guard.Deny},
		{Name: "read_allowed", Call: &guard.Call{Tool: "read", Qualified: "files.read", Principal: "bob",
			Arguments: map[string]any{"path": "/home/bob/notes"}}, Want: guard.Allow},
		{Name: "write_default", Call: &guard.Call{Tool: "files.write", Qualified: "files.write", Principal: "bob",
			Arguments: map[string]any{"path": "/tmp/x"}}, Want: guard.Deny},
		{Name: "refund_zero", Call: &guard.Call{Tool: "billing.refund", Qualified: "billing.refund", Principal: "bob",
			Arguments: map[string]any{"amount": 0.0}}, Want: guard.Allow},
		{Name: "refund_some", Call: &guard.Call{Tool: "billing.refund", Qualified: "billing.refund", Principal: "bob",
			Arguments: map[string]any{"amount": 12.5}}, Want: guard.Review},
		{Name: "finance_allowed", Call: &guard.Call{Tool: "billing.charge", Qualified: "billing.charge", Principal: "finance-ann"},
			Want: guard.Allow},
		{Name: "nested_billing_review", Call: &guard.Call{Tool: "billing.sub.refund", Qualified: "billing.sub.refund", Principal: "bob"},
			Want: guard.Review},
		{Name: "ops_cli_review", Call: &guard.Call{Tool: "ops.restart", Qualified: "ops.restart", Manual: "ops", Protocol: "cli",
			Principal: "bob"}, Want: guard.Review},
		{Name: "ops_http_default", Call: &guard.Call{Tool: "ops.restart", Qualified: "ops.restart", Manual: "ops", Protocol: "http",
			Principal: "bob"}, Want: guard.Deny},
		{Name: "suffix_glob", Call: &guard.Call{Tool: "a.b.ping", Qualified: "a.b.ping"}, Want: guard.Allow},
		{Name: "anonymous", Call: &guard.Call{Tool: "weather.forecast", Qualified: "weather.forecast"}, Want: guard.Deny},
		{Name: "forecast", Call: &guard.Call{Tool: "forecast", Qualified: "weather.forecast", Principal: "x"}, Want: guard.Allow},
		{Name: "unresolved_uses_tool", Call: &guard.Call{Tool: "weather.forecast", Principal: "x"}, Want: guard.Allow},
	}
}

func TestConformance(t *testing.T) {
	guardtest.Run(t, func(t *testing.T) guard.Guard { return newSample(t) }, sampleCases())
}

func TestConfig(t *testing.T) {
	guardtest.RunConfig(t, policy.Kind, []string{
		sample,
		`{"default":"allow"}`,
		`{"default":"review","rules":[]}`,
		`{"default":"deny","rules":[{"decision":"allow","args":[{"pointer":"","equals":{}}]}]}`,
	}, []guardtest.ConfigCase{
		{Name: "empty", Config: `{}`, WantErr: "field default: a decision is required"},
		{Name: "bad_default", Config: `{"default":"maybe"}`, WantErr: `field default: invalid decision "maybe"`},
		{Name: "error_default", Config: `{"default":"error"}`, WantErr: `invalid decision "error"`},
		{Name: "wrong_kind", Config: `{"kind":"webhook","default":"deny"}`, WantErr: `field kind is "webhook"`},
		{Name: "no_decision", Config: `{"default":"deny","rules":[{"tools":["a"]}]}`, WantErr: "rules[0]: field decision: a decision is required"},
		{Name: "typo", Config: `{"default":"deny","rules":[{"tool":["a"],"decision":"deny"}]}`,
			WantErr: `unknown field "rules[0].tool" (did you mean "tools"?)`},
		{Name: "nested_typo", Config: `{"default":"deny","rules":[{"args":[{"pointer":"/a","regexp":"x"}],"decision":"deny"}]}`,
			WantErr: `unknown field "rules[0].args[0].regexp"`},
		{Name: "bad_regex", Config: `{"default":"deny","rules":[{"decision":"deny"},{"args":[{"pointer":"/a","regex":"("}],"decision":"deny"}]}`,
			WantErr: "rules[1]: args[0]: field regex: error parsing regexp"},
		{Name: "both", Config: `{"default":"deny","rules":[{"args":[{"pointer":"/a","regex":"x","equals":1}],"decision":"deny"}]}`,
			WantErr: "set one of regex and equals"},
		{Name: "neither", Config: `{"default":"deny","rules":[{"args":[{"pointer":"/a"}],"decision":"deny"}]}`,
			WantErr: "one of regex and equals is required"},
		{Name: "bad_pointer", Config: `{"default":"deny","rules":[{"args":[{"pointer":"a","equals":1}],"decision":"deny"}]}`,
			WantErr: "must be empty or start with '/'"},
		{Name: "bad_escape", Config: `{"default":"deny","rules":[{"args":[{"pointer":"/a~2","equals":1}],"decision":"deny"}]}`,
			WantErr: "'~' must be followed by 0 or 1"},
		{Name: "empty_tool", Config: `{"default":"deny","rules":[{"tools":[""],"decision":"deny"}]}`,
			WantErr: "field tools: an empty pattern"},
		{Name: "tools_type", Config: `{"default":"deny","rules":[{"tools":"a.*","decision":"deny"}]}`,
			WantErr: "field rules.tools: want an array, got a JSON string"},
	})
}

func TestVerdictDetails(t *testing.T) {
	g := newSample(t)
	ctx := t.Context()
	v, err := g.Evaluate(ctx, &guard.Call{Tool: "files.read", Arguments: map[string]any{"path": "/etc/shadow"}})
	if err != nil {
		t.Fatal(err)
	}
	want := guard.Verdict{Decision: guard.Deny, Reason: "system files are off limits", Details: json.RawMessage(`{"name":"no-etc","rule":0}`)}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("verdict (-want +got):\n%s", diff)
	}
	v, _ = g.Evaluate(ctx, &guard.Call{Tool: "x.y", Principal: "p"})
	want = guard.Verdict{Decision: guard.Deny, Reason: "no policy rule matched (default deny)", Details: json.RawMessage(`{"default":true}`)}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("default verdict (-want +got):\n%s", diff)
	}
	v, _ = g.Evaluate(ctx, &guard.Call{Tool: "files.list", Principal: "p"})
	if v.Reason != "policy rules[1] matched: allow" || string(v.Details) != `{"rule":1}` {
		t.Errorf("unnamed rule verdict %+v", v)
	}
	if _, err := g.Evaluate(ctx, nil); err == nil {
		t.Error("a nil call did not fail")
	}
}

// one builds a policy with a single rule deciding deny, default allow.
func one(t *testing.T, ruleJSON string) guard.Guard {
	t.Helper()
	cfg := fmt.Sprintf(`{"default":"allow","rules":[%s]}`, ruleJSON)
	g, err := policy.New(json.RawMessage(cfg), nil)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg, err)
	}
	return g
}

type namedStruct struct {
	Path  string   `json:"path"`
	Flags []string `json:"flags"`
}

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		cond string // one args entry
		args map[string]any
		want bool // matches (deny)
	}{
		{"regex string", `{"pointer":"/p","regex":"^/etc/"}`, map[string]any{"p": "/etc/x"}, true},
		{"regex unanchored", `{"pointer":"/p","regex":"etc"}`, map[string]any{"p": "/usr/etc"}, true},
		{"regex no match", `{"pointer":"/p","regex":"^/etc/"}`, map[string]any{"p": "/tmp"}, false},
		{"missing pointer", `{"pointer":"/p","regex":""}`, map[string]any{"q": "/etc"}, false},
		{"empty regex present", `{"pointer":"/p","regex":""}`, map[string]any{"p": 1.0}, true},
		{"nil args", `{"pointer":"/p","regex":""}`, nil, false},
		{"whole doc", `{"pointer":"","regex":"secret"}`, map[string]any{"a": map[string]any{"b": "secret"}}, true},
		{"whole doc nil args", `{"pointer":"","equals":{}}`, nil, true},
		{"number as json", `{"pointer":"/n","regex":"^42$"}`, map[string]any{"n": 42.0}, true},
		{"big float as json", `{"pointer":"/n","regex":"^1e\\+21$"}`, map[string]any{"n": 1e21}, true},
		{"json number", `{"pointer":"/n","regex":"^7$"}`, map[string]any{"n": json.Number("7")}, true},
		{"bool as json", `{"pointer":"/b","regex":"^true$"}`, map[string]any{"b": true}, true},
		{"null as json", `{"pointer":"/b","regex":"^null$"}`, map[string]any{"b": nil}, true},
		{"array as json", `{"pointer":"/a","regex":"rm -rf"}`, map[string]any{"a": []any{"sh", "-c", "rm -rf /"}}, true},
		{"no html escaping", `{"pointer":"/a","regex":"<b>"}`, map[string]any{"a": []any{"<b>"}}, true},
		{"nested member", `{"pointer":"/a/b/c","regex":"x"}`, map[string]any{"a": map[string]any{"b": map[string]any{"c": "x"}}}, true},
		{"array index", `{"pointer":"/a/1","equals":"y"}`, map[string]any{"a": []any{"x", "y"}}, true},
		{"array index out of range", `{"pointer":"/a/2","regex":""}`, map[string]any{"a": []any{"x", "y"}}, false},
		{"array dash", `{"pointer":"/a/-","regex":""}`, map[string]any{"a": []any{"x"}}, false},
		{"array leading zero", `{"pointer":"/a/01","regex":""}`, map[string]any{"a": []any{"x", "y"}}, false},
		{"array non-number", `{"pointer":"/a/x","regex":""}`, map[string]any{"a": []any{"x"}}, false},
		{"through scalar", `{"pointer":"/a/b","regex":""}`, map[string]any{"a": "str"}, false},
		{"escaped slash", `{"pointer":"/a~1b","equals":1}`, map[string]any{"a/b": 1.0}, true},
		{"escaped tilde", `{"pointer":"/a~0b","equals":1}`, map[string]any{"a~b": 1.0}, true},
		{"escape order", `{"pointer":"/~01","equals":1}`, map[string]any{"~1": 1.0}, true},
		{"empty key", `{"pointer":"/","equals":1}`, map[string]any{"": 1.0}, true},
		{"equals int vs float", `{"pointer":"/n","equals":3}`, map[string]any{"n": 3.0}, true},
		{"equals float literal", `{"pointer":"/n","equals":3.0}`, map[string]any{"n": 3}, true},
		{"equals go int", `{"pointer":"/n","equals":3}`, map[string]any{"n": int64(3)}, true},
		{"equals big int exact", `{"pointer":"/n","equals":9007199254740993}`, map[string]any{"n": json.Number("9007199254740993")}, true},
		{"equals big int differs", `{"pointer":"/n","equals":9007199254740993}`, map[string]any{"n": json.Number("9007199254740992")}, false},
		{"equals number vs string", `{"pointer":"/n","equals":3}`, map[string]any{"n": "3"}, false},
		{"equals string", `{"pointer":"/s","equals":"x"}`, map[string]any{"s": "x"}, true},
		{"equals bool", `{"pointer":"/b","equals":false}`, map[string]any{"b": false}, true},
		{"equals null", `{"pointer":"/b","equals":null}`, map[string]any{"b": nil}, true},
		{"equals null vs missing", `{"pointer":"/b","equals":null}`, map[string]any{}, false},
		{"equals object any order", `{"pointer":"/o","equals":{"b":[1,2],"a":"x"}}`,
			map[string]any{"o": map[string]any{"a": "x", "b": []any{1.0, 2.0}}}, true},
		{"equals object extra key", `{"pointer":"/o","equals":{"a":"x"}}`, map[string]any{"o": map[string]any{"a": "x", "b": 1.0}}, false},
		{"equals array order", `{"pointer":"/a","equals":[1,2]}`, map[string]any{"a": []any{2.0, 1.0}}, false},
		{"go typed slice", `{"pointer":"/a/1","equals":"-rf"}`, map[string]any{"a": []string{"rm", "-rf"}}, true},
		{"go typed slice equals", `{"pointer":"/a","equals":["rm","-rf"]}`, map[string]any{"a": []string{"rm", "-rf"}}, true},
		{"go struct", `{"pointer":"/s/flags/0","regex":"^-f$"}`, map[string]any{"s": namedStruct{Path: "/", Flags: []string{"-f"}}}, true},
		{"go map", `{"pointer":"/m/k","equals":2}`, map[string]any{"m": map[string]int{"k": 2}}, true},
		{"unmarshalable", `{"pointer":"/c/x","regex":""}`, map[string]any{"c": make(chan int)}, false},
		{"unmarshalable regex", `{"pointer":"/c","regex":""}`, map[string]any{"c": make(chan int)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := one(t, fmt.Sprintf(`{"decision":"deny","args":[%s]}`, tc.cond))
			v, err := g.Evaluate(t.Context(), &guard.Call{Tool: "m.t", Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Decision == guard.Deny; got != tc.want {
				t.Errorf("matched = %v, want %v (args %v)", got, tc.want, tc.args)
			}
		})
	}
}

func TestConditionsAndOr(t *testing.T) {
	g := one(t, `{"decision":"deny","tools":["a.*","b.x"],"principals":["p1","p2"],
		"args":[{"pointer":"/x","equals":1},{"pointer":"/y","regex":"^z"}]}`)
	full := map[string]any{"x": 1.0, "y": "zz"}
	tests := []struct {
		name string
		call guard.Call
		want guard.Decision
	}{
		{"all match", guard.Call{Tool: "a.q", Principal: "p2", Arguments: full}, guard.Deny},
		{"second tool", guard.Call{Tool: "b.x", Principal: "p1", Arguments: full}, guard.Deny},
		{"tool misses", guard.Call{Tool: "b.y", Principal: "p1", Arguments: full}, guard.Allow},
		{"principal misses", guard.Call{Tool: "a.q", Principal: "p3", Arguments: full}, guard.Allow},
		{"one arg misses", guard.Call{Tool: "a.q", Principal: "p1", Arguments: map[string]any{"x": 1.0, "y": "a"}}, guard.Allow},
		{"qualified wins over tool", guard.Call{Tool: "a.q", Qualified: "c.q", Principal: "p1", Arguments: full}, guard.Allow},
	}
	for _, tc := range tests {
		v, _ := g.Evaluate(t.Context(), &tc.call)
		if v.Decision != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, v.Decision, tc.want)
		}
	}
}

// TestIndexAgreesWithScan checks the indexed lookup against a plain scan
// of the rules over random policies and names.
func TestIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "ab", ".", "*", "?", "c.d", "é"}
	word := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max) + 1 {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for iter := range 200 {
		var rules []policy.Rule
		for range rng.IntN(40) + 1 {
			var r policy.Rule
			for range rng.IntN(3) {
				r.Tools = append(r.Tools, word(5))
			}
			if rng.IntN(4) == 0 {
				r.Principals = []string{word(2)}
			}
			r.Decision = []guard.Decision{guard.Allow, guard.Deny, guard.Review}[rng.IntN(3)]
			rules = append(rules, r)
		}
		p, err := policy.Compile(policy.Config{Default: guard.Deny, Rules: rules})
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			name := strings.NewReplacer("*", "x", "?", "y").Replace(word(6))
			call := &guard.Call{Tool: name, Principal: strings.NewReplacer("*", "", "?", "").Replace(word(2))}
			v, err := p.Evaluate(t.Context(), call)
			if err != nil {
				t.Fatal(err)
			}
			want := scan(rules, call)
			var got = -1
			if v.Details != nil {
				var d struct{ Rule *int }
				if err := json.Unmarshal(v.Details, &d); err != nil {
					t.Fatal(err)
				}
				if d.Rule != nil {
					got = *d.Rule
				}
			}
			if got != want {
				t.Fatalf("iteration %d: name %q principal %q: indexed lookup chose rule %d, a scan chooses %d; rules %+v",
					iter, call.Tool, call.Principal, got, want, rules)
			}
		}
	}
}

// scan is the reference: the first rule whose globs match, by a simple
// recursive matcher.
func scan(rules []policy.Rule, call *guard.Call) int {
	anyMatch := func(pats []string, s string) bool {
		if len(pats) == 0 {
			return true
		}
		for _, p := range pats {
			if refGlob([]rune(p), []rune(s)) {
				return true
			}
		}
		return false
	}
	for i, r := range rules {
		if anyMatch(r.Tools, call.Tool) && anyMatch(r.Principals, call.Principal) {
			return i
		}
	}
	return -1
}

func refGlob(p, s []rune) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if refGlob(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return len(s) > 0 && refGlob(p[1:], s[1:])
	}
	return len(s) > 0 && s[0] == p[0] && refGlob(p[1:], s[1:])
}

func TestUnreachableWarning(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	_, err := policy.New(json.RawMessage(`{"default":"deny","rules":[{"decision":"allow"},{"tools":["x"],"decision":"deny"}]}`), log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "rules after it never match") {
		t.Errorf("no warning about unreachable rules in %q", buf.String())
	}
}

func TestRegistered(t *testing.T) {
	g, err := guard.Default.New(policy.Kind, json.RawMessage(`{"kind":"policy","default":"review"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Evaluate(t.Context(), &guard.Call{Tool: "x"})
	if err != nil || v.Decision != guard.Review {
		t.Errorf("got %+v, %v", v, err)
	}
}

// TestKinds: kinds matches the kind of action (an empty Kind is a tool
// call), and a rule without kinds matches resource reads and prompts too.
func TestKinds(t *testing.T) {
	g, err := policy.New(json.RawMessage(`{"default":"allow","rules":[
		{"kinds":["resource"],"manuals":["files"],"args":[{"pointer":"/uri","regex":"^file:///etc/"}],"decision":"deny"},
		{"kinds":["prompt"],"tools":["files.*"],"decision":"review"},
		{"kinds":["tool"],"tools":["files.rm"],"decision":"deny"},
		{"manuals":["secret"],"decision":"deny"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(uri string) *guard.Call {
		return &guard.Call{Kind: guard.ActionResource, Tool: "utcpd://files.srv/" + uri, Qualified: "utcpd://files.srv/" + uri,
			Manual: "files", Protocol: "mcp", Arguments: map[string]any{"uri": uri}}
	}
	tests := []struct {
		name string
		call *guard.Call
		want guard.Decision
	}{
		{"resource under /etc", read("file:///etc/passwd"), guard.Deny},
		{"other resource", read("file:///tmp/x"), guard.Allow},
		{"prompt", &guard.Call{Kind: guard.ActionPrompt, Tool: "files.srv.p", Qualified: "files.srv.p", Manual: "files"}, guard.Review},
		{"tool of that name is not a prompt", &guard.Call{Tool: "files.srv.p", Qualified: "files.srv.p", Manual: "files"}, guard.Allow},
		{"empty kind is a tool", &guard.Call{Tool: "files.rm", Qualified: "files.rm", Manual: "files"}, guard.Deny},
		{"a prompt is not a tool", &guard.Call{Kind: guard.ActionPrompt, Tool: "files.rm", Qualified: "files.rm", Manual: "files"}, guard.Review},
		{"no kinds: every kind", &guard.Call{Kind: guard.ActionResource, Tool: "utcpd://secret.s/x", Manual: "secret"}, guard.Deny},
	}
	for _, tc := range tests {
		v, _ := g.Evaluate(t.Context(), tc.call)
		if v.Decision != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, v.Decision, tc.want)
		}
	}
	if _, err := policy.New(json.RawMessage(`{"default":"allow","rules":[{"kinds":[""],"decision":"deny"}]}`), nil); err == nil {
		t.Error("an empty kinds pattern was accepted")
	}
}
