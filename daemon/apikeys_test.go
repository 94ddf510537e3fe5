package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// applyKeys reads a gateway section holding api_keys (and whatever else
// it holds) as the daemon does, strictly.
func applyKeys(t *testing.T, section string) (*Settings, []manuals.Problem) {
	t.Helper()
	var s Settings
	errs, warnings := ApplyGateway(&s, &manuals.Config{Path: "c.json", Gateway: json.RawMessage(section)}, nil, false)
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	return &s, errs
}

// TestNamedKeyConfigExample: the example of the issue loads exactly as
// written, a toolsets key beside it included (another part of the daemon
// reads it: it must not be refused here), with plain keys beside named
// ones.
func TestNamedKeyConfigExample(t *testing.T) {
	var s Settings
	cfg := &manuals.Config{Path: "c.json", Gateway: json.RawMessage(`{"api_keys": [
		{"name": "math", "key_env": "MATH_KEY", "tools": ["demo.add"]},
		{"name": "ci-bot", "key_env": "CI_BOT_KEY", "tools": ["github.*", "!github.repos/delete"], "rate_limit": "5/s"},
		"plain-key"], "toolsets": {"ops": {"tools": ["github.*"]}}}`)}
	errs, _ := ApplyGateway(&s, cfg, nil, false)
	for _, e := range errs {
		if e.Path == "gateway.api_keys" {
			t.Fatalf("api_keys refused: %v", e)
		}
	}
	if diff := cmp.Diff([]string{"plain-key"}, s.APIKeys); diff != "" {
		t.Errorf("plain keys (-want +got):\n%s", diff)
	}
	if len(s.NamedKeys) != 2 {
		t.Fatalf("named keys: %+v", s.NamedKeys)
	}
	math, ci := s.NamedKeys[0], s.NamedKeys[1]
	if math.Name != "math" || math.KeyEnv != "MATH_KEY" || math.Key != "" || math.RateLimit != nil {
		t.Errorf("math: %+v", math)
	}
	if ci.Name != "ci-bot" || ci.KeyEnv != "CI_BOT_KEY" || ci.RateLimit == nil || *ci.RateLimit != (gateway.RateLimit{Count: 5, Per: time.Second}) {
		t.Errorf("ci-bot: %+v", ci)
	}
	tool := func(name string, tags ...string) *utcp.Tool { return &utcp.Tool{Name: name, Tags: tags} }
	for _, c := range []struct {
		k    gateway.APIKey
		tool string
		want bool
	}{
		{math, "demo.add", true}, {math, "demo.echo", false}, {math, "github.repos/list", false},
		{ci, "github.repos/list", true}, {ci, "github.repos/delete", false}, {ci, "demo.add", false},
	} {
		if got := c.k.Scope.Allows(tool(c.tool)); got != c.want {
			t.Errorf("%s allows %s: %v, want %v", c.k.Name, c.tool, got, c.want)
		}
	}

	// key_env is read at start: set, the key is known; unset or empty,
	// the start fails naming the key and the variable.
	env := map[string]string{"MATH_KEY": "m-secret", "CI_BOT_KEY": "c-secret"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	keys, err := ResolveAPIKeys(&s, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0].Key != "m-secret" || keys[1].Key != "c-secret" || s.NamedKeys[0].Key != "" {
		t.Errorf("resolved %v (the settings must keep no secret)", keys)
	}
	for _, v := range []string{"", "unset"} {
		if v == "" {
			env["CI_BOT_KEY"] = ""
		} else {
			delete(env, "CI_BOT_KEY")
		}
		_, err = ResolveAPIKeys(&s, lookup)
		if err == nil || !strings.Contains(err.Error(), `"ci-bot"`) || !strings.Contains(err.Error(), "CI_BOT_KEY") || !strings.Contains(err.Error(), "unset or empty") {
			t.Errorf("CI_BOT_KEY %q: %v", v, err)
		}
	}
	env["CI_BOT_KEY"] = "m-secret"
	if _, err = ResolveAPIKeys(&s, lookup); err == nil || !strings.Contains(err.Error(), "same key") || strings.Contains(err.Error(), "m-secret") {
		t.Errorf("two names for one key: %v", err)
	}
}

// TestNamedKeyConfigForms: plain strings keep working (trimmed, empty
// ones dropped); key_sha256 is an alternative to key_env; every field is
// read.
func TestNamedKeyConfigForms(t *testing.T) {
	sum := sha256.Sum256([]byte("hashed-secret"))
	hexSum := strings.ToUpper(hex.EncodeToString(sum[:]))
	s, errs := applyKeys(t, `{"api_keys": [" a ", "", {"name": "h.1", "key_sha256": "`+hexSum+`",
		"manuals": ["demo"], "tags": ["Math"], "toolsets": ["ops"], "rate_limit": "20/10s", "max_concurrent": 3}, "b"]}`)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if diff := cmp.Diff([]string{"a", "b"}, s.APIKeys); diff != "" {
		t.Errorf("plain keys (-want +got):\n%s", diff)
	}
	k := s.NamedKeys[0]
	if d, ok := k.Digest(); !ok || d != sum {
		t.Errorf("digest of %v: %x %v", k, d, ok)
	}
	if k.MaxConcurrent != 3 || *k.RateLimit != (gateway.RateLimit{Count: 20, Per: 10 * time.Second}) || k.Toolsets[0] != "ops" {
		t.Errorf("limits: %+v", k)
	}
	if !k.Scope.Allows(&utcp.Tool{Name: "demo.add", Tags: []string{"math"}}) || k.Scope.Allows(&utcp.Tool{Name: "demo.echo"}) ||
		k.Scope.Allows(&utcp.Tool{Name: "other.add", Tags: []string{"math"}}) {
		t.Errorf("scope %v", k.Scope)
	}
	// A plain key's principal is unchanged: "key:" and 8 hex digits.
	d := sha256.Sum256([]byte("a"))
	if p := gateway.PlainKey("a").Name; p != "key:"+hex.EncodeToString(d[:4]) {
		t.Errorf("plain principal %q", p)
	}
	// The key is not in what is logged or encoded.
	k.Key = "the-secret"
	b, _ := json.Marshal(k)
	if strings.Contains(string(b), "the-secret") || strings.Contains(strings.ToLower(string(b)), strings.ToLower(hexSum)) ||
		strings.Contains(k.String(), "secret") {
		t.Errorf("the key leaks: %s %s", b, k)
	}
}

// TestNamedKeyConfigBadValues: every bad entry is an error at
// gateway.api_keys naming the entry and what is wrong.
func TestNamedKeyConfigBadValues(t *testing.T) {
	ok := `"key_env": "K"`
	for _, c := range []struct{ name, keys, want string }{
		{"not an array", `"k"`, "must be an array of keys: strings, or objects such as"},
		{"a number", `[5]`, "[0]: must be"},
		{"no name", `[{` + ok + `}]`, `[0]: a named key needs a "name"`},
		{"bad name", `[{"name": "a b", ` + ok + `}]`, `[0]: the name "a b" is not valid`},
		{"reserved name", `[{"name": "utcpd-admin", ` + ok + `}]`, `the name "utcpd-admin" is not valid`},
		{"duplicate name", `[{"name": "a", ` + ok + `}, {"name": "a", "key_env": "L"}]`, `[1]: the name "a" is already the name of [0]`},
		{"both", `[{"name": "a", ` + ok + `, "key_sha256": "` + strings.Repeat("0", 64) + `"}]`, `[0] ("a"): key_env and key_sha256 are both set`},
		{"neither", `[{"name": "a"}]`, `[0] ("a"): give exactly one of key_env`},
		{"bad env name", `[{"name": "a", "key_env": "A-B"}]`, `key_env "A-B" is not an environment variable name`},
		{"bad sha", `[{"name": "a", "key_sha256": "abc"}]`, "key_sha256 must be 64 hex digits"},
		{"unknown field", `[{"name": "a", ` + ok + `, "tool": ["x.*"]}]`, `unknown field "tool" (did you mean "tools"?)`},
		{"tools not strings", `[{"name": "a", ` + ok + `, "tools": "x.*"}]`, "tools must be an array of strings"},
		{"empty glob", `[{"name": "a", ` + ok + `, "tools": ["!"]}]`, `tools[0] "!": a glob must not be empty`},
		{"bang inside", `[{"name": "a", ` + ok + `, "tools": ["a!b"]}]`, `"!" is allowed only at the start`},
		{"reserved glob char", `[{"name": "a", ` + ok + `, "tools": ["a.[bc]"]}]`, `'[' is reserved in globs`},
		{"space in glob", `[{"name": "a", ` + ok + `, "tools": ["a .b"]}]`, "white space"},
		{"bad manual", `[{"name": "a", ` + ok + `, "manuals": ["a.b"]}]`, `manuals[0] "a.b"`},
		{"bad rate", `[{"name": "a", ` + ok + `, "rate_limit": "fast"}]`, `rate_limit "fast" is not "<count>/<period>"`},
		{"zero rate", `[{"name": "a", ` + ok + `, "rate_limit": "0/s"}]`, `rate_limit "0/s"`},
		{"bad concurrency", `[{"name": "a", ` + ok + `, "max_concurrent": 0}]`, "max_concurrent must be a positive integer"},
		{"toolsets not strings", `[{"name": "a", ` + ok + `, "toolsets": [1]}]`, "toolsets must be an array of strings"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs := applyKeys(t, `{"api_keys": `+c.keys+`}`)
			if len(errs) != 1 || errs[0].Path != "gateway.api_keys" || !strings.Contains(errs[0].Message, c.want) {
				t.Fatalf("errors %v, want one at gateway.api_keys containing %q", errs, c.want)
			}
		})
	}
}

