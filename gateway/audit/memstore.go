package audit

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// MemStore is an in-memory Store: nothing survives the process. The
// daemon uses it without a data directory. The zero value is not usable;
// call NewMemStore.
type MemStore struct {
	mu     sync.RWMutex
	recs   []Record // in ID order
	nextID int64
	max    int // > 0: only the newest max records are kept
}

var (
	_ Store   = (*MemStore)(nil)
	_ Trimmer = (*MemStore)(nil)
)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{nextID: 1} }

// NewBoundedMemStore returns an empty MemStore that keeps only the
// newest max records: each Append forgets the oldest beyond them, so
// that the memory it holds is bounded between prunes whatever the call
// rate (max ≤ 0: no bound, as NewMemStore).
func NewBoundedMemStore(max int) *MemStore { return &MemStore{nextID: 1, max: max} }

// Append stores copies of recs.
func (s *MemStore) Append(ctx context.Context, recs []Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range recs {
		if err := Check(&recs[i]); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		c := recs[i].Clone()
		c.ID = s.nextID
		s.nextID++
		s.recs = append(s.recs, c)
	}
	// Past the bound, the oldest are forgotten a quarter of it at a
	// time (one copy per max/4 records, not one per record); Query sees
	// only the newest max meanwhile.
	if s.max > 0 && len(s.recs) > s.max+s.max/4 {
		n := len(s.recs) - s.max
		copy(s.recs, s.recs[n:])
		clear(s.recs[s.max:])
		s.recs = s.recs[:s.max]
	}
	return nil
}

// Query returns copies of the selected records, newest first.
func (s *MemStore) Query(ctx context.Context, q Query) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := q.EffectiveLimit()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Record{}
	floor := 0
	if s.max > 0 && len(s.recs) > s.max {
		floor = len(s.recs) - s.max
	}
	for i := len(s.recs) - 1; i >= floor && len(out) < limit; i-- {
		if q.Match(&s.recs[i]) {
			out = append(out, s.recs[i].Clone())
		}
	}
	return out, nil
}

// Prune deletes the records of calls that started before before.
func (s *MemStore) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.recs[:0]
	var n int64
	for _, r := range s.recs {
		if r.Time.Before(before) {
			n++
			continue
		}
		kept = append(kept, r)
	}
	clear(s.recs[len(kept):])
	s.recs = kept
	return n, nil
}

// Trim deletes the oldest records beyond maxRows records and maxBytes of
// their JSON encoding (≤ 0: no limit).
func (s *MemStore) Trim(ctx context.Context, maxRows, maxBytes int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := len(s.recs)
	if maxRows > 0 && int64(keep) > maxRows {
		keep = int(maxRows)
	}
	if maxBytes > 0 {
		var size int64
		for i := len(s.recs) - 1; i >= len(s.recs)-keep; i-- {
			c := s.recs[i]
			c.ID = 0
			b, _ := json.Marshal(&c)
			size += int64(len(b))
			if size > maxBytes {
				keep = len(s.recs) - 1 - i
				break
			}
		}
	}
	n := len(s.recs) - keep
	if n == 0 {
		return 0, nil
	}
	copy(s.recs, s.recs[n:])
	clear(s.recs[keep:])
	s.recs = s.recs[:keep]
	return int64(n), nil
}
