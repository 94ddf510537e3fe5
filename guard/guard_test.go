package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/guardtest"
	"github.com/utcpd/utcpd/utcp"
)

// recorder is a guard that answers a fixed verdict (or error, or panic)
// and records that it ran.
type recorder struct {
	v     guard.Verdict
	err   error
	panic any
	calls atomic.Int32
}

func (r *recorder) Evaluate(ctx context.Context, call *guard.Call) (guard.Verdict, error) {
	r.calls.Add(1)
	if r.panic != nil {
		panic(r.panic)
	}
	return r.v, r.err
}

func answer(d guard.Decision, reason string) *recorder {
	return &recorder{v: guard.Verdict{Decision: d, Reason: reason}}
}

func approver(v guard.Verdict, err error) guard.Approver {
	return guard.ApproverFunc(func(context.Context, *guard.Call, guard.Verdict) (guard.Verdict, error) { return v, err })
}

// blockingApprover waits for ctx, then (badly) answers allow anyway.
var blockingApprover = guard.ApproverFunc(func(ctx context.Context, _ *guard.Call, _ guard.Verdict) (guard.Verdict, error) {
	<-ctx.Done()
	return guard.Verdict{Decision: guard.Allow}, nil
})

var call = &guard.Call{Tool: "echo", Qualified: "tools.echo", Manual: "tools", Protocol: "http",
	Arguments: map[string]any{"msg": "hi"}, Principal: "alice"}

