package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/audit/audittest"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/guard/review/reviewtest"
	"github.com/utcpd/utcpd/internal/pgtest"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/storetest"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/utcp"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open opens a Store on dsn, closed when t ends.
func open(t *testing.T, dsn string, opts postgres.Options) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newDB returns the DSN of a new, empty database on the shared server.
func newDB(t *testing.T) string { return pgtest.Shared(t).Database(t) }

func pgtestDB(b testing.TB) string { return pgtest.Shared(b).Database(b) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) registry.Store { return open(t, newDB(t), postgres.Options{}) })
}

func TestPinConformance(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) registry.PinStore { return open(t, newDB(t), postgres.Options{}) })
}

func TestReviewStoreConformance(t *testing.T) {
	reviewtest.Run(t, func(t *testing.T) review.Store { return open(t, newDB(t), postgres.Options{}).Reviews() })
}

func TestAuditStoreConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Store { return open(t, newDB(t), postgres.Options{}).Audit() })
}

// next waits up to 5 s for the next change on ch.
func next(t *testing.T, ch <-chan registry.Change) registry.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("Watch channel closed")
		}
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no change reported within 5s")
	}
	return registry.Change{}
}

// none checks that ch reports nothing for a while.
func none(t *testing.T, ch <-chan registry.Change, d time.Duration) {
	t.Helper()
	select {
	case c := <-ch:
		t.Fatalf("unexpected change %+v", c)
	case <-time.After(d):
	}
}

// TestWatchReportsOtherReplicas checks that a Store reports the puts and
// deletes another Store on the same database makes, and not its own.
func TestWatchReportsOtherReplicas(t *testing.T) {
	dsn := newDB(t)
	a, b := open(t, dsn, postgres.Options{}), open(t, dsn, postgres.Options{})
	chA, chB := a.Watch(t.Context()), b.Watch(t.Context())

	if err := a.Put(t.Context(), storetest.Record("weather")); err != nil {
		t.Fatal(err)
	}
	if c := next(t, chB); c != (registry.Change{Kind: registry.ChangePut, Name: "weather"}) {
		t.Errorf("B saw %+v, want a put of weather", c)
	}
	if err := b.Delete(t.Context(), "weather"); err != nil {
		t.Fatal(err)
	}
	if c := next(t, chA); c != (registry.Change{Kind: registry.ChangeDelete, Name: "weather"}) {
		t.Errorf("A saw %+v, want a delete of weather", c)
	}
	none(t, chA, 300*time.Millisecond) // A's own put is not reported
	none(t, chB, 0)
	if err := a.Health(); err != nil {
		t.Errorf("Health: %v", err)
	}
}

// TestResyncFindsMissedChanges writes behind the Stores' backs (no
// notification) and checks that the periodic resync reports the change.
func TestResyncFindsMissedChanges(t *testing.T) {
	dsn := newDB(t)
	a := open(t, dsn, postgres.Options{ResyncInterval: 100 * time.Millisecond})
	if err := a.Put(t.Context(), storetest.Record("kept")); err != nil {
		t.Fatal(err)
	}
	ch := a.Watch(t.Context())
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if _, err := conn.Exec(t.Context(), `INSERT INTO manuals (name, template, source, revision)
		VALUES ('sneaky', '{"name":"sneaky","call_template_type":"text","file_path":"x"}', 'api', nextval('manuals_revision'))`); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c != (registry.Change{Kind: registry.ChangePut, Name: "sneaky"}) {
		t.Errorf("resync reported %+v, want a put of sneaky", c)
	}
	if _, err := conn.Exec(t.Context(), `DELETE FROM manuals WHERE name = 'kept'`); err != nil {
		t.Fatal(err)
	}
	if c := next(t, ch); c != (registry.Change{Kind: registry.ChangeDelete, Name: "kept"}) {
		t.Errorf("resync reported %+v, want a delete of kept", c)
	}
	none(t, ch, 300*time.Millisecond) // nothing changed since
}

