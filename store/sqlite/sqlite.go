// Package sqlite is utcpd's embedded, default registry.Store: one SQLite
// database file, utcpd.db, in the daemon's data directory, accessed through
// modernc.org/sqlite (pure Go, no cgo).
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL, so every commit
// syncs the write-ahead log to stable storage before it returns: a Put or
// Delete that returned nil survives the process being killed (kill -9) and
// the machine losing power, on storage that honours fsync. The directory is
// created 0700 and the database file 0600; SQLite gives its -wal and -shm
// files the database file's mode.
//
// # Concurrency
//
// A Store is safe for concurrent use. Writes go through a single
// connection and are therefore serialised; reads use a small pool of
// read-only connections, which WAL lets run alongside the writer. Several
// processes may open the same database (SQLite locks it and busy_timeout
// waits), but none is told about the others' changes: see Store.Watch.
//
// # Secrets
//
// A Store keeps exactly the registry.Record it is given. The contract with
// its caller (the gateway) is that Record.Template is the raw call
// template as registered, before variable substitution, so the file never
// holds resolved secrets; this package neither resolves nor redacts
// anything, and must not be handed a resolved template.
//
// # Schema
//
// The schema is versioned. Open applies the migrations the database lacks,
// in one transaction, and records each in the schema_migrations table. A
// database whose version is newer than SchemaVersion (written by a newer
// utcpd) is refused with an error matching ErrSchemaTooNew; its tables are
// left untouched.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// FileName is the name of the database file Open uses inside its directory.
const FileName = "utcpd.db"

// Defaults for the Options.
const (
	// DefaultBusyTimeout is how long a connection waits for a lock held by
	// another connection or process before failing with SQLITE_BUSY.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultMaxReaders caps the read-only connection pool. It is raised to
	// GOMAXPROCS when that is larger.
	DefaultMaxReaders = 4
	// DefaultProbeInterval is how often a store that refuses writes tries
	// again (see Store.Health).
	DefaultProbeInterval = 2 * time.Second
)

// Option configures Open and OpenPath.
type Option func(*config)

type config struct {
	busyTimeout   time.Duration
	maxReaders    int
	probeInterval time.Duration
	log           *slog.Logger
	// readOnlyFirst opens the first writer connection read-only (tests:
	// a store that refuses writes until the probe reopens it).
	readOnlyFirst bool
}

// WithBusyTimeout sets how long an operation waits for a lock another
// connection or process holds (SQLite's busy_timeout) before it fails. The
// default is DefaultBusyTimeout; values below one millisecond are raised
// to one millisecond.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) { c.busyTimeout = max(d, time.Millisecond) }
}

// WithProbeInterval sets how often a store that refuses writes tries to
// write again (default DefaultProbeInterval; at least one millisecond).
func WithProbeInterval(d time.Duration) Option {
	return func(c *config) { c.probeInterval = max(d, time.Millisecond) }
}

// WithLogger makes the store log when it starts and stops refusing
// writes (default: no log).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.log = l }
}

// WithMaxReaders sets the maximum number of read-only connections (at
// least 1). The default is the larger of DefaultMaxReaders and GOMAXPROCS.
func WithMaxReaders(n int) Option {
	return func(c *config) { c.maxReaders = max(n, 1) }
}

// Store is the SQLite registry.Store. Create it with Open or OpenPath; the
// zero value is not usable.
type Store struct {
	path   string
	cfg    config
	wdsn   string
	writer atomic.Pointer[sql.DB] // exactly one connection: serialises every write
	reader *sql.DB                // read-only connections (query_only)

	// unwritable, when set, is why writes fail (Health); probing reports
	// that the probe goroutine runs, probes that it has ended.
	unwritable atomic.Pointer[writeFailure]
	probing    atomic.Bool
	probes     sync.WaitGroup
	pmu        sync.Mutex // orders starting a probe with Close
	// poolMu is held shared by every operation while it uses the pools,
	// and exclusively while the probe replaces them.
	poolMu sync.RWMutex
	rdsn   string

	// auditIns are the audit log's prepared INSERTs (audit.go).
	auditIns auditInserts

	closed    atomic.Bool
	done      chan struct{} // closed by Close; ends every Watch
	closeOnce sync.Once
	closeErr  error
}

var _ registry.Store = (*Store)(nil)

