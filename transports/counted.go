package transports

import (
	"context"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// Counted is a Transport wrapped by Count: what the gateway uses. It
// implements Streamer exactly when the wrapped Transport does.
type Counted interface {
	// RegisterManual is the Transport's, counting a registration when it
	// succeeds.
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	// Hold counts a registration of tmpl's manual made without
	// RegisterManual (the gateway serving a stored copy of the manual);
	// DeregisterManual balances it like any other.
	Hold(tmpl *utcp.CallTemplate)
	// DeregisterManual balances one registration of tmpl's manual and,
	// with the last, calls the Transport's Release. It is idempotent.
	DeregisterManual(ctx context.Context, tmpl *utcp.CallTemplate) error
	// CallTool is the Transport's, refused with manual_not_found for a
	// manual whose last registration ended.
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
	// Close is the Transport's Close. It is idempotent.
	Close() error
	// Unwrap returns the wrapped Transport, for the optional interfaces
	// it may implement (PrefixedNames).
	Unwrap() Transport
}

// Keyer is implemented by a transport whose per-manual state belongs to
// a whole template rather than to a manual name (mcp: a changed template
// gets sessions of its own, and deregistering the old one ends the old
// sessions while the new ones run on). Count then counts registrations
// per RegistrationKey(tmpl) and calls Release once per key.
type Keyer interface {
	RegistrationKey(tmpl *utcp.CallTemplate) string
}

// Count wraps the transport t of call_template_type typ in the one
// registration counter every transport shares. It counts registrations
// per key: the manual name (tmpl.Name), or t.RegistrationKey(tmpl) when t
// is a Keyer. RegisterManual counts a successful registration and
// DeregisterManual balances one (with none left it does nothing). When no
// registration of a key is left and none is under way, t.Release is
// called once: after the DeregisterManual that balanced the last one, or
// after a RegisterManual that failed, so that what the failed attempt set
// up goes too. From the DeregisterManual that leaves a manual name with
// no registration, CallTool (and CallToolStream) of that manual
// (call.Manual) fail with manual_not_found, wrapping ErrNotRegistered,
// until it is registered again; calls of manuals never registered pass
// through. The result implements Streamer exactly when t does.
// DeregisterManual is idempotent and, like Release, does nothing after
// Close.
func Count(typ string, t Transport) Counted {
	c := &counted{typ: typ, t: t, keys: map[string]*registrations{}, names: map[string]int{}, released: map[string]bool{}}
	if k, ok := t.(Keyer); ok {
		c.key = k.RegistrationKey
	} else {
		c.key = func(tmpl *utcp.CallTemplate) string { return tmpl.Name }
	}
	if s, ok := t.(Streamer); ok {
		return &countedStreamer{counted: c, s: s}
	}
	return c
}

type counted struct {
	typ string
	t   Transport
	key func(*utcp.CallTemplate) string

	mu       sync.Mutex
	closed   bool
	keys     map[string]*registrations // by key
	names    map[string]int            // registrations by manual name
	released map[string]bool           // manual names whose last registration ended
}

type registrations struct {
	refs    int // successful RegisterManual calls not yet balanced
	pending int // RegisterManual calls under way
}

func (c *counted) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if tmpl == nil {
		return c.t.RegisterManual(ctx, tmpl)
	}
	key := c.key(tmpl)
	c.mu.Lock()
	st := c.keys[key]
	if st == nil {
		st = &registrations{}
		c.keys[key] = st
	}
	st.pending++
	c.mu.Unlock()
	m, err := c.t.RegisterManual(ctx, tmpl)
	c.mu.Lock()
	st.pending--
	if err == nil {
		c.hold(tmpl, st)
		c.mu.Unlock()
		return m, nil
	}
	release := c.idle(key, st)
	c.mu.Unlock()
	if release {
		_ = c.t.Release(ctx, tmpl)
	}
	return nil, err
}

func (c *counted) Hold(tmpl *utcp.CallTemplate) {
	if tmpl == nil {
		return
	}
	key := c.key(tmpl)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.keys[key]
	if st == nil {
		st = &registrations{}
		c.keys[key] = st
	}
	c.hold(tmpl, st)
}

// hold counts one registration of tmpl (whose key's registrations are
// st). Call it with c.mu held.
func (c *counted) hold(tmpl *utcp.CallTemplate, st *registrations) {
	st.refs++
	c.names[tmpl.Name]++
	delete(c.released, tmpl.Name)
}

func (c *counted) DeregisterManual(ctx context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	key := c.key(tmpl)
	c.mu.Lock()
	st := c.keys[key]
	if c.closed || st == nil || st.refs == 0 {
		c.mu.Unlock()
		return nil
	}
	st.refs--
	if c.names[tmpl.Name]--; c.names[tmpl.Name] == 0 {
		delete(c.names, tmpl.Name)
		c.released[tmpl.Name] = true
	}
	release := c.idle(key, st)
	c.mu.Unlock()
	if release {
		return c.t.Release(ctx, tmpl)
	}
	return nil
}

// idle reports whether key (whose registrations are st) has none left
// and none under way, and then forgets it. Call it with c.mu held.
func (c *counted) idle(key string, st *registrations) bool {
	if c.closed || st.refs > 0 || st.pending > 0 {
		return false
	}
	if c.keys[key] == st {
		delete(c.keys, key)
	}
	return true
}
func (c *counted) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	if err := c.check(call); err != nil {
		return nil, err
	}
	return c.t.CallTool(ctx, call)
}

func (c *counted) Unwrap() Transport { return c.t }

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
	gone := c.released[call.Manual]
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
