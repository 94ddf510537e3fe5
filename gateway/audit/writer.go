package audit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Defaults of WriterOptions.
const (
	// DefaultQueueSize is how many records wait for the store at most.
	DefaultQueueSize = 8192
	// DefaultBatchSize is how many records one Append writes at most.
	DefaultBatchSize = 512
	// DefaultRetention is how long records are kept (audit_retention).
	DefaultRetention = 720 * time.Hour
	// DefaultMaxHeld is how many records a Writer holds back at most
	// while the store is unavailable.
	DefaultMaxHeld = 100_000
	// DefaultLinger is the group-commit window the daemon uses
	// (WriterOptions.Linger): records of the last DefaultLinger can be
	// lost if the process is killed (SIGKILL, power loss), never on a
	// clean stop.
	DefaultLinger = 10 * time.Millisecond
)

// The backoff between two attempts to write held-back records: it starts
// at retryMin and doubles up to retryMax.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// appendTimeout bounds one Store.Append.
const appendTimeout = 30 * time.Second

// WriterOptions configure a Writer. The zero value uses the defaults.
type WriterOptions struct {
	// QueueSize bounds the records waiting to be written; a record that
	// finds the queue full is dropped and counted (Dropped).
	QueueSize int
	// BatchSize caps the records written by one Store.Append.
	BatchSize int
	// Linger, when positive, groups records into fewer store
	// transactions (group commit): after the first record of a batch,
	// the Writer waits up to Linger for more, and writes the batch once
	// it holds BatchSize records or Linger has passed, whichever comes
	// first; a Flush or Close writes at once. With a store that syncs
	// each transaction to disk (SQLite, PostgreSQL), this turns one sync
	// per call into at most one per Linger. The cost is the crash
	// window: the records of the last Linger (and those queued) are only
	// in memory, and lost if the process is killed or the machine loses
	// power; a clean stop (Close) writes them. Zero or negative writes
	// each batch as soon as a record arrives (what is queued then).
	Linger time.Duration
	// MaxHeld bounds the records taken from the queue and not written yet
	// (default DefaultMaxHeld): while the store is unavailable, the
	// Writer keeps taking records from the queue, behind the batch that
	// failed, until it holds MaxHeld; then new records wait in the queue,
	// and once that is full too they are dropped and counted (Dropped).
	// The oldest records are kept, the newest dropped, so that what is
	// written stays one unbroken stretch of calls. At most QueueSize +
	// MaxHeld records are in memory.
	MaxHeld int
	// Retention is how long records are kept: older ones are pruned at
	// start and then every PruneInterval. Negative keeps them forever.
	Retention time.Duration
	// MaxRows and MaxBytes, when positive, bound the records kept
	// (settings audit_max_rows and audit_max_bytes): the oldest beyond
	// MaxRows records, or beyond MaxBytes of encoded records, are deleted
	// with the old ones, at start and every PruneInterval, when the Store
	// is a Trimmer.
	MaxRows, MaxBytes int64
	// PruneInterval is how often old records are pruned (default: a
	// tenth of Retention, between one minute and one hour; one minute
	// when records are kept forever).
	PruneInterval time.Duration
	// SpillPath, when set, keeps what Close could not write: the records
	// still held back or queued when the store is unavailable at close
	// are written to this file (one JSON record a line, mode 0600,
	// replaced atomically) instead of being lost, and a Writer created
	// with the same SpillPath writes the file's records first (at most
	// MaxHeld + QueueSize of them), in their order and with their own
	// times, then removes it.
	SpillPath string
	// Logger receives write failures; nil discards them.
	Logger *slog.Logger
}

