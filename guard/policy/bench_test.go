package policy_test

import (
	"fmt"
	"testing"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/policy"
)

// rules1000 is a policy of 1,000 rules shaped like a large real one:
// per-manual globs, exact tool names, argument regexes and equals,
// principal and protocol conditions, and a handful of unindexable rules
// (no tools, or a leading wildcard) that every call has to look at.
func rules1000() policy.Config {
	var rules []policy.Rule
	for i := range 1000 {
		m := fmt.Sprintf("manual%03d", i/4)
		var r policy.Rule
		switch {
		case i%100 == 7:
			// Unindexable: applies to any tool.
			re := fmt.Sprintf("^/secret%d/", i)
			r = policy.Rule{Args: []policy.ArgMatch{{Pointer: "/path", Regex: &re}}, Decision: guard.Deny}
		case i%100 == 53:
			r = policy.Rule{Tools: []string{fmt.Sprintf("*.drop%d", i)}, Decision: guard.Deny}
		case i%4 == 0:
			re := `^(/etc|/root|/var/lib)/`
			r = policy.Rule{Tools: []string{m + ".*"}, Args: []policy.ArgMatch{{Pointer: "/target/path", Regex: &re}}, Decision: guard.Deny}
		case i%4 == 1:
			r = policy.Rule{Tools: []string{fmt.Sprintf("%s.tool%d", m, i), fmt.Sprintf("%s.alt%d", m, i)},
				Principals: []string{"ops-*", "admin"}, Decision: guard.Allow}
		case i%4 == 2:
			r = policy.Rule{Tools: []string{m + ".write*"}, Protocols: []string{"cli"},
				Args: []policy.ArgMatch{{Pointer: "/force", Equals: []byte("true")}}, Decision: guard.Review}
		default:
			r = policy.Rule{Tools: []string{m + ".*"}, Manuals: []string{m}, Principals: []string{"svc-?"}, Decision: guard.Allow}
		}
		rules = append(rules, r)
	}
	return policy.Config{Default: guard.Deny, Rules: rules}
}

// unindexable1000 is the worst case: 1,000 rules that apply to every
// tool name, each with an argument regex the call does not match, so
// every rule is tried.
func unindexable1000() policy.Config {
	var rules []policy.Rule
	for i := range 1000 {
		re := fmt.Sprintf(`^/never%d/`, i)
		rules = append(rules, policy.Rule{Tools: []string{"*"}, Args: []policy.ArgMatch{{Pointer: "/path", Regex: &re}}, Decision: guard.Deny})
	}
	return policy.Config{Default: guard.Allow, Rules: rules}
}

func benchCalls() []*guard.Call {
	args := map[string]any{"path": "/home/u/file", "target": map[string]any{"path": "/tmp/out"}, "force": false}
	return []*guard.Call{
		{Tool: "tool1", Qualified: "manual000.tool1", Manual: "manual000", Protocol: "http", Principal: "ops-1", Arguments: args},
		{Tool: "writeX", Qualified: "manual120.writeX", Manual: "manual120", Protocol: "cli", Principal: "bob", Arguments: args},
		{Tool: "get", Qualified: "manual249.get", Manual: "manual249", Protocol: "http", Principal: "svc-a", Arguments: args},
		{Tool: "nothing.here", Principal: "bob", Arguments: args},
	}
}

// BenchmarkPolicy1000Rules measures one Evaluate on policies of 1,000
// rules. indexed: the realistic policy, calls cycling over an early hit,
// a mid hit, a late hit and a miss (the default). unindexable: every rule
// applies to every name and is tried (the worst case).
func BenchmarkPolicy1000Rules(b *testing.B) {
	for _, bc := range []struct {
		name string
		cfg  policy.Config
	}{{"indexed", rules1000()}, {"unindexable", unindexable1000()}} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := policy.Compile(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			calls := benchCalls()
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := p.Evaluate(ctx, calls[i%len(calls)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkPolicyCompile1000Rules measures loading a 1,000-rule policy
// (what a config reload costs).
func BenchmarkPolicyCompile1000Rules(b *testing.B) {
	cfg := rules1000()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Compile(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchPoliciesDecide checks that the benchmark policies decide the
// benchmark calls as intended, so BenchmarkPolicy1000Rules measures real
// matching. The time per call is a benchmark figure (docs/benchmarks.md),
// never asserted here.
func TestBenchPoliciesDecide(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  policy.Config
		want []guard.Decision // for each of benchCalls
	}{
		{"indexed", rules1000(), []guard.Decision{guard.Allow, guard.Deny, guard.Allow, guard.Deny}},
		{"unindexable", unindexable1000(), []guard.Decision{guard.Allow, guard.Allow, guard.Allow, guard.Allow}},
	} {
		p, err := policy.Compile(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range benchCalls() {
			v, _ := p.Evaluate(t.Context(), c)
			if v.Decision != tc.want[i] {
				t.Errorf("%s: call %d (%s): %s (%s), want %s", tc.name, i, c.Qualified, v.Decision, v.Reason, tc.want[i])
			}
		}
	}
}