// TestMigrationsOnceUnderConcurrentStarts opens five Stores on one empty
// database at once: every migration is applied exactly once.
func TestMigrationsOnceUnderConcurrentStarts(t *testing.T) {
	dsn := newDB(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{})
			if err != nil {
				errs <- err
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Open: %v", err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n, top int
	if err := conn.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &top); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion || top != postgres.SchemaVersion {
		t.Errorf("schema_migrations has %d rows up to %d, want %d", n, top, postgres.SchemaVersion)
	}
}

// TestSchemaTooNew refuses a database migrated by a newer utcpd.
func TestSchemaTooNew(t *testing.T) {
	dsn := newDB(t)
	open(t, dsn, postgres.Options{}).Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	if _, err := conn.Exec(t.Context(), fmt.Sprintf(`INSERT INTO schema_migrations (version) VALUES (%d)`, postgres.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), dsn, postgres.Options{})
	if !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
	}
}

// TestInvalidDSN: an unparsable DSN is refused without repeating its
// password.
func TestInvalidDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://u:hunter2@[::1/db", "host=x port=notaport password=hunter2"} {
		_, err := postgres.New(dsn, postgres.Options{})
		if err == nil {
			t.Fatalf("New(%q) accepted an unparsable DSN", dsn)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error repeats the password: %v", err)
		}
	}
}