// Writer appends records to a Store from one background goroutine, in
// batches, so that auditing costs a call only a channel send. With
// WriterOptions.Linger the batches are group commits: one transaction for
// the records of up to Linger. When the
// store falls behind and the queue is full, records are dropped and
// counted rather than slowing calls down.
//
// When the store fails with an error that Retryable accepts (the database
// is unavailable: PostgreSQL restarting, say), the batch is not lost: it is
// held back and retried with backoff (100 ms doubling to 5 s) until the
// store takes it or the Writer is closed, and the records that arrive
// meanwhile are held behind it, up to WriterOptions.MaxHeld. Records are
// written in the order they were appended, with their own times. A record
// the store rejects for good (any other error) is dropped and counted
// (Failed); the rest of its batch is still written. Held-back records are
// only in memory until Close: with WriterOptions.SpillPath, what Close
// cannot write goes to that file and is written at the next start;
// without it, or if the process dies, they are lost.
//
// Create it with NewWriter; Close flushes. A Writer is safe for
// concurrent use.
type Writer struct {
	store Store
	opts  WriterOptions
	log   *slog.Logger

	retryMin, retryMax time.Duration

	// queue holds pointers, not records: a buffer of QueueSize records
	// (about 300 bytes each) would stay resident and be scanned by every
	// garbage collection, while the queue is nearly always almost empty.
	queue   chan *Record // from recordPool, back to it once held
	flushes chan chan struct{}
	// While the run goroutine lingers it does not read the queue, so
	// that a call's Append wakes no goroutine: records wait in the queue
	// until the linger timer fires. quiet says it lingers; an Append that
	// finds room records or more queued then kicks it (the batch is
	// full). kick holds one signal at most.
	quiet    atomic.Bool
	room     atomic.Int64
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	trimOnce sync.Once
	closed   atomic.Bool
	// ctx bounds every store operation; the end of the first Close's ctx
	// cancels it (unregister, set before stop is closed, undoes that).
	ctx        context.Context
	cancel     context.CancelFunc
	unregister func() bool

	dropped, written, failed, pruned, spilled atomic.Uint64
	nheld                                     atomic.Int64

	// Owned by the run goroutine.
	held     []Record // taken from the queue, not written yet: held[head:]
	head     int
	taken    uint64 // records taken from the queue so far
	resolved uint64 // of those, written or lost
	delay    time.Duration
	retry    *time.Timer
	linger   *time.Timer
	// lingering: held records wait for linger to fire (or the batch to
	// fill) before they are written.
	lingering bool
	waiters   []flushWaiter
	// replay is the taken count once the spill file's records are all
	// resolved (then the file is removed); 0 when no file was read.
	replay uint64
}

// A flushWaiter is a Flush waiting for the records before it.
type flushWaiter struct {
	ack    chan struct{}
	target uint64 // done once resolved reaches it
}

// NewWriter returns a running Writer appending to store.
func NewWriter(store Store, opts WriterOptions) *Writer {
	return newWriter(store, opts, retryMin, retryMax)
}

func newWriter(store Store, opts WriterOptions, rmin, rmax time.Duration) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.MaxHeld <= 0 {
		opts.MaxHeld = DefaultMaxHeld
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = min(max(opts.Retention/10, time.Minute), time.Hour)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{store: store, opts: opts, log: log, retryMin: rmin, retryMax: rmax,
		queue: make(chan *Record, opts.QueueSize), flushes: make(chan chan struct{}), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.loadSpill()
	go w.run()
	return w
}

// Append queues r for writing and returns at once. A record that finds
// the queue full, or the Writer closed, is dropped and counted. A zero
// Time is set to now.
func (w *Writer) Append(r Record) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	if w.closed.Load() {
		w.dropped.Add(1)
		return
	}
	p := recordPool.Get().(*Record)
	*p = r
	select {
	case w.queue <- p:
		if w.quiet.Load() && int64(len(w.queue)) >= w.room.Load() {
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	default:
		w.dropped.Add(1)
		putRecord(p)
	}
}

// Dropped returns how many records were dropped (queue full or closed).
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written returns how many records were written.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Failed returns how many records were lost to store errors: records the
// store rejected for good, and records still held back when Close gave up.
func (w *Writer) Failed() uint64 { return w.failed.Load() }

// Spilled returns how many records Close wrote to the spill file.
func (w *Writer) Spilled() uint64 { return w.spilled.Load() }

// Pruned returns how many records retention removed (age, MaxRows and
// MaxBytes).
func (w *Writer) Pruned() uint64 { return w.pruned.Load() }

// Pending returns how many records wait to be written: queued or held.
func (w *Writer) Pending() int { return len(w.queue) + w.Held() }

// Held returns how many records the Writer has taken from the queue and
// not written yet: the batch being written and, while the store is
// unavailable, the records held back for the next attempt (at most
// WriterOptions.MaxHeld).
func (w *Writer) Held() int { return int(w.nheld.Load()) }

// Flush returns once every record queued before it was written (or lost:
// rejected by the store, or dropped by Close), or when ctx ends. While
// the store is unavailable it waits for the held-back records too.
func (w *Writer) Flush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case w.flushes <- ack:
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting records, makes one more attempt to write those
// queued and held back, and stops: if the store is still unavailable,
// what is left goes to the spill file (WriterOptions.SpillPath), or
// without one (or when writing it fails) is dropped and counted
// (Failed). It returns ctx's error if this did not finish before ctx
// ended; the end of the first call's ctx also cancels the write under
// way, and what it did not write is spilled or dropped likewise (Close
// waits up to spillGrace more for that). Idempotent.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() {
		w.unregister = context.AfterFunc(ctx, w.cancel)
		w.closed.Store(true)
		close(w.stop)
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	t := time.NewTimer(spillGrace)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
	return ctx.Err()
}

