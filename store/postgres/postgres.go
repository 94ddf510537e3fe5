// Package postgres is the registry.Store that several utcpd replicas share:
// one PostgreSQL database, accessed through github.com/jackc/pgx/v5. It
// holds the manuals, the reviews (Store.Reviews) and the audit log
// (Store.Audit), with the same contracts as store/sqlite.
//
// # Connecting
//
// New checks the DSN and returns at once; Connect (Open does both) waits
// for the database, retrying with exponential backoff (100 ms doubling to
// 5 s) until it answers, then applies the schema migrations the database
// lacks in one transaction under an advisory lock, so that replicas
// starting together migrate once. Until Connect succeeds every method
// fails with an unavailable error, so a daemon can start, report itself
// not ready, and restore its registry once the database is there.
//
// # Changes made by other replicas
//
// Every write sends a notification (NOTIFY utcpd_manuals, payload: the
// writing Store's instance ID, the kind, the row's revision and the name)
// in the writing transaction, so it is delivered on commit. Each Store
// listens on a dedicated connection and reports, through Watch, the
// changes other Stores made; its own are recognised by the instance ID and
// not reported. Every write takes a new revision from a sequence, and a
// resync (every Options.ResyncInterval and after every reconnection of the
// listener) compares the revisions in the table with the ones this Store
// knows, so a change whose notification was lost (the connection dropped)
// is still reported. Watch reports a name, not a record: the receiver
// reads the row (Get) and gets its latest state.
//
// # The database going away
//
// Methods fail with an unavailable *utcp.Error while the database cannot
// be reached (within Options.OpTimeout); the pool reconnects by itself
// when the database is back, and the listener reconnects with backoff and
// then resyncs. A write that returned nil was committed (synchronous
// commit), and survives the server restarting. Health reports whether the
// listener is connected.
//
// # Secrets
//
// As in store/sqlite: the Store keeps exactly the registry.Record it is
// given, whose Template is the raw call template before variable
// substitution.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of Options.
const (
	// DefaultResyncInterval is how often a Store compares the revisions in
	// the table with the ones it knows.
	DefaultResyncInterval = 30 * time.Second
	// DefaultMaxConns caps the connection pool (the listener's connection
	// comes on top).
	DefaultMaxConns = 8
	// DefaultOpTimeout bounds one operation when its context has no
	// earlier deadline.
	DefaultOpTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds establishing one connection.
	DefaultConnectTimeout = 5 * time.Second
)

// The notification channels.
const (
	channelManuals = "utcpd_manuals"
	channelReviews = "utcpd_reviews"
)

