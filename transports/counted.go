package transports

import (
	"context"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// Lifecycle is what a transport implements: RegisterManual, CallTool,
// Release and Close (see Transport for the first two and Close). It does
// not count registrations; Count does that for it.
type Lifecycle interface {
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
	// Release lets go of what the transport keeps for tmpl's manual
	// (sessions, connections, subprocesses). Count calls it once when the
	// manual's last registration ends (the DeregisterManual balancing it),
	// and after a RegisterManual that failed while the manual held no
	// registration, to drop what the failed attempt left behind. It is
	// never called after Close, and it must be harmless for a manual the
	// transport holds nothing for. Calls in flight on the manual may fail.
	Release(ctx context.Context, tmpl *utcp.CallTemplate) error
	Close() error
}

// Count wraps the transport t of call_template_type typ in the one
// registration counter every transport shares, keyed by manual name
// (tmpl.Name, call.Manual): RegisterManual counts a successful
// registration, DeregisterManual balances one (with none left it does
// nothing), and when the last one is balanced it calls t.Release once;
// from then on CallTool (and CallToolStream) of the manual fail with
// manual_not_found (wrapping ErrNotRegistered) until it is registered
// again. Calls of manuals never registered pass through. The result
// implements Streamer exactly when t does. DeregisterManual is idempotent
// and, like Release, does nothing after Close.
func Count(typ string, t Lifecycle) Transport {
	c := &counted{typ: typ, t: t, manuals: map[string]*registrations{}}
	if s, ok := t.(Streamer); ok {
		return &countedStreamer{counted: c, s: s}
	}
	return c
}

type counted struct {
	typ string
	t   Lifecycle

	mu      sync.Mutex
	closed  bool
	manuals map[string]*registrations // by manual name
}

type registrations struct {
	refs     int  // successful RegisterManual calls not yet balanced
	released bool // the last one was balanced: calls fail until the next
}

func (c *counted) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	m, err := c.t.RegisterManual(ctx, tmpl)
	if tmpl == nil {
		return m, err
	}
	c.mu.Lock()
	st := c.manuals[tmpl.Name]
	if err == nil {
		if st == nil {
			st = &registrations{}
			c.manuals[tmpl.Name] = st
		}
		st.refs++
		st.released = false
		c.mu.Unlock()
		return m, nil
	}
	release := !c.closed && (st == nil || st.refs == 0)
	c.mu.Unlock()
	if release {
		_ = c.t.Release(ctx, tmpl)
	}
	return nil, err
}

func (c *counted) DeregisterManual(ctx context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	c.mu.Lock()
	st := c.manuals[tmpl.Name]
	if c.closed || st == nil || st.refs == 0 {
		c.mu.Unlock()
		return nil
	}
	st.refs--
	if st.refs > 0 {
		c.mu.Unlock()
		return nil
	}
	st.released = true
	c.mu.Unlock()
	return c.t.Release(ctx, tmpl)
}

func (c *counted) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	if err := c.check(call); err != nil {
		return nil, err
	}
	return c.t.CallTool(ctx, call)
}

func (c *counted) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.t.Close()
}

// check refuses a call of a manual whose last registration was balanced.
func (c *counted) check(call *utcp.Call) error {
	if call == nil {
		return nil
	}
	c.mu.Lock()
	st := c.manuals[call.Manual]
	gone := st != nil && st.released
	c.mu.Unlock()
	if gone {
		return utcp.Errorf(utcp.CodeManualNotFound, "%s: manual %q was deregistered: %w", c.typ, call.Manual, ErrNotRegistered).WithDetail("manual", call.Manual)
	}
	return nil
}

type countedStreamer struct {
	*counted
	s Streamer
}

func (c *countedStreamer) CallToolStream(ctx context.Context, call *utcp.Call) (Stream, error) {
	if err := c.check(call); err != nil {
		return nil, err
	}
	return c.s.CallToolStream(ctx, call)
}
