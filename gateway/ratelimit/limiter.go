package ratelimit

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// SharedStore is a token bucket per key shared by replicas (store/postgres
// implements it). Take and Give are called once per leased share, never
// per call.
type SharedStore interface {
	// TakeTokens refills the bucket key (capacity burst, rate tokens a
	// second; created full) and takes up to want whole tokens from it. It
	// returns how many it took, and, when that is 0, how long until one
	// token is there.
	TakeTokens(ctx context.Context, key string, want, burst, rate float64) (granted float64, wait time.Duration, err error)
	// GiveTokens puts n unused tokens back into the bucket key, never
	// beyond burst.
	GiveTokens(ctx context.Context, key string, n, burst float64) error
}

// Options configure a Limiter. Every field is optional.
type Options struct {
	// Shared, when set, holds the rate buckets (replicas on PostgreSQL):
	// each rule's tokens are leased from it Share(burst) at a time and
	// spent locally. When it fails, the rule falls back to a local
	// bucket until it answers again (each replica then admits up to the
	// whole rate on its own).
	Shared SharedStore
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives store failures; default discards.
	Logger *slog.Logger
}

// Limiter enforces a list of rules. Create it with New.
type Limiter struct {
	limits []*limit
	opts   Options
	log    *slog.Logger
	now    func() time.Time

	// cache maps principal, manual and name to the matching limits.
	cache  sync.Map // cacheKey → []*limit
	cached atomic.Int64
}

// maxCached bounds the match cache; beyond it matches are computed per
// call (a cost of len(rules) glob matches).
const maxCached = 1 << 16

type cacheKey struct{ principal, manual, name string }

// limit is the state of one rule.
type limit struct {
	rule  Rule
	label string
	rate  float64 // tokens a second; 0: no rate
	burst float64
	key   string // the shared bucket's key

	mu      sync.Mutex
	tokens  float64   // local bucket, or the leased balance when shared
	last    time.Time // local bucket's last refill
	local   bool      // the shared store failed: use the local bucket
	localAt time.Time // when it failed
	// emptyUntil is when the shared bucket, found empty, has a token
	// again.
	emptyUntil time.Time

	inFlight atomic.Int64
	refused  [2]atomic.Uint64 // by kind: 0 rate, 1 concurrency
}

// New returns a Limiter for rules, which must be valid (Validate).
func New(rules []Rule, opts Options) (*Limiter, error) {
	if err := Validate(rules); err != nil {
		return nil, err
	}
	l := &Limiter{opts: opts, now: opts.Now, log: opts.Logger}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	start := l.now()
	for i, r := range rules {
		lm := &limit{rule: r, label: r.label(i), last: start}
		if r.Rate != "" {
			lm.rate, _, _ = ParseRate(r.Rate)
			lm.burst = r.burst()
			lm.key = lm.label + "|" + r.Rate + "|" + formatFloat(lm.burst)
			if opts.Shared == nil {
				lm.tokens = lm.burst
			}
		}
		l.limits = append(l.limits, lm)
	}
	return l, nil
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Len is the number of rules.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	return len(l.limits)
}

// Ticket is an admitted call's hold on the concurrency caps it counts
// against. Release it once when the call ends.
type Ticket struct {
	held []*limit
}

// Release gives the ticket's concurrency slots back. It is safe on the
// zero Ticket and idempotent only in the sense that a released ticket's
// copy must not be released again.
func (t Ticket) Release() {
	for _, lm := range t.held {
		if lm.rule.MaxConcurrent > 0 {
			lm.inFlight.Add(-1)
		}
	}
}

// Acquire admits or refuses one call of name (a qualified tool name,
// prompt name or resource URI) of manual by principal. Admitted, it
// returns a Ticket to release when the call ends. Refused, the error is
// a *utcp.Error of code rate_limited whose message says "rate limited:
// retry after N s" and whose details hold retry_after_seconds (an
// integer, rounded up, at least 1), rule (the rule's label) and limit
// ("rate" or "max_concurrent"). A nil Limiter admits everything.
func (l *Limiter) Acquire(ctx context.Context, principal, manual, name string) (Ticket, error) {
	if l == nil || len(l.limits) == 0 {
		return Ticket{}, nil
	}
	ms := l.match(principal, manual, name)
	if len(ms) == 0 {
		return Ticket{}, nil
	}
	// Concurrency first: it is given back exactly on a later refusal.
	for i, lm := range ms {
		if lm.rule.MaxConcurrent > 0 && lm.inFlight.Add(1) > int64(lm.rule.MaxConcurrent) {
			lm.inFlight.Add(-1)
			Ticket{held: ms[:i]}.Release()
			lm.refused[1].Add(1)
			return Ticket{}, refusal(lm, "max_concurrent", time.Second,
				"%d calls in flight is its max_concurrent", lm.rule.MaxConcurrent)
		}
	}
	for i, lm := range ms {
		if lm.rate == 0 {
			continue
		}
		if wait, ok := l.take(ctx, lm); !ok {
			for _, prev := range ms[:i] {
				if prev.rate != 0 {
					l.refund(prev)
				}
			}
			Ticket{held: ms}.Release()
			lm.refused[0].Add(1)
			return Ticket{}, refusal(lm, "rate", wait, "its rate is %s", lm.rule.Rate)
		}
	}
	return Ticket{held: ms}, nil
}

