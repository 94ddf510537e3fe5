package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/store/internal/rowscan"
	"github.com/utcpd/utcpd/utcp"
)

// Audit is the audit.Store of a Store, in its audit table. Get it with
// Store.Audit; it is closed with its Store.
type Audit struct{ s *Store }

var (
	_ audit.Store   = (*Audit)(nil)
	_ audit.Trimmer = (*Audit)(nil)
)

// Audit returns the store's audit.Store.
func (s *Store) Audit() *Audit { return &Audit{s: s} }

// pruneBatch is how many rows one DELETE of Prune removes, so that a
// large prune never holds the write lock for long.
const pruneBatch = 5000

// appendRows is how many records one INSERT of Append writes at most
// (six parameters each, well below SQLite's limit of 32766).
const appendRows = 64

// insertAudit is the INSERT of n audit rows.
func insertAudit(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO audit (time, tool, qualified, decision, outcome, data) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?, ?, ?, ?, ?, ?)`)
	}
	return b.String()
}

// rowBuffers hold the encoded rows of an Append.
var rowBuffers = sync.Pool{New: func() any { return new([]byte) }}

// auditInserts are Append's INSERTs, prepared once on the writer pool:
// one for each power of two up to appendRows rows, so that a batch of any
// size is a few executions of statements already compiled (compiling a
// multi-row INSERT cost more than running it). A new writer pool (the
// probe reopened it) prepares them anew.
type auditInserts struct {
	mu    sync.Mutex
	db    *sql.DB
	stmts map[int]*sql.Stmt
}

// inserts returns the prepared INSERTs of db, by number of rows. Call it
// outside a transaction: the writer pool has one connection.
func (s *Store) inserts(ctx context.Context, db *sql.DB) (map[int]*sql.Stmt, error) {
	c := &s.auditIns
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == db {
		return c.stmts, nil
	}
	for _, st := range c.stmts {
		_ = st.Close() // of the pool replaced
	}
	c.db, c.stmts = nil, nil
	stmts := make(map[int]*sql.Stmt)
	for n := appendRows; n >= 1; n /= 2 {
		st, err := db.PrepareContext(ctx, insertAudit(n))
		if err != nil {
			for _, st := range stmts {
				_ = st.Close()
			}
			return nil, err
		}
		stmts[n] = st
	}
	c.db, c.stmts = db, stmts
	return stmts, nil
}

// Append stores recs in one durable transaction.
func (a *Audit) Append(ctx context.Context, recs []audit.Record) (err error) {
	s := a.s
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if len(recs) == 0 {
		return nil
	}
	// Every record's data in one buffer (ends[i] is where record i's
	// ends), encoded without reflection (audit.AppendJSON). The driver
	// copies what it binds, so the buffer is reused once Append returns.
	bp := rowBuffers.Get().(*[]byte)
	defer func() { rowBuffers.Put(bp) }()
	data := (*bp)[:0]
	ends := make([]int, len(recs))
	for i := range recs {
		r := &recs[i]
		if err := audit.Check(r); err != nil {
			return err
		}
		if r.Time.Before(minTime) || r.Time.After(maxTime) {
			return utcp.NewError(utcp.CodeInvalidRequest, "audit: record time %s is outside the storable range", r.Time)
		}
		c := *r
		c.ID = 0 // the store assigns it: not part of the data
		data, err = audit.AppendJSON(data, &c)
		if err != nil {
			return utcp.Errorf(utcp.CodeInvalidRequest, "audit: encoding a record: %w", err)
		}
		ends[i] = len(data)
	}
	*bp = data
	db := s.wdb()
	stmts, err := s.inserts(ctx, db)
	if err != nil {
		return s.wwrap(ctx, "append audit records", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return s.wwrap(ctx, "append audit records", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// Rows go in by up to appendRows at a time, one multi-row INSERT each
	// (one statement execution instead of one per record), in order, so
	// their ids ascend as the records came.
	args := make([]any, 0, 6*min(appendRows, len(recs)))
	for start := 0; start < len(recs); {
		n := appendRows
		for n > len(recs)-start {
			n /= 2
		}
		stmt := tx.StmtContext(ctx, stmts[n])
		args = args[:0]
		for i := start; i < start+n; i++ {
			r := &recs[i]
			from := 0
			if i > 0 {
				from = ends[i-1]
			}
			args = append(args, r.Time.UnixNano(), r.Tool, r.Qualified, r.Decision, r.Outcome, data[from:ends[i]:ends[i]])
		}
		_, err = stmt.ExecContext(ctx, args...)
		_ = stmt.Close() // the transaction's handle; the prepared statement stays
		if err != nil {
			return s.wwrap(ctx, "append audit records", err)
		}
		start += n
	}
	if err = tx.Commit(); err != nil {
		return s.wwrap(ctx, "append audit records", err)
	}
	s.wrote()
	return nil
}

// Query returns the selected records, newest first.
func (a *Audit) Query(ctx context.Context, q audit.Query) ([]audit.Record, error) {
	s := a.s
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	sqlq, args := auditQuery(q)
	rows, err := s.reader.QueryContext(ctx, sqlq, args...)
	if err != nil {
		return nil, s.wrap(ctx, "query audit records", err)
	}
	defer rows.Close()
	return rowscan.Collect(rows, func(id int64, data []byte) (audit.Record, error) { return rowscan.Record("sqlite", id, data) },
		func(err error) error { return s.wrap(ctx, "query audit records", err) })
}

// auditQuery is the SELECT of Query and its arguments.
func auditQuery(q audit.Query) (string, []any) {
	sqlq := `SELECT id, data FROM audit WHERE 1 = 1`
	var args []any
	if q.Tool != "" {
		// tool = ? OR qualified = ?, in the terms of the two indexes:
		// audit_tool holds only the rows whose tool is not their
		// qualified name (migration 6), and a row whose tool is its
		// qualified name is found by qualified.
		sqlq += ` AND (qualified = ? OR (tool = ? AND tool <> qualified))`
		args = append(args, q.Tool, q.Tool)
	}
	if q.Decision != "" {
		sqlq += ` AND decision = ?`
		args = append(args, q.Decision)
	}
	if q.Outcome != "" {
		sqlq += ` AND outcome = ?`
		args = append(args, q.Outcome)
	}
	if !q.Since.IsZero() {
		sqlq += ` AND time >= ?`
		since := q.Since
		if since.Before(minTime) {
			since = minTime
		}
		args = append(args, since.UnixNano())
	}
	if q.Before > 0 {
		sqlq += ` AND id < ?`
		args = append(args, q.Before)
	}
	sqlq += ` ORDER BY id DESC LIMIT ` + strconv.Itoa(q.EffectiveLimit())
	return sqlq, args
}

// Prune deletes the records of calls that started before before, a batch
// at a time.
func (a *Audit) Prune(ctx context.Context, before time.Time) (int64, error) {
	s := a.s
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	defer s.use()()
	if before.Before(minTime) {
		return 0, nil
	}
	if before.After(maxTime) {
		before = maxTime
	}
	var total int64
	for {
		res, err := s.wdb().ExecContext(ctx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE time < ? ORDER BY time LIMIT ?)`,
			before.UnixNano(), pruneBatch)
		if err != nil {
			return total, s.wwrap(ctx, "prune audit records", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, s.wrap(ctx, "prune audit records", err)
		}
		total += n
		if n > 0 {
			s.wrote()
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// Trim deletes the oldest records beyond maxRows records and maxBytes of
// encoded records (the data column), a batch at a time. The database file
// does not shrink: SQLite reuses the freed pages.
func (a *Audit) Trim(ctx context.Context, maxRows, maxBytes int64) (int64, error) {
	s := a.s
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	defer s.use()()
	var cut int64 // the records with id <= cut go
	if maxRows > 0 {
		var id int64
		err := s.reader.QueryRowContext(ctx, `SELECT id FROM audit ORDER BY id DESC LIMIT 1 OFFSET ?`, maxRows).Scan(&id)
		switch {
		case err == nil:
			cut = id
		case !errors.Is(err, sql.ErrNoRows):
			return 0, s.wrap(ctx, "trim audit records", err)
		}
	}
	if maxBytes > 0 {
		var id int64
		err := s.reader.QueryRowContext(ctx, `SELECT id FROM (
			SELECT id, SUM(length(data)) OVER (ORDER BY id DESC ROWS UNBOUNDED PRECEDING) AS kept FROM audit
		) WHERE kept > ? ORDER BY id DESC LIMIT 1`, maxBytes).Scan(&id)
		switch {
		case err == nil:
			cut = max(cut, id)
		case !errors.Is(err, sql.ErrNoRows):
			return 0, s.wrap(ctx, "trim audit records", err)
		}
	}
	if cut == 0 {
		return 0, nil
	}
	var total int64
	for {
		res, err := s.wdb().ExecContext(ctx, `DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE id <= ? ORDER BY id LIMIT ?)`, cut, pruneBatch)
		if err != nil {
			return total, s.wwrap(ctx, "trim audit records", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, s.wrap(ctx, "trim audit records", err)
		}
		total += n
		if n > 0 {
			s.wrote()
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}