// Options configure a Store. The zero value uses the defaults.
type Options struct {
	// ResyncInterval is how often the revisions are compared (see the
	// package documentation); 0 means DefaultResyncInterval, negative
	// never (a resync still follows every reconnection).
	ResyncInterval time.Duration
	// MaxConns caps the connection pool; 0 means DefaultMaxConns, or the
	// DSN's pool_max_conns when it sets one.
	MaxConns int32
	// OpTimeout bounds each operation whose context has no earlier
	// deadline; 0 means DefaultOpTimeout.
	OpTimeout time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// Store is the PostgreSQL registry.Store. Create it with New (then
// Connect) or Open; the zero value is not usable. It is safe for
// concurrent use.
type Store struct {
	opts     Options
	log      *slog.Logger
	pool     *pgxpool.Pool
	listen   *pgx.ConnConfig // the listener's connection
	instance string          // this Store's ID in notifications
	target   string          // host:port/db, for messages (no secrets)

	life context.Context // cancelled by Close
	stop context.CancelFunc
	bg   sync.WaitGroup

	connectMu sync.Mutex
	ready     atomic.Bool // migrated: methods may run
	online    atomic.Bool // the listener is connected
	lastErr   atomic.Pointer[string]
	queries   atomic.Int64

	mu       sync.Mutex
	known    map[string]int64 // revision of each manual as this Store last knew it
	watchers map[*watcher]struct{}
	reviewWs map[*watcher]struct{}
	// toolsetWs are the WatchToolsets watchers (toolsets.go).
	toolsetWs map[*watcher]struct{}

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ registry.Store = (*Store)(nil)

// New returns a Store for the database dsn (a postgres:// or
// postgresql:// URL, or a key=value connection string) without connecting
// to it: call Connect. An unparsable DSN is an error.
func New(dsn string, opts Options) (*Store, error) {
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: invalid DSN: %w", err) // pgconn masks the password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MinConns = 0
	s := &Store{opts: opts, log: opts.Logger, known: map[string]int64{},
		watchers: map[*watcher]struct{}{}, reviewWs: map[*watcher]struct{}{}, toolsetWs: map[*watcher]struct{}{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.listen = cfg.ConnConfig.Copy()
	cfg.ConnConfig.Tracer = counter{&s.queries}
	s.target = fmt.Sprintf("%s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	s.instance = strings.ToLower(rand.Text()[:16])
	s.life, s.stop = context.WithCancel(context.Background())
	s.pool, err = pgxpool.NewWithConfig(s.life, cfg)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	msg := "not connected to the database yet"
	s.lastErr.Store(&msg)
	return s, nil
}

// Open is New followed by Connect.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s, err := New(dsn, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Connect waits until the database answers, retrying with backoff, applies
// the missing migrations, and starts following the other replicas'
// changes. It returns ctx's error if ctx ends first, an error matching
// ErrSchemaTooNew at once for a database written by a newer utcpd, and nil
// when the Store is connected (at once when it already is).
func (s *Store) Connect(ctx context.Context) error {
	s.connectMu.Lock()
	defer s.connectMu.Unlock()
	if s.ready.Load() {
		return nil
	}
	wait := 100 * time.Millisecond
	var conn *pgx.Conn
	for attempt := 1; ; attempt++ {
		if s.closed.Load() {
			return errClosed()
		}
		// The listener listens before the revisions are read, so that no
		// change falls between them.
		var err error
		conn, err = s.connectListener(ctx)
		if err == nil {
			if err = s.setUp(ctx); err == nil {
				break
			}
			_ = conn.Close(context.Background())
		}
		if errors.Is(err, ErrSchemaTooNew) {
			return fmt.Errorf("postgres: %s: %w", s.target, err)
		}
		msg := "database unavailable: " + err.Error()
		s.lastErr.Store(&msg)
		s.log.Warn("database not reachable; retrying", "database", s.target, "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: connecting to %s: %w (last error: %w)", s.target, ctx.Err(), err)
		case <-s.life.Done():
			return errClosed()
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
	s.ready.Store(true)
	s.online.Store(true)
	s.bg.Add(2)
	go s.listenLoop(conn)
	go s.resyncLoop()
	return nil
}

// setUp migrates the schema and learns the current revisions.
func (s *Store) setUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, max(s.opts.OpTimeout, 30*time.Second))
	defer cancel()
	from, err := migrate(ctx, s.pool)
	if err != nil {
		return err
	}
	if from < SchemaVersion {
		s.log.Info("database schema migrated", "database", s.target, "from", from, "to", SchemaVersion)
	}
	revs, err := s.revisions(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.known = revs
	s.mu.Unlock()
	return nil
}

// Ready reports whether Connect has succeeded.
func (s *Store) Ready() bool { return s.ready.Load() }

// Health returns nil while the Store is connected and its listener
// follows the other replicas' changes, and an error saying why not
// otherwise (not connected yet, or the database went away).
func (s *Store) Health() error {
	if s.closed.Load() {
		return errClosed()
	}
	if s.ready.Load() && s.online.Load() {
		return nil
	}
	msg := "database unavailable"
	if p := s.lastErr.Load(); p != nil {
		msg = *p
	}
	return utcp.NewError(utcp.CodeUnavailable, "postgres: %s: %s", s.target, msg)
}

// Queries returns how many queries the Store's pool has sent since New
// (the listener's waiting is not counted). Tests use it to show that a
// tool call sends none.
func (s *Store) Queries() int64 { return s.queries.Load() }

// Instance returns the ID this Store writes into its notifications.
func (s *Store) Instance() string { return s.instance }

func errClosed() error { return utcp.NewError(utcp.CodeUnavailable, "postgres: store is closed") }

// op returns the context of one operation: ctx bounded by OpTimeout, or
// an error when the Store cannot run operations.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if s.closed.Load() {
		return nil, nil, errClosed()
	}
	if !s.ready.Load() {
		return nil, nil, utcp.NewError(utcp.CodeUnavailable, "postgres: %s: not connected to the database yet", s.target)
	}
	c, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	return c, cancel, nil
}

// wrap turns a database error from operation op into what a method
// returns: ctx's own error when the caller's ctx ended, unavailable when
// the Store is closed, invalid_request when the database refused the data
// itself (SQLSTATE class 22 data exception, 23 integrity constraint, 54
// program limit: retrying cannot help), and otherwise an unavailable
// *utcp.Error naming the database (a database that cannot be reached is
// a backend that is not available).
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if s.closed.Load() {
		return errClosed()
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("postgres: %s: %w", op, cerr)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) >= 2 {
		switch pe.Code[:2] {
		case "22", "23", "54":
			return utcp.Errorf(utcp.CodeInvalidRequest, "postgres: %s: the database refused the data: %w", op, err)
		}
	}
	return utcp.Errorf(utcp.CodeUnavailable, "postgres: %s: database %s unavailable: %w", op, s.target, err)
}

// The storable range of times: what UnixNano represents.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func encodeTime(name, field string, t time.Time) (*int64, error) {
	if t.IsZero() {
		return nil, nil
	}
	if t.Before(minTime) || t.After(maxTime) {
		return nil, utcp.NewError(utcp.CodeInvalidRequest,
			"store: record %q: %s time %s is outside the storable range (%d to %d)",
			name, field, t.Format(time.RFC3339Nano), minTime.Year(), maxTime.Year()).
			WithDetail("manual", name)
	}
	n := t.UnixNano()
	return &n, nil
}

func decodeTime(v *int64) time.Time {
	if v == nil {
		return time.Time{}
	}
	return time.Unix(0, *v).UTC()
}

// notifyName is the name part of a notification: PostgreSQL caps a
// payload below 8000 bytes, so a longer name is sent empty, which makes
// the receivers resync.
func notifyName(name string) string {
	if len(name) > 4000 {
		return ""
	}
	return name
}

const upsert = `WITH up AS (
	INSERT INTO manuals (name, template, manual, source, registered_at, refreshed_at, revision, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, nextval('manuals_revision'), now())
	ON CONFLICT (name) DO UPDATE SET
		template = excluded.template,
		manual = excluded.manual,
		source = excluded.source,
		registered_at = excluded.registered_at,
		refreshed_at = excluded.refreshed_at,
		revision = excluded.revision,
		updated_at = excluded.updated_at
	RETURNING revision)
SELECT revision, pg_notify('` + channelManuals + `', $7::text || ' put ' || revision::text || ' ' || $8::text) FROM up`

// Put creates or replaces the record called rec.Name, committed when Put
// returns nil, and notifies the other replicas. It stores Template byte
// for byte and Manual as its JSON encoding; times to the nanosecond as
// Unix time, so a time before 1678 or after 2262 is an invalid_request
// error.
func (s *Store) Put(ctx context.Context, rec *registry.Record) error {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := registry.CheckRecord(rec); err != nil {
		return err
	}
	var manual []byte // nil: SQL NULL
	if rec.Manual != nil {
		if manual, err = json.Marshal(rec.Manual); err != nil {
			return utcp.Errorf(utcp.CodeInvalidManual, "store: record %q: encoding manual: %w", rec.Name, err)
		}
	}
	registered, err := encodeTime(rec.Name, "registered", rec.Registered)
	if err != nil {
		return err
	}
	refreshed, err := encodeTime(rec.Name, "refreshed", rec.Refreshed)
	if err != nil {
		return err
	}
	var rev int64
	var ignored string
	if err := s.pool.QueryRow(octx, upsert, rec.Name, []byte(rec.Template), manual, rec.Source, registered, refreshed,
		s.instance, notifyName(rec.Name)).Scan(&rev, &ignored); err != nil {
		return s.wrap(ctx, fmt.Sprintf("put %q", rec.Name), err)
	}
	s.learn(rec.Name, rev)
	return nil
}

// learn records that this Store wrote revision rev of name.
func (s *Store) learn(name string, rev int64) {
	s.mu.Lock()
	if rev > s.known[name] {
		s.known[name] = rev
	}
	s.mu.Unlock()
}

const selectColumns = `SELECT name, template, manual, source, registered_at, refreshed_at FROM manuals`

func scanRecord(row pgx.Row) (*registry.Record, error) {
	var (
		rec                   registry.Record
		template, manual      []byte
		registered, refreshed *int64
	)
	if err := row.Scan(&rec.Name, &template, &manual, &rec.Source, &registered, &refreshed); err != nil {
		return nil, err
	}
	rec.Template = json.RawMessage(template)
	rec.Registered, rec.Refreshed = decodeTime(registered), decodeTime(refreshed)
	if manual != nil {
		rec.Manual = new(utcp.Manual)
		if err := json.Unmarshal(manual, rec.Manual); err != nil {
			return nil, utcp.Errorf(utcp.CodeInternal, "postgres: record %q: decoding stored manual: %w", rec.Name, err)
		}
	}
	return &rec, nil
}

// Get returns a fresh copy of the record called name, or an error
// wrapping registry.ErrNotFound. Times come back in UTC.
func (s *Store) Get(ctx context.Context, name string) (*registry.Record, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rec, err := scanRecord(s.pool.QueryRow(octx, selectColumns+` WHERE name = $1`, name))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, registry.NotFound(name)
	case utcp.CodeOf(err) == utcp.CodeInternal:
		return nil, err
	case err != nil:
		return nil, s.wrap(ctx, fmt.Sprintf("get %q", name), err)
	}
	return rec, nil
}

