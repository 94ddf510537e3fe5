// Package memstore is an in-memory registry.Store: nothing survives the
// process. utcpd uses it when started with an empty --data-dir, and tests use it
// wherever persistence does not matter.
package memstore

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// Store is an in-memory registry.Store. Records are deep-copied on the way
// in and out, with the manual JSON round-tripped like a persistent store
// would. Watch never sends: there are no other processes. The zero value
// is not usable; call New.
type Store struct {
	mu      sync.RWMutex
	recs    map[string]*registry.Record
	pins    registry.MemPins // pins.go
	closed  bool
	done    chan struct{} // closed by Close
	closeMu sync.Once
}

var _ registry.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{recs: map[string]*registry.Record{}, done: make(chan struct{})}
}

func errClosed() error { return utcp.NewError(utcp.CodeUnavailable, "memstore: store is closed") }

// Put stores a copy of rec, replacing any record of the same name.
func (s *Store) Put(ctx context.Context, rec *registry.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := registry.CheckRecord(rec); err != nil {
		return err
	}
	c, err := registry.CloneRecord(rec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed()
	}
	s.recs[c.Name] = c
	return nil
}

// Get returns a copy of the record called name.
func (s *Store) Get(ctx context.Context, name string) (*registry.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	rec, ok := s.recs[name]
	if !ok {
		return nil, registry.NotFound(name)
	}
	return registry.CloneRecord(rec)
}

// Delete removes the record called name.
func (s *Store) Delete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed()
	}
	if _, ok := s.recs[name]; !ok {
		return registry.NotFound(name)
	}
	delete(s.recs, name)
	return nil
}

// List returns copies of every record, ordered by name.
func (s *Store) List(ctx context.Context) ([]*registry.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	out := make([]*registry.Record, 0, len(s.recs))
	for _, rec := range s.recs {
		c, err := registry.CloneRecord(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *registry.Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Watch returns a channel that never receives and is closed when ctx ends
// or the Store is closed.
func (s *Store) Watch(ctx context.Context) <-chan registry.Change {
	ch := make(chan registry.Change)
	go func() {
		defer close(ch)
		select {
		case <-ctx.Done():
		case <-s.done:
		}
	}()
	return ch
}

// Close marks the store closed, drops its records and closes every Watch
// channel. It is idempotent.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.recs = nil
		s.mu.Unlock()
		close(s.done)
	})
	return nil
}
