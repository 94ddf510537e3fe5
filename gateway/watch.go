package gateway

import "sync"

// watchers is a set of functions called with every notice of type T:
// Subscribe's (the tool set changed) and WatchResources's (a backend's
// resources or prompts changed). Safe for concurrent use.
type watchers[T any] struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func(T)
}

// add registers fn; cancel removes it (idempotent, safe to call from fn).
func (w *watchers[T]) add(fn func(T)) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[uint64]func(T){}
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

// notify calls every registered function with v, outside the lock.
func (w *watchers[T]) notify(v T) {
	w.mu.Lock()
	fns := make([]func(T), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn(v)
	}
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
	return g.watch.add(func(struct{}) { fn() })
}

// changed calls every subscriber. Call it without holding regLock.
func (g *Gateway) changed() { g.watch.notify(struct{}{}) }
