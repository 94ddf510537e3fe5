package audit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/utcp"
)

// outageStore is a MemStore whose Append fails with unavailable (as
// store/postgres reports a database it cannot reach) while down is set or
// while failures remain, and rejects for good the records whose tool is
// "bad" (invalid_request) or "nul" (an unavailable error carrying a
// PostgreSQL data exception, as store/postgres wraps every database error).
// Like the real stores, it writes all of a batch or none of it.
type outageStore struct {
	*audit.MemStore
	down     atomic.Bool
	flaky    atomic.Bool  // every other Append fails
	failures atomic.Int64 // the next this many Appends fail
	attempts atomic.Int64 // Appends called
}

func newOutageStore() *outageStore { return &outageStore{MemStore: audit.NewMemStore()} }

// pgError stands for *pgconn.PgError: an error with an SQLSTATE.
type pgError struct{ code string }

func (e *pgError) Error() string    { return "ERROR: invalid byte sequence (SQLSTATE " + e.code + ")" }
func (e *pgError) SQLState() string { return e.code }

func (s *outageStore) Append(ctx context.Context, recs []audit.Record) error {
	n := s.attempts.Add(1)
	if s.down.Load() || s.flaky.Load() && n%2 == 0 || s.failures.Add(-1) >= 0 {
		return utcp.NewError(utcp.CodeUnavailable, "test: database unavailable")
	}
	for _, r := range recs {
		switch r.Tool {
		case "bad":
			return utcp.NewError(utcp.CodeInvalidRequest, "test: record rejected")
		case "nul":
			return utcp.Errorf(utcp.CodeUnavailable, "test: database unavailable: %w", &pgError{"22021"})
		}
	}
	return s.MemStore.Append(ctx, recs)
}

// all returns every stored record, oldest (lowest ID) first.
func (s *outageStore) all(t *testing.T) []audit.Record {
	t.Helper()
	var out []audit.Record
	q := audit.Query{Limit: audit.MaxLimit}
	for {
		page, err := s.Query(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < audit.MaxLimit {
			break
		}
		q.Before = page[len(page)-1].ID
	}
	slices.Reverse(out)
	return out
}

// fast is a backoff short enough for tests.
const fastMin, fastMax = time.Millisecond, 4 * time.Millisecond

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// rec returns the i-th test record: its tool names it, its time is
// epoch + i seconds.
func rec(i int) audit.Record {
	return audit.Record{Tool: fmt.Sprintf("t%05d", i), Time: epoch.Add(time.Duration(i) * time.Second)}
}

// checkSeq checks that got is exactly the records rec(i) for want's i, in
// that order, with their original times.
func checkSeq(t *testing.T, got []audit.Record, want []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("stored %d records, want %d", len(got), len(want))
	}
	for k, i := range want {
		w := rec(i)
		if got[k].Tool != w.Tool || !got[k].Time.Equal(w.Time) {
			t.Fatalf("record %d = %s at %s, want %s at %s", k, got[k].Tool, got[k].Time, w.Tool, w.Time)
		}
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func closeWriter(t *testing.T, w *audit.Writer) {
	t.Helper()
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestWriterRetriesFailedBatch: a store that fails three times and then
// succeeds gets every record once, in order, with its own time; nothing is
// counted lost.
func TestWriterRetriesFailedBatch(t *testing.T) {
	st := newOutageStore()
	st.failures.Store(3)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 8}, fastMin, fastMax)
	defer closeWriter(t, w)
	for i := range 100 {
		w.Append(rec(i))
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), seq(0, 100))
	if w.Written() != 100 || w.Failed() != 0 || w.Dropped() != 0 || w.Pending() != 0 || w.Held() != 0 {
		t.Errorf("written %d failed %d dropped %d pending %d held %d; want 100 0 0 0 0",
			w.Written(), w.Failed(), w.Dropped(), w.Pending(), w.Held())
	}
	if n := st.attempts.Load(); n < 4 {
		t.Errorf("%d Appends, want at least 4 (3 failures, then success)", n)
	}
}

