package review

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemStore is an in-memory Store: nothing survives the process. The
// daemon uses it without a data directory; tests use it where persistence
// does not matter. The zero value is not usable; call NewMemStore.
type MemStore struct {
	mu      sync.RWMutex
	reviews map[string]*Review
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{reviews: map[string]*Review{}} }

// Put stores a copy of r.
func (s *MemStore) Put(ctx context.Context, r *Review) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := Check(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.reviews[r.ID]; ok {
		return fmt.Errorf("review %s: %w", r.ID, ErrExists)
	}
	s.reviews[r.ID] = r.Clone()
	return nil
}

// Get returns a copy of the review called id.
func (s *MemStore) Get(ctx context.Context, id string) (*Review, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.reviews[id]
	if !ok {
		return nil, NotFound(id)
	}
	return r.Clone(), nil
}

// List returns copies of the reviews in the given statuses, oldest first.
func (s *MemStore) List(ctx context.Context, statuses ...Status) ([]*Review, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]*Review, 0, len(s.reviews))
	for _, r := range s.reviews {
		if len(statuses) == 0 || slices.Contains(statuses, r.Status) {
			out = append(out, r.Clone())
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Review) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Update replaces the review r.ID with a copy of r if its status is from.
func (s *MemStore) Update(ctx context.Context, r *Review, from Status) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := Check(r); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.reviews[r.ID]
	if !ok {
		return NotFound(r.ID)
	}
	if cur.Status != from {
		return fmt.Errorf("review %s is %s, not %s: %w", r.ID, cur.Status, from, ErrConflict)
	}
	s.reviews[r.ID] = r.Clone()
	return nil
}

// Prune deletes the final reviews that finished before before.
func (s *MemStore) Prune(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, r := range s.reviews {
		if r.Status.Final() && finishedAt(r).Before(before) {
			delete(s.reviews, id)
			n++
		}
	}
	return n, nil
}

// finishedAt is when r reached its final status (its creation time when
// that was not recorded).
func finishedAt(r *Review) time.Time {
	if !r.Finished.IsZero() {
		return r.Finished
	}
	return r.Created
}
