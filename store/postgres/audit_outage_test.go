package postgres_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/internal/pgtest"
	"github.com/utcpd/utcpd/store/postgres"
)

// syncBuffer is a bytes.Buffer safe for the Writer's goroutine and the
// test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// auditRow is what the audit table holds of a record.
type auditRow struct {
	tool string
	time int64
}

// auditRows returns every row of the audit table in ID order, read with a
// connection of its own.
func auditRows(t *testing.T, dsn string) []auditRow {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT tool, time FROM audit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (auditRow, error) {
		var a auditRow
		err := r.Scan(&a.tool, &a.time)
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuditWriterSurvivesRestart writes audit records through a Writer,
// stops PostgreSQL, appends more, starts it again and flushes: every
// record is in the table exactly once, in append order, with its own
// time, and none is counted lost. Then records PostgreSQL rejects for
// good (a NUL byte, invalid UTF-8, a tool name too large for its index)
// are dropped and counted without holding back the records around them.
func TestAuditWriterSurvivesRestart(t *testing.T) {
	srv := pgtest.New(t)
	dsn := srv.Database(t)
	s := open(t, dsn, postgres.Options{ResyncInterval: -1, OpTimeout: 2 * time.Second})
	var logs syncBuffer
	w := audit.NewWriter(s.Audit(), audit.WriterOptions{BatchSize: 8,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() { _ = w.Close(context.Background()) }()

	base := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	var want []auditRow
	add := func(i int) {
		r := audit.Record{Tool: fmt.Sprintf("tool-%03d", i), Time: base.Add(time.Duration(i) * time.Millisecond),
			Decision: "allow", Outcome: "ok"}
		w.Append(r)
		want = append(want, auditRow{tool: r.Tool, time: r.Time.UnixNano()})
	}
	for i := range 20 {
		add(i)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := 20; i < 50; i++ {
		add(i)
	}
	waitFor(t, "the Writer to hold the records back", func() bool {
		return w.Held() == 30 && strings.Contains(logs.String(), "holding audit records back")
	})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := w.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while PostgreSQL is down = %v, want the deadline (records held)", err)
	}
	if w.Written() != 20 || w.Failed() != 0 || w.Dropped() != 0 {
		t.Errorf("during the outage: written %d failed %d dropped %d; want 20 0 0", w.Written(), w.Failed(), w.Dropped())
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 50; i < 60; i++ {
		add(i)
	}
	fctx, fcancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer fcancel()
	if err := w.Flush(fctx); err != nil {
		t.Fatalf("Flush after the restart: %v", err)
	}
	got := auditRows(t, dsn)
	if len(got) != len(want) {
		t.Fatalf("the table has %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if w.Written() != 60 || w.Failed() != 0 || w.Dropped() != 0 || w.Pending() != 0 {
		t.Errorf("after the restart: written %d failed %d dropped %d pending %d; want 60 0 0 0",
			w.Written(), w.Failed(), w.Dropped(), w.Pending())
	}

	// Records PostgreSQL refuses (SQLSTATE 22021 twice, 54000) are dropped,
	// each on its own; the batch around them is written.
	noise := make([]byte, 10000)
	_, _ = rand.Read(noise)
	for i, tool := range []string{"nul\x00byte", "bad\xffutf8", hex.EncodeToString(noise)} {
		add(100 + 2*i)
		w.Append(audit.Record{Tool: tool, Decision: "deny", Outcome: "tool_not_found"})
		add(101 + 2*i)
	}
	if err := w.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	got = auditRows(t, dsn)
	if len(got) != len(want) {
		t.Fatalf("the table has %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if w.Failed() != 3 || w.Written() != 66 {
		t.Errorf("failed %d written %d; want 3 66", w.Failed(), w.Written())
	}
	// They were told apart by PostgreSQL's own SQLSTATEs, although
	// store/postgres reports every database error as unavailable.
	for _, code := range []string{"SQLSTATE 22021", "SQLSTATE 54000"} {
		if !strings.Contains(logs.String(), code) {
			t.Errorf("the log does not mention %s:\n%s", code, logs.String())
		}
	}
}
