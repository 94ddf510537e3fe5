package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/store/internal/rowscan"
	"github.com/utcpd/utcpd/utcp"
)

// Reviews is the review.Store of a Store, in its reviews table. Get it
// with Store.Reviews; it is closed with its Store.
type Reviews struct{ s *Store }

var _ review.Store = (*Reviews)(nil)

// Reviews returns the store's review.Store.
func (s *Store) Reviews() *Reviews { return &Reviews{s: s} }

// finishedAt is the finished_at column of r: when it reached a final
// status, else when it was created.
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
	return rowscan.Review("sqlite", id, data)
}

// Put creates r in one durable transaction.
func (v *Reviews) Put(ctx context.Context, r *review.Review) error {
	s := v.s
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := review.Check(r); err != nil {
		return err
	}
	data, err := encodeReview(r)
	if err != nil {
		return err
	}
	res, err := s.wdb().ExecContext(ctx, `INSERT INTO reviews (id, status, created_at, finished_at, data) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, r.ID, string(r.Status), r.Created.UnixNano(), finishedAt(r), data)
	if err != nil {
		return s.wwrap(ctx, "put review "+r.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.wrap(ctx, "put review "+r.ID, err)
	} else if n == 0 {
		return fmt.Errorf("review %s: %w", r.ID, review.ErrExists)
	}
	s.wrote()
	return nil
}

// Get returns a fresh copy of the review called id.
func (v *Reviews) Get(ctx context.Context, id string) (*review.Review, error) {
	s := v.s
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	var data []byte
	err := s.reader.QueryRowContext(ctx, `SELECT data FROM reviews WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
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
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	q := `SELECT id, data FROM reviews`
	args := make([]any, 0, len(statuses))
	if len(statuses) > 0 {
		q += ` WHERE status IN (?` + strings.Repeat(`, ?`, len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	rows, err := s.reader.QueryContext(ctx, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, s.wrap(ctx, "list reviews", err)
	}
	defer rows.Close()
	return rowscan.Collect(rows, decodeReview, func(err error) error { return s.wrap(ctx, "list reviews", err) })
}

// Update replaces the review r.ID with r if its stored status is from,
// in one statement on the single writer connection: a compare-and-swap.
func (v *Reviews) Update(ctx context.Context, r *review.Review, from review.Status) error {
	s := v.s
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := review.Check(r); err != nil {
		return err
	}
	data, err := encodeReview(r)
	if err != nil {
		return err
	}
	res, err := s.wdb().ExecContext(ctx, `UPDATE reviews SET status = ?, created_at = ?, finished_at = ?, data = ? WHERE id = ? AND status = ?`,
		string(r.Status), r.Created.UnixNano(), finishedAt(r), data, r.ID, string(from))
	if err != nil {
		return s.wwrap(ctx, "update review "+r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return s.wrap(ctx, "update review "+r.ID, err)
	}
	if n == 1 {
		s.wrote()
		return nil
	}
	var cur string
	err = s.wdb().QueryRowContext(ctx, `SELECT status FROM reviews WHERE id = ?`, r.ID).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
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
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	defer s.use()()
	res, err := s.wdb().ExecContext(ctx, `DELETE FROM reviews WHERE status IN (?, ?, ?, ?) AND finished_at < ?`,
		string(review.StatusDenied), string(review.StatusExpired), string(review.StatusDone), string(review.StatusInterrupted),
		before.UnixNano())
	if err != nil {
		return 0, s.wwrap(ctx, "prune reviews", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.wrap(ctx, "prune reviews", err)
	}
	if n > 0 {
		s.wrote()
	}
	return int(n), nil
}
