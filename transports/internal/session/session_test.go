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
	s := Slots[*fakeConn]{}.Get("k", "m")
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

// TestSlotsTakeAndClose: Take removes a manual's slots only; CloseSlots
// shuts their connections with the reason and waits for them.
func TestSlotsTakeAndClose(t *testing.T) {
	m := Slots[*fakeConn]{}
	a, b, c := m.Get("a", "m1"), m.Get("b", "m1"), m.Get("c", "m2")
	if m.Get("a", "m1") != a {
		t.Fatal("Get added a second slot for a key")
	}
	conn := newFakeConn(1)
	if _, err := a.Get(t.Context(), func(context.Context) (*fakeConn, error) { return conn, nil }, ctxErrOf); err != nil {
		t.Fatal(err)
	}
	taken := m.Take("m1")
	if len(taken) != 2 || m.Holds(a) || m.Holds(b) || !m.Holds(c) {
		t.Fatalf("Take(m1) = %d slots; left %v", len(taken), m)
	}
	why := errors.New("deregistered")
	CloseSlots(t.Context(), taken, why)
	if !conn.Closing() || conn.why != why {
		t.Errorf("connection: closing %v, why %v", conn.Closing(), conn.why)
	}
}
