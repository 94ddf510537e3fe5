package gateway

import "sync"

// watchers holds the functions Subscribe registered.
type watchers struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func()
}

// Subscribe registers fn to be called after every change of the tool set:
// a manual added, replaced (refresh, reload, PUT) or removed. fn runs on
// the goroutine that made the change, after the registry has been
// updated, so a ListTools inside fn already sees the change; it must be
// fast and must not block (hand the work to another goroutine). Several
// changes may be reported by one call, and a change may be reported even
// when the tools stayed the same. cancel stops further calls; it is
// idempotent and safe to call from fn.
func (g *Gateway) Subscribe(fn func()) (cancel func()) {
	w := &g.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[uint64]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

// changed calls every subscriber. Call it without holding regLock.
func (g *Gateway) changed() {
	w := &g.watch
	w.mu.Lock()
	fns := make([]func(), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