// TestWriterQueuesBehindHeldBatch: records appended while the store is
// down are held behind the failed batch and written after it, in append
// order, once the store is back; Flush waits for them.
func TestWriterQueuesBehindHeldBatch(t *testing.T) {
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4}, fastMin, fastMax)
	defer closeWriter(t, w)
	for i := range 10 {
		w.Append(rec(i))
	}
	waitUntil(t, "failed attempts", func() bool { return st.attempts.Load() >= 3 })
	for i := 10; i < 30; i++ {
		w.Append(rec(i))
	}
	waitUntil(t, "30 records held", func() bool { return w.Held() == 30 })
	if w.Pending() != 30 || w.Written() != 0 || w.Failed() != 0 {
		t.Errorf("during the outage: pending %d written %d failed %d; want 30 0 0", w.Pending(), w.Written(), w.Failed())
	}
	// Flush waits for the held records: it cannot end while the store is down.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := w.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the store is down = %v, want the deadline", err)
	}
	st.down.Store(false)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), seq(0, 30))
	if w.Written() != 30 || w.Held() != 0 {
		t.Errorf("after the outage: written %d held %d; want 30 0", w.Written(), w.Held())
	}
}

// TestWriterMaxHeldKeepsOldest: while the store is down the Writer holds
// at most MaxHeld records, then the queue fills, then new records are
// dropped and counted; the oldest are the ones written afterwards.
func TestWriterMaxHeldKeepsOldest(t *testing.T) {
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{QueueSize: 5, BatchSize: 4, MaxHeld: 10}, fastMin, fastMax)
	defer closeWriter(t, w)
	for i := range 10 {
		w.Append(rec(i))
		waitUntil(t, fmt.Sprintf("%d records held", i+1), func() bool { return w.Held() == i+1 })
	}
	for i := 10; i < 20; i++ {
		w.Append(rec(i))
	}
	// 10 held, 5 queued behind them, 5 dropped.
	if w.Held() != 10 || w.Pending() != 15 || w.Dropped() != 5 {
		t.Errorf("held %d pending %d dropped %d; want 10 15 5", w.Held(), w.Pending(), w.Dropped())
	}
	st.down.Store(false)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), seq(0, 15))
	if w.Written() != 15 || w.Dropped() != 5 || w.Failed() != 0 {
		t.Errorf("written %d dropped %d failed %d; want 15 5 0", w.Written(), w.Dropped(), w.Failed())
	}
}

// TestWriterDropsRejectedRecords: records the store rejects for good
// (invalid_request, or a PostgreSQL data exception however it is wrapped)
// do not block the queue: each is dropped and counted, and the records of
// its batch around it are written, in order.
func TestWriterDropsRejectedRecords(t *testing.T) {
	st := newOutageStore()
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 16}, fastMin, fastMax)
	defer closeWriter(t, w)
	bad := map[int]string{3: "bad", 17: "nul", 18: "bad", 40: "nul"}
	var good []int
	for i := range 50 {
		r := rec(i)
		if tool, ok := bad[i]; ok {
			r.Tool = tool
		} else {
			good = append(good, i)
		}
		w.Append(r)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), good)
	if w.Failed() != 4 || w.Written() != 46 {
		t.Errorf("failed %d written %d; want 4 46", w.Failed(), w.Written())
	}
	// The Writer goes on as usual.
	w.Append(rec(50))
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 47 {
		t.Errorf("written %d after one more record, want 47", w.Written())
	}
}

