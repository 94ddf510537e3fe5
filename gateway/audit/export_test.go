package audit

import "time"

// NewWriterBackoff is NewWriter with the backoff between attempts to write
// held-back records set to start at rmin and double up to rmax, so that
// tests need not wait for the production delays.
func NewWriterBackoff(store Store, opts WriterOptions, rmin, rmax time.Duration) *Writer {
	return newWriter(store, opts, rmin, rmax)
}
