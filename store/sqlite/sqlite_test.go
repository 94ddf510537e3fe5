package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/storetest"
	"github.com/utcpd/utcpd/utcp"
)

// crashChildEnv, when set to a directory, turns the test binary into the
// child process of TestCrashDurability (see crashChild).
const (
	crashChildEnv   = "UTCPD_SQLITE_CRASH_CHILD_DIR"
	crashChildRound = "UTCPD_SQLITE_CRASH_CHILD_ROUND"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir, os.Getenv(crashChildRound)))
	}
	os.Exit(m.Run())
}

func openStore(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(t.Context(), dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawDB opens the database file directly, for inspecting what the Store
// wrote.
func rawDB(t *testing.T, file string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(file, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) registry.Store {
		s, err := Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	s := openStore(t, dir)
	if err := s.Put(t.Context(), storetest.Record("m")); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, FileName); s.Path() != want {
		t.Errorf("Path() = %q, want %q", s.Path(), want)
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o700},
		{filepath.Join(dir, FileName), 0o600},
		{filepath.Join(dir, FileName+"-wal"), 0o600},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Errorf("stat: %v", err)
			continue
		}
		if got := fi.Mode().Perm(); got != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, got, tc.mode)
		}
	}
}

func TestPragmas(t *testing.T) {
	s := openStore(t, t.TempDir(), WithBusyTimeout(1234*time.Millisecond))
	for _, db := range []struct {
		name string
		db   *sql.DB
	}{{"writer", s.wdb()}, {"reader", s.reader}} {
		for _, p := range []struct{ pragma, want string }{
			{"journal_mode", "wal"},
			{"synchronous", "2"},
			{"foreign_keys", "1"},
			{"busy_timeout", "1234"},
		} {
			var got string
			if err := db.db.QueryRowContext(t.Context(), "PRAGMA "+p.pragma).Scan(&got); err != nil {
				t.Fatalf("%s: PRAGMA %s: %v", db.name, p.pragma, err)
			}
			if got != p.want {
				t.Errorf("%s: PRAGMA %s = %s, want %s", db.name, p.pragma, got, p.want)
			}
		}
	}
	var ts int
	if err := s.wdb().QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&ts); err != nil || ts != 2 {
		t.Errorf("writer temp_store = %d, %v; want 2 (memory: statement journals never spill to a file)", ts, err)
	}
	var qo int
	if err := s.reader.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&qo); err != nil || qo != 1 {
		t.Errorf("reader query_only = %d, %v; want 1", qo, err)
	}
	if s.wdb().Stats().MaxOpenConnections != 1 {
		t.Errorf("writer pool allows %d connections, want 1", s.wdb().Stats().MaxOpenConnections)
	}
}

