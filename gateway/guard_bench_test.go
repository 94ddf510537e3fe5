package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	_ "github.com/utcpd/utcpd/guard/policy" // the policy kind
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports"
)

// BenchmarkCallToolWithGuardChain measures what the guard chain and the
// audit log add to gateway.CallTool on an in-process no-op transport:
//
//	none                 no guard (AllowAll): the baseline
//	chain_func           a Chain of one Func guard that allows
//	chain_func_timeout   the same with a guard timeout (the daemon's setup:
//	                     each guard runs in a goroutine the chain can abandon)
//	chain_4_func_timeout four guards, guard timeout
//	daemon_memory        chain_func_timeout + review queue (ticket) + audit
//	                     writer to memory: what every daemon call pays
//	daemon_sqlite        the same with the audit log in SQLite (the default);
//	                     "dropped" counts records the writer could not keep
//	                     up with (at this rate, far above real traffic)
//	policy_1000          a chain of the real policy kind with 1,000 rules
//	                     that all apply to every tool and are all tried
//	                     (each an argument regex that does not match), guard
//	                     timeout on: the "≤ 20 µs per call" case
//	daemon_policy_1000   policy_1000 + review queue + audit writer to SQLite
func BenchmarkCallToolWithGuardChain(b *testing.B) {
	allow := guard.Func(func(context.Context, *guard.Call) (guard.Verdict, error) {
		return guard.Verdict{Decision: guard.Allow, Reason: "ok"}, nil
	})
	one := []guard.Named{{Name: "0:func", Guard: allow}}
	four := []guard.Named{{Name: "0:a", Guard: allow}, {Name: "1:b", Guard: allow}, {Name: "2:c", Guard: allow}, {Name: "3:d", Guard: allow}}
	cases := []struct {
		name  string
		setup func(b *testing.B) gateway.Options
	}{
		{"none", func(*testing.B) gateway.Options { return gateway.Options{Transports: transports.Default} }},
		{"chain_func", func(*testing.B) gateway.Options { return gateway.Options{Guard: guard.NewChain(one)} }},
		{"chain_func_timeout", func(*testing.B) gateway.Options {
			return gateway.Options{Guard: guard.NewChain(one, guard.WithGuardTimeout(10*time.Second))}
		}},
		{"chain_4_func_timeout", func(*testing.B) gateway.Options {
			return gateway.Options{Guard: guard.NewChain(four, guard.WithGuardTimeout(10*time.Second))}
		}},
		{"daemon_memory", func(b *testing.B) gateway.Options {
			return daemonOptions(b, one, review.NewMemStore(), audit.NewMemStore())
		}},
		{"daemon_sqlite", func(b *testing.B) gateway.Options {
			st, err := sqlite.Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return daemonOptions(b, one, st.Reviews(), st.Audit())
		}},
		{"policy_1000", func(b *testing.B) gateway.Options {
			return gateway.Options{Guard: guard.NewChain(policy1000(b), guard.WithGuardTimeout(10*time.Second))}
		}},
		{"daemon_policy_1000", func(b *testing.B) gateway.Options {
			st, err := sqlite.Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return daemonOptions(b, policy1000(b), st.Reviews(), st.Audit())
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			opts := tc.setup(b)
			reg := transports.NewRegistry()
			if err := reg.Register(noopInfo()); err != nil {
				b.Fatal(err)
			}
			opts.Transports = reg
			g, err := gateway.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = g.Close() })
			registerNoop(b, g, "bench", 10)
			args := map[string]any{"x": 1, "path": "/home/u/file"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.CallTool(ctx, "bench.tool_3", args, gateway.CallOptions{Front: "rest", Principal: "key:bench"}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if w, ok := opts.Audit.(*audit.Writer); ok {
				_ = w.Close(context.Background())
				b.ReportMetric(float64(w.Dropped())/float64(b.N), "dropped/op")
			}
		})
	}
}

// policy1000 is a policy guard of 1,000 rules, built from its JSON
// configuration as the daemon builds it, that every call runs through
// entirely: each rule applies to every tool and tests an argument regex
// the benchmark call does not match; the default allows.
func policy1000(b *testing.B) []guard.Named {
	rules := make([]map[string]any, 1000)
	for i := range rules {
		rules[i] = map[string]any{"tools": []string{"*"}, "args": []map[string]any{{"pointer": "/path", "regex": fmt.Sprintf("^/never%d/", i)}}, "decision": "deny"}
	}
	cfg, err := json.Marshal(map[string]any{"kind": "policy", "default": "allow", "rules": rules})
	if err != nil {
		b.Fatal(err)
	}
	g, err := guard.Default.New("policy", cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	return []guard.Named{{Name: "0:policy", Guard: g}}
}

func daemonOptions(b *testing.B, guards []guard.Named, rs review.Store, as audit.Store) gateway.Options {
	q := review.NewQueue(rs, review.Options{})
	b.Cleanup(func() { _ = q.Close(context.Background()) })
	w := audit.NewWriter(as, audit.WriterOptions{})
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	chain := guard.NewChain(guards, guard.WithGuardTimeout(10*time.Second), guard.WithApprover(q), guard.WithReviewTimeout(time.Minute))
	return gateway.Options{Guard: chain, Reviews: q, Audit: w}
}

// BenchmarkAuditWriterAppend is the audit log's cost on the call path:
// one Append of a record (a channel send), the store written behind.
func BenchmarkAuditWriterAppend(b *testing.B) {
	w := audit.NewWriter(audit.NewMemStore(), audit.WriterOptions{Retention: -1})
	defer w.Close(context.Background())
	rec := audit.Record{Time: time.Now(), Front: "rest", Tool: "demo.add", Qualified: "demo.add", Decision: "allow",
		Steps: []audit.Step{{Guard: "0:policy", Decision: "allow"}}, Outcome: "ok", Dispatched: true}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Append(rec)
		}
	})
}