func refusal(lm *limit, kind string, wait time.Duration, format string, args ...any) *utcp.Error {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	e := utcp.NewError(utcp.CodeRateLimited, "rate limited: retry after %d s (rate limit %q: "+format+")",
		append([]any{secs, lm.label}, args...)...)
	return e.WithDetail("retry_after_seconds", secs).WithDetail("rule", lm.label).WithDetail("limit", kind)
}

// match returns the limits whose rules match the call, cached.
func (l *Limiter) match(principal, manual, name string) []*limit {
	k := cacheKey{principal, manual, name}
	if v, ok := l.cache.Load(k); ok {
		return v.([]*limit)
	}
	var ms []*limit
	for _, lm := range l.limits {
		r := lm.rule
		if match(r.Principal, principal) && match(r.Tools, name) && match(r.Manuals, manual) {
			ms = append(ms, lm)
		}
	}
	if l.cached.Load() < maxCached {
		if _, loaded := l.cache.LoadOrStore(k, ms); !loaded {
			l.cached.Add(1)
		}
	}
	return ms
}

// take takes one token of lm's bucket, or reports how long until one is
// there.
func (l *Limiter) take(ctx context.Context, lm *limit) (time.Duration, bool) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	now := l.now()
	if l.opts.Shared != nil && (!lm.local || now.Sub(lm.localAt) >= localRetry) {
		if lm.local {
			// Try the shared store again; the local tokens lapse.
			lm.local, lm.tokens = false, 0
		}
		return l.takeShared(ctx, lm, now)
	}
	if el := now.Sub(lm.last).Seconds(); el > 0 {
		lm.tokens = math.Min(lm.burst, lm.tokens+el*lm.rate)
	}
	lm.last = now
	if lm.tokens >= 1 {
		lm.tokens--
		return 0, true
	}
	return time.Duration((1 - lm.tokens) / lm.rate * float64(time.Second)), false
}

// localRetry is how long a rule stays on its local bucket after the
// shared store failed.
const localRetry = 5 * time.Second

// takeShared spends the leased balance, leasing a new share when it is
// spent. lm.mu is held.
func (l *Limiter) takeShared(ctx context.Context, lm *limit, now time.Time) (time.Duration, bool) {
	if lm.tokens >= 1 {
		lm.tokens--
		return 0, true
	}
	if now.Before(lm.emptyUntil) {
		// The shared bucket was empty: refuse without asking again, so
		// that calls over the limit cost no query each.
		return lm.emptyUntil.Sub(now), false
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	got, wait, err := l.opts.Shared.TakeTokens(ctx, lm.key, Share(lm.burst), lm.burst, lm.rate)
	if err != nil {
		l.log.Warn("rate limit: the shared store failed; limiting on this replica alone for now", "rule", lm.label, "err", err)
		// A full local bucket would admit a whole burst on every
		// failure: it starts with one share.
		lm.local, lm.localAt, lm.last = true, now, now
		lm.tokens = Share(lm.burst) - 1
		return 0, true
	}
	lm.tokens += got
	if lm.tokens >= 1 {
		lm.tokens--
		return 0, true
	}
	lm.emptyUntil = now.Add(wait)
	return wait, false
}

// refund gives back a token taken by a call that another rule refused.
func (l *Limiter) refund(lm *limit) {
	lm.mu.Lock()
	lm.tokens = math.Min(lm.burst, lm.tokens+1)
	lm.mu.Unlock()
}

// Close returns the unused leased tokens to the shared store (at
// shutdown). The Limiter keeps working, leasing again when needed.
func (l *Limiter) Close(ctx context.Context) error {
	if l == nil || l.opts.Shared == nil {
		return nil
	}
	var first error
	for _, lm := range l.limits {
		if lm.rate == 0 {
			continue
		}
		lm.mu.Lock()
		n := math.Floor(lm.tokens)
		if n >= 1 && !lm.local {
			if err := l.opts.Shared.GiveTokens(ctx, lm.key, n, lm.burst); err != nil {
				if first == nil {
					first = err
				}
			} else {
				lm.tokens -= n
			}
		}
		lm.mu.Unlock()
	}
	return first
}

// Stat is one rule's counters, for metrics.
type Stat struct {
	// Rule is the rule's label (its name, else its index).
	Rule string
	// RefusedRate and RefusedConcurrency count the calls refused by the
	// rule's rate and by its max_concurrent.
	RefusedRate, RefusedConcurrency uint64
	// InFlight is the matching calls in flight (0 without a cap).
	InFlight int64
	// MaxConcurrent is the rule's cap, 0 for none.
	MaxConcurrent int
}

// Stats returns every rule's counters, in rule order.
func (l *Limiter) Stats() []Stat {
	if l == nil {
		return nil
	}
	out := make([]Stat, len(l.limits))
	for i, lm := range l.limits {
		out[i] = Stat{Rule: lm.label, RefusedRate: lm.refused[0].Load(), RefusedConcurrency: lm.refused[1].Load(),
			InFlight: lm.inFlight.Load(), MaxConcurrent: lm.rule.MaxConcurrent}
	}
	return out
}