// spillGrace bounds how long Close waits, after its context ended, for
// the records to reach the spill file.
const spillGrace = 10 * time.Second

// Retryable reports whether the Writer retries a batch that Store.Append
// failed with err, rather than dropping it: when err has the code
// unavailable or timeout (utcp.CodeOf; a context deadline is a timeout),
// or is a context cancellation. An error that carries a PostgreSQL
// SQLSTATE (a SQLState() string method somewhere in its chain) of class
// 22 (data exception), 23 (integrity constraint violation) or 54
// (program limit exceeded) is never retryable, whatever its code: the
// record itself is at fault, and retrying it would block every record
// behind it.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		if s := st.SQLState(); len(s) >= 2 {
			switch s[:2] {
			case "22", "23", "54":
				return false
			}
		}
	}
	switch utcp.CodeOf(err) {
	case utcp.CodeUnavailable, utcp.CodeTimeout, utcp.CodeCanceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func (w *Writer) run() {
	defer close(w.done)
	defer w.cancel()
	w.prune()
	tick := time.NewTicker(w.opts.PruneInterval)
	defer tick.Stop()
	w.retry = time.NewTimer(time.Hour)
	w.retry.Stop()
	defer w.retry.Stop()
	w.linger = time.NewTimer(time.Hour)
	w.linger.Stop()
	defer w.linger.Stop()
	if w.heldLen() > 0 { // the spill file's records
		w.writeHeld()
	}
	for {
		w.ackFlushes()
		var in <-chan *Record
		if w.heldLen() < w.opts.MaxHeld && !w.lingering {
			in = w.queue
		}
		var retry <-chan time.Time
		if w.delay > 0 {
			retry = w.retry.C
		}
		var linger <-chan time.Time
		if w.lingering {
			linger = w.linger.C
		}
		select {
		case r := <-in:
			w.hold(*r)
			putRecord(r)
			w.gather()
		case <-w.kick: // the batch filled while lingering (or a late kick)
			w.gather()
		case <-linger:
			w.stopLingering()
			w.take(min(w.opts.BatchSize, w.opts.MaxHeld))
			if w.delay == 0 {
				w.writeHeld()
			}
		case ack := <-w.flushes:
			target := w.taken + uint64(len(w.queue))
			w.waiters = append(w.waiters, flushWaiter{ack: ack, target: target})
			for w.delay == 0 && w.resolved < target {
				w.take(min(w.opts.BatchSize, w.opts.MaxHeld))
				if w.heldLen() == 0 {
					break
				}
				w.writeHeld()
			}
		case <-retry:
			w.writeHeld()
		case <-tick.C:
			if w.delay == 0 { // the store is away: pruning would fail too
				w.prune()
			}
		case <-w.stop:
			w.final()
			w.unregister()
			return
		}
	}
}

// final makes the last attempt of Close: everything queued and held is
// written once; on failure the rest goes to the spill file, or is
// dropped and counted.
func (w *Writer) final() {
	w.take(math.MaxInt)
	err := w.writeAll(w.ctx)
	if n := w.heldLen(); n > 0 {
		if w.opts.SpillPath != "" {
			if serr := w.writeSpill(w.held[w.head:]); serr == nil {
				w.spilled.Add(uint64(n))
				w.log.Warn("audit store unavailable at close; held-back audit records written to the spill file, to be written at the next start",
					"records", n, "file", w.opts.SpillPath, "err", err)
				w.release(n)
				w.replay = 0 // the file holds them now
			} else {
				err = errors.Join(err, serr)
				w.replay = 0 // a spill file read at start keeps its records
			}
		}
	}
	if n := w.heldLen(); n > 0 {
		w.failed.Add(uint64(n))
		w.log.Error("audit store unavailable at close; held-back audit records are lost", "records", n, "err", err)
		w.release(n)
	}
	w.replayed()
	for _, f := range w.waiters {
		close(f.ack)
	}
	w.waiters = nil
}

// ackFlushes ends the flushes whose records are all resolved.
func (w *Writer) ackFlushes() {
	i := 0
	for ; i < len(w.waiters) && w.waiters[i].target <= w.resolved; i++ {
		close(w.waiters[i].ack)
	}
	if i > 0 {
		w.waiters = append(w.waiters[:0], w.waiters[i:]...)
	}
}

func (w *Writer) heldLen() int { return len(w.held) - w.head }

// hold appends r to the held records.
func (w *Writer) hold(r Record) {
	if len(w.held) == cap(w.held) && w.head > 0 { // drop the written front
		live := len(w.held) - w.head
		if w.head >= cap(w.held)/4 { // in place: amortized O(1) a record
			copy(w.held, w.held[w.head:])
			clear(w.held[live:])
			w.held = w.held[:live]
		} else { // mostly live: grow, as append would
			grown := make([]Record, live, 2*cap(w.held))
			copy(grown, w.held[w.head:])
			w.held = grown
		}
		w.head = 0
	}
	w.held = append(w.held, r)
	w.taken++
	w.nheld.Add(1)
}

// take moves queued records into held until it has n or the queue is
// empty.
func (w *Writer) take(n int) {
	for w.heldLen() < n {
		select {
		case r := <-w.queue:
			w.hold(*r)
			putRecord(r)
		default:
			return
		}
	}
}

// release forgets the first n held records (written or lost).
func (w *Writer) release(n int) {
	clear(w.held[w.head : w.head+n])
	w.head += n
	w.resolved += uint64(n)
	w.nheld.Add(-int64(n))
	if w.head == len(w.held) {
		w.head = 0
		if cap(w.held) > 4*w.opts.BatchSize { // an outage's backlog: give it back
			w.held = nil
		} else {
			w.held = w.held[:0]
		}
	}
}

// gather takes what is queued behind the held records and writes them,
// unless it lingers for more: the batch's first record starts the linger
// timer, and until it fires (or the batch fills) the queue is left alone.
func (w *Writer) gather() {
	if w.delay > 0 {
		w.take(w.opts.MaxHeld) // behind the held-back batch
		return
	}
	batch := min(w.opts.BatchSize, w.opts.MaxHeld)
	w.take(batch)
	if w.heldLen() == 0 {
		return
	}
	if w.opts.Linger > 0 && w.heldLen() < batch {
		if !w.lingering { // the batch's first record: group the next ones with it
			w.lingering = true
			w.room.Store(int64(batch - w.heldLen()))
			w.quiet.Store(true)
			w.linger.Reset(w.opts.Linger)
		}
		return
	}
	w.writeHeld()
}

// stopLingering ends the linger window: Appends no longer kick.
func (w *Writer) stopLingering() {
	w.lingering = false
	w.quiet.Store(false)
}

// writeHeld writes the held records; when the store fails with a
// retryable error, it starts (or lengthens) the backoff before the next
// attempt.
func (w *Writer) writeHeld() {
	if w.lingering {
		w.stopLingering()
		w.linger.Stop()
	}
	before := w.resolved
	err := w.writeAll(w.ctx)
	w.replayed()
	if err == nil {
		if w.delay > 0 {
			w.log.Info("audit store available again; held-back audit records written", "records", w.resolved-before)
			w.delay = 0
		}
		return
	}
	if w.delay == 0 {
		w.delay = w.retryMin
		w.log.Warn("audit store unavailable; holding audit records back and retrying",
			"held", w.heldLen(), "queued", len(w.queue), "err", err)
	} else {
		w.delay = min(2*w.delay, w.retryMax)
	}
	w.retry.Reset(w.delay)
}

// writeAll writes the held records a batch at a time, until none is left
// or the store fails with a retryable error, which it returns.
func (w *Writer) writeAll(ctx context.Context) error {
	for w.heldLen() > 0 {
		n := min(w.heldLen(), w.opts.BatchSize)
		done, err := w.write(ctx, w.held[w.head:w.head+n])
		w.release(done)
		if err != nil {
			return err
		}
	}
	return nil
}

// write appends recs and returns how many of them, from the front, were
// written or lost, and the retryable error that stopped it, if any. When
// the store rejects the batch for good, write halves it until it has
// found the records at fault, drops those and writes the others: a Store
// writes all of a batch or none of it.
func (w *Writer) write(ctx context.Context, recs []Record) (int, error) {
	actx, cancel := context.WithTimeout(ctx, appendTimeout)
	err := w.store.Append(actx, recs)
	cancel()
	switch {
	case err == nil:
		w.written.Add(uint64(len(recs)))
		return len(recs), nil
	case Retryable(err):
		return 0, err
	case len(recs) == 1:
		w.failed.Add(1)
		w.log.Error("the audit store rejected an audit record; it is lost",
			"tool", clip(recs[0].Tool), "time", recs[0].Time, "err", err)
		return 1, nil
	}
	h := len(recs) / 2
	n, err := w.write(ctx, recs[:h])
	if err != nil {
		return n, err
	}
	m, err := w.write(ctx, recs[h:])
	return n + m, err
}

// clip shortens s for a log line: a rejected record's tool name can be
// anything a caller sent.
func clip(s string) string {
	const limit = 128
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

func (w *Writer) prune() {
	if w.opts.Retention > 0 {
		ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
		n, err := w.store.Prune(ctx, time.Now().Add(-w.opts.Retention))
		cancel()
		switch {
		case err != nil:
			w.log.Warn("pruning audit records", "err", err)
		case n > 0:
			w.pruned.Add(uint64(n))
			w.log.Info("audit records pruned", "count", n, "retention", w.opts.Retention)
		}
	}
	if w.opts.MaxRows <= 0 && w.opts.MaxBytes <= 0 {
		return
	}
	tr, ok := w.store.(Trimmer)
	if !ok {
		w.trimOnce.Do(func() {
			w.log.Warn("the audit store cannot bound its size; audit_max_rows and audit_max_bytes are ignored")
		})
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	n, err := tr.Trim(ctx, w.opts.MaxRows, w.opts.MaxBytes)
	switch {
	case err != nil:
		w.log.Warn("trimming audit records", "err", err)
	case n > 0:
		w.pruned.Add(uint64(n))
		w.log.Info("audit records trimmed", "count", n, "max_rows", w.opts.MaxRows, "max_bytes", w.opts.MaxBytes)
	}
}

// recordPool recycles the queue's records: the queue holds pointers, and
// a record is copied into the writer's batch as soon as it is taken off,
// so its box can serve the next call (no allocation per call).
var recordPool = sync.Pool{New: func() any { return new(Record) }}

func putRecord(r *Record) {
	*r = Record{}
	recordPool.Put(r)
}
