package postgres

import (
	"context"
	"fmt"
	"time"
)

// TakeTokens leases up to want whole tokens from the shared token bucket
// key (capacity burst, refilled at rate tokens a second, created full),
// for gateway/ratelimit: one statement that refills the row by the
// database's clock, takes what it can and returns it, under the row's
// lock, so replicas leasing at once never take the same token. When it
// takes none, wait is how long until one token is there.
func (s *Store) TakeTokens(ctx context.Context, key string, want, burst, rate float64) (granted float64, wait time.Duration, err error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer cancel()
	var tokens float64
	// r is the refilled balance: the elapsed time never negative (a
	// statement that waited for the lock may have started earlier).
	err = s.pool.QueryRow(octx, `INSERT INTO rate_buckets AS b (key, tokens, granted, updated_at)
		VALUES ($1, $3::float8 - LEAST($2::float8, floor($3::float8)), LEAST($2::float8, floor($3::float8)), clock_timestamp())
		ON CONFLICT (key) DO UPDATE SET
			granted = LEAST($2::float8, floor(LEAST($3::float8, b.tokens + $4::float8 * GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - b.updated_at)::float8)))),
			tokens = LEAST($3::float8, b.tokens + $4::float8 * GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - b.updated_at)::float8))
				- LEAST($2::float8, floor(LEAST($3::float8, b.tokens + $4::float8 * GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - b.updated_at)::float8)))),
			updated_at = GREATEST(b.updated_at, clock_timestamp())
		RETURNING granted, tokens`, key, want, burst, rate).Scan(&granted, &tokens)
	if err != nil {
		return 0, 0, s.wrap(ctx, fmt.Sprintf("take rate limit tokens %q", key), err)
	}
	if granted < 1 && rate > 0 {
		wait = time.Duration((1 - tokens) / rate * float64(time.Second))
	}
	return granted, wait, nil
}

// GiveTokens puts n unused leased tokens back into the bucket key, never
// beyond burst (at shutdown).
func (s *Store) GiveTokens(ctx context.Context, key string, n, burst float64) error {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := s.pool.Exec(octx, `UPDATE rate_buckets SET tokens = LEAST($3::float8, tokens + $2::float8) WHERE key = $1`, key, n, burst); err != nil {
		return s.wrap(ctx, fmt.Sprintf("give back rate limit tokens %q", key), err)
	}
	return nil
}