func TestReopenPersists(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s1, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	pending := storetest.Record("pending")
	pending.Manual = nil
	pending.Refreshed = time.Time{}
	want := []*registry.Record{storetest.Record("alpha"), storetest.Record("beta"), pending}
	for _, rec := range append(want, storetest.Record("gone")) {
		if err := s1.Put(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	replaced := storetest.Record("beta")
	replaced.Source = registry.SourceConfig
	replaced.Manual.Tools = replaced.Manual.Tools[1:]
	if err := s1.Put(ctx, replaced); err != nil {
		t.Fatal(err)
	}
	want[1] = replaced
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, dir)
	got, err := s2.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := storetest.Diff(want, got); d != "" {
		t.Errorf("after reopen (-want +got):\n%s", d)
	}
	if _, err := s2.Get(ctx, "gone"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deleted record after reopen: %v, want not found", err)
	}
}

func TestMigrationIdempotent(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		s := openStore(t, dir)
		if err := s.Put(t.Context(), storetest.Record(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db := rawDB(t, filepath.Join(dir, FileName))
	rows, err := db.QueryContext(t.Context(), `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var want []int
	for v := 1; v <= SchemaVersion; v++ {
		want = append(want, v)
	}
	if d := cmp.Diff(want, versions); d != "" {
		t.Errorf("schema_migrations after 3 opens (-want +got):\n%s", d)
	}
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM manuals`).Scan(&n); err != nil || n != 3 {
		t.Errorf("manuals rows = %d, %v; want 3", n, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if err := s.Put(t.Context(), storetest.Record("keep")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, FileName)
	db := rawDB(t, file)
	future := SchemaVersion + 1
	if _, err := db.ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, future); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE from_the_future (x)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := Open(t.Context(), dir)
	if err == nil {
		_ = s2.Close()
		t.Fatal("Open of a newer schema succeeded")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("error %v does not match ErrSchemaTooNew", err)
	}
	for _, want := range []string{file, fmt.Sprintf("version %d", future), fmt.Sprintf("up to %d", SchemaVersion)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// The refusal changed nothing.
	db = rawDB(t, file)
	var top, n int
	if err := db.QueryRowContext(t.Context(), `SELECT MAX(version), count(*) FROM schema_migrations`).Scan(&top, &n); err != nil {
		t.Fatal(err)
	}
	if top != future || n != SchemaVersion+1 {
		t.Errorf("schema_migrations: max %d, %d rows; want %d, %d", top, n, future, SchemaVersion+1)
	}
}

func TestOpenErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.MkdirAll(garbage, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(garbage, FileName), bytes.Repeat([]byte("not a database "), 512), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"empty": "", "file_as_dir": notDir, "not_a_database": garbage} {
		t.Run(name, func(t *testing.T) {
			s, err := Open(t.Context(), dir)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

// The manual is stored as JSON; the tool call templates' Raw must come
// back with every transport-specific field, and the record template byte
// for byte.
func TestTemplatesRoundTrip(t *testing.T) {
	s := openStore(t, t.TempDir())
	tct := `{"call_template_type":"http","url":"https://x.example/a?b=<c>&d","http_method":"POST",` +
		`"headers":{"X-Ünï":"${TOKEN}"},"body_field":"body","zeta":[1,2.50,{"deep":null}],"alpha":true}`
	manualJSON := `{"utcp_version":"1.1.0","manual_version":"1","tools":[{"name":"t","description":"d",` +
		`"tags":["a"],"tool_call_template":` + tct + `}]}`
	var m utcp.Manual
	if err := json.Unmarshal([]byte(manualJSON), &m); err != nil {
		t.Fatal(err)
	}
	tmpl := json.RawMessage("{ \"name\": \"raw\",\n  \"call_template_type\": \"cli\", \"commands\": [{\"command\": \"echo $X\"}] }\n")
	rec := &registry.Record{Name: "raw", Template: tmpl, Manual: &m, Source: registry.SourceDir}
	if err := s.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), "raw")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Template, tmpl) {
		t.Errorf("Template = %q, want the bytes put, %q", got.Template, tmpl)
	}
	gotRaw := got.Manual.Tools[0].ToolCallTemplate.Raw
	var want, have any
	_ = json.Unmarshal([]byte(tct), &want)
	if err := json.Unmarshal(gotRaw, &have); err != nil {
		t.Fatalf("stored Raw is not JSON: %v", err)
	}
	if d := cmp.Diff(want, have); d != "" {
		t.Errorf("tool_call_template Raw (-want +got):\n%s", d)
	}
	// Key order survives too (JSON encoding compacts and HTML-escapes, no more).
	if i, j := bytes.Index(gotRaw, []byte(`"zeta"`)), bytes.Index(gotRaw, []byte(`"alpha"`)); i < 0 || j < i {
		t.Errorf("key order changed: %s", gotRaw)
	}
	if ct := got.Manual.Tools[0].ToolCallTemplate; ct.Type != "http" || ct.Spec != nil {
		t.Errorf("decoded template: type %q, spec %v", ct.Type, ct.Spec)
	}
}

func TestTimes(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	loc := time.FixedZone("X", -(7*3600 + 1800))
	rec := storetest.Record("t")
	rec.Registered = time.Date(1999, 12, 31, 23, 59, 59, 123456789, loc)
	rec.Refreshed = time.Now() // with a monotonic reading
	if err := s.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Registered.Equal(rec.Registered) || got.Registered.Nanosecond() != 123456789 {
		t.Errorf("Registered = %v, want %v (nanosecond precision)", got.Registered, rec.Registered)
	}
	if !got.Refreshed.Equal(rec.Refreshed) {
		t.Errorf("Refreshed = %v, want %v", got.Refreshed, rec.Refreshed)
	}
	if got.Registered.Location() != time.UTC {
		t.Errorf("Registered location = %v, want UTC", got.Registered.Location())
	}

	for _, bad := range []time.Time{time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		r := storetest.Record("bad")
		r.Refreshed = bad
		if err := s.Put(ctx, r); utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("Put with time %v: %v, want invalid_request", bad, err)
		}
	}
	if _, err := s.Get(ctx, "bad"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("out-of-range Put stored a record: %v", err)
	}
}

func TestClosed(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := t.Context()
	if err := s.Put(ctx, storetest.Record("x")); err != nil {
		t.Fatal(err)
	}
	watch := s.Watch(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-watch:
		if ok {
			t.Error("Watch sent a change")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch channel not closed by Close")
	}
	if _, ok := <-s.Watch(ctx); ok {
		t.Error("Watch after Close sent a change")
	}
	_, gerr := s.Get(ctx, "x")
	_, lerr := s.List(ctx)
	for name, err := range map[string]error{
		"Put": s.Put(ctx, storetest.Record("y")), "Get": gerr, "List": lerr, "Delete": s.Delete(ctx, "x"),
	} {
		if utcp.CodeOf(err) != utcp.CodeUnavailable {
			t.Errorf("%s after Close: %v, want code unavailable", name, err)
		}
	}
}

func TestContextCanceled(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, storetest.Record("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context: %v", err)
	}
	if _, err := s.List(ctx); utcp.CodeOf(err) != utcp.CodeCanceled {
		t.Errorf("List with a canceled context: %v (code %s)", err, utcp.CodeOf(err))
	}
	if _, err := s.Get(t.Context(), "x"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("canceled Put stored a record: %v", err)
	}
}

// Two Stores on one file (two processes, say) share the data; writes wait
// for each other's locks rather than failing.
func TestTwoStoresOneFile(t *testing.T) {
	dir := t.TempDir()
	a, b := openStore(t, dir), openStore(t, dir)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i, s := range []*Store{a, b} {
		wg.Go(func() {
			for j := range 25 {
				if err := s.Put(t.Context(), storetest.Record(fmt.Sprintf("s%d_%d", i, j))); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, s := range []*Store{a, b} {
		list, err := s.List(t.Context())
		if err != nil || len(list) != 50 {
			t.Errorf("List: %d records, %v; want 50", len(list), err)
		}
	}
}

// Many records go through the parallel decoder; order and content hold.
func TestListMany(t *testing.T) {
	s := openStore(t, t.TempDir())
	var want []string
	for i := range 100 {
		name := fmt.Sprintf("n%03d", (i*37)%100)
		want = append(want, name)
		if err := s.Put(t.Context(), storetest.Record(name)); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range list {
		got = append(got, r.Name)
		if d := storetest.Diff(storetest.Record(r.Name), r); d != "" {
			t.Fatalf("record %s (-want +got):\n%s", r.Name, d)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("List names (-want +got):\n%s", d)
	}
}

// crashChild is the child process of TestCrashDurability. It opens the
// store in dir and runs steps forever: step i puts the record
// crashName(round, i), except every fifth step, which deletes the record of
// step i-2. After each operation returns it writes one line, "put NAME" or
// "del NAME", to stdout (unbuffered: one write per line).
func crashChild(dir, round string) int {
	ctx := context.Background()
	s, err := Open(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	for i := 0; ; i++ {
		op, name := crashStep(round, i)
		if op == "del" {
			err = s.Delete(ctx, name)
		} else {
			err = s.Put(ctx, storetest.Record(name))
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s %s: %v\n", op, name, err)
			return 3
		}
		if _, err := fmt.Fprintln(os.Stdout, op, name); err != nil {
			return 4
		}
	}
}

func crashStep(round string, i int) (op, name string) {
	if i%5 == 4 {
		return "del", fmt.Sprintf("r%s_%06d", round, i-2)
	}
	return "put", fmt.Sprintf("r%s_%06d", round, i)
}

// TestCrashDurability kills a writing child process with SIGKILL at a
// random moment and checks that everything it acknowledged is in the
// database, and nothing it did not attempt. Three rounds share one
// database, so recovery after a crash is exercised too. (It proves
// durability across a process crash; power loss is covered by
// synchronous=FULL, which a test cannot cut.)
func TestCrashDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	present := map[string]bool{} // what must be in the store after every round
	for round := range 3 {
		r := fmt.Sprint(round)
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashChildRound+"="+r)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		watchdog := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
		killAfter := 200 + rand.IntN(300)
		sc := bufio.NewScanner(stdout)
		var lines []string
		killed := false
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) == killAfter && !killed {
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				if err := cmd.Process.Kill(); err != nil { // SIGKILL
					t.Fatal(err)
				}
				killed = true
			}
			// Keep reading: lines written before the kill are acknowledgements too.
		}
		watchdog.Stop()
		err = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited after %d acknowledgements (%v); stderr:\n%s", round, len(lines), err, stderr.String())
		}
		if err == nil {
			t.Fatalf("round %d: child exited cleanly after being killed", round)
		}
		// Apply the acknowledgements; the step after the last one was in
		// flight and may or may not have happened.
		for i, line := range lines {
			op, name := crashStep(r, i)
			if line != op+" "+name {
				t.Fatalf("round %d: line %d is %q, want %q", round, i, line, op+" "+name)
			}
			present[name] = op == "put"
		}
		inOp, inName := crashStep(r, len(lines))
		t.Logf("round %d: killed after %d acknowledgements (%d read before the kill), in flight: %s %s",
			round, len(lines), killAfter, inOp, inName)

		s, err := Open(t.Context(), dir)
		if err != nil {
			t.Fatalf("round %d: reopen after kill: %v", round, err)
		}
		list, err := s.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*registry.Record{}
		for _, rec := range list {
			got[rec.Name] = rec
		}
		for name, want := range present {
			rec, ok := got[name]
			switch {
			case name == inName:
				// in flight: either outcome is right
			case want && !ok:
				t.Errorf("round %d: acknowledged put %s is missing", round, name)
			case !want && ok:
				t.Errorf("round %d: acknowledged delete %s is undone", round, name)
			case ok:
				if d := storetest.Diff(storetest.Record(name), rec); d != "" {
					t.Errorf("round %d: record %s (-want +got):\n%s", round, name, d)
				}
			}
		}
		for name := range got {
			if _, ok := present[name]; !ok && name != inName {
				t.Errorf("round %d: record %s was never written", round, name)
			}
		}
		// Settle the in-flight step for the next rounds.
		if _, ok := got[inName]; ok {
			present[inName] = true
		} else if _, known := present[inName]; known {
			present[inName] = false
		}
		var check string
		if err := s.reader.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Errorf("round %d: integrity_check = %q, %v", round, check, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.Logf("child stderr:\n%s", stderr.String())
			return
		}
	}
	t.Logf("%d records present after 3 crashes", countTrue(present))
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

func TestUnencodableManual(t *testing.T) {
	s := openStore(t, t.TempDir())
	rec := storetest.Record("bad")
	rec.Manual.Tools[0].ToolCallTemplate.Raw = json.RawMessage(`{"call_template_type":`)
	if err := s.Put(t.Context(), rec); utcp.CodeOf(err) != utcp.CodeInvalidManual {
		t.Errorf("Put of an unencodable manual: %v, want invalid_manual", err)
	}
	if _, err := s.Get(t.Context(), "bad"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("unencodable manual was stored: %v", err)
	}
}

// Closing while other goroutines use the store neither panics nor races;
// their operations succeed or fail as unavailable.
func TestCloseWhileBusy(t *testing.T) {
	s := openStore(t, t.TempDir())
	for i := range 20 {
		if err := s.Put(t.Context(), storetest.Record(fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var err error
				switch i % 3 {
				case 0:
					err = s.Put(t.Context(), storetest.Record(fmt.Sprintf("w%d_%d", w, i)))
				case 1:
					_, err = s.List(t.Context())
				case 2:
					_, err = s.Get(t.Context(), "m1")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if utcp.CodeOf(err) != utcp.CodeUnavailable {
			t.Errorf("operation racing Close: %v (code %s), want unavailable", err, utcp.CodeOf(err))
		}
	}
}

func TestPinConformance(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) registry.PinStore {
		s, err := Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
