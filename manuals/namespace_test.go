package manuals

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

// randomName draws a string over alphabet, biased towards '_' so that
// runs of underscores of every length (the hard case of the namespace
// rule) are frequent.
func randomName(rng *rand.Rand, alphabet string, maxLen int) string {
	n := 1 + rng.IntN(maxLen)
	var b strings.Builder
	for range n {
		if rng.IntN(3) == 0 {
			b.WriteByte('_')
		} else {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
	}
	return b.String()
}

// TestNamespaceInjective is the property the namespace rule rests on:
// two different (manual, key) pairs that CrossNamespace accepts never
// give the same namespaced name, and SplitNamespace reads each name back
// into the pair it came from. Manual names go through SanitizeName (as
// the gateway registers them), so they include '-', '.' and non-ASCII.
func TestNamespaceInjective(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 5))
	const keyChars = "abAB09_"
	const manualChars = "abAB09_-.é"
	type pair struct{ manual, key string }
	seen := map[string]pair{}
	accepted := 0
	for range 200_000 {
		m := utcp.SanitizeName(randomName(rng, manualChars, 8))
		k := randomName(rng, keyChars, 6)
		if CrossNamespace(m, k) {
			if k[0] != '_' {
				t.Fatalf("CrossNamespace(%q, %q) refuses a key that does not start with '_'", m, k)
			}
			continue
		}
		accepted++
		ns := Namespace(m, k)
		if prev, ok := seen[ns]; ok && prev != (pair{m, k}) {
			t.Fatalf("collision: Namespace(%q, %q) = Namespace(%q, %q) = %q", prev.manual, prev.key, m, k, ns)
		}
		seen[ns] = pair{m, k}
		gm, gk, ok := SplitNamespace(ns)
		if !ok || gm != m || gk != k {
			t.Fatalf("SplitNamespace(%q) = %q, %q, %v; want %q, %q", ns, gm, gk, ok, m, k)
		}
	}
	if accepted < 100_000 {
		t.Fatalf("only %d pairs accepted; the generator does not exercise the rule", accepted)
	}
	// Without the rule the attack of issue 14 collides: this is what
	// CrossNamespace refuses.
	if Namespace("evil", "_x_API_KEY") != Namespace("evil_x", "API_KEY") {
		t.Fatal("the known collision no longer collides; revisit the rule and this test")
	}
	if !CrossNamespace("evil", "_x_API_KEY") || CrossNamespace("evil_x", "API_KEY") || CrossNamespace("", "_X") {
		t.Fatal("CrossNamespace does not refuse exactly the keys starting with '_' under a namespace")
	}
}

// FuzzNamespace checks the same property on fuzzed pairs: an accepted
// pair is read back from its namespaced name.
func FuzzNamespace(f *testing.F) {
	f.Add("web_scraper", "API_KEY")
	f.Add("_x_", "K_")
	f.Add("a__b", "0")
	f.Fuzz(func(t *testing.T, manual, key string) {
		m := utcp.SanitizeName(manual)
		if m == "" || key == "" || utcp.SanitizeName(key) != key || CrossNamespace(m, key) {
			return
		}
		gm, gk, ok := SplitNamespace(Namespace(m, key))
		if !ok || gm != m || gk != key {
			t.Fatalf("SplitNamespace(Namespace(%q, %q)) = %q, %q, %v", m, key, gm, gk, ok)
		}
	})
}

func TestSubstituteRefusesCrossNamespace(t *testing.T) {
	r := testResolver(t, map[string]string{"evil__x_API_KEY": "secret-of-evil_x", "evil_API_KEY": "own"})
	for _, in := range []string{
		`{"url":"https://h/?k=${_x_API_KEY}"}`,
		`{"headers":{"A":"$API_KEY","B":"$_x_API_KEY"}}`,
		`{"auth":{"auth_type":"api_key","api_key":"${_}"}}`,
	} {
		out, err := Substitute(json.RawMessage(in), "evil", r)
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Fatalf("Substitute(%s) = %s, %v; want invalid_template", in, out, err)
		}
		if strings.Contains(err.Error(), "secret-of-evil_x") || !strings.Contains(err.Error(), "another manual's namespace") {
			t.Fatalf("error %q", err)
		}
		if err := CheckNamespace(json.RawMessage(in), "evil"); utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Fatalf("CheckNamespace(%s) = %v", in, err)
		}
		if got := RequiredVariables(json.RawMessage(in), "evil"); len(got) > 0 && got[0] == "evil__x_API_KEY" {
			t.Fatalf("RequiredVariables lists the other manual's variable: %v", got)
		}
	}
	// Unambiguous references, escapes, skipped fields and the
	// namespace-less case keep working.
	for _, in := range []string{
		`{"url":"https://h/?k=${API_KEY}"}`,
		`{"a":"$$_x_API_KEY"}`,
		`{"description":"costs ${_x}"}`,
	} {
		if _, err := Substitute(json.RawMessage(in), "evil", r); err != nil {
			t.Fatalf("Substitute(%s): %v", in, err)
		}
		if err := CheckNamespace(json.RawMessage(in), "evil"); err != nil {
			t.Fatalf("CheckNamespace(%s): %v", in, err)
		}
	}
	got, err := Substitute(json.RawMessage(`{"a":"${evil__x_API_KEY}"}`), "", r)
	if err != nil || string(got) != `{"a":"secret-of-evil_x"}` {
		t.Fatalf("no namespace: %s, %v", got, err)
	}
}
