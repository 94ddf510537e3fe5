package gateway

import "sync"

// inflight counts the calls in flight through one manual entry so that its
// retirement can wait for them without outliving the gateway. It keeps
// the order a sync.RWMutex gave: once retirement has begun, a call that
// enters waits until the entry's deregistration has ended.
type inflight struct {
	mu       sync.Mutex
	n        int
	drained  chan struct{} // closed when n reaches 0 during retirement
	released chan struct{} // closed when retirement has ended
}

// enter records a call in flight; leave must follow.
func (f *inflight) enter() {
	f.mu.Lock()
	if r := f.released; r != nil {
		f.mu.Unlock()
		<-r
		f.mu.Lock()
	}
	f.n++
	f.mu.Unlock()
}

// leave ends a call recorded by enter.
func (f *inflight) leave() {
	f.mu.Lock()
	f.n--
	if f.n == 0 && f.drained != nil {
		close(f.drained)
		f.drained = nil
	}
	f.mu.Unlock()
}

// retire begins retirement: drained is closed once every call in flight
// has left, and release, called exactly once, ends retirement and lets
// waiting calls through. ok is false when retirement has already begun.
func (f *inflight) retire() (drained <-chan struct{}, release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.released != nil {
		return nil, nil, false
	}
	r := make(chan struct{})
	f.released = r
	d := make(chan struct{})
	if f.n == 0 {
		close(d)
	} else {
		f.drained = d
	}
	return d, func() { close(r) }, true
}
