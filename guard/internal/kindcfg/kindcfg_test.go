package kindcfg

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

type inner struct {
	Pointer string `json:"pointer"`
	Regex   string `json:"regex,omitempty"`
}

type sample struct {
	Default string   `json:"default"`
	Timeout Duration `json:"timeout"`
	Rules   []struct {
		Tools []string `json:"tools"`
		Args  []inner  `json:"args"`
	} `json:"rules"`
	Headers map[string]string `json:"headers"`
	Nested  map[string]inner  `json:"nested"`
	Skip    string            `json:"-"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, cfg string
		wantErr   []string // substrings; nil means success
	}{
		{name: "empty", cfg: ``},
		{name: "null", cfg: `null`},
		{name: "ok", cfg: `{"kind":"k","name":"n","default":"deny","timeout":"2s","rules":[{"tools":["a"],"args":[{"pointer":"/x"}]}],"headers":{"A":"b"}}`},
		{name: "not object", cfg: `[1]`, wantErr: []string{"must be a JSON object"}},
		{name: "bad json", cfg: `{"default":`, wantErr: []string{"invalid JSON"}},
		{name: "trailing", cfg: `{} {}`, wantErr: []string{"invalid JSON"}},
		{name: "unknown top", cfg: `{"defualt":"deny","bogus":1}`,
			wantErr: []string{`unknown fields "defualt" (did you mean "default"?), "bogus"`}},
		{name: "case differs", cfg: `{"Default":"deny"}`, wantErr: []string{`unknown field "Default" (did you mean "default"?)`}},
		{name: "unknown nested", cfg: `{"rules":[{"tools":[]},{"args":[{"pointer":"/x","regexp":"y"}]}]}`,
			wantErr: []string{`unknown field "rules[1].args[0].regexp" (did you mean "regex"?)`}},
		{name: "unknown in map value", cfg: `{"nested":{"k":{"pointr":""}}}`, wantErr: []string{`"nested[\"k\"].pointr"`}},
		{name: "dash field", cfg: `{"Skip":"x"}`, wantErr: []string{`unknown field "Skip"`}},
		{name: "duplicate", cfg: `{"default":"allow","default":"deny"}`, wantErr: []string{`duplicated fields "default"`}},
		{name: "wrong kind", cfg: `{"kind":"webhook"}`, wantErr: []string{`field kind is "webhook"`}},
		{name: "kind not string", cfg: `{"kind":1}`, wantErr: []string{`field kind must be a string`}},
		{name: "name not string", cfg: `{"name":1}`, wantErr: []string{`field name must be a string`}},
		{name: "type", cfg: `{"default":1}`, wantErr: []string{`field default: want a string, got a JSON number`}},
		{name: "duration number", cfg: `{"timeout":5}`, wantErr: []string{`field timeout: a duration must be a string`}},
		{name: "duration bad", cfg: `{"timeout":"5 sec"}`, wantErr: []string{`field timeout: invalid duration "5 sec"`}},
		{name: "duration negative", cfg: `{"timeout":"-1s"}`, wantErr: []string{`must not be negative`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s sample
			err := Decode([]byte(tc.cfg), "k", &s)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode succeeded, want an error containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	var s sample
	if err := Decode([]byte(`{"timeout":"1m30s","rules":[{"args":[{"pointer":"/a","regex":"x"}]}]}`), "k", &s); err != nil {
		t.Fatal(err)
	}
	if time.Duration(s.Timeout) != 90*time.Second || s.Rules[0].Args[0].Regex != "x" {
		t.Errorf("decoded %+v", s)
	}
	if err := Decode([]byte(`{}`), "k", s); err == nil {
		t.Error("a non-pointer dst was accepted")
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"", "", true},
		{"", "a", false},
		{"billing.charge", "billing.charge", true},
		{"billing.charge", "billing.charges", false},
		{"billing.*", "billing.charge", true},
		{"billing.*", "billing.sub.refund", true},
		{"billing.*", "billing.", true},
		{"billing.*", "billing", false},
		{"billing.*", "Billing.charge", false},
		{"*", "", true},
		{"**", "anything.at.all", true},
		{"*.delete", "files.delete", true},
		{"*.delete", "files.deleted", false},
		{"*.delete*", "files.delete_all", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "aéc", true},
		{"a?c", "abbc", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a*b?d", "abxbyd", true},
		{"*x*", "aaaaaaaaxaaaa", true},
		{"*x*", "aaaaaaaaaaaaa", false},
		{"m.*.t?", "m.a.b.tx", true},
		{"?", "é", true},
		{"??", "é", false},
	}
	for _, tc := range tests {
		if got := CompileGlob(tc.pattern).Match(tc.name); got != tc.want {
			t.Errorf("glob %q match %q = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
	if p := CompileGlob("billing.re*fund?").Prefix(); p != "billing.re" {
		t.Errorf("Prefix = %q", p)
	}
	if !CompileGlob("a.b").Literal() || CompileGlob("a.*").Literal() {
		t.Error("Literal")
	}
	if gs := CompileGlobs([]string{"x", "y.*"}); !gs.Match("y.z") || gs.Match("z") {
		t.Error("Globs.Match")
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("a*b?c", "axxbyc")
	f.Add("*", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			t.Skip("the reference matcher works on runes")
		}
		got := CompileGlob(pattern).Match(name)
		if want := refMatch([]rune(pattern), []rune(name)); got != want {
			t.Fatalf("glob %q match %q = %v, reference says %v", pattern, name, got, want)
		}
	})
}

// refMatch is an obviously correct, exponential reference matcher.
func refMatch(p, s []rune) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if refMatch(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return len(s) > 0 && refMatch(p[1:], s[1:])
	}
	return len(s) > 0 && s[0] == p[0] && refMatch(p[1:], s[1:])
}