// Delete removes the record called name, committed when Delete returns
// nil, and notifies the other replicas; or returns an error wrapping
// registry.ErrNotFound.
func (s *Store) Delete(ctx context.Context, name string) error {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var ignored string
	err = s.pool.QueryRow(octx, `WITH del AS (DELETE FROM manuals WHERE name = $1 RETURNING name)
		SELECT pg_notify('`+channelManuals+`', $2::text || ' delete 0 ' || $3::text) FROM del`,
		name, s.instance, notifyName(name)).Scan(&ignored)
	if errors.Is(err, pgx.ErrNoRows) {
		return registry.NotFound(name)
	}
	if err != nil {
		return s.wrap(ctx, fmt.Sprintf("delete %q", name), err)
	}
	s.mu.Lock()
	delete(s.known, name)
	s.mu.Unlock()
	return nil
}

// List returns fresh copies of every record, ordered by name in byte order
// (the column's "C" collation), read in one statement (one snapshot).
func (s *Store) List(ctx context.Context) ([]*registry.Record, error) {
	octx, cancel, err := s.op(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.pool.Query(octx, selectColumns+` ORDER BY name`)
	if err != nil {
		return nil, s.wrap(ctx, "list", err)
	}
	defer rows.Close()
	out := []*registry.Record{}
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			if utcp.CodeOf(err) == utcp.CodeInternal {
				return nil, err
			}
			return nil, s.wrap(ctx, "list", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, "list", err)
	}
	return out, nil
}