// TestWriterCloseTriesOnceThenDrops: Close makes one more attempt at
// once (not after the backoff); when the store is still down it drops the
// held records and counts them as failed.
func TestWriterCloseTriesOnceThenDrops(t *testing.T) {
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4}, time.Hour, time.Hour)
	for i := range 7 {
		w.Append(rec(i))
	}
	waitUntil(t, "7 records held", func() bool { return w.Held() == 7 })
	before := st.attempts.Load()
	closeWriter(t, w)
	if n := st.attempts.Load() - before; n != 1 {
		t.Errorf("Close made %d attempts, want 1", n)
	}
	if w.Failed() != 7 || w.Written() != 0 || w.Pending() != 0 {
		t.Errorf("failed %d written %d pending %d; want 7 0 0", w.Failed(), w.Written(), w.Pending())
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Errorf("Flush after Close = %v", err)
	}
}

// TestWriterCloseWritesHeldRecords: when the store is back by the time
// of Close, Close writes the held and queued records without waiting for
// the backoff.
func TestWriterCloseWritesHeldRecords(t *testing.T) {
	st := newOutageStore()
	st.down.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 4}, time.Hour, time.Hour)
	for i := range 7 {
		w.Append(rec(i))
	}
	waitUntil(t, "7 records held", func() bool { return w.Held() == 7 })
	st.down.Store(false)
	closeWriter(t, w)
	checkSeq(t, st.all(t), seq(0, 7))
	if w.Failed() != 0 || w.Written() != 7 {
		t.Errorf("failed %d written %d; want 0 7", w.Failed(), w.Written())
	}
}

// hangStore's Append waits for its ctx to end, as with a database that
// does not answer.
type hangStore struct{ *audit.MemStore }

func (hangStore) Append(ctx context.Context, _ []audit.Record) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestWriterCloseCtxCancelsWrite: the end of Close's ctx cancels the write
// under way; the records are dropped and counted, and the Writer stops.
func TestWriterCloseCtxCancelsWrite(t *testing.T) {
	w := audit.NewWriterBackoff(hangStore{audit.NewMemStore()}, audit.WriterOptions{}, fastMin, fastMax)
	for i := range 3 {
		w.Append(rec(i))
	}
	waitUntil(t, "a write under way", func() bool { return w.Held() > 0 && w.Pending() == 3 })
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline", err)
	}
	closeWriter(t, w) // waits for the Writer to stop
	if w.Failed() != 3 || w.Pending() != 0 {
		t.Errorf("failed %d pending %d; want 3 0", w.Failed(), w.Pending())
	}
}

// TestWriterFlappingStoreConcurrent: writers append while the store goes
// down and up; every record is written exactly once, each writer's in its
// order.
func TestWriterFlappingStoreConcurrent(t *testing.T) {
	st := newOutageStore()
	w := audit.NewWriterBackoff(st, audit.WriterOptions{BatchSize: 16}, fastMin, fastMax)
	defer closeWriter(t, w)
	stop := make(chan struct{})
	var flap sync.WaitGroup
	flap.Go(func() {
		for {
			select {
			case <-stop:
				st.down.Store(false)
				return
			case <-time.After(3 * time.Millisecond):
				st.down.Store(!st.down.Load())
			}
		}
	})
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				w.Append(audit.Record{Tool: fmt.Sprintf("g%d", g), Reason: fmt.Sprint(i)})
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	flap.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := st.all(t)
	if len(got) != writers*each || w.Written() != writers*each || w.Dropped() != 0 || w.Failed() != 0 {
		t.Fatalf("stored %d written %d dropped %d failed %d; want %d, %d, 0, 0",
			len(got), w.Written(), w.Dropped(), w.Failed(), writers*each, writers*each)
	}
	next := map[string]int{}
	for _, r := range got {
		if r.Reason != fmt.Sprint(next[r.Tool]) {
			t.Fatalf("writer %s: record %s after %d", r.Tool, r.Reason, next[r.Tool])
		}
		next[r.Tool]++
	}
	if st.attempts.Load() <= int64(len(got)/16) {
		t.Logf("the store never failed an Append (%d attempts)", st.attempts.Load())
	}
}

