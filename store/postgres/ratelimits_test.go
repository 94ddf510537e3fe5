package postgres_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// limitedReplica is a gateway over its own Store on a shared database
// whose rate limits lease from that Store.
func limitedReplica(t *testing.T, dsn string, rules []ratelimit.Rule) (*gateway.Gateway, *postgres.Store, *ratelimit.Limiter) {
	t.Helper()
	st := open(t, dsn, postgres.Options{})
	l, err := ratelimit.New(rules, ratelimit.Options{Shared: st})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: transports.Default, Store: st, RateLimits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if _, _, err := g.Restore(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	return g, st, l
}

// TestRateLimitAcrossReplicas: two gateways on one database, a rule of
// 30 calls an hour (no refill to speak of during the test), 200 calls at
// once spread over both. The replicas together admit at most the burst
// plus the documented bound (one share per replica, docs/deploy.md),
// with far fewer queries than calls; the shares still held go back to
// the table at Close.
func TestRateLimitAcrossReplicas(t *testing.T) {
	dsn := newDB(t)
	url := serveFixture(t)
	rules := []ratelimit.Rule{{Name: "echo", Tools: "demo.echo", Rate: "30/h"}}
	ga, sa, la := limitedReplica(t, dsn, rules)
	gb, sb, lb := limitedReplica(t, dsn, rules)
	for _, g := range []*gateway.Gateway{ga, gb} {
		if _, err := g.RegisterManual(t.Context(), manual("demo", url), gateway.RegisterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const calls, burst = 200, 30
	share := ratelimit.Share(burst)
	qa, qb := sa.Queries(), sb.Queries()
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		g := []*gateway.Gateway{ga, gb}[i%2]
		wg.Go(func() {
			<-start
			_, err := g.CallTool(t.Context(), "demo.echo", map[string]any{"i": i}, gateway.CallOptions{})
			switch utcp.CodeOf(err) {
			case "":
				ok.Add(1)
			case utcp.CodeRateLimited:
				limited.Add(1)
			default:
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	bound := burst + 2*int64(share)
	t.Logf("admitted %d, refused %d (limit %d, bound %d); queries %d and %d", ok.Load(), limited.Load(), burst, bound,
		sa.Queries()-qa, sb.Queries()-qb)
	if ok.Load() > bound {
		t.Errorf("admitted %d calls, over the limit %d plus the bound", ok.Load(), burst)
	}
	// Tokens are leased, never made up: below the burst only by what the
	// replicas still hold.
	if ok.Load() < burst-2*int64(share) {
		t.Errorf("admitted %d calls, want at least %d", ok.Load(), burst-2*int64(share))
	}
	if ok.Load()+limited.Load() != calls {
		t.Errorf("%d + %d answers", ok.Load(), limited.Load())
	}
	// A lease per share, one empty answer per replica: not a query per
	// call.
	if q := sa.Queries() - qa + sb.Queries() - qb; q > int64(burst/share)+4 {
		t.Errorf("%d queries for %d calls", q, calls)
	}

	// What a replica still holds goes back at Close: the bucket then has
	// burst minus the calls admitted (give or take the refill).
	if err := la.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := lb.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	var tokens float64
	conn := open(t, dsn, postgres.Options{})
	got, _, err := conn.TakeTokens(t.Context(), fmt.Sprintf("echo|30/h|%d", burst), 1000, burst, 30.0/3600)
	if err != nil {
		t.Fatal(err)
	}
	tokens = got
	if want := float64(burst) - float64(ok.Load()); tokens != want {
		t.Errorf("the bucket holds %v tokens after both replicas closed, want %v", tokens, want)
	}
}

// TestTakeTokensRefills: the shared bucket refills by the database's
// clock at the rule's rate, never beyond its burst, and says how long
// until the next token when empty.
func TestTakeTokensRefills(t *testing.T) {
	st := open(t, newDB(t), postgres.Options{})
	ctx := t.Context()
	got, _, err := st.TakeTokens(ctx, "k", 3, 4, 20)
	if err != nil || got != 3 {
		t.Fatalf("first lease %v, %v; want 3 of a full bucket", got, err)
	}
	got, _, err = st.TakeTokens(ctx, "k", 3, 4, 20)
	if err != nil || got < 1 || got > 2 {
		t.Fatalf("second lease %v, %v; want the one left (plus the refill)", got, err)
	}
	time.Sleep(400 * time.Millisecond) // 8 tokens' worth at 20/s: capped at 4
	got, _, err = st.TakeTokens(ctx, "k", 10, 4, 20)
	if err != nil || got != 4 {
		t.Fatalf("after a pause %v, %v; want the burst 4", got, err)
	}
	got, wait, err := st.TakeTokens(ctx, "k", 1, 4, 0.001)
	if err != nil || got != 0 || wait < 100*time.Second {
		t.Fatalf("empty: %v, %v, %v; want none and a wait of ~1000 s", got, wait, err)
	}
	if err := st.GiveTokens(ctx, "k", 100, 4); err != nil {
		t.Fatal(err)
	}
	if got, _, _ = st.TakeTokens(ctx, "k", 10, 4, 0.001); got != 4 {
		t.Errorf("after giving back 100: %v, want at most the burst 4", got)
	}
}
