// Package guardtest is the minimal conformance suite every guard kind
// passes: expected decisions, valid verdict details, calls left
// unmodified, safety under concurrent use (run it with -race), and respect
// for context cancellation. RunConfig checks how a registered kind loads
// its configuration.
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
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
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

// Option adjusts Run.
type Option func(*options)

type options struct {
	workers, rounds int
}

// Concurrency sets the shape of the concurrent subtest: workers
// goroutines each evaluate every non-blocking case rounds times (default
// 64 and 4). Lower it for a guard whose every evaluation is expensive,
// such as one that starts a process.
func Concurrency(workers, rounds int) Option {
	return func(o *options) {
		o.workers, o.rounds = max(workers, 2), max(rounds, 1)
	}
}

// Run runs the suite. newGuard is called once per subtest and returns the
// guard under test; cases should cover every decision the guard can make.
// Subtest names are stable: decisions/<case>, concurrent, canceled/<case>,
// deadline/<case>, empty_call. In decisions, besides the decision, the
// verdict's Details must be valid JSON when set, and Evaluate must leave
// the call as it was.
func Run(t *testing.T, newGuard func(t *testing.T) guard.Guard, cases []Case, opts ...Option) {
	t.Helper()
	o := options{workers: 64, rounds: 4}
	for _, opt := range opts {
		opt(&o)
	}
	t.Run("decisions", func(t *testing.T) {
		g := newGuard(t)
		for _, tc := range cases {
			if tc.Blocks {
				continue
			}
			t.Run(tc.Name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				before := snapshot(tc.Call)
				v, err := g.Evaluate(ctx, tc.Call)
				if msg := check(tc.Want, v, err); msg != "" {
					t.Error(msg)
				}
				if after := snapshot(tc.Call); after != before {
					t.Errorf("Evaluate modified the call:\nbefore %s\nafter  %s", before, after)
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
		workers := o.workers
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make(chan string, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range o.rounds * len(runnable) {
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
	if len(v.Details) > 0 && !json.Valid(v.Details) {
		return fmt.Sprintf("verdict details are not valid JSON: %.200q", v.Details)
	}
	return ""
}

// snapshot renders everything a guard could modify in a call.
func snapshot(c *guard.Call) string {
	if c == nil {
		return "<nil>"
	}
	args, err := json.Marshal(c.Arguments)
	if err != nil {
		args = []byte(fmt.Sprintf("%#v", c.Arguments))
	}
	return fmt.Sprintf("tool=%q qualified=%q manual=%q protocol=%q principal=%q args=%s template=%q",
		c.Tool, c.Qualified, c.Manual, c.Protocol, c.Principal, args, c.Template)
}

// ConfigCase is a configuration section a guard kind must reject.
type ConfigCase struct {
	// Name is the subtest name.
	Name string
	// Config is the configuration section (JSON).
	Config string
	// WantErr is a substring the error must contain, so that the user is
	// told what is wrong; "" accepts any error.
	WantErr string
}

// RunConfig checks how the guard kind registered in guard.Default under
// kind loads configuration sections, through guard.Default.New as the
// daemon loads them. Subtests: registered; valid/<i>: each of valid (JSON
// objects) builds a guard; unknown_field/<i>: each of valid with one
// unknown field added fails, and the error names the field; not_object:
// sections that are not JSON objects fail; invalid/<name>: each of invalid
// fails with an error containing its WantErr.
func RunConfig(t *testing.T, kind string, valid []string, invalid []ConfigCase) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	t.Run("registered", func(t *testing.T) {
		if _, ok := guard.Default.Lookup(kind); !ok {
			t.Fatalf("kind %q is not registered in guard.Default (registered: %v)", kind, guard.Default.Kinds())
		}
	})
	for i, cfg := range valid {
		t.Run(fmt.Sprintf("valid/%d", i), func(t *testing.T) {
			g, err := guard.Default.New(kind, json.RawMessage(cfg), log)
			if err != nil {
				t.Fatalf("New(%s): %v", cfg, err)
			}
			if g == nil {
				t.Fatal("New returned a nil guard")
			}
		})
		t.Run(fmt.Sprintf("unknown_field/%d", i), func(t *testing.T) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(cfg), &m); err != nil {
				t.Fatalf("valid configuration %s is not a JSON object: %v", cfg, err)
			}
			const field = "zz_not_a_field"
			m[field] = json.RawMessage("true")
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			_, err = guard.Default.New(kind, b, log)
			if err == nil {
				t.Fatalf("New accepted the unknown field %q in %s", field, b)
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("the error %q does not name the unknown field %q", err, field)
			}
		})
	}
	t.Run("not_object", func(t *testing.T) {
		for _, cfg := range []string{`[]`, `"policy"`, `42`, `true`, `{"unterminated":`} {
			if _, err := guard.Default.New(kind, json.RawMessage(cfg), log); err == nil {
				t.Errorf("New accepted %s", cfg)
			}
		}
	})
	for _, tc := range invalid {
		t.Run("invalid/"+tc.Name, func(t *testing.T) {
			_, err := guard.Default.New(kind, json.RawMessage(tc.Config), log)
			if err == nil {
				t.Fatalf("New accepted %s", tc.Config)
			}
			if !strings.Contains(err.Error(), tc.WantErr) {
				t.Errorf("error %q does not contain %q", err, tc.WantErr)
			}
		})
	}
}

func timed(ctx context.Context, g guard.Guard, call *guard.Call) (guard.Verdict, time.Duration, error) {
	start := time.Now()
	v, err := g.Evaluate(ctx, call)
	return v, time.Since(start), err
}
