package guard

import (
	"context"
	"sync/atomic"
)

// Holder is a Guard whose implementation can be replaced while calls are
// evaluated: the daemon installs one as the gateway's guard and swaps the
// Chain in it when the configuration is reloaded. A call is evaluated
// entirely by the guard that was current when it started. The zero value
// allows every call (as AllowAll); a Holder is safe for concurrent use.
type Holder struct {
	g atomic.Pointer[held]
}

type held struct{ g Guard }

var _ Guard = (*Holder)(nil)

// NewHolder returns a Holder of g (nil: AllowAll).
func NewHolder(g Guard) *Holder {
	h := &Holder{}
	h.Set(g)
	return h
}

// Set makes g (nil: AllowAll) the guard of the calls that start from now
// on. Calls being evaluated finish with the previous one.
func (h *Holder) Set(g Guard) {
	if g == nil {
		g = AllowAll
	}
	h.g.Store(&held{g})
}

// Load returns the current guard.
func (h *Holder) Load() Guard {
	if p := h.g.Load(); p != nil {
		return p.g
	}
	return AllowAll
}

// Evaluate evaluates call with the current guard.
func (h *Holder) Evaluate(ctx context.Context, call *Call) (Verdict, error) {
	return h.Load().Evaluate(ctx, call)
}