func TestChain(t *testing.T) {
	type step struct {
		name string
		g    *recorder
	}
	tests := []struct {
		name       string
		steps      []step
		opts       []guard.Option
		want       guard.Decision
		wantGuard  string
		wantReason string // substring
		wantRan    []bool // which steps ran
	}{
		{name: "empty_chain_allows", want: guard.Allow},
		{name: "all_allow", steps: []step{{"a", answer(guard.Allow, "")}, {"b", answer(guard.Allow, "fine")}},
			want: guard.Allow, wantGuard: "b", wantReason: "fine", wantRan: []bool{true, true}},
		{name: "deny_stops", steps: []step{{"a", answer(guard.Allow, "")}, {"b", answer(guard.Deny, "no deletes")}, {"c", answer(guard.Allow, "")}},
			want: guard.Deny, wantGuard: "b", wantReason: "no deletes", wantRan: []bool{true, true, false}},
		{name: "deny_default_reason", steps: []step{{"a", answer(guard.Deny, "")}},
			want: guard.Deny, wantGuard: "a", wantReason: `denied by guard "a"`, wantRan: []bool{true}},
		{name: "first_decides", steps: []step{{"a", answer(guard.Deny, "first")}, {"b", answer(guard.Deny, "second")}},
			want: guard.Deny, wantGuard: "a", wantReason: "first", wantRan: []bool{true, false}},
		{name: "error_verdict_stops", steps: []step{{"a", answer(guard.Error, "backend down")}, {"b", answer(guard.Allow, "")}},
			want: guard.Error, wantGuard: "a", wantReason: "backend down", wantRan: []bool{true, false}},
		{name: "go_error_is_error", steps: []step{{"a", &recorder{v: guard.Verdict{Decision: guard.Allow}, err: errors.New("policy file unreadable")}}, {"b", answer(guard.Allow, "")}},
			want: guard.Error, wantGuard: "a", wantReason: "policy file unreadable", wantRan: []bool{true, false}},
		{name: "panic_is_error", steps: []step{{"a", &recorder{panic: "boom"}}, {"b", answer(guard.Allow, "")}},
			want: guard.Error, wantGuard: "a", wantReason: "panicked: boom", wantRan: []bool{true, false}},
		{name: "empty_decision_is_error", steps: []step{{"a", answer("", "")}},
			want: guard.Error, wantGuard: "a", wantReason: `invalid decision ""`, wantRan: []bool{true}},
		{name: "unknown_decision_is_error", steps: []step{{"a", answer("ALLOW", "")}},
			want: guard.Error, wantGuard: "a", wantReason: `invalid decision "ALLOW"`, wantRan: []bool{true}},
		{name: "review_without_approver_denies", steps: []step{{"a", answer(guard.Review, "money moves")}, {"b", answer(guard.Allow, "")}},
			want: guard.Deny, wantGuard: "a", wantReason: "review required but no approver", wantRan: []bool{true, false}},
		{name: "review_approved_continues", steps: []step{{"a", answer(guard.Review, "")}, {"b", answer(guard.Allow, "b ok")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow, Reason: "bob approved"}, nil))},
			want: guard.Allow, wantGuard: "b", wantReason: "b ok", wantRan: []bool{true, true}},
		{name: "review_approved_then_denied", steps: []step{{"a", answer(guard.Review, "")}, {"b", answer(guard.Deny, "b says no")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow}, nil))},
			want: guard.Deny, wantGuard: "b", wantReason: "b says no", wantRan: []bool{true, true}},
		{name: "review_approved_last", steps: []step{{"a", answer(guard.Review, "")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow, Reason: "bob approved"}, nil))},
			want: guard.Allow, wantGuard: "a", wantReason: "bob approved", wantRan: []bool{true}},
		{name: "review_rejected", steps: []step{{"a", answer(guard.Review, "")}, {"b", answer(guard.Allow, "")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Deny, Guard: "reviewer:bob"}, nil))},
			want: guard.Deny, wantGuard: "reviewer:bob", wantReason: "rejected on review", wantRan: []bool{true, false}},
		{name: "approver_error", steps: []step{{"a", answer(guard.Review, "")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow}, errors.New("queue unreachable")))},
			want: guard.Error, wantGuard: "a", wantReason: "queue unreachable", wantRan: []bool{true}},
		{name: "approver_invalid_answer", steps: []step{{"a", answer(guard.Review, "")}},
			opts: []guard.Option{guard.WithApprover(approver(guard.Verdict{Decision: guard.Review}, nil))},
			want: guard.Error, wantGuard: "a", wantReason: `approver returned "review"`, wantRan: []bool{true}},
		{name: "approver_panic", steps: []step{{"a", answer(guard.Review, "")}},
			opts: []guard.Option{guard.WithApprover(guard.ApproverFunc(func(context.Context, *guard.Call, guard.Verdict) (guard.Verdict, error) {
				panic("approver bug")
			}))},
			want: guard.Error, wantGuard: "a", wantReason: "approver bug", wantRan: []bool{true}},
		{name: "approval_timeout_is_pending", steps: []step{{"a", answer(guard.Review, "large transfer")}, {"b", answer(guard.Allow, "")}},
			opts: []guard.Option{guard.WithApprover(blockingApprover), guard.WithReviewTimeout(20 * time.Millisecond)},
			want: guard.Review, wantGuard: "a", wantReason: "not decided in time", wantRan: []bool{true, false}},
		// The requested name never bypasses (issue 14): only the resolved
		// qualified name does. (This case used to expect a bypass.)
		{name: "requested_name_never_bypasses", steps: []step{{"a", answer(guard.Deny, "")}},
			opts: []guard.Option{guard.WithBypass("echo")},
			want: guard.Deny, wantGuard: "a", wantRan: []bool{true}},
		{name: "bypass_qualified_name", steps: []step{{"a", answer(guard.Deny, "")}},
			opts: []guard.Option{guard.WithBypass("other.tool", "tools.echo")},
			want: guard.Allow, wantReason: "bypass_tools", wantRan: []bool{false}},
		{name: "bypass_no_globs", steps: []step{{"a", answer(guard.Deny, "")}},
			opts: []guard.Option{guard.WithBypass("tools.*", "*", "tools", "ECHO", "tools.ech", "")},
			want: guard.Deny, wantGuard: "a", wantRan: []bool{true}},
		{name: "named_inner_guard", steps: []step{{"policy", &recorder{v: guard.Verdict{Decision: guard.Deny, Guard: "rule-7"}}}},
			want: guard.Deny, wantGuard: "policy/rule-7", wantRan: []bool{true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var named []guard.Named
			for _, s := range tc.steps {
				named = append(named, guard.Named{Name: s.name, Guard: s.g})
			}
			c := guard.NewChain(named, tc.opts...)
			v, err := c.Evaluate(t.Context(), call)
			if err != nil {
				t.Fatalf("Evaluate returned an error: %v (failures must be verdicts)", err)
			}
			if v.Decision != tc.want {
				t.Errorf("decision %q (reason %q), want %q", v.Decision, v.Reason, tc.want)
			}
			if tc.wantGuard != "" && v.Guard != tc.wantGuard {
				t.Errorf("guard %q, want %q", v.Guard, tc.wantGuard)
			}
			if !strings.Contains(v.Reason, tc.wantReason) {
				t.Errorf("reason %q, want it to contain %q", v.Reason, tc.wantReason)
			}
			if tc.want != guard.Allow && v.Reason == "" {
				t.Error("a refusing verdict has no reason")
			}
			var ran []bool
			for _, s := range tc.steps {
				ran = append(ran, s.g.calls.Load() > 0)
			}
			if d := cmp.Diff(tc.wantRan, ran); d != "" {
				t.Errorf("guards that ran (-want +got):\n%s", d)
			}
		})
	}
}

