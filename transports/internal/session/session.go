// Package session keeps the long-lived connections the websocket and
// webrtc transports share between a manual's calls: one Slot per
// connection key, which dials at most once at a time and backs off after
// failures, and the Pool that holds a transport's slots, its open
// connections and their goroutines, and answers Release and Close.
package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Backoff between failed connection attempts of one Slot: FirstRedialBackoff
// after the first failure, doubling with each further one, at most
// MaxRedialBackoff.
const (
	FirstRedialBackoff = 100 * time.Millisecond
	MaxRedialBackoff   = 30 * time.Second
)

// Conn is a long-lived connection a transport keeps in a Slot (a
// WebSocket, a WebRTC peer connection). Its methods are safe for
// concurrent use.
type Conn interface {
	comparable
	// Closing reports whether the connection has started closing; a
	// closing connection is never handed out again.
	Closing() bool
	// Shut starts closing the connection for why (the first reason
	// wins); calls on it fail with why. It does not wait.
	Shut(why error)
	// Done is closed when the connection's goroutines have ended.
	Done() <-chan struct{}
}

// Slot holds the one shared connection of a manual for one connection key
// (endpoint and credentials): Get hands it out, dialling when there is
// none, with at most one dial under way and, after failed dials, an
// exponential backoff before the next. A Slot is safe for concurrent use.
type Slot[C Conn] struct {
	// Key and Manual are the slot's key in its Pool and the manual it
	// serves; they do not change.
	Key, Manual string

	mu       sync.Mutex
	conn     C             // zero when there is none
	dialing  chan struct{} // closed when the dial under way ends
	failures int           // failed dials in a row
	retryAt  time.Time     // no dial before this after a failure
	lastErr  error
}

// Get returns the slot's open connection, or dials one with dial (only
// one caller dials; the others wait for its outcome). After a failed dial
// that counts (see below) it waits out the backoff first, and fails at
// once, naming the last dial error and the wait, when ctx ends before
// the backoff does. A dial error counts unless ctx had ended or it is a
// *utcp.Error with one of the codes in permanent. When ctx ends while
// Get waits, it returns ctxErr(ctx).
func (s *Slot[C]) Get(ctx context.Context, dial func(context.Context) (C, error), ctxErr func(context.Context) error, permanent ...utcp.Code) (C, error) {
	var zero C
	for {
		s.mu.Lock()
		if c := s.conn; c != zero && !c.Closing() {
			s.mu.Unlock()
			return c, nil
		}
		if ch := s.dialing; ch != nil {
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return zero, ctxErr(ctx)
			}
		}
		if wait := time.Until(s.retryAt); wait > 0 {
			last := s.lastErr
			s.mu.Unlock()
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return zero, fmt.Errorf("%w (the next connection attempt is in %v)", last, wait.Round(time.Millisecond))
			}
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
				continue
			case <-ctx.Done():
				timer.Stop()
				return zero, ctxErr(ctx)
			}
		}
		ch := make(chan struct{})
		s.dialing = ch
		s.mu.Unlock()
		c, err := dial(ctx)
		s.mu.Lock()
		s.dialing = nil
		close(ch)
		if err != nil {
			var uerr *utcp.Error
			if ctx.Err() == nil && !(errors.As(err, &uerr) && slices.Contains(permanent, uerr.Code)) {
				s.failures++
				s.retryAt = time.Now().Add(min(FirstRedialBackoff<<min(s.failures-1, 16), MaxRedialBackoff))
				s.lastErr = err
			}
			s.mu.Unlock()
			return zero, err
		}
		s.failures, s.retryAt, s.lastErr = 0, time.Time{}, nil
		s.conn = c
		s.mu.Unlock()
		return c, nil
	}
}

// Detach forgets c when it is the slot's connection, so that the next Get
// dials again. A connection calls it as it starts closing.
func (s *Slot[C]) Detach(c C) {
	s.mu.Lock()
	if s.conn == c {
		var zero C
		s.conn = zero
	}
	s.mu.Unlock()
}

// take removes and returns the slot's connection (zero when none).
func (s *Slot[C]) take() C {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conn
	var zero C
	s.conn = zero
	return c
}

// slots are a Pool's slots by key. They are not safe for concurrent use:
// the Pool's lock is held for every method.
type slots[C Conn] map[string]*Slot[C]

// get returns the slot of key, adding one for manual when there is none.
func (m slots[C]) get(key, manual string) *Slot[C] {
	s := m[key]
	if s == nil {
		s = &Slot[C]{Key: key, Manual: manual}
		m[key] = s
	}
	return s
}

// holds reports whether s is still m's slot for its key (a released
// manual's slots are removed).
func (m slots[C]) holds(s *Slot[C]) bool { return m[s.Key] == s }

// take removes and returns the slots of manual.
func (m slots[C]) take(manual string) []*Slot[C] {
	var out []*Slot[C]
	for k, s := range m {
		if s.Manual == manual {
			out = append(out, s)
			delete(m, k)
		}
	}
	return out
}

// closeSlots shuts the connections of victims for why, one after
// another, each time waiting until its goroutines have ended (or ctx
// ends). Call it without the Pool's lock.
func closeSlots[C Conn](ctx context.Context, victims []*Slot[C], why error) {
	var zero C
	for _, s := range victims {
		c := s.take()
		if c == zero {
			continue
		}
		c.Shut(why)
		select {
		case <-c.Done():
		case <-ctx.Done():
		}
	}
}
