package registry

import (
	"context"
	"slices"

	"sync"
)

// MemPins is an in-memory PinStore: nothing survives the process. The
// zero value is ready to use. The gateway uses one when its store keeps no
// pins; registry/memstore embeds one.
type MemPins struct {
	mu      sync.RWMutex
	pins    map[string]*Pin
	changes map[string]*PinChange
	seq     map[string]int64 // insertion order of changes
}

var _ PinStore = (*MemPins)(nil)

// GetPin returns a copy of the pin of manual.
func (s *MemPins) GetPin(ctx context.Context, manual string) (*Pin, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pins[manual]
	if !ok {
		return nil, PinNotFound(manual)
	}
	return ClonePin(p)
}

// PutPin stores a copy of p.
func (s *MemPins) PutPin(ctx context.Context, p *Pin) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckPin(p); err != nil {
		return err
	}
	c, err := ClonePin(p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pins == nil {
		s.pins = map[string]*Pin{}
	}
	s.pins[c.Manual] = c
	return nil
}

// DeletePin removes the pin of manual.
func (s *MemPins) DeletePin(ctx context.Context, manual string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pins, manual)
	return nil
}

// AddChange stores a copy of c.
func (s *MemPins) AddChange(ctx context.Context, c *PinChange) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckChange(c); err != nil {
		return err
	}
	cc, err := CloneChange(c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changes == nil {
		s.changes, s.seq = map[string]*PinChange{}, map[string]int64{}
	}
	if _, ok := s.changes[cc.ID]; ok {
		return ChangeConflict(cc.ID, "", s.changes[cc.ID].Status)
	}
	s.changes[cc.ID] = cc
	s.seq[cc.ID] = int64(len(s.seq))
	return nil
}

// GetChange returns a copy of the change id.
func (s *MemPins) GetChange(ctx context.Context, id string) (*PinChange, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.changes[id]
	if !ok {
		return nil, ChangeNotFound(id)
	}
	return CloneChange(c)
}

// UpdateChange replaces the change c.ID when its status is from, and puts
// pin with it.
func (s *MemPins) UpdateChange(ctx context.Context, c *PinChange, from PinStatus, pin *Pin) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckChange(c); err != nil {
		return err
	}
	if pin != nil {
		if err := CheckPin(pin); err != nil {
			return err
		}
	}
	cc, err := CloneChange(c)
	if err != nil {
		return err
	}
	pc, err := ClonePin(pin)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.changes[c.ID]
	if !ok {
		return ChangeNotFound(c.ID)
	}
	if cur.Status != from {
		return ChangeConflict(c.ID, from, cur.Status)
	}
	s.changes[c.ID] = cc
	if pc != nil {
		if s.pins == nil {
			s.pins = map[string]*Pin{}
		}
		s.pins[pc.Manual] = pc
	}
	return nil
}

// ListChanges returns copies of the changes of manual ("" all), newest
// first.
func (s *MemPins) ListChanges(ctx context.Context, manual string, limit int) ([]*PinChange, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultChangeLimit
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for id, c := range s.changes {
		if manual == "" || c.Manual == manual {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		ca, cb := s.changes[a], s.changes[b]
		if c := cb.Created.Compare(ca.Created); c != 0 {
			return c
		}
		return int(s.seq[b] - s.seq[a])
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]*PinChange, 0, len(ids))
	for _, id := range ids {
		c, err := CloneChange(s.changes[id])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
