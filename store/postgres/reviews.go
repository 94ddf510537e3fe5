package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/store/internal/rowscan"
	"github.com/utcpd/utcpd/utcp"
)

// Reviews is the review.Store of a Store, in its reviews table, shared by
// every replica: a review created on one replica can be decided through
// any other, and every transition is a compare-and-swap on the status in
// one statement, so it happens once whichever replicas race. Every write
// notifies the other replicas (NOTIFY utcpd_reviews, payload: the writing
// Store's instance ID and the review ID), which Watch reports. Get it with
// Store.Reviews; it is closed with its Store.
type Reviews struct{ s *Store }

var (
	_ review.Store   = (*Reviews)(nil)
	_ review.Watcher = (*Reviews)(nil)
)

// Reviews returns the store's review.Store.
func (s *Store) Reviews() *Reviews { return &Reviews{s: s} }

func finishedAt(r *review.Review) int64 {
	if !r.Finished.IsZero() {
		return r.Finished.UnixNano()
	}
	return r.Created.UnixNano()
}

func encodeReview(r *review.Review) ([]byte, error) {
	if r.Created.Before(minTime) || r.Created.After(maxTime) || r.Finished.Before(minTime) && !r.Finished.IsZero() || r.Finished.After(maxTime) {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "review %s: a time is outside the storable range", r.ID)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidRequest, "review %s: encoding: %w", r.ID, err)
	}
	return b, nil
}

func decodeReview(id string, data []byte) (*review.Review, error) {
	return rowscan.Review("postgres", id, data)
}

const notifyReview = `pg_notify('` + channelReviews + `', $%d::text || ' ' || id)`

// Put creates r, committed when Put returns nil.
func (v *Reviews) Put(ctx context.Context, r *review.Review) error {
	s := v.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := review.Check(r); err != nil {
		return err
	}
	data, err := encodeReview(r)
	if err != nil {
		return err
	}
	var ignored string
	err = s.pool.QueryRow(octx, `WITH ins AS (INSERT INTO reviews (id, status, created_at, finished_at, data) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING RETURNING id)
		SELECT `+fmt.Sprintf(notifyReview, 6)+` FROM ins`,
		r.ID, string(r.Status), r.Created.UnixNano(), finishedAt(r), data, s.instance).Scan(&ignored)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("review %s: %w", r.ID, review.ErrExists)
	}
	if err != nil {
		return s.wrap(ctx, "put review "+r.ID, err)
	}
	return nil
}

// Get returns a fresh copy of the review called id.
func (v *Reviews) Get(ctx context.Context, id string) (*review.Review, error) {
	s := v.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var data []byte
	err = s.pool.QueryRow(octx, `SELECT data FROM reviews WHERE id = $1`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, review.NotFound(id)
	}
	if err != nil {
		return nil, s.wrap(ctx, "get review "+id, err)
	}
	return decodeReview(id, data)
}

// List returns the reviews in the given statuses (all when none), oldest
// first.
func (v *Reviews) List(ctx context.Context, statuses ...review.Status) ([]*review.Review, error) {
	s := v.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	q := `SELECT id, data FROM reviews`
	var args []any
	if len(statuses) > 0 {
		st := make([]string, len(statuses))
		for i, x := range statuses {
			st[i] = string(x)
		}
		q += ` WHERE status = ANY($1)`
		args = append(args, st)
	}
	rows, err := s.pool.Query(octx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, s.wrap(ctx, "list reviews", err)
	}
	defer rows.Close()
	return rowscan.Collect(rows, decodeReview, func(err error) error { return s.wrap(ctx, "list reviews", err) })
}

// Update replaces the review r.ID with r if its stored status is from, in
// one statement: a compare-and-swap that one replica wins.
func (v *Reviews) Update(ctx context.Context, r *review.Review, from review.Status) error {
	s := v.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := review.Check(r); err != nil {
		return err
	}
	data, err := encodeReview(r)
	if err != nil {
		return err
	}
	var ignored string
	err = s.pool.QueryRow(octx, `WITH up AS (UPDATE reviews SET status = $1, created_at = $2, finished_at = $3, data = $4
		WHERE id = $5 AND status = $6 RETURNING id)
		SELECT `+fmt.Sprintf(notifyReview, 7)+` FROM up`,
		string(r.Status), r.Created.UnixNano(), finishedAt(r), data, r.ID, string(from), s.instance).Scan(&ignored)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return s.wrap(ctx, "update review "+r.ID, err)
	}
	var cur string
	err = s.pool.QueryRow(octx, `SELECT status FROM reviews WHERE id = $1`, r.ID).Scan(&cur)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return review.NotFound(r.ID)
	case err != nil:
		return s.wrap(ctx, "update review "+r.ID, err)
	}
	return fmt.Errorf("review %s is %s, not %s: %w", r.ID, cur, from, review.ErrConflict)
}

// Prune deletes the reviews in a final status that finished before
// before.
func (v *Reviews) Prune(ctx context.Context, before time.Time) (int, error) {
	s := v.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if before.Before(minTime) {
		return 0, nil
	}
	if before.After(maxTime) {
		before = maxTime
	}
	tag, err := s.pool.Exec(octx, `DELETE FROM reviews WHERE status = ANY($1) AND finished_at < $2`,
		[]string{string(review.StatusDenied), string(review.StatusExpired), string(review.StatusDone), string(review.StatusInterrupted)},
		before.UnixNano())
	if err != nil {
		return 0, s.wrap(ctx, "prune reviews", err)
	}
	return int(tag.RowsAffected()), nil
}

// Watch reports the IDs of the reviews other replicas wrote, so that a
// caller waiting on this replica learns at once that its review was
// decided elsewhere. An empty ID means any review may have changed
// (notifications were lost while the database was away). IDs not yet
// received are merged. The channel is closed when ctx ends or the Store
// is closed.
func (v *Reviews) Watch(ctx context.Context) <-chan string {
	return watchSet(v.s, ctx, v.s.reviewWs, func(it item) (string, bool) { return it.key, true })
}

// reportReview hands a review ID to every review watcher.
func (s *Store) reportReview(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.reviewWs {
		w.add(id, "")
	}
}