// TestNamedKeyConfigSchema: the configuration's JSON Schema (both
// variants) accepts both forms of api_keys as utcpd does, and rejects
// what utcpd refuses.
func TestNamedKeyConfigSchema(t *testing.T) {
	variants := []schemas{compileSchemas(t, false), compileSchemas(t, true)}
	good := `{"gateway": {"api_keys": ["plain",
		{"name": "math", "key_env": "MATH_KEY", "tools": ["demo.add"]},
		{"name": "ci-bot", "key_env": "CI_BOT_KEY", "tools": ["github.*", "!github.repos/delete"], "rate_limit": "5/s"},
		{"name": "h", "key_sha256": "` + strings.Repeat("ab", 32) + `", "manuals": ["m"], "tags": ["t"], "toolsets": ["x"], "max_concurrent": 2}]}}`
	if v := load(t, t.TempDir(), good, true); !v.ok() {
		t.Fatalf("utcpd refuses %s: %v", good, v.errs)
	}
	for _, s := range variants {
		if err := check(s.config, good); err != nil {
			t.Errorf("%s refuses both forms: %v", s.config.Location, err)
		}
	}
	for name, keys := range map[string]string{
		"both key sources": `[{"name": "a", "key_env": "A", "key_sha256": "` + strings.Repeat("0", 64) + `"}]`,
		"no key source":    `[{"name": "a"}]`,
		"no name":          `[{"key_env": "A"}]`,
		"unknown field":    `[{"name": "a", "key_env": "A", "tool": ["x"]}]`,
		"bad digest":       `[{"name": "a", "key_sha256": "xyz"}]`,
		"bad concurrency":  `[{"name": "a", "key_env": "A", "max_concurrent": 0}]`,
		"a number":         `[3]`,
	} {
		cfg := `{"gateway": {"api_keys": ` + keys + `}}`
		if v := load(t, t.TempDir(), cfg, false); v.ok() {
			t.Errorf("%s: utcpd loads %s; the case is wrong", name, cfg)
		}
		for _, s := range variants {
			if err := check(s.config, cfg); err == nil {
				t.Errorf("%s: %s accepts %s, which utcpd refuses", name, s.config.Location, cfg)
			}
		}
	}
}