func TestChainContext(t *testing.T) {
	t.Run("canceled_before_start", func(t *testing.T) {
		g := answer(guard.Allow, "")
		c := guard.NewChain([]guard.Named{{Name: "a", Guard: g}})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		v, _ := c.Evaluate(ctx, call)
		if v.Decision != guard.Error || g.calls.Load() != 0 {
			t.Errorf("verdict %+v, guard ran %d times; want error without running", v, g.calls.Load())
		}
	})
	t.Run("guard_allows_after_cancel", func(t *testing.T) {
		// A guard that (wrongly) allows after its context ended is not trusted.
		ctx, cancel := context.WithCancel(t.Context())
		g := guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
			cancel()
			return guard.Verdict{Decision: guard.Allow}, nil
		})
		v, _ := guard.NewChain([]guard.Named{{Name: "a", Guard: g}}).Evaluate(ctx, call)
		if v.Decision != guard.Error {
			t.Errorf("decision %q, want error", v.Decision)
		}
	})
	t.Run("caller_gone_during_review", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		defer cancel()
		c := guard.NewChain([]guard.Named{{Name: "a", Guard: answer(guard.Review, "")}}, guard.WithApprover(blockingApprover))
		start := time.Now()
		v, _ := c.Evaluate(ctx, call)
		if v.Decision != guard.Review {
			t.Errorf("decision %q, want review (pending)", v.Decision)
		}
		if time.Since(start) > time.Second {
			t.Errorf("took %v", time.Since(start))
		}
	})
	t.Run("late_allow_ignored", func(t *testing.T) {
		// The approver answers allow just after the review deadline.
		late := guard.ApproverFunc(func(ctx context.Context, _ *guard.Call, _ guard.Verdict) (guard.Verdict, error) {
			<-ctx.Done()
			time.Sleep(5 * time.Millisecond)
			return guard.Verdict{Decision: guard.Allow}, nil
		})
		c := guard.NewChain([]guard.Named{{Name: "a", Guard: answer(guard.Review, "")}},
			guard.WithApprover(late), guard.WithReviewTimeout(10*time.Millisecond))
		v, _ := c.Evaluate(t.Context(), call)
		if v.Allowed() {
			t.Error("a late approval allowed the call")
		}
	})
	t.Run("approver_sees_call_and_verdict", func(t *testing.T) {
		var got *guard.Call
		var gotV guard.Verdict
		a := guard.ApproverFunc(func(ctx context.Context, c *guard.Call, v guard.Verdict) (guard.Verdict, error) {
			got, gotV = c, v
			if _, ok := ctx.Deadline(); !ok {
				t.Error("approver context has no deadline despite WithReviewTimeout")
			}
			return guard.Verdict{Decision: guard.Allow}, nil
		})
		details := json.RawMessage(`{"rule":"transfers"}`)
		g := &recorder{v: guard.Verdict{Decision: guard.Review, Reason: "big", Details: details}}
		c := guard.NewChain([]guard.Named{{Name: "a", Guard: g}}, guard.WithApprover(a), guard.WithReviewTimeout(time.Minute))
		v, _ := c.Evaluate(t.Context(), call)
		if got != call || gotV.Reason != "big" || gotV.Guard != "a" || string(gotV.Details) != string(details) {
			t.Errorf("approver got call %p verdict %+v", got, gotV)
		}
		if !v.Allowed() || string(v.Details) != string(details) {
			t.Errorf("verdict %+v", v)
		}
	})
}