// revisions reads the revision of every manual.
func (s *Store) revisions(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, revision FROM manuals`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var rev int64
		if err := rows.Scan(&name, &rev); err != nil {
			return nil, err
		}
		out[name] = rev
	}
	return out, rows.Err()
}

// Watch reports the changes other replicas make to the manuals (see the
// package documentation); a change this Store made is not reported. The
// changes of one name not yet received are merged into one (the latest
// kind), so a slow receiver never blocks the Store. The channel is closed
// when ctx ends or the Store is closed.
func (s *Store) Watch(ctx context.Context) <-chan registry.Change {
	return watchSet(s, ctx, s.watchers, func(it item) (registry.Change, bool) {
		return registry.Change{Kind: registry.ChangeKind(it.kind), Name: it.key}, true
	})
}

// watchSet registers a watcher in set (one of the Store's watcher sets,
// guarded by s.mu) and delivers what it is told, each item turned into a
// value by conv (false: skip it), until ctx ends or the Store is closed;
// then it leaves set and closes the channel. Pending items merge in the
// watcher, so a slow receiver never blocks the Store.
func watchSet[T any](s *Store, ctx context.Context, set map[*watcher]struct{}, conv func(item) (T, bool)) <-chan T {
	w := newWatcher()
	out := make(chan T)
	s.mu.Lock()
	closed := s.closed.Load()
	if !closed {
		set[w] = struct{}{}
	}
	s.mu.Unlock()
	go func() {
		defer close(out)
		if closed {
			return
		}
		defer func() {
			s.mu.Lock()
			delete(set, w)
			s.mu.Unlock()
		}()
		for {
			for _, it := range w.take() {
				v, ok := conv(it)
				if !ok {
					continue
				}
				select {
				case out <- v:
				case <-ctx.Done():
					return
				case <-s.life.Done():
					return
				}
			}
			select {
			case <-w.signal:
			case <-ctx.Done():
				return
			case <-s.life.Done():
				return
			}
		}
	}()
	return out
}

// watcher is the merged backlog of one Watch (or WatchReviews).
type watcher struct {
	mu      sync.Mutex
	pending map[string]string // key → kind
	order   []string
	signal  chan struct{}
}

type item struct{ key, kind string }

func newWatcher() *watcher {
	return &watcher{pending: map[string]string{}, signal: make(chan struct{}, 1)}
}

func (w *watcher) add(key, kind string) {
	w.mu.Lock()
	if _, ok := w.pending[key]; !ok {
		w.order = append(w.order, key)
	}
	w.pending[key] = kind
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

func (w *watcher) take() []item {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]item, 0, len(w.order))
	for _, k := range w.order {
		out = append(out, item{k, w.pending[k]})
	}
	w.order = w.order[:0]
	clear(w.pending)
	return out
}

// report hands a change of manual name to every watcher.
func (s *Store) report(name string, kind registry.ChangeKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.add(name, string(kind))
	}
}

// listenLoop keeps a connection listening for the other replicas'
// notifications, reconnecting with backoff, and resyncs after every
// (re)connection.
func (s *Store) listenLoop(conn *pgx.Conn) {
	defer s.bg.Done()
	wait := 100 * time.Millisecond
	first := true
	for s.life.Err() == nil {
		var err error
		if !first {
			conn, err = s.connectListener(s.life)
		}
		if err != nil {
			s.online.Store(false)
			msg := "database unavailable: " + err.Error()
			s.lastErr.Store(&msg)
			if s.life.Err() != nil {
				return
			}
			s.log.Warn("listener cannot reach the database; retrying", "database", s.target, "retry_in", wait, "err", err)
			select {
			case <-s.life.Done():
				return
			case <-time.After(wait):
			}
			wait = min(wait*2, 5*time.Second)
			continue
		}
		wait = 100 * time.Millisecond
		if !first {
			s.online.Store(true)
			s.log.Info("database reachable again; resyncing", "database", s.target)
			// The pool's idle connections died with the server: drop
			// them rather than fail the next writes on them.
			s.pool.Reset()
			// Notifications sent while no connection listened are lost:
			// compare revisions, and wake every review waiter.
			s.resync(s.life)
			s.reportReview("")
		}
		first = false
		err = s.receive(conn)
		_ = conn.Close(context.Background())
		if s.life.Err() != nil {
			return
		}
		s.online.Store(false)
		msg := "database unavailable: " + err.Error()
		s.lastErr.Store(&msg)
		s.log.Warn("lost the database connection; reconnecting", "database", s.target, "err", err)
	}
}

func (s *Store) connectListener(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout+s.opts.OpTimeout)
	defer cancel()
	stop := context.AfterFunc(s.life, cancel) // Close interrupts it
	defer stop()
	conn, err := pgx.ConnectConfig(ctx, s.listen)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN `+channelManuals+`; LISTEN `+channelReviews+`; LISTEN `+channelToolsets); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive handles notifications until the connection fails or the Store
