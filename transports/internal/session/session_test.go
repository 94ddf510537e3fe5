package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// fakeConn is a Conn.
type fakeConn struct {
	id      int
	mu      sync.Mutex
	why     error
	closing bool
	done    chan struct{}
}

func newFakeConn(id int) *fakeConn { return &fakeConn{id: id, done: make(chan struct{})} }

func (c *fakeConn) Closing() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.closing }
func (c *fakeConn) Shut(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closing {
		c.closing, c.why = true, why
		close(c.done)
	}
}
func (c *fakeConn) Done() <-chan struct{} { return c.done }

func ctxErrOf(ctx context.Context) error { return context.Cause(ctx) }

// TestSlotSharesOneConnection: concurrent Gets dial once and share the
// connection; a closing one, or one Detach forgets, is dialled again.
func TestSlotSharesOneConnection(t *testing.T) {
	s := slots[*fakeConn]{}.get("k", "m")
	var dials atomic.Int32
	release := make(chan struct{})
	dial := func(context.Context) (*fakeConn, error) {
		n := dials.Add(1)
		<-release
		return newFakeConn(int(n)), nil
	}
	var wg sync.WaitGroup
	got := make([]*fakeConn, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Get(t.Context(), dial, ctxErrOf)
			if err != nil {
				t.Error(err)
			}
			got[i] = c
		}()
	}
	time.Sleep(20 * time.Millisecond) // let the callers pile up behind the one dial
	close(release)
	wg.Wait()
	for _, c := range got {
		if c != got[0] {
			t.Fatalf("callers got different connections: %v", got)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	got[0].Shut(errors.New("gone"))
	c2, err := s.Get(t.Context(), dial, ctxErrOf)
	if err != nil || c2 == got[0] {
		t.Fatalf("after the connection closed: %v, %v; want a new one", c2, err)
	}
	s.Detach(got[0]) // not the slot's connection: no effect
	if c, _ := s.Get(t.Context(), dial, ctxErrOf); c != c2 {
		t.Errorf("Detach of another connection dropped the slot's")
	}
	s.Detach(c2)
	if c, _ := s.Get(t.Context(), dial, ctxErrOf); c == c2 {
		t.Errorf("Detach did not make Get dial again")
	}
}

// TestSlotBackoff: a failed dial delays the next one; a permanent code
// does not; a deadline shorter than the wait fails at once naming the
// last error.
func TestSlotBackoff(t *testing.T) {
	s := &Slot[*fakeConn]{Key: "k", Manual: "m"}
	refused := &utcp.TransportError{Err: errors.New("refused")}
	var dials atomic.Int32
	dial := func(context.Context) (*fakeConn, error) { dials.Add(1); return nil, refused }
	if _, err := s.Get(t.Context(), dial, ctxErrOf); !errors.Is(err, refused) {
		t.Fatalf("first Get: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), FirstRedialBackoff/4)
	defer cancel()
	_, err := s.Get(ctx, dial, ctxErrOf)
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), "the next connection attempt is in") || dials.Load() != 1 {
		t.Fatalf("Get within the backoff: %v after %d dials", err, dials.Load())
	}
	// After the wait, Get dials again (and fails, doubling the wait).
	if _, err := s.Get(t.Context(), dial, ctxErrOf); !errors.Is(err, refused) || dials.Load() != 2 {
		t.Fatalf("Get after the backoff: %v after %d dials", err, dials.Load())
	}

	p := &Slot[*fakeConn]{Key: "k", Manual: "m"}
	invalid := utcp.NewError(utcp.CodeInvalidTemplate, "bad url")
	bad := func(context.Context) (*fakeConn, error) { return nil, invalid }
	for range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), FirstRedialBackoff/4)
		if _, err := p.Get(ctx, bad, ctxErrOf, utcp.CodeInvalidTemplate); err != invalid {
			t.Errorf("permanent failure: %v, want it again without a backoff", err)
		}
		cancel()
	}
}

