package audit

import (
	"strconv"
	"testing"
)

// TestHeldBuffer drives the held records' buffer directly through holds
// and releases that reach its capacity with a little or a lot of it
// written (the two ways it makes room): the records left are always the
// ones held and not released, in order, and their count is Held.
func TestHeldBuffer(t *testing.T) {
	w := &Writer{opts: WriterOptions{BatchSize: 4}}
	next, first := 0, 0 // records next.. to hold; first..next-1 held
	hold := func(n int) {
		for range n {
			w.hold(Record{Tool: strconv.Itoa(next)})
			next++
		}
	}
	release := func(n int) {
		w.release(n)
		first += n
	}
	check := func(step string) {
		t.Helper()
		if w.heldLen() != next-first || w.Held() != next-first {
			t.Fatalf("%s: %d held (Held %d), want %d", step, w.heldLen(), w.Held(), next-first)
		}
		for i, r := range w.held[w.head:] {
			if r.Tool != strconv.Itoa(first+i) {
				t.Fatalf("%s: held[%d] = %s, want %d", step, i, r.Tool, first+i)
			}
		}
		for i := range w.head {
			if w.held[i].Tool != "" {
				t.Fatalf("%s: released record %d not cleared", step, i)
			}
		}
	}
	hold(64)
	check("fill")
	for cap(w.held) > len(w.held) {
		hold(1)
	}
	release(1) // little written: the buffer grows
	hold(1)
	check("grow")
	for cap(w.held) > len(w.held) {
		hold(1)
	}
	release(len(w.held) / 2) // much written: compacted in place
	c := cap(w.held)
	hold(1)
	check("compact")
	if cap(w.held) != c {
		t.Errorf("compacting changed the capacity from %d to %d", c, cap(w.held))
	}
	release(w.heldLen()) // all written: a large buffer is given back
	check("empty")
	if w.held != nil {
		t.Errorf("an empty backlog buffer of capacity %d was kept", cap(w.held))
	}
	hold(3)
	release(2)
	check("again")
}
