package gateway

import (
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff with jitter: the wait after the
// n-th consecutive failure (n ≥ 1) is drawn from [d/2, d), where d is
// Initial·2^(n-1) capped at Max ("equal jitter": it never drops below
// half the nominal wait, and replicas or manuals that failed together
// spread out).
type Backoff struct {
	// Initial is the nominal wait after the first failure (default 1 s).
	Initial time.Duration
	// Max caps the nominal wait (default 2 min).
	Max time.Duration
}

// DefaultBackoff is the Backoff of failed manuals' background retries.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 2 * time.Minute}

// withDefaults returns b with its zero fields set to DefaultBackoff's,
// and Max raised to Initial when below it.
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = DefaultBackoff.Initial
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoff.Max
	}
	b.Max = max(b.Max, b.Initial)
	return b
}

// Nominal returns the capped wait after failures consecutive failures,
// before jitter: Initial·2^(failures-1), at most Max (Initial for
// failures ≤ 1). Zero fields take DefaultBackoff's values.
func (b Backoff) Nominal(failures int) time.Duration {
	b = b.withDefaults()
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Delay returns the wait after failures consecutive failures: Nominal
// scaled into [Nominal/2, Nominal) by r, a number in [0, 1) (nil: a
// random one).
func (b Backoff) Delay(failures int, r func() float64) time.Duration {
	if r == nil {
		r = rand.Float64
	}
	d := b.Nominal(failures)
	f := min(max(r(), 0), 1)
	return d/2 + time.Duration(f*float64(d/2))
}
