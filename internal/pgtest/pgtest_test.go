package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestSharedDatabase checks that a test gets a database of its own on the
// shared server.
func TestSharedDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	a, b := srv.Database(t), srv.Database(t)
	if a == b {
		t.Fatalf("two databases with one DSN %s", a)
	}
	conn, err := pgx.Connect(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var one int
	if err := conn.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}

// TestStopStart checks that a committed row survives a stop and start of
// an owned cluster, and that the server refuses connections while stopped.
func TestStopStart(t *testing.T) {
	srv := pgtest.New(t)
	dsn := srv.Database(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE t (v int); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(t.Context())
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := pgx.Connect(t.Context(), dsn); err == nil {
		_ = c.Close(t.Context())
		t.Fatal("connected to a stopped server")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var v int
	if err := conn.QueryRow(t.Context(), "SELECT v FROM t").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after restart: %d, %v", v, err)
	}
}
