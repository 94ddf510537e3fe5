// Package guardtest is the minimal conformance suite every guard kind
// passes: expected decisions, safety under concurrent use (run it with
// -race), and respect for context cancellation.
//
//	func TestConformance(t *testing.T) {
//		guardtest.Run(t, func(t *testing.T) guard.Guard { return newTestGuard(t) }, []guardtest.Case{
//			{Name: "allowed", Call: &guard.Call{Tool: "m.read"}, Want: guard.Allow},
//			{Name: "denied", Call: &guard.Call{Tool: "m.delete"}, Want: guard.Deny},
//		})
//	}
package guardtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/guard"
)

// Case is one call and the decision the guard under test must reach.
type Case struct {
	// Name is the subtest name.
	Name string
	// Call is evaluated as is; the suite never modifies it.
	Call *guard.Call
	// Want is the expected decision. For Want == guard.Error, returning a
	// non-nil error also passes.
	Want guard.Decision
	// Blocks marks a case whose evaluation waits on something outside the
	// guard (an unanswered webhook, a slow policy server) until its context
	// ends. The suite runs it only with a short deadline and checks that
	// Evaluate returns promptly without allowing.
	Blocks bool
}

// Prompt is how soon Evaluate must return after its context ends.
const Prompt = time.Second

// Run runs the suite. newGuard is called once per subtest and returns the
// guard under test; cases should cover every decision the guard can make.
// Subtest names are stable: decisions/<case>, concurrent, canceled/<case>,
// deadline/<case>, empty_call.
func Run(t *testing.T, newGuard func(t *testing.T) guard.Guard, cases []Case) {
	t.Helper()
	t.Run("decisions", func(t *testing.T) {
		g := newGuard(t)
		for _, tc := range cases {
			if tc.Blocks {
				continue
			}
			t.Run(tc.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				v, err := g.Evaluate(ctx, tc.Call)
				if msg := check(tc.Want, v, err); msg != "" {
					t.Error(msg)
				}
			})
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		g := newGuard(t)
		var runnable []Case
		for _, tc := range cases {
			if !tc.Blocks {
				runnable = append(runnable, tc)
			}
		}
		if len(runnable) == 0 {
			t.Skip("no non-blocking cases")
		}
		const workers = 64
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan string, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 4 * len(runnable) {
					tc := runnable[(w+i)%len(runnable)]
					v, err := g.Evaluate(ctx, tc.Call)
					if msg := check(tc.Want, v, err); msg != "" {
						errs <- fmt.Sprintf("%s: %s", tc.Name, msg)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for msg := range errs {
			t.Error(msg)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		g := newGuard(t)
		for _, tc := range cases {
			t.Run(tc.Name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				v, took, err := timed(ctx, g, tc.Call)
				if took > Prompt {
					t.Errorf("Evaluate with a canceled context took %v, want under %v", took, Prompt)
				}
				if err == nil && v.Decision == guard.Allow && tc.Want != guard.Allow {
					t.Errorf("a canceled context turned %s into allow", tc.Want)
				}
			})
		}
	})

	t.Run("deadline", func(t *testing.T) {
		g := newGuard(t)
		for _, tc := range cases {
			if !tc.Blocks {
				continue
			}
			t.Run(tc.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				defer cancel()
				v, took, err := timed(ctx, g, tc.Call)
				if took > 100*time.Millisecond+Prompt {
					t.Errorf("Evaluate past its deadline took %v", took)
				}
				if err == nil && v.Decision == guard.Allow {
					t.Error("Evaluate allowed a call whose context ended")
				}
			})
		}
	})

	t.Run("empty_call", func(t *testing.T) {
		// An unresolved call with nothing but a name must not crash a guard.
		g := newGuard(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		v, err := g.Evaluate(ctx, &guard.Call{Tool: "unknown"})
		if err == nil && !v.Decision.Valid() {
			t.Errorf("invalid decision %q", v.Decision)
		}
	})
}

// check compares an outcome with the expected decision; "" means it passes.
func check(want guard.Decision, v guard.Verdict, err error) string {
	if err != nil {
		if want == guard.Error {
			return ""
		}
		return fmt.Sprintf("Evaluate: %v, want decision %q", err, want)
	}
	if v.Decision != want {
		return fmt.Sprintf("decision %q (reason %q), want %q", v.Decision, v.Reason, want)
	}
	return ""
}

func timed(ctx context.Context, g guard.Guard, call *guard.Call) (guard.Verdict, time.Duration, error) {
	start := time.Now()
	v, err := g.Evaluate(ctx, call)
	return v, time.Since(start), err
}