// Open opens the store in dir, creating dir (mode 0700, with any missing
// parents) and the database file FileName inside it (mode 0600) if they do
// not exist, and migrates the schema to SchemaVersion. ctx bounds the
// opening and migration only. An existing directory or file keeps its
// mode. It fails with an error matching ErrSchemaTooNew when the database
// was written by a newer schema.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	if dir == "" {
		return nil, errors.New("sqlite: empty data directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: creating data directory: %w", err)
	}
	return OpenPath(ctx, filepath.Join(dir, FileName), opts...)
}

// OpenPath is Open for an explicit database file, whose directory must
// exist. The file is created with mode 0600 when missing.
func OpenPath(ctx context.Context, file string, opts ...Option) (*Store, error) {
	cfg := config{busyTimeout: DefaultBusyTimeout, maxReaders: max(DefaultMaxReaders, runtime.GOMAXPROCS(0))}
	for _, o := range opts {
		o(&cfg)
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := createFile(abs); err != nil {
		return nil, err
	}

	if cfg.probeInterval <= 0 {
		cfg.probeInterval = DefaultProbeInterval
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	s := &Store{path: abs, cfg: cfg, done: make(chan struct{})}
	common := url.Values{}
	common.Set("_busy_timeout", strconv.FormatInt(cfg.busyTimeout.Milliseconds(), 10))
	common.Set("_foreign_keys", "1")
	common.Set("_synchronous", "FULL")

	w := cloneValues(common)
	w.Set("_journal_mode", "WAL")
	w.Set("_txlock", "immediate") // a write transaction takes the lock up front
	// Statement journals in memory: a multi-row INSERT (the audit log's
	// batches) spills its statement journal past 64 KiB to a temporary
	// file otherwise, created, written and removed in every transaction.
	w.Set("_pragma", "temp_store(memory)")
	s.wdsn = dsn(abs, w)
	first := s.wdsn
	if cfg.readOnlyFirst {
		ro := cloneValues(w)
		ro.Set("mode", "ro")
		first = dsn(abs, ro)
	}
	wdb, err := openWriter(first)
	if err != nil {
		return nil, fmt.Errorf("sqlite: opening %s: %w", abs, err)
	}
	s.writer.Store(wdb)

	if err := s.setUp(ctx); err != nil {
		// A database that cannot be written (a read-only file or
		// directory) but needs no migration opens refusing writes
		// (Health), and takes them once it can.
		if !readOnlyError(err) || !s.schemaCurrent(ctx) {
			_ = wdb.Close()
			return nil, err
		}
		s.refused(err)
	} else if err := writeProbe(ctx, s.wdb()); err != nil && ctx.Err() == nil {
		// Opened, but a write fails (a read-only database file): say
		// so now, not at the first write.
		s.refused(err)
	}

	// Readers are opened after the writer has switched the file to WAL, so
	// none of them races it for the journal mode.
	r := cloneValues(common)
	r.Set("_query_only", "1")
	s.rdsn = dsn(abs, r)
	if s.reader, err = openReader(s.rdsn, cfg.maxReaders); err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: opening %s: %w", abs, err)
	}
	if err := s.reader.PingContext(ctx); err != nil {
		_ = s.reader.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("sqlite: opening %s: %w", abs, err)
	}
	return s, nil
}

// openWriter opens the single-connection writer pool of dsn.
func openWriter(dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

// openReader opens the read-only connection pool of dsn.
func openReader(dsn string, n int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return db, nil
}

// use holds the pools for one operation; call what it returns when done.
func (s *Store) use() func() {
	s.poolMu.RLock()
	return s.poolMu.RUnlock
}

// wdb returns the writer pool.
func (s *Store) wdb() *sql.DB { return s.writer.Load() }

// setUp checks the writer connection's settings and migrates the schema.
func (s *Store) setUp(ctx context.Context) error {
	var mode string
	if err := s.wdb().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", s.path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlite: opening %s: journal_mode is %q, not wal (does the file system support shared memory?)", s.path, mode)
	}
	var syncMode int
	if err := s.wdb().QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return fmt.Errorf("sqlite: opening %s: %w", s.path, err)
	}
	if syncMode != 2 { // FULL
		return fmt.Errorf("sqlite: opening %s: synchronous is %d, not 2 (FULL)", s.path, syncMode)
	}
	return migrate(ctx, s.wdb(), s.path)
}

// readOnlyError reports whether err is SQLite's "attempt to write a
// readonly database" (SQLITE_READONLY and its extended codes) or
// "unable to open database file" (SQLITE_CANTOPEN: a -wal or -shm file
// that cannot be created).
func readOnlyError(err error) bool {
	var ce interface{ Code() int }
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code() & 0xff {
	case 8, 14: // SQLITE_READONLY, SQLITE_CANTOPEN
		return true
	}
	return false
}