// TestWriterPartialRecovery: a store that fails every other Append while
// a backlog builds up (batches written between failures, records taken
// behind them, up to MaxHeld) still gets every record once, in order.
func TestWriterPartialRecovery(t *testing.T) {
	st := newOutageStore()
	st.flaky.Store(true)
	w := audit.NewWriterBackoff(st, audit.WriterOptions{QueueSize: 20000, BatchSize: 7, MaxHeld: 100}, fastMin, fastMax)
	defer closeWriter(t, w)
	for i := range 1500 {
		w.Append(rec(i))
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, st.all(t), seq(0, 1500))
	if w.Written() != 1500 || w.Failed() != 0 || w.Dropped() != 0 {
		t.Errorf("written %d failed %d dropped %d; want 1500 0 0", w.Written(), w.Failed(), w.Dropped())
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{utcp.NewError(utcp.CodeUnavailable, "down"), true},
		{utcp.NewError(utcp.CodeTimeout, "slow"), true},
		{fmt.Errorf("postgres: append: %w", context.DeadlineExceeded), true},
		{context.Canceled, true},
		{utcp.Errorf(utcp.CodeUnavailable, "x: %w", &pgError{"08006"}), true}, // connection failure
		{utcp.Errorf(utcp.CodeUnavailable, "x: %w", &pgError{"57P01"}), true}, // admin shutdown
		{utcp.Errorf(utcp.CodeUnavailable, "x: %w", &pgError{"22021"}), false},
		{utcp.Errorf(utcp.CodeUnavailable, "x: %w", &pgError{"23505"}), false},
		{utcp.Errorf(utcp.CodeUnavailable, "x: %w", &pgError{"54000"}), false},
		{utcp.NewError(utcp.CodeInvalidRequest, "bad"), false},
		{errors.New("plain"), false},
		{nil, false},
	} {
		if got := audit.Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestWriterLingerGroupsRecords: with a linger window, records appended
// one at a time go to the store in one transaction (one Append) when the
// window ends, a Flush or Close writes at once, and a full batch is
// written without waiting for the window.
func TestWriterLingerGroupsRecords(t *testing.T) {
	s := newOutageStore()
	w := audit.NewWriter(s, audit.WriterOptions{Linger: time.Hour, BatchSize: 8, Retention: -1})
	for i := range 5 {
		w.Append(rec(i))
	}
	waitUntil(t, "the records to be queued or held", func() bool { return w.Pending() == 5 })
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := s.attempts.Load(); n != 1 {
		t.Errorf("5 records lingering, then a Flush: %d Appends, want 1 (grouped)", n)
	}
	checkSeq(t, s.all(t), seq(0, 5))

	for i := 5; i < 5+8; i++ { // a full batch: written at once
		w.Append(rec(i))
	}
	waitUntil(t, "the full batch to be written", func() bool { return w.Written() == 13 })
	if n := s.attempts.Load(); n != 2 {
		t.Errorf("a full batch: %d Appends in all, want 2", n)
	}

	for i := 13; i < 16; i++ { // lingering at Close: written
		w.Append(rec(i))
	}
	closeWriter(t, w)
	checkSeq(t, s.all(t), seq(0, 16))
	if w.Dropped() != 0 || w.Failed() != 0 {
		t.Errorf("dropped %d, failed %d, want none", w.Dropped(), w.Failed())
	}
}

// TestWriterLingerWindowEnds: records that wait for their window are
// written when it ends, with no Flush.
func TestWriterLingerWindowEnds(t *testing.T) {
	s := newOutageStore()
	w := audit.NewWriter(s, audit.WriterOptions{Linger: 5 * time.Millisecond, Retention: -1})
	defer closeWriter(t, w)
	for i := range 3 {
		w.Append(rec(i))
	}
	waitUntil(t, "the lingering records to be written", func() bool { return w.Written() == 3 })
	checkSeq(t, s.all(t), seq(0, 3))
}