// TestNotConnectedYet checks that a Store whose database is not there
// fails its operations with unavailable, and reports it in Health, while
// Connect retries.
func TestNotConnectedYet(t *testing.T) {
	s, err := postgres.New("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(t.Context(), storetest.Record("x")); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("Put before Connect = %v, want unavailable", err)
	}
	if err := s.Health(); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("Health before Connect = %v, want unavailable", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if err := s.Connect(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect to nothing = %v, want the deadline", err)
	}
}

// TestServerRestart stops the server under two Stores: writes fail with
// unavailable while it is down, Connect started meanwhile waits for it,
// and once it is back every committed write is there, the Stores recover
// without being reopened, and notifications flow again.
func TestServerRestart(t *testing.T) {
	srv := pgtest.New(t)
	dsn := srv.Database(t)
	opts := postgres.Options{ResyncInterval: -1, OpTimeout: 2 * time.Second}
	a, b := open(t, dsn, opts), open(t, dsn, opts)
	chB := b.Watch(t.Context())
	if err := a.Put(t.Context(), storetest.Record("before")); err != nil {
		t.Fatal(err)
	}
	next(t, chB)

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(t.Context(), storetest.Record("during")); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("Put while the server is down = %v, want unavailable", err)
	}
	waitFor(t, "Health to report the outage", func() bool { return a.Health() != nil })
	late, err := postgres.New(dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	connected := make(chan error, 1)
	go func() { connected <- late.Connect(t.Context()) }()

	time.Sleep(300 * time.Millisecond) // let Connect fail a few times
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-connected; err != nil {
		t.Fatalf("Connect across the outage: %v", err)
	}
	waitFor(t, "Health after the restart", func() bool { return a.Health() == nil && b.Health() == nil })
	if _, err := b.Get(t.Context(), "before"); err != nil {
		t.Errorf("a write committed before the restart: %v", err)
	}
	if err := a.Put(t.Context(), storetest.Record("after")); err != nil {
		t.Fatalf("Put after the restart: %v", err)
	}
	// B reconnected its listener: it hears A again.
	deadline := time.After(5 * time.Second)
	for {
		select {
		case c := <-chB:
			if c.Name == "after" {
				return
			}
		case <-deadline:
			t.Fatal("B heard nothing of A's write after the restart")
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReviewWatch checks that a review written through one Store is
// reported to the other by ID, and a Store's own writes are not.
func TestReviewWatch(t *testing.T) {
	dsn := newDB(t)
	a, b := open(t, dsn, postgres.Options{}), open(t, dsn, postgres.Options{})
	chA, chB := a.Reviews().Watch(t.Context()), b.Reviews().Watch(t.Context())
	r := reviewtest.Fixture("rv_shared", 0)
	if err := a.Reviews().Put(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-chB:
		if id != "rv_shared" {
			t.Errorf("B heard %q", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("B heard nothing")
	}
	approved := r.Clone()
	approved.Status = review.StatusApproved
	if err := b.Reviews().Update(t.Context(), approved, review.StatusPending); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-chA:
		if id != "rv_shared" {
			t.Errorf("A heard %q", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("A heard nothing of B's approval")
	}
	select {
	case id := <-chA:
		t.Errorf("A heard its own write %q", id)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestAuditShared checks that audit records appended through two Stores
// are listed by both.
func TestAuditShared(t *testing.T) {
	dsn := newDB(t)
	a, b := open(t, dsn, postgres.Options{}), open(t, dsn, postgres.Options{})
	if err := a.Audit().Append(t.Context(), []audit.Record{audittest.Fixture("one", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Audit().Append(t.Context(), []audit.Record{audittest.Fixture("two", time.Second)}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*postgres.Store{a, b} {
		recs, err := s.Audit().Query(t.Context(), audit.Query{})
		if err != nil || len(recs) != 2 || recs[0].Tool != "two" || recs[1].Tool != "one" {
			t.Errorf("Query = %v, %v; want two then one", recs, err)
		}
	}
}

// TestAcknowledgedWritesSurviveRestart restarts the server under four
// writers: every Put that returned nil is there afterwards, the writes
// during the outage fail with unavailable, and the writers succeed again
// without reopening the Store.
func TestAcknowledgedWritesSurviveRestart(t *testing.T) {
	srv := pgtest.New(t)
	dsn := srv.Database(t)
	s := open(t, dsn, postgres.Options{OpTimeout: 2 * time.Second})
	var (
		mu        sync.Mutex
		acked     []string
		failed    int
		restarted = make(chan struct{})
		afterOK   = make(chan struct{}, 4)
		stop      = make(chan struct{})
		wg        sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d_%d", w, i)
				err := s.Put(t.Context(), storetest.Record(name))
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, name)
					select {
					case <-restarted:
						select {
						case afterOK <- struct{}{}:
						default:
						}
					default:
					}
				case utcp.CodeOf(err) == utcp.CodeUnavailable:
					failed++
				default:
					t.Errorf("Put %s: %v (want nil or unavailable)", name, err)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	close(restarted)
	select {
	case <-afterOK:
	case <-time.After(20 * time.Second):
		t.Fatal("no write succeeded within 20s of the restart")
	}
	close(stop)
	wg.Wait()
	if failed == 0 {
		t.Error("no write failed while the server was down")
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, r := range list {
		stored[r.Name] = true
	}
	for _, name := range acked {
		if !stored[name] {
			t.Errorf("acknowledged write %s lost", name)
		}
	}
	t.Logf("%d writes acknowledged, %d failed during the outage", len(acked), failed)
}

// TestCloseLeavesNoGoroutines: Close stops the listener, the resync, every
// Watch and the pool.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	dsn := newDB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{ResyncInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Watch(context.Background())
	_ = s.Reviews().Watch(context.Background())
	if err := s.Put(t.Context(), storetest.Record("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond) // a resync or two
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRefusedDataIsInvalidRequest: data the database refuses (a NUL byte,
// invalid UTF-8: SQLSTATE class 22) is invalid_request, not unavailable,
// so nobody retries it; the store keeps working.
func TestRefusedDataIsInvalidRequest(t *testing.T) {
	s := open(t, newDB(t), postgres.Options{})
	for _, tool := range []string{"nul\x00byte", "bad\xffutf8"} {
		r := audittest.Fixture("refused", 0)
		r.Tool = tool
		err := s.Audit().Append(t.Context(), []audit.Record{r})
		if code := utcp.CodeOf(err); code != utcp.CodeInvalidRequest {
			t.Errorf("append of tool %q: %v (code %q), want invalid_request", tool, err, code)
		}
	}
	if err := s.Audit().Append(t.Context(), []audit.Record{audittest.Fixture("fine", 0)}); err != nil {
		t.Fatalf("a good record after the refused ones: %v", err)
	}
}