// schemaCurrent reports whether the database is at SchemaVersion, read
// through the writer connection (which may be read-only).
func (s *Store) schemaCurrent(ctx context.Context) bool {
	var v int
	err := s.wdb().QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return err == nil && v == SchemaVersion
}

// createFile creates file with mode 0600 if it does not exist, and syncs
// its directory so that the new entry itself is durable.
func createFile(file string) error {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: creating database file: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(file))
	}
	if err != nil {
		return fmt.Errorf("sqlite: creating database file: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// dsn returns a SQLite URI for file carrying the driver parameters q.
func dsn(file string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(file), RawQuery: q.Encode()}
	if u.Path != "" && u.Path[0] != '/' { // Windows: file:///C:/...
		u.Path = "/" + u.Path
	}
	return u.String()
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

func errClosed() error { return utcp.NewError(utcp.CodeUnavailable, "sqlite: store is closed") }

// wrap turns a database error from operation op into what a Store method
// returns: the context's own error when ctx ended, unavailable when the
// store is closed, and an unavailable *utcp.Error carrying the cause
// otherwise (a database that cannot be read or written is a backend that
// is not available, not a bug).
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if s.closed.Load() {
		return errClosed()
	}
	if cerr := ctx.Err(); cerr != nil { // the driver may report it as SQLITE_INTERRUPT
		return fmt.Errorf("sqlite: %s: %w", op, cerr)
	}
	return utcp.Errorf(utcp.CodeUnavailable, "sqlite: %s: %w", op, err)
}

// check runs the checks every method starts with.
func (s *Store) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return errClosed()
	}
	return nil
}

// The storable range of times: what UnixNano represents.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encodeTime returns t as Unix nanoseconds, or nil (SQL NULL) for the zero
// time.
func encodeTime(name, field string, t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, utcp.NewError(utcp.CodeInvalidRequest,
			"store: record %q: %s time %s is outside the storable range (%d to %d)",
			name, field, t.Format(time.RFC3339Nano), minTime.Year(), maxTime.Year()).
			WithDetail("manual", name)
	}
	return t.UnixNano(), nil
}

func decodeTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64).UTC()
}

const upsert = `INSERT INTO manuals (name, template, manual, source, registered_at, refreshed_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
	template = excluded.template,
	manual = excluded.manual,
	source = excluded.source,
	registered_at = excluded.registered_at,
	refreshed_at = excluded.refreshed_at,
	updated_at = excluded.updated_at`

// Put creates or replaces the record called rec.Name in one transaction,
// durable when Put returns nil. It stores rec exactly: Template byte for
// byte, and Manual as its JSON encoding (tool call templates as their Raw
// JSON). Times are kept to the nanosecond as Unix time, so a time before
// 1678 or after 2262 is an invalid_request error; the zero time is kept as
// zero.
func (s *Store) Put(ctx context.Context, rec *registry.Record) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	if err := registry.CheckRecord(rec); err != nil {
		return err
	}
	var manual any // nil: SQL NULL
	if rec.Manual != nil {
		b, err := json.Marshal(rec.Manual)
		if err != nil {
			return utcp.Errorf(utcp.CodeInvalidManual, "store: record %q: encoding manual: %w", rec.Name, err)
		}
		manual = b
	}
	registered, err := encodeTime(rec.Name, "registered", rec.Registered)
	if err != nil {
		return err
	}
	refreshed, err := encodeTime(rec.Name, "refreshed", rec.Refreshed)
	if err != nil {
		return err
	}
	// The driver copies the parameters, so rec may change after Put.
	if _, err := s.wdb().ExecContext(ctx, upsert,
		rec.Name, []byte(rec.Template), manual, rec.Source, registered, refreshed, time.Now().UnixNano()); err != nil {
		return s.wwrap(ctx, fmt.Sprintf("put %q", rec.Name), err)
	}
	s.wrote()
	return nil
}

const selectColumns = `SELECT name, template, manual, source, registered_at, refreshed_at FROM manuals`

// row is one manuals row as read, before the manual is decoded.
type row struct {
	name, source          string
	template, manual      []byte
	registered, refreshed sql.NullInt64
}

type scanner interface{ Scan(dest ...any) error }

func (r *row) scan(sc scanner) error {
	return sc.Scan(&r.name, &r.template, &r.manual, &r.source, &r.registered, &r.refreshed)
}