func TestChainNilCases(t *testing.T) {
	c := guard.NewChain([]guard.Named{{Name: "missing"}})
	if v, err := c.Evaluate(t.Context(), call); err != nil || v.Decision != guard.Error {
		t.Errorf("nil guard: %+v, %v; want error verdict", v, err)
	}
	if v, err := guard.NewChain(nil).Evaluate(t.Context(), nil); err != nil || v.Decision != guard.Error {
		t.Errorf("nil call: %+v, %v; want error verdict", v, err)
	}
	if got := guard.NewChain([]guard.Named{{Name: "a"}, {Name: "b"}}).Names(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names = %v", got)
	}
}

func TestChainConcurrent(t *testing.T) {
	var n atomic.Int64
	counting := guard.Func(func(ctx context.Context, c *guard.Call) (guard.Verdict, error) {
		n.Add(1)
		if strings.HasPrefix(c.Tool, "delete") {
			return guard.Verdict{Decision: guard.Deny, Reason: "no deletes"}, nil
		}
		if c.Tool == "pay" {
			return guard.Verdict{Decision: guard.Review}, nil
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	c := guard.NewChain([]guard.Named{{Name: "count", Guard: counting}, {Name: "all", Guard: guard.AllowAll}},
		guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow}, nil)), guard.WithBypass("m.free"))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				tool, want := "read", guard.Allow
				switch (w + i) % 4 {
				case 1:
					tool, want = "delete_file", guard.Deny
				case 2:
					tool = "pay"
				case 3:
					tool = "free"
				}
				v, _ := c.Evaluate(t.Context(), &guard.Call{Tool: tool, Qualified: "m." + tool})
				if v.Decision != want {
					errs <- fmt.Errorf("%s: %q, want %q", tool, v.Decision, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n.Load() != 64*50*3/4 {
		t.Errorf("guard ran %d times, want %d (bypassed calls skip it)", n.Load(), 64*50*3/4)
	}
}

func TestDenied(t *testing.T) {
	tests := []struct {
		v       guard.Verdict
		code    utcp.Code
		details map[string]any
		msg     string
	}{
		{v: guard.Verdict{Decision: guard.Allow}},
		{v: guard.Verdict{Decision: guard.Deny, Reason: "no deletes", Guard: "policy", Details: json.RawMessage(`{"rule":3}`)},
			code: utcp.CodeGuardDenied, msg: `call denied by guard "policy": no deletes`,
			details: map[string]any{"guard": "policy", "reason": "no deletes", "decision": "deny", "details": json.RawMessage(`{"rule":3}`)}},
		{v: guard.Verdict{Decision: guard.Error, Reason: "guard \"w\" failed: timeout", Guard: "w"},
			code: utcp.CodeGuardError, msg: `call refused: guard error by guard "w": guard "w" failed: timeout`,
			details: map[string]any{"guard": "w", "reason": "guard \"w\" failed: timeout", "decision": "error"}},
		{v: guard.Verdict{Decision: guard.Review, Reason: "review not decided in time", Guard: "hol", Details: json.RawMessage(`{bad`)},
			code: utcp.CodeReviewPending, msg: `call awaits review by guard "hol": review not decided in time`,
			details: map[string]any{"guard": "hol", "reason": "review not decided in time", "decision": "review"}},
		{v: guard.Verdict{Decision: "bogus"}, code: utcp.CodeGuardError, msg: "call refused: guard error",
			details: map[string]any{"guard": "", "reason": "", "decision": "bogus"}},
	}
	for _, tc := range tests {
		t.Run(string(tc.v.Decision), func(t *testing.T) {
			err := guard.Denied(tc.v)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Denied(allow) = %v, want nil", err)
				}
				return
			}
			var ue *utcp.Error
			if !errors.As(err, &ue) {
				t.Fatalf("Denied = %T %v, want *utcp.Error", err, err)
			}
			if ue.Code != tc.code || ue.Message != tc.msg {
				t.Errorf("Denied = %q %q, want %q %q", ue.Code, ue.Message, tc.code, tc.msg)
			}
			if d := cmp.Diff(tc.details, ue.Details); d != "" {
				t.Errorf("details (-want +got):\n%s", d)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	if d := cmp.Diff([]string{"allow_all", "deny_all"}, guard.Default.Kinds()); d != "" {
		t.Errorf("Default kinds (-want +got):\n%s", d)
	}
	for _, cfg := range []string{"", "null", "{}", " { } "} {
		g, err := guard.Default.New("allow_all", json.RawMessage(cfg), nil)
		if err != nil {
			t.Fatalf("New(allow_all, %q): %v", cfg, err)
		}
		if v, _ := g.Evaluate(t.Context(), call); !v.Allowed() {
			t.Errorf("allow_all: %+v", v)
		}
	}
	if _, err := guard.Default.New("allow_all", json.RawMessage(`{"x":1}`), nil); utcp.CodeOf(err) != utcp.CodeInvalidConfig {
		t.Errorf("allow_all with config: %v, want invalid_config", err)
	}
	g, err := guard.Default.New("deny_all", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Evaluate(t.Context(), call); v.Decision != guard.Deny {
		t.Errorf("deny_all: %+v", v)
	}
	_, err = guard.Default.New("alow_all", nil, nil)
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeInvalidConfig {
		t.Fatalf("unknown kind: %v", err)
	}
	if dym, _ := ue.Details["did_you_mean"].([]string); len(dym) == 0 || dym[0] != "allow_all" {
		t.Errorf("did_you_mean = %v, want allow_all first", ue.Details["did_you_mean"])
	}

	r := guard.NewRegistry()
	ok := guard.Info{Kind: "webhook", New: func(json.RawMessage, *slog.Logger) (guard.Guard, error) { return guard.AllowAll, nil }}
	if err := r.Register(ok); err != nil {
		t.Fatal(err)
	}
	for name, info := range map[string]guard.Info{
		"duplicate":  ok,
		"empty_kind": {New: ok.New},
		"upper_kind": {Kind: "Webhook", New: ok.New},
		"no_new":     {Kind: "x"},
	} {
		if err := r.Register(info); err == nil {
			t.Errorf("Register(%s) succeeded", name)
		}
	}
	if _, found := r.Lookup("webhook"); !found {
		t.Error("Lookup(webhook) failed")
	}
	failing := guard.Info{Kind: "broken", New: func(json.RawMessage, *slog.Logger) (guard.Guard, error) {
		return nil, errors.New("url is required")
	}}
	_ = r.Register(failing)
	if _, err := r.New("broken", nil, nil); utcp.CodeOf(err) != utcp.CodeInvalidConfig || !strings.Contains(err.Error(), "url is required") {
		t.Errorf("New(broken) = %v", err)
	}
}

func TestConformance(t *testing.T) {
	t.Run("allow_all", func(t *testing.T) {
		guardtest.Run(t, func(*testing.T) guard.Guard { return guard.AllowAll }, []guardtest.Case{
			{Name: "any", Call: call, Want: guard.Allow},
		})
	})
	t.Run("deny_all", func(t *testing.T) {
		guardtest.Run(t, func(*testing.T) guard.Guard { return guard.DenyAll }, []guardtest.Case{
			{Name: "any", Call: call, Want: guard.Deny},
		})
	})
	t.Run("chain", func(t *testing.T) {
		policy := guard.Func(func(ctx context.Context, c *guard.Call) (guard.Verdict, error) {
			switch c.Tool {
			case "rm":
				return guard.Verdict{Decision: guard.Deny, Reason: "destructive"}, nil
			case "pay", "slow_pay":
				return guard.Verdict{Decision: guard.Review, Reason: "money"}, nil
			case "broken":
				return guard.Verdict{}, errors.New("rules failed to load")
			}
			return guard.Verdict{Decision: guard.Allow}, nil
		})
		// The approver approves "pay" at once and never answers "slow_pay".
		appr := guard.ApproverFunc(func(ctx context.Context, c *guard.Call, _ guard.Verdict) (guard.Verdict, error) {
			if c.Tool == "slow_pay" {
				<-ctx.Done()
				return guard.Verdict{}, ctx.Err()
			}
			return guard.Verdict{Decision: guard.Allow}, nil
		})
		guardtest.Run(t, func(*testing.T) guard.Guard {
			return guard.NewChain([]guard.Named{{Name: "policy", Guard: policy}}, guard.WithApprover(appr), guard.WithBypass("m.health"))
		}, []guardtest.Case{
			{Name: "allow", Call: &guard.Call{Tool: "read"}, Want: guard.Allow},
			{Name: "deny", Call: &guard.Call{Tool: "rm"}, Want: guard.Deny},
			{Name: "approved", Call: &guard.Call{Tool: "pay"}, Want: guard.Allow},
			{Name: "guard_error", Call: &guard.Call{Tool: "broken"}, Want: guard.Error},
			{Name: "bypass", Call: &guard.Call{Tool: "health", Qualified: "m.health"}, Want: guard.Allow},
			{Name: "pending_review", Call: &guard.Call{Tool: "slow_pay"}, Want: guard.Review, Blocks: true},
		})
	})
}

// TestBypassOnlyResolvedName replays issue 14's bypass attack at the
// chain: bypass_tools ["nosuch.ping"] must not let a call typed
// "nosuch.ping" through when it resolves to "evil.nosuch.ping" (another
// manual's tool whose short name looks like the entry), nor when it does
// not resolve at all; the entry's own resolved name does bypass.
func TestBypassOnlyResolvedName(t *testing.T) {
	c := guard.NewChain([]guard.Named{{Name: "deny", Guard: guard.DenyAll}}, guard.WithBypass("nosuch.ping", "health.ping"))
	for _, tc := range []struct {
		call *guard.Call
		want guard.Decision
	}{
		{&guard.Call{Tool: "nosuch.ping", Qualified: "evil.nosuch.ping", Manual: "evil"}, guard.Deny},
		{&guard.Call{Tool: "nosuch.ping"}, guard.Deny},
		{&guard.Call{Tool: "ping", Qualified: "health.ping", Manual: "health"}, guard.Allow},
		{&guard.Call{Tool: "health.ping", Qualified: "health.ping", Manual: "health"}, guard.Allow},
		{&guard.Call{Tool: "health.ping", Qualified: "evil.health.ping", Manual: "evil"}, guard.Deny},
		// A prompt named like a bypassed tool runs the chain.
		{&guard.Call{Tool: "health.ping", Qualified: "health.ping", Manual: "health", Kind: guard.ActionPrompt}, guard.Deny},
		{&guard.Call{Tool: "health.ping", Qualified: "health.ping", Manual: "health", Kind: guard.ActionResource}, guard.Deny},
		{&guard.Call{Tool: "health.ping", Qualified: "health.ping", Manual: "health", Kind: guard.ActionTool}, guard.Allow},
	} {
		v, _ := c.Evaluate(t.Context(), tc.call)
		if v.Decision != tc.want {
			t.Errorf("%+v: %s (%s), want %s", tc.call, v.Decision, v.Reason, tc.want)
		}
	}
}
