package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/utcp"
)

func limiter(t *testing.T, rules ...ratelimit.Rule) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rules, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRateLimitedCalls: a refused call reaches no backend, is
// rate_limited with a retry delay, and is audited with that outcome;
// calls that fail an earlier check (arguments) spend no token; a
// streamed call counts as a call; the concurrency cap holds while a call
// is in flight and frees its slot when it ends.
func TestRateLimitedCalls(t *testing.T) {
	f, base := serveFixture(t)
	log := &auditLog{}
	g := newGateway(t, gateway.Options{Audit: log, RateLimits: limiter(t,
		ratelimit.Rule{Name: "adds", Principal: "ci", Tools: "demo.add", Rate: "3/h"},
		ratelimit.Rule{Name: "one-sleep", Tools: "demo.sleep", MaxConcurrent: 1},
	)})
	register(t, g, httpManual("demo", base+"/utcp"))
	ci := gateway.CallOptions{Principal: "ci", Front: "test"}
	// Invalid arguments fail before the limit: no token spent.
	_, err := g.CallTool(t.Context(), "demo.add", map[string]any{"a": "x"}, ci)
	codeOf(t, err, utcp.CodeInvalidArguments)
	for i := range 2 {
		if _, err := g.CallTool(t.Context(), "demo.add", map[string]any{"a": i, "b": 1}, ci); err != nil {
			t.Fatal(err)
		}
	}
	st, err := g.CallToolStreaming(t.Context(), "demo.add", map[string]any{"a": 1, "b": 1}, ci)
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	before := f.Calls()
	_, err = g.CallTool(t.Context(), "demo.add", map[string]any{"a": 1, "b": 1}, ci)
	ue := codeOf(t, err, utcp.CodeRateLimited)
	if ue.Details["rule"] != "adds" || ue.Details["retry_after_seconds"].(int) < 1000 || !strings.HasPrefix(ue.Message, "rate limited: retry after ") {
		t.Errorf("refusal %q %v", ue.Message, ue.Details)
	}
	_, err = g.CallToolStreaming(t.Context(), "demo.add", map[string]any{"a": 1, "b": 1}, ci)
	codeOf(t, err, utcp.CodeRateLimited)
	if f.Calls() != before {
		t.Errorf("a refused call reached the backend")
	}
	if r := log.last(t); r.Outcome != "rate_limited" || r.Dispatched || r.Decision != "allow" || r.Principal != "ci" || r.Tool != "demo.add" {
		t.Errorf("audit %+v", r)
	}
	// Another principal is not limited by the rule.
	if _, err := g.CallTool(t.Context(), "demo.add", map[string]any{"a": 1, "b": 1}, gateway.CallOptions{Principal: "other"}); err != nil {
		t.Errorf("other principal: %v", err)
	}

	// max_concurrent 1: a second sleep while the first runs is refused.
	done := make(chan error, 1)
	go func() {
		_, err := g.CallTool(context.WithoutCancel(t.Context()), "demo.sleep", map[string]any{"ms": 800}, gateway.CallOptions{})
		done <- err
	}()
	waitUntil(t, "the first sleep in flight", func() bool { return f.Calls() > before+1 })
	_, err = g.CallTool(t.Context(), "demo.sleep", map[string]any{"ms": 1}, gateway.CallOptions{})
	if ue := codeOf(t, err, utcp.CodeRateLimited); ue.Details["limit"] != "max_concurrent" || ue.Details["rule"] != "one-sleep" {
		t.Errorf("second sleep: %v", ue.Details)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := g.CallTool(t.Context(), "demo.sleep", map[string]any{"ms": 1}, gateway.CallOptions{}); err != nil {
		t.Errorf("after the first sleep ended: %v", err)
	}
}

// TestRateLimitedResources: resource reads and prompt gets count against
// the rules that match their utcpd URI or prompt name, and are audited
// rate_limited.
func TestRateLimitedResources(t *testing.T) {
	_, url := serveConf(t)
	log := &auditLog{}
	g := newGateway(t, gateway.Options{Audit: log, RateLimits: limiter(t,
		ratelimit.Rule{Tools: "utcpd://one.srv/*", Rate: "1/h"},
		ratelimit.Rule{Manuals: "one", Tools: "one.srv.*", Rate: "1/h"},
	)})
	register(t, g, mcpManual("one", url))
	uri := "utcpd://one.srv/" + confserver.ResourceStaticText
	if _, err := g.ReadResource(t.Context(), uri, gateway.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := g.ReadResource(t.Context(), uri, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeRateLimited)
	if r := log.last(t); r.Kind != "resource" || r.Outcome != "rate_limited" || r.Dispatched {
		t.Errorf("audit %+v", r)
	}
	prompt := "one.srv." + confserver.PromptSimple
	if _, err := g.GetPrompt(t.Context(), prompt, nil, gateway.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = g.GetPrompt(t.Context(), prompt, nil, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeRateLimited)
	if r := log.last(t); r.Kind != "prompt" || r.Outcome != "rate_limited" {
		t.Errorf("audit %+v", r)
	}

}
