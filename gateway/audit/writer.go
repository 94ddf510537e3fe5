package audit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of WriterOptions.
const (
	// DefaultQueueSize is how many records wait for the store at most.
	DefaultQueueSize = 8192
	// DefaultBatchSize is how many records one Append writes at most.
	DefaultBatchSize = 512
	// DefaultRetention is how long records are kept (audit_retention).
	DefaultRetention = 720 * time.Hour
)

// WriterOptions configure a Writer. The zero value uses the defaults.
type WriterOptions struct {
	// QueueSize bounds the records waiting to be written; a record that
	// finds the queue full is dropped and counted (Dropped).
	QueueSize int
	// BatchSize caps the records written by one Store.Append.
	BatchSize int
	// Retention is how long records are kept: older ones are pruned at
	// start and then every PruneInterval. Negative keeps them forever.
	Retention time.Duration
	// PruneInterval is how often old records are pruned (default: a
	// tenth of Retention, between one minute and one hour).
	PruneInterval time.Duration
	// Logger receives write failures; nil discards them.
	Logger *slog.Logger
}

// Writer appends records to a Store from one background goroutine, in
// batches, so that auditing costs a call only a channel send. When the
// store falls behind and the queue is full, records are dropped and
// counted rather than slowing calls down. Create it with NewWriter; Close
// flushes. A Writer is safe for concurrent use.
type Writer struct {
	store Store
	opts  WriterOptions
	log   *slog.Logger

	queue   chan Record
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	closed  atomic.Bool

	dropped, written, failed, pruned atomic.Uint64
}

// NewWriter returns a running Writer appending to store.
func NewWriter(store Store, opts WriterOptions) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
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
	w := &Writer{store: store, opts: opts, log: log,
		queue: make(chan Record, opts.QueueSize), flushes: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
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
	select {
	case w.queue <- r:
	default:
		w.dropped.Add(1)
	}
}

// Dropped returns how many records were dropped (queue full or closed).
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written returns how many records were written.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Failed returns how many records were lost to store errors.
func (w *Writer) Failed() uint64 { return w.failed.Load() }

// Pruned returns how many records retention removed.
func (w *Writer) Pruned() uint64 { return w.pruned.Load() }

// Pending returns how many records wait to be written.
func (w *Writer) Pending() int { return len(w.queue) }

// Flush returns once every record queued before it was written (or
// failed), or when ctx ends.
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

// Close stops accepting records, writes those queued, and stops. It
// returns ctx's error if the queue could not be written before ctx ended
// (the rest is dropped). Idempotent.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() {
		w.closed.Store(true)
		close(w.stop)
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Writer) run() {
	defer close(w.done)
	w.prune()
	tick := time.NewTicker(w.opts.PruneInterval)
	defer tick.Stop()
	batch := make([]Record, 0, w.opts.BatchSize)
	for {
		select {
		case r := <-w.queue:
			batch = append(batch[:0], r)
			batch = w.fill(batch)
			w.write(batch)
		case ack := <-w.flushes:
			w.drain(batch)
			close(ack)
		case <-tick.C:
			w.prune()
		case <-w.stop:
			w.drain(batch)
			return
		}
	}
}

// fill adds to batch whatever is queued, up to the batch size.
func (w *Writer) fill(batch []Record) []Record {
	for len(batch) < cap(batch) {
		select {
		case r := <-w.queue:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// drain writes everything queued now.
func (w *Writer) drain(batch []Record) {
	for len(w.queue) > 0 {
		batch = w.fill(batch[:0])
		w.write(batch)
	}
}

func (w *Writer) write(batch []Record) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.store.Append(ctx, batch); err != nil {
		w.failed.Add(uint64(len(batch)))
		w.log.Error("writing audit records; they are lost", "records", len(batch), "err", err)
		return
	}
	w.written.Add(uint64(len(batch)))
	clear(batch)
}

func (w *Writer) prune() {
	if w.opts.Retention <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := w.store.Prune(ctx, time.Now().Add(-w.opts.Retention))
	if err != nil {
		w.log.Warn("pruning audit records", "err", err)
		return
	}
	if n > 0 {
		w.pruned.Add(uint64(n))
		w.log.Info("audit records pruned", "count", n, "retention", w.opts.Retention)
	}
}