// closes.
func (s *Store) receive(conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(s.life)
		if err != nil {
			return err
		}
		s.handle(n.Channel, n.Payload)
	}
}

// handle applies one notification.
func (s *Store) handle(channel, payload string) {
	switch channel {
	case channelManuals:
		// "<instance> <kind> <revision> <name>"
		parts := strings.SplitN(payload, " ", 4)
		if len(parts) != 4 {
			return
		}
		if parts[0] == s.instance {
			return
		}
		name := parts[3]
		if name == "" { // a name too long to send
			s.resync(s.life)
			return
		}
		rev, _ := strconv.ParseInt(parts[2], 10, 64)
		s.mu.Lock()
		switch registry.ChangeKind(parts[1]) {
		case registry.ChangePut:
			if rev > s.known[name] {
				s.known[name] = rev
			}
		case registry.ChangeDelete:
			delete(s.known, name)
		default:
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.report(name, registry.ChangeKind(parts[1]))
	case channelToolsets:
		// "<instance>"
		if payload != s.instance {
			s.reportToolsets()
		}
	case channelReviews:
		// "<instance> <review id>"
		inst, id, ok := strings.Cut(payload, " ")
		if !ok || inst == s.instance {
			return
		}
		s.reportReview(id)
	}
}

// resyncLoop resyncs every ResyncInterval.
func (s *Store) resyncLoop() {
	defer s.bg.Done()
	if s.opts.ResyncInterval < 0 {
		return
	}
	t := time.NewTicker(s.opts.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-t.C:
			s.resync(s.life)
		}
	}
}

