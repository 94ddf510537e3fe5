package session

import (
	"context"
	"sync"
)

// Pool is the session bookkeeping of a transport that keeps long-lived
// connections for its manuals (websocket, webrtc): the slots by
// connection key, every open connection, the goroutines that serve them,
// and whether the transport has closed. The transport keeps its
// protocol; the Pool answers the lifecycle questions the same way for
// each: which connection a call uses, what Release and Close shut, and
// what they wait for. A Pool is safe for concurrent use.
type Pool[C Conn] struct {
	errClosed    error
	deregistered func(manual string) error

	mu     sync.Mutex
	closed bool
	slots  slots[C]
	open   map[C]struct{}
	wg     sync.WaitGroup
}

// NewPool returns an empty Pool. errClosed is the error of every request
// after Close and the reason open connections are shut with at Close;
// deregistered(manual) is the reason Release shuts a manual's
// connections with, and the error of a connection dialled for a slot
// that Release removed meanwhile.
func NewPool[C Conn](errClosed error, deregistered func(manual string) error) *Pool[C] {
	return &Pool[C]{errClosed: errClosed, deregistered: deregistered, slots: slots[C]{}, open: map[C]struct{}{}}
}

// Closed reports whether Close has been called.
func (p *Pool[C]) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Slot returns the slot of key, adding one for manual when there is none,
// or the pool's errClosed after Close.
func (p *Pool[C]) Slot(key, manual string) (*Slot[C], error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, p.errClosed
	}
	return p.slots.get(key, manual), nil
}

// Adopt records c, a connection just dialled for the slot s (nil for a
// connection that belongs to no slot, such as one per call), as open,
// and starts each of goroutines; Close waits until they have returned.
// It refuses, starting nothing and leaving c to the caller to close,
// with errClosed after Close, and with deregistered(s.Manual) when s is
// no longer the pool's (Release removed it while c was dialled).
func (p *Pool[C]) Adopt(c C, s *Slot[C], goroutines ...func()) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return p.errClosed
	case s != nil && !p.slots.holds(s):
		return p.deregistered(s.Manual)
	}
	p.open[c] = struct{}{}
	for _, f := range goroutines {
		p.wg.Go(f)
	}
	return nil
}

// Forget removes c from the open connections, so that Close no longer
// shuts it. A connection's serving goroutine calls it as it ends.
func (p *Pool[C]) Forget(c C) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// Go runs f in a goroutine that Close waits for, unless the pool has
// closed; it reports whether f runs.
func (p *Pool[C]) Go(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Go(f)
	return true
}

// Release removes the slots of manual and shuts their connections with
// deregistered(manual), one after another, each time waiting until its
// goroutines have ended (or ctx ends). It does nothing after Close.
func (p *Pool[C]) Release(ctx context.Context, manual string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	victims := p.slots.take(manual)
	p.mu.Unlock()
	closeSlots(ctx, victims, p.deregistered(manual))
}

// Close refuses every later Slot, Adopt and Go, shuts every open
// connection with errClosed, and waits until every goroutine the pool
// started has returned. It reports false, doing nothing, when the pool
// had closed already.
func (p *Pool[C]) Close() bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.closed = true
	open := make([]C, 0, len(p.open))
	for c := range p.open {
		open = append(open, c)
	}
	p.slots = slots[C]{}
	p.mu.Unlock()
	for _, c := range open {
		c.Shut(p.errClosed)
	}
	p.wg.Wait()
	return true
}
