package guard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/guard"
)

func TestTraceRecordsEverySteps(t *testing.T) {
	c := guard.NewChain([]guard.Named{
		{Name: "0:a", Guard: answer(guard.Allow, "fine")},
		{Name: "1:b", Guard: answer(guard.Review, "big")},
		{Name: "2:c", Guard: answer(guard.Deny, "no")},
	}, guard.WithApprover(approver(guard.Verdict{Decision: guard.Allow, Reason: "bob ok"}, nil)))
	var tr guard.Trace
	v, _ := c.Evaluate(guard.WithTrace(t.Context(), &tr), call)
	if v.Decision != guard.Deny {
		t.Fatalf("verdict %+v", v)
	}
	want := []guard.Step{
		{Guard: "0:a", Decision: guard.Allow, Reason: "fine"},
		{Guard: "1:b", Decision: guard.Review, Reason: "big"},
		{Guard: "1:b", Decision: guard.Allow, Reason: "bob ok", Review: true},
		{Guard: "2:c", Decision: guard.Deny, Reason: "no"},
	}
	if d := cmp.Diff(want, tr.Steps); d != "" {
		t.Errorf("steps (-want +got):\n%s", d)
	}
	if guard.TraceFrom(t.Context()) != nil {
		t.Error("a trace from nowhere")
	}
	// Without a trace nothing is recorded (and nothing breaks).
	if v, _ := c.Evaluate(t.Context(), call); v.Decision != guard.Deny {
		t.Errorf("verdict %+v", v)
	}
}

func TestGuardTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hang := guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
		<-release // ignores its context
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	polite := guard.Func(func(ctx context.Context, _ *guard.Call) (guard.Verdict, error) {
		<-ctx.Done()
		return guard.Verdict{}, ctx.Err()
	})
	for name, g := range map[string]guard.Guard{"hangs": hang, "honours_context": polite} {
		t.Run(name, func(t *testing.T) {
			next := answer(guard.Allow, "")
			c := guard.NewChain([]guard.Named{{Name: "0:slow", Guard: g}, {Name: "1:next", Guard: next}}, guard.WithGuardTimeout(50*time.Millisecond))
			start := time.Now()
			v, _ := c.Evaluate(t.Context(), call)
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %v", took)
			}
			if v.Decision != guard.Error || v.Guard != "0:slow" || next.calls.Load() != 0 {
				t.Errorf("verdict %+v, next ran %d times", v, next.calls.Load())
			}
		})
	}
	// A fast guard, a panicking one and a canceled call under a timeout.
	c := guard.NewChain([]guard.Named{{Name: "0:a", Guard: answer(guard.Allow, "quick")}}, guard.WithGuardTimeout(time.Second))
	if v, _ := c.Evaluate(t.Context(), call); v.Decision != guard.Allow || v.Reason != "quick" {
		t.Errorf("fast guard: %+v", v)
	}
	c = guard.NewChain([]guard.Named{{Name: "0:p", Guard: &recorder{panic: "bug"}}}, guard.WithGuardTimeout(time.Second))
	if v, _ := c.Evaluate(t.Context(), call); v.Decision != guard.Error {
		t.Errorf("panicking guard: %+v", v)
	}
	ctx, cancel := context.WithCancel(t.Context())
	c = guard.NewChain([]guard.Named{{Name: "0:h", Guard: guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
		cancel()
		<-release
		return guard.Verdict{Decision: guard.Allow}, nil
	})}}, guard.WithGuardTimeout(time.Minute))
	if v, _ := c.Evaluate(ctx, call); v.Decision != guard.Error {
		t.Errorf("canceled call: %+v", v)
	}
}

func TestParkedAndExpiredReviews(t *testing.T) {
	for _, sentinel := range []error{guard.ErrParked, guard.ErrReviewExpired} {
		a := guard.ApproverFunc(func(context.Context, *guard.Call, guard.Verdict) (guard.Verdict, error) {
			return guard.Verdict{Decision: guard.Allow}, fmt.Errorf("review rv_1: %w", sentinel)
		})
		next := answer(guard.Allow, "")
		c := guard.NewChain([]guard.Named{{Name: "0:r", Guard: answer(guard.Review, "why")}, {Name: "1:n", Guard: next}}, guard.WithApprover(a))
		v, _ := c.Evaluate(t.Context(), call)
		if v.Decision != guard.Review || v.Guard != "0:r" || next.calls.Load() != 0 {
			t.Errorf("%v: verdict %+v", sentinel, v)
		}
		if want := "review rv_1: " + sentinel.Error() + " (why)"; v.Reason != want {
			t.Errorf("reason %q, want %q", v.Reason, want)
		}
	}
	// Any other approver error is a guard error.
	a := guard.ApproverFunc(func(context.Context, *guard.Call, guard.Verdict) (guard.Verdict, error) {
		return guard.Verdict{}, errors.New("store down")
	})
	v, _ := guard.NewChain([]guard.Named{{Name: "0:r", Guard: answer(guard.Review, "")}}, guard.WithApprover(a)).Evaluate(t.Context(), call)
	if v.Decision != guard.Error {
		t.Errorf("approver error: %+v", v)
	}
}

func TestKindNamedGuardsAreNotRepeated(t *testing.T) {
	g := &recorder{v: guard.Verdict{Decision: guard.Deny, Guard: "deny_all"}}
	v, _ := guard.NewChain([]guard.Named{{Name: "3:deny_all", Guard: g}}).Evaluate(t.Context(), call)
	if v.Guard != "3:deny_all" {
		t.Errorf("guard %q, want 3:deny_all", v.Guard)
	}
}

func TestHolder(t *testing.T) {
	var zero guard.Holder
	if v, _ := zero.Evaluate(t.Context(), call); v.Decision != guard.Allow {
		t.Errorf("zero Holder: %+v", v)
	}
	h := guard.NewHolder(guard.DenyAll)
	if v, _ := h.Evaluate(t.Context(), call); v.Decision != guard.Deny {
		t.Errorf("deny holder: %+v", v)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				if (i+j)%2 == 0 {
					h.Set(guard.AllowAll)
				} else {
					h.Set(guard.DenyAll)
				}
				if v, _ := h.Evaluate(context.Background(), call); v.Decision != guard.Allow && v.Decision != guard.Deny {
					t.Errorf("verdict %+v", v)
				}
			}
		})
	}
	wg.Wait()
	h.Set(nil)
	if v, _ := h.Load().Evaluate(t.Context(), call); v.Decision != guard.Allow {
		t.Errorf("Set(nil): %+v", v)
	}
}