// record decodes r into a new Record that shares no memory with r's
// buffers beyond the ones it takes over (template).
func (r *row) record() (*registry.Record, error) {
	rec := &registry.Record{
		Name:       r.name,
		Template:   json.RawMessage(r.template),
		Source:     r.source,
		Registered: decodeTime(r.registered),
		Refreshed:  decodeTime(r.refreshed),
	}
	if r.manual != nil {
		rec.Manual = new(utcp.Manual)
		if err := json.Unmarshal(r.manual, rec.Manual); err != nil {
			return nil, utcp.Errorf(utcp.CodeInternal, "sqlite: record %q: decoding stored manual: %w", r.name, err)
		}
	}
	return rec, nil
}

// Get returns a fresh copy of the record called name, or an error wrapping
// registry.ErrNotFound (code manual_not_found). Times come back in UTC.
func (s *Store) Get(ctx context.Context, name string) (*registry.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	var r row
	err := r.scan(s.reader.QueryRowContext(ctx, selectColumns+` WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, registry.NotFound(name)
	}
	if err != nil {
		return nil, s.wrap(ctx, fmt.Sprintf("get %q", name), err)
	}
	return r.record()
}

// Delete removes the record called name, durable when Delete returns nil,
// or returns an error wrapping registry.ErrNotFound.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	defer s.use()()
	res, err := s.wdb().ExecContext(ctx, `DELETE FROM manuals WHERE name = ?`, name)
	if err != nil {
		return s.wwrap(ctx, fmt.Sprintf("delete %q", name), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return s.wrap(ctx, fmt.Sprintf("delete %q", name), err)
	}
	if n == 0 {
		return registry.NotFound(name)
	}
	s.wrote()
	return nil
}

// List returns fresh copies of every record, ordered by name in byte order
// (the column's BINARY collation compares UTF-8 bytes), read from one
// consistent snapshot. Decoding the manuals, the bulk of the work when
// the daemon restores its registry, runs on GOMAXPROCS goroutines while
// the rows are still being read.
func (s *Store) List(ctx context.Context) ([]*registry.Record, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	defer s.use()()
	rows, err := s.reader.QueryContext(ctx, selectColumns+` ORDER BY name`)
	if err != nil {
		return nil, s.wrap(ctx, "list", err)
	}
	defer rows.Close()

	// Only this goroutine touches jobs; a worker writes its job's rec and
	// err, which are read after wg.Wait.
	type job struct {
		r   row
		rec *registry.Record
		err error
	}
	var (
		jobs   []*job
		queue  = make(chan *job, 64)
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range queue {
				if failed.Load() {
					continue
				}
				j.rec, j.err = j.r.record()
				j.r = row{}
				if j.err != nil {
					failed.Store(true)
				}
			}
		})
	}
	for !failed.Load() && rows.Next() {
		j := new(job)
		if err := j.r.scan(rows); err != nil {
			j.err = s.wrap(ctx, "list", err)
			failed.Store(true)
		} else {
			queue <- j
		}
		jobs = append(jobs, j)
	}
	close(queue)
	err = rows.Err()
	_ = rows.Close() // release the connection while the decoding finishes
	wg.Wait()
	if err != nil {
		return nil, s.wrap(ctx, "list", err)
	}
	out := make([]*registry.Record, len(jobs))
	for i, j := range jobs {
		if j.err != nil {
			return nil, j.err
		}
		out[i] = j.rec
	}
	return out, nil
}

// Watch returns a channel that is closed when ctx ends or the Store is
// closed, and never sends. A SQLite store belongs to one process: changes
// made through this Store are not reported (the Store interface excludes
// them), and changes another process makes to the same file are not
// detected. Stores shared by several processes (store/postgres) send.
func (s *Store) Watch(ctx context.Context) <-chan registry.Change {
	ch := make(chan registry.Change)
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-s.done:
		}
	}()
	return ch
}

// Close closes the database, ending every Watch; a checkpoint folds the
// write-ahead log into the database file when no other process has it
// open. Operations after Close fail with an unavailable error. Close is
// idempotent: later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.pmu.Lock() // a probe starting after this sees closed
		s.closed.Store(true)
		s.pmu.Unlock()
		close(s.done)
		s.probes.Wait()
		// Readers first, so that the writer is the last connection and
		// checkpoints.
		s.closeErr = errors.Join(s.reader.Close(), s.wdb().Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: closing %s: %w", s.path, s.closeErr)
		}
	})
	return s.closeErr
}

// withReadOnlyWriter opens the first writer connection read-only, as a
// database file without write permission opens (tests).
func withReadOnlyWriter() Option {
	return func(c *config) { c.readOnlyFirst = true }
}