// TestSlotsTakeAndClose: take removes a manual's slots only; closeSlots
// shuts their connections with the reason and waits for them.
func TestSlotsTakeAndClose(t *testing.T) {
	m := slots[*fakeConn]{}
	a, b, c := m.get("a", "m1"), m.get("b", "m1"), m.get("c", "m2")
	if m.get("a", "m1") != a {
		t.Fatal("get added a second slot for a key")
	}
	conn := newFakeConn(1)
	if _, err := a.Get(t.Context(), func(context.Context) (*fakeConn, error) { return conn, nil }, ctxErrOf); err != nil {
		t.Fatal(err)
	}
	taken := m.take("m1")
	if len(taken) != 2 || m.holds(a) || m.holds(b) || !m.holds(c) {
		t.Fatalf("take(m1) = %d slots; left %v", len(taken), m)
	}
	why := errors.New("deregistered")
	closeSlots(t.Context(), taken, why)
	if !conn.Closing() || conn.why != why {
		t.Errorf("connection: closing %v, why %v", conn.Closing(), conn.why)
	}
}

// TestPool: Release shuts a manual's connections with the deregistered
// reason and refuses a connection dialled for its removed slot; Close
// shuts every open connection, waits for the goroutines, and refuses
// everything after.
func TestPool(t *testing.T) {
	closed := errors.New("closed")
	p := NewPool[*fakeConn](closed, func(m string) error { return errors.New("released " + m) })
	s1, err := p.Slot("k1", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.Slot("k1", "m1"); again != s1 {
		t.Fatal("Slot added a second slot for a key")
	}
	c1 := newFakeConn(1)
	if _, err := s1.Get(t.Context(), func(context.Context) (*fakeConn, error) { return c1, nil }, ctxErrOf); err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	if err := p.Adopt(c1, s1, func() { <-c1.Done(); p.Forget(c1); close(served) }); err != nil {
		t.Fatal(err)
	}
	p.Release(t.Context(), "m1")
	<-served
	if c1.why == nil || c1.why.Error() != "released m1" {
		t.Fatalf("released connection: why %v", c1.why)
	}
	if err := p.Adopt(newFakeConn(2), s1, func() { t.Error("a refused connection's goroutine ran") }); err == nil || err.Error() != "released m1" {
		t.Fatalf("Adopt for a released slot: %v", err)
	}

	s2, _ := p.Slot("k2", "m2")
	c2, c3 := newFakeConn(2), newFakeConn(3)
	var ended atomic.Int32
	serve := func(c *fakeConn) func() {
		return func() { <-c.Done(); p.Forget(c); ended.Add(1) }
	}
	if err := p.Adopt(c2, s2, serve(c2)); err != nil {
		t.Fatal(err)
	}
	if err := p.Adopt(c3, nil, serve(c3)); err != nil { // a per-call connection
		t.Fatal(err)
	}
	if !p.Go(func() { <-c2.Done(); ended.Add(1) }) {
		t.Fatal("Go before Close did not run")
	}
	if !p.Close() {
		t.Fatal("first Close reported false")
	}
	if n := ended.Load(); n != 3 {
		t.Fatalf("Close returned with %d of 3 goroutines ended", n)
	}
	if c2.why != closed || c3.why != closed {
		t.Errorf("Close shut with %v, %v; want %v", c2.why, c3.why, closed)
	}
	if p.Close() || !p.Closed() || p.Go(func() {}) {
		t.Error("a second Close, Closed or Go after Close answered as if open")
	}
	if _, err := p.Slot("k2", "m2"); err != closed {
		t.Errorf("Slot after Close: %v", err)
	}
	if err := p.Adopt(newFakeConn(4), nil); err != closed {
		t.Errorf("Adopt after Close: %v", err)
	}
	p.Release(t.Context(), "m2") // no effect, no panic
}
