package ratelimit

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"5/s": 5, "100/m": 100.0 / 60, "1000/h": 1000.0 / 3600, " 2 / minute ": 2.0 / 60, "20/10s": 2, "3/1m30s": 3.0 / 90} {
		got, _, err := ParseRate(in)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "0/s", "-1/s", "5/d", "x/s", "1.5/s", "5/0s", "5/-1s"} {
		if _, _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

func TestParseRules(t *testing.T) {
	rules, err := ParseRules([]byte(`[{"principal": "ci-bot", "tools": "github.*", "rate": "100/m", "burst": 10, "max_concurrent": 4},
		{"name": "slow", "manuals": "demo", "max_concurrent": 1}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].Burst != 10 || rules[0].Principal != "ci-bot" || rules[1].Name != "slow" {
		t.Errorf("rules %+v", rules)
	}
	bad := map[string]string{
		`{}`:                                  "must be an array",
		`[1]`:                                 "rate_limits[0]: must be an object",
		`[{"tools": "x"}]`:                    `rate_limits[0]: needs a "rate"`,
		`[{"rate": "5/d"}]`:                   "the period must be s, m, h or a duration",
		`[{"rate": "5/s", "burts": 3}]`:       `unknown field "burts" (did you mean "burst"?)`,
		`[{"rate": "5/s", "burst": -1}]`:      "burst must be a positive integer",
		`[{"max_concurrent": 2, "burst": 1}]`: "burst needs a rate",
		`[{"max_concurrent": -2}]`:            "max_concurrent must be a positive integer",
		`[{"rate": "5/s", "burst": "ten"}]`:   "rate_limits[0].burst: must be an integer",
		`[{"rate": "5/s", "name": "a b"}]`:    `name "a b" must be`,
		`[{"rate": "5/s", "name": "x"}, {"rate": "1/s", "name": "x"}]`: `rate_limits[1]: name "x" is also the name of rate_limits[0]`,
		`[{"rate": "5/s"}, {"rate": "1/s", "name": "0"}]`:              `rate_limits[1]: name "0"`,
	}
	for in, want := range bad {
		_, err := ParseRules([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRules(%s) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestMatch(t *testing.T) {
	cases := []struct {
		p, s string
		want bool
	}{
		{"", "anything", true}, {"*", "", true}, {"github.*", "github.repos_get", true},
		{"github.*", "github", false}, {"github.*", "gitlab.x", false}, {"*.get_*", "a.b.get_c", true},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"exact", "exact", true}, {"exact", "exactly", false},
		{"*x*y*", "aaxbbycc", true}, {"*x*y*", "aaybbxcc", false}, {"utcpd://m.s/*", "utcpd://m.s/file:///a", true},
	}
	for _, c := range cases {
		if got := match(c.p, c.s); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Unix(1_000_000, 0)} }

func mustNew(t *testing.T, rules []Rule, opts Options) *Limiter {
	t.Helper()
	l, err := New(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRateBucket(t *testing.T) {
	c := newClock()
	l := mustNew(t, []Rule{{Tools: "github.*", Rate: "5/s"}}, Options{Now: c.now})
	ctx := t.Context()
	for i := range 5 {
		if _, err := l.Acquire(ctx, "", "github", "github.get"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := l.Acquire(ctx, "", "github", "github.get")
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeRateLimited {
		t.Fatalf("sixth call: %v, want rate_limited", err)
	}
	if ue.Details["retry_after_seconds"] != 1 || ue.Details["rule"] != "0" || ue.Details["limit"] != "rate" ||
		!strings.HasPrefix(ue.Message, "rate limited: retry after 1 s") {
		t.Errorf("refusal %q %v", ue.Message, ue.Details)
	}
	// Other tools are not limited.
	for range 10 {
		if _, err := l.Acquire(ctx, "", "other", "other.x"); err != nil {
			t.Fatal(err)
		}
	}
	c.add(200 * time.Millisecond) // one token back
	if _, err := l.Acquire(ctx, "", "github", "github.get"); err != nil {
		t.Errorf("after 200ms: %v", err)
	}
	if _, err := l.Acquire(ctx, "", "github", "github.get"); err == nil {
		t.Error("the refilled token was spent twice")
	}
	c.add(time.Hour) // full, never beyond the burst
	n := 0
	for ; n < 100; n++ {
		if _, err := l.Acquire(ctx, "", "github", "github.get"); err != nil {
			break
		}
	}
	if n != 5 {
		t.Errorf("after an hour %d calls admitted, want the burst 5", n)
	}
	if s := l.Stats(); s[0].RefusedRate != 3 {
		t.Errorf("stats %+v", s)
	}
}

func TestRetryAfterRoundsUp(t *testing.T) {
	c := newClock()
	l := mustNew(t, []Rule{{Rate: "1/m", Burst: 1}}, Options{Now: c.now})
	_, _ = l.Acquire(t.Context(), "", "m", "m.t")
	c.add(10 * time.Second)
	_, err := l.Acquire(t.Context(), "", "m", "m.t")
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Details["retry_after_seconds"] != 50 {
		t.Fatalf("%v", err)
	}
	c.add(49*time.Second + 500*time.Millisecond)
	_, err = l.Acquire(t.Context(), "", "m", "m.t")
	if !errors.As(err, &ue) || ue.Details["retry_after_seconds"] != 1 {
		t.Fatalf("%v, want retry after 1 (0.5 s rounded up)", err)
	}
}

func TestPrincipalAndManualMatch(t *testing.T) {
	l := mustNew(t, []Rule{{Principal: "ci-bot", Manuals: "g*h*", Rate: "1/h"}}, Options{})
	ctx := t.Context()
	if _, err := l.Acquire(ctx, "ci-bot", "github", "github.a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, "ci-bot", "ghe", "ghe.b"); utcp.CodeOf(err) != utcp.CodeRateLimited {
		t.Errorf("same rule, other manual: %v", err)
	}
	if _, err := l.Acquire(ctx, "key:0123abcd", "github", "github.a"); err != nil {
		t.Errorf("another principal: %v", err)
	}
	if _, err := l.Acquire(ctx, "ci-bot", "gitlab", "gitlab.a"); err != nil {
		t.Errorf("another manual: %v", err)
	}
}

func TestMaxConcurrent(t *testing.T) {
	l := mustNew(t, []Rule{{Name: "slow", Tools: "demo.sleep", MaxConcurrent: 2}}, Options{})
	ctx := t.Context()
	a, err := l.Acquire(ctx, "", "demo", "demo.sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "", "demo", "demo.sleep")
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, "", "demo", "demo.sleep")
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeRateLimited || ue.Details["limit"] != "max_concurrent" || ue.Details["rule"] != "slow" {
		t.Fatalf("third: %v", err)
	}
	if s := l.Stats()[0]; s.InFlight != 2 || s.RefusedConcurrency != 1 {
		t.Errorf("stats %+v", s)
	}
	a.Release()
	c, err := l.Acquire(ctx, "", "demo", "demo.sleep")
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	b.Release()
	c.Release()
	if s := l.Stats()[0]; s.InFlight != 0 {
		t.Errorf("in flight %d after every release", s.InFlight)
	}
}

// A call refused by one rule gives back what the others took.
func TestRefusalGivesBack(t *testing.T) {
	c := newClock()
	l := mustNew(t, []Rule{
		{Name: "wide", Rate: "3/h", MaxConcurrent: 10},
		{Name: "narrow", Tools: "m.b", Rate: "1/h"},
	}, Options{Now: c.now})
	ctx := t.Context()
	if _, err := l.Acquire(ctx, "", "m", "m.b"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := l.Acquire(ctx, "", "m", "m.b"); utcp.CodeOf(err) != utcp.CodeRateLimited {
			t.Fatalf("%v", err)
		}
	}
	// "wide" lost only the admitted call's token: two left for m.a.
	for i := range 2 {
		if _, err := l.Acquire(ctx, "", "m", "m.a"); err != nil {
			t.Fatalf("m.a call %d: %v", i, err)
		}
	}
	if _, err := l.Acquire(ctx, "", "m", "m.a"); utcp.CodeOf(err) != utcp.CodeRateLimited {
		t.Fatalf("%v", err)
	}
	if s := l.Stats(); s[0].InFlight != 3 || s[1].RefusedRate != 5 || s[0].RefusedRate != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestNilLimiter(t *testing.T) {
	var l *Limiter
	tk, err := l.Acquire(t.Context(), "", "m", "m.t")
	if err != nil {
		t.Fatal(err)
	}
	tk.Release()
	if l.Len() != 0 || l.Stats() != nil || l.Close(t.Context()) != nil {
		t.Error("nil limiter")
	}
}

// Under -race: concurrent calls admit exactly the burst, and the caps
// are never exceeded.
func TestConcurrentAcquire(t *testing.T) {
	l := mustNew(t, []Rule{{Rate: "100/h"}, {Tools: "m.cap", MaxConcurrent: 3}}, Options{})
	var admitted, inCap, maxCap atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 10 {
				name := "m.t"
				if (i+j)%2 == 0 {
					name = "m.cap"
				}
				tk, err := l.Acquire(t.Context(), "", "m", name)
				if err != nil {
					continue
				}
				admitted.Add(1)
				if name == "m.cap" {
					n := inCap.Add(1)
					for {
						m := maxCap.Load()
						if n <= m || maxCap.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(time.Microsecond)
					inCap.Add(-1)
				}
				tk.Release()
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 100 {
		t.Errorf("admitted %d, want the burst 100", admitted.Load())
	}
	if maxCap.Load() > 3 {
		t.Errorf("%d calls in flight under a cap of 3", maxCap.Load())
	}
}

// memShared is a SharedStore in memory that counts its queries.
type memShared struct {
	mu      sync.Mutex
	tokens  map[string]float64
	last    map[string]time.Time
	now     func() time.Time
	queries atomic.Int64
	fail    atomic.Bool
}

func newMemShared(now func() time.Time) *memShared {
	return &memShared{tokens: map[string]float64{}, last: map[string]time.Time{}, now: now}
}

func (m *memShared) TakeTokens(_ context.Context, key string, want, burst, rate float64) (float64, time.Duration, error) {
	m.queries.Add(1)
	if m.fail.Load() {
		return 0, 0, errors.New("store down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	tok, ok := m.tokens[key]
	if !ok {
		tok = burst
	} else {
		tok = math.Min(burst, tok+now.Sub(m.last[key]).Seconds()*rate)
	}
	m.last[key] = now
	got := math.Min(want, math.Floor(tok))
	m.tokens[key] = tok - got
	if got == 0 {
		return 0, time.Duration((1 - tok) / rate * float64(time.Second)), nil
	}
	return got, 0, nil
}

func (m *memShared) GiveTokens(_ context.Context, key string, n, burst float64) error {
	m.queries.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[key] = math.Min(burst, m.tokens[key]+n)
	return nil
}

func TestSharedLeases(t *testing.T) {
	c := newClock()
	st := newMemShared(c.now)
	rules := []Rule{{Rate: "40/h"}}
	a := mustNew(t, rules, Options{Shared: st, Now: c.now})
	b := mustNew(t, rules, Options{Shared: st, Now: c.now})
	admitted := 0
	for i := range 100 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if _, err := l.Acquire(t.Context(), "", "m", "m.t"); err == nil {
			admitted++
		}
	}
	if admitted != 40 {
		t.Errorf("admitted %d, want 40 (no time passed: the shared bucket's burst)", admitted)
	}
	// Share is 5: 8 leases, then one empty answer per replica (the
	// refusals after it ask no more until a token is due).
	if q := st.queries.Load(); q != 8+2 {
		t.Errorf("%d queries", q)
	}
	st.queries.Store(0)
	// With a share in hand, calls need no query.
	c.add(time.Hour)
	for range 5 {
		if _, err := a.Acquire(t.Context(), "", "m", "m.t"); err != nil {
			t.Fatal(err)
		}
	}
	if q := st.queries.Load(); q != 1 {
		t.Errorf("5 calls from one share made %d queries, want 1", q)
	}
	// A leased share goes back at Close.
	if _, err := a.Acquire(t.Context(), "", "m", "m.t"); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	key := a.limits[0].key
	if got := st.tokens[key]; got != 40-10+4 {
		t.Errorf("bucket %v after Close, want 34", got)
	}
}

func TestSharedStoreDown(t *testing.T) {
	c := newClock()
	st := newMemShared(c.now)
	st.fail.Store(true)
	l := mustNew(t, []Rule{{Rate: "16/h"}}, Options{Shared: st, Now: c.now})
	n := 0
	for range 20 {
		if _, err := l.Acquire(t.Context(), "", "m", "m.t"); err == nil {
			n++
		}
	}
	if n != 2 {
		t.Errorf("store down: %d admitted, want one share (2) from the local bucket", n)
	}
	if q := st.queries.Load(); q != 1 {
		t.Errorf("%d queries while down, want 1 until the retry", q)
	}
	st.fail.Store(false)
	c.add(localRetry)
	if _, err := l.Acquire(t.Context(), "", "m", "m.t"); err != nil {
		t.Errorf("store back: %v", err)
	}
	if q := st.queries.Load(); q != 2 {
		t.Errorf("%d queries, want the store asked again", q)
	}
}
