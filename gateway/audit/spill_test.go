package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
)

// TestWriterSpillsAtCloseAndReplays: with a spill file, the records the
// store cannot take at close are written there (not lost) and a new
// Writer writes them first, in order, with their own times, before the
// records appended to it; then the file is gone.
func TestWriterSpillsAtCloseAndReplays(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "audit-spill.jsonl")
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4, SpillPath: spill}, time.Hour, time.Hour)
	for i := range 7 {
		w.Append(rec(i))
	}
	waitUntil(t, "7 records held", func() bool { return w.Held() == 7 })
	closeWriter(t, w)
	if w.Failed() != 0 || w.Spilled() != 7 || w.Written() != 0 {
		t.Fatalf("failed %d spilled %d written %d; want 0 7 0", w.Failed(), w.Spilled(), w.Written())
	}
	fi, err := os.Stat(spill)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("spill file: %v %v", fi, err)
	}
	data, _ := os.ReadFile(spill)
	if n := strings.Count(string(data), "\n"); n != 7 {
		t.Errorf("spill file has %d lines, want 7:\n%s", n, data)
	}

	// Still down at the next start: the spilled records are held first,
	// the new ones behind them, and all of them spill again at close.
	w = audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4, SpillPath: spill}, time.Hour, time.Hour)
	for i := 7; i < 10; i++ {
		w.Append(rec(i))
	}
	waitUntil(t, "10 records held", func() bool { return w.Held() == 10 })
	closeWriter(t, w)
	if w.Spilled() != 10 || w.Failed() != 0 {
		t.Fatalf("second close: spilled %d failed %d", w.Spilled(), w.Failed())
	}

	// The store is back: everything is written once, in order.
	st.down.Store(false)
	w = audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4, SpillPath: spill}, fastMin, fastMax)
	w.Append(rec(10))
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), seq(0, 11))
	if _, err := os.Stat(spill); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spill file after the replay: %v", err)
	}
	closeWriter(t, w)
	if _, err := os.Stat(spill); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spill file after a clean close: %v", err)
	}
}

// TestWriterReplaysWithoutNewRecords: the spill file's records are
// written at start even when no call comes.
func TestWriterReplaysWithoutNewRecords(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill.jsonl")
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{SpillPath: spill}, time.Hour, time.Hour)
	w.Append(rec(0))
	w.Append(rec(1))
	waitUntil(t, "2 held", func() bool { return w.Held() == 2 })
	closeWriter(t, w)
	st.down.Store(false)
	w = audit.NewWriterBackoff(st, audit.WriterOptions{SpillPath: spill}, fastMin, fastMax)
	defer closeWriter(t, w)
	waitUntil(t, "the spilled records written", func() bool { return w.Written() == 2 })
	checkSeq(t, st.all(t), seq(0, 2))
	waitUntil(t, "the spill file removed", func() bool {
		_, err := os.Stat(spill)
		return errors.Is(err, os.ErrNotExist)
	})
}

// TestWriterSpillUnwritable: when the spill file cannot be written
// either, the records are lost and counted, as without one.
func TestWriterSpillUnwritable(t *testing.T) {
	st := newOutageStore()
	st.down.Store(true)
	spill := filepath.Join(t.TempDir(), "no-such-dir", "spill.jsonl")
	w := audit.NewWriterBackoff(st, audit.WriterOptions{SpillPath: spill}, time.Hour, time.Hour)
	w.Append(rec(0))
	waitUntil(t, "1 held", func() bool { return w.Held() == 1 })
	closeWriter(t, w)
	if w.Failed() != 1 || w.Spilled() != 0 {
		t.Errorf("failed %d spilled %d; want 1 0", w.Failed(), w.Spilled())
	}
}

// TestWriterSpillBadLines: unreadable lines of a spill file are skipped
// and counted; the good ones are written.
func TestWriterSpillBadLines(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill.jsonl")
	good := `{"time":"2026-01-02T03:04:05Z","tool":"t00000","outcome":"ok"}`
	if err := os.WriteFile(spill, []byte(good+"\nnot json\n{\"tool\":\"no time\"}\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := newOutageStore()
	w := audit.NewWriterBackoff(st, audit.WriterOptions{SpillPath: spill}, fastMin, fastMax)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the good record written", func() bool { return w.Written() == 1 })
	closeWriter(t, w)
	checkSeq(t, st.all(t), []int{0})
	if w.Failed() != 2 {
		t.Errorf("failed %d, want 2", w.Failed())
	}
}

// TestWriterCloseCtxSpills: when Close's ctx ends during a write that
// hangs, the records go to the spill file.
func TestWriterCloseCtxSpills(t *testing.T) {
	spill := filepath.Join(t.TempDir(), "spill.jsonl")
	w := audit.NewWriterBackoff(hangStore{audit.NewMemStore()}, audit.WriterOptions{SpillPath: spill}, fastMin, fastMax)
	for i := range 3 {
		w.Append(rec(i))
	}
	waitUntil(t, "a write under way", func() bool { return w.Held() > 0 && w.Pending() == 3 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline", err)
	}
	if w.Spilled() != 3 || w.Failed() != 0 {
		t.Errorf("spilled %d failed %d; want 3 0", w.Spilled(), w.Failed())
	}
}

// TestWriterTrims: MaxRows and MaxBytes apply at start (and every
// PruneInterval), besides the age limit, and count as pruned.
func TestWriterTrims(t *testing.T) {
	st := audit.NewMemStore()
	var recs []audit.Record
	for i := range 10 {
		r := rec(i)
		r.Time = time.Now()
		recs = append(recs, r)
	}
	if err := st.Append(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	w := audit.NewWriterBackoff(st, audit.WriterOptions{MaxRows: 3, Retention: time.Hour}, fastMin, fastMax)
	waitUntil(t, "the oldest seven trimmed", func() bool { return w.Pruned() == 7 })
	closeWriter(t, w)
	got, err := st.Query(t.Context(), audit.Query{})
	if err != nil || len(got) != 3 || got[0].Tool != rec(9).Tool || got[2].Tool != rec(7).Tool {
		t.Errorf("kept %v, %v", got, err)
	}
	// Records kept forever are still bounded by size.
	w = audit.NewWriterBackoff(st, audit.WriterOptions{MaxBytes: 1, Retention: -1}, fastMin, fastMax)
	waitUntil(t, "everything trimmed", func() bool { return w.Pruned() == 3 })
	closeWriter(t, w)
}