// resync compares the revisions in the table with the known ones and
// reports every difference as a change. An entry that changed while the
// table was read (this Store wrote, or a notification arrived) is left to
// that newer knowledge.
func (s *Store) resync(ctx context.Context) {
	// Toolsets are few: their watchers list them all again.
	s.reportToolsets()
	s.mu.Lock()
	before := make(map[string]int64, len(s.known))
	for k, v := range s.known {
		before[k] = v
	}
	s.mu.Unlock()
	octx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	revs, err := s.revisions(octx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("resync: reading revisions", "err", err)
		}
		return
	}
	type change struct {
		name string
		kind registry.ChangeKind
	}
	var changes []change
	s.mu.Lock()
	for name, rev := range revs {
		old, had := before[name]
		cur, has := s.known[name]
		if had != has || old != cur {
			continue // changed meanwhile
		}
		if !had || old != rev {
			s.known[name] = rev
			changes = append(changes, change{name, registry.ChangePut})
		}
	}
	for name, old := range before {
		if _, ok := revs[name]; ok {
			continue
		}
		if cur, has := s.known[name]; !has || cur != old {
			continue
		}
		delete(s.known, name)
		changes = append(changes, change{name, registry.ChangeDelete})
	}
	s.mu.Unlock()
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.name, b.name) })
	for _, c := range changes {
		s.report(c.name, c.kind)
	}
	if len(changes) > 0 {
		s.log.Info("resync found changes no notification reported", "changes", len(changes))
	}
}

// Close stops the listener, ends every Watch and closes the pool.
// Operations after Close fail with an unavailable error. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		s.stop()
		s.bg.Wait()
		s.pool.Close()
	})
	return nil
}

// counter is a pgx.QueryTracer counting the queries sent.
type counter struct{ n *atomic.Int64 }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
