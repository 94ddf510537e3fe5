package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/store/internal/rowscan"
	"github.com/utcpd/utcpd/utcp"
)

// Audit is the audit.Store of a Store, in its audit table: every
// replica's records in one table, so the audit listing of any replica
// shows the calls of all. IDs come from one sequence: newer records of any
// replica have larger IDs. Get it with Store.Audit; it is closed with its
// Store.
type Audit struct{ s *Store }

var (
	_ audit.Store   = (*Audit)(nil)
	_ audit.Trimmer = (*Audit)(nil)
)

// Audit returns the store's audit.Store.
func (s *Store) Audit() *Audit { return &Audit{s: s} }

// pruneBatch is how many rows one DELETE of Prune removes.
const pruneBatch = 5000

// Append stores recs in one transaction, committed when Append returns
// nil.
func (a *Audit) Append(ctx context.Context, recs []audit.Record) error {
	s := a.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if len(recs) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for i := range recs {
		r := &recs[i]
		if err := audit.Check(r); err != nil {
			return err
		}
		if r.Time.Before(minTime) || r.Time.After(maxTime) {
			return utcp.NewError(utcp.CodeInvalidRequest, "audit: record time %s is outside the storable range", r.Time)
		}
		c := *r
		c.ID = 0
		data, err := json.Marshal(&c)
		if err != nil {
			return utcp.Errorf(utcp.CodeInvalidRequest, "audit: encoding a record: %w", err)
		}
		batch.Queue(`INSERT INTO audit (time, tool, qualified, decision, outcome, data) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.Time.UnixNano(), r.Tool, r.Qualified, r.Decision, r.Outcome, data)
	}
	err = pgx.BeginFunc(octx, s.pool, func(tx pgx.Tx) error {
		return tx.SendBatch(octx, batch).Close()
	})
	if err != nil {
		return s.wrap(ctx, "append audit records", err)
	}
	return nil
}

// Query returns the selected records, newest first.
func (a *Audit) Query(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	s := a.s
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	sqlq := `SELECT id, data FROM audit WHERE true`
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Tool != "" {
		p := arg(q.Tool)
		sqlq += ` AND (tool = ` + p + ` OR qualified = ` + p + `)`
	}
	if q.Decision != "" {
		sqlq += ` AND decision = ` + arg(q.Decision)
	}
	if q.Outcome != "" {
		sqlq += ` AND outcome = ` + arg(q.Outcome)
	}
	if !q.Since.IsZero() {
		since := q.Since
		if since.Before(minTime) {
			since = minTime
		}
		sqlq += ` AND time >= ` + arg(since.UnixNano())
	}
	if q.Before > 0 {
		sqlq += ` AND id < ` + arg(q.Before)
	}
	sqlq += ` ORDER BY id DESC LIMIT ` + strconv.Itoa(q.EffectiveLimit())
	rows, err := s.pool.Query(octx, sqlq, args...)
	if err != nil {
		return nil, s.wrap(ctx, "query audit records", err)
	}
	defer rows.Close()
	return rowscan.Collect(rows, func(id int64, data []byte) (audit.Record, error) { return rowscan.Record("postgres", id, data) },
		func(err error) error { return s.wrap(ctx, "query audit records", err) })
}

// Prune deletes the records of calls that started before before, a batch
// at a time.
func (a *Audit) Prune(ctx context.Context, before time.Time) (int64, error) {
	s := a.s
	if _, cancel, err := s.op(ctx); err != nil {
		return 0, err
	} else {
		cancel()
	}
	if before.Before(minTime) {
		return 0, nil
	}
	if before.After(maxTime) {
		before = maxTime
	}
	var total int64
	for {
		octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		tag, err := s.pool.Exec(octx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE time < $1 ORDER BY time LIMIT $2)`,
			before.UnixNano(), pruneBatch)
		cancel()
		if err != nil {
			return total, s.wrap(ctx, "prune audit records", err)
		}
		n := tag.RowsAffected()
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// Trim deletes the oldest records beyond maxRows records and maxBytes of
// encoded records (the data column), a batch at a time. Every replica's
// records count: the limits are the table's.
func (a *Audit) Trim(ctx context.Context, maxRows, maxBytes int64) (int64, error) {
	s := a.s
	if _, cancel, err := s.op(ctx); err != nil {
		return 0, err
	} else {
		cancel()
	}
	var cut int64 // the records with id <= cut go
	find := func(q string, arg int64) error {
		octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		defer cancel()
		var id int64
		err := s.pool.QueryRow(octx, q, arg).Scan(&id)
		switch {
		case err == nil:
			cut = max(cut, id)
		case !errors.Is(err, pgx.ErrNoRows):
			return s.wrap(ctx, "trim audit records", err)
		}
		return nil
	}
	if maxRows > 0 {
		if err := find(`SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET $1`, maxRows); err != nil {
			return 0, err
		}
	}
	if maxBytes > 0 {
		if err := find(`SELECT id FROM (
			SELECT id, SUM(octet_length(data)) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS kept FROM audit
		) t WHERE kept > $1 ORDER BY id DESC LIMIT 1`, maxBytes); err != nil {
			return 0, err
		}
	}
	if cut == 0 {
		return 0, nil
	}
	var total int64
	for {
		octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
		tag, err := s.pool.Exec(octx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= $1 ORDER BY id LIMIT $2)`, cut, pruneBatch)
		cancel()
		if err != nil {
			return total, s.wrap(ctx, "trim audit records", err)
		}
		n := tag.RowsAffected()
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
