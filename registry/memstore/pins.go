package memstore

import (
	"context"

	"github.com/utcpd/utcpd/registry"
)

// The pins of a Store are a registry.MemPins that fails once the store is
// closed.

var _ registry.PinStore = (*Store)(nil)

func (s *Store) open() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errClosed()
	}
	return nil
}

// GetPin returns a copy of the pin of manual.
func (s *Store) GetPin(ctx context.Context, manual string) (*registry.Pin, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.pins.GetPin(ctx, manual)
}

// PutPin stores a copy of p.
func (s *Store) PutPin(ctx context.Context, p *registry.Pin) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.pins.PutPin(ctx, p)
}

// DeletePin removes the pin of manual.
func (s *Store) DeletePin(ctx context.Context, manual string) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.pins.DeletePin(ctx, manual)
}

// AddChange stores a copy of c.
func (s *Store) AddChange(ctx context.Context, c *registry.PinChange) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.pins.AddChange(ctx, c)
}

// GetChange returns a copy of the change id.
func (s *Store) GetChange(ctx context.Context, id string) (*registry.PinChange, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.pins.GetChange(ctx, id)
}

// UpdateChange replaces the change c.ID when its status is from, and puts
// pin with it.
func (s *Store) UpdateChange(ctx context.Context, c *registry.PinChange, from registry.PinStatus, pin *registry.Pin) error {
	if err := s.open(); err != nil {
		return err
	}
	return s.pins.UpdateChange(ctx, c, from, pin)
}

// ListChanges returns copies of the changes of manual ("" all), newest
// first.
func (s *Store) ListChanges(ctx context.Context, manual string, limit int) ([]*registry.PinChange, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	return s.pins.ListChanges(ctx, manual, limit)
}
