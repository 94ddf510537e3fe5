package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/utcpd/utcpd/gateway"
)

func TestSubscribe(t *testing.T) {
	_, url := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	var a, b atomic.Int64
	var seen atomic.Int64 // tools ListTools showed inside the callback
	cancelA := g.Subscribe(func() {
		a.Add(1)
		seen.Store(int64(len(g.ListTools(context.Background()))))
	})
	cancelB := g.Subscribe(func() { b.Add(1) })
	defer cancelB()

	register(t, g, httpManual("one", url+"/utcp"))
	if a.Load() != 1 || b.Load() != 1 {
		t.Fatalf("after a registration: calls %d and %d, want 1 each", a.Load(), b.Load())
	}
	if seen.Load() != 5 {
		t.Errorf("the callback saw %d tools, want the 5 just registered", seen.Load())
	}
	if _, err := g.RefreshManual(t.Context(), "one"); err != nil {
		t.Fatal(err)
	}
	if a.Load() != 2 {
		t.Errorf("after a refresh: %d calls, want 2", a.Load())
	}
	if _, err := g.RegisterManual(t.Context(), httpManual("one", url+"/utcp"), gateway.RegisterOptions{}); err == nil {
		t.Fatal("registering a taken name succeeded")
	}
	if a.Load() != 2 {
		t.Errorf("a failed registration notified: %d calls", a.Load())
	}
	cancelA()
	cancelA() // idempotent
	if err := g.DeregisterManual(t.Context(), "one"); err != nil {
		t.Fatal(err)
	}
	if a.Load() != 2 || b.Load() != 3 {
		t.Errorf("after removal with one cancelled: calls %d and %d, want 2 and 3", a.Load(), b.Load())
	}
	if err := g.DeregisterManual(t.Context(), "one"); err == nil {
		t.Fatal("removing a missing manual succeeded")
	}
	if b.Load() != 3 {
		t.Errorf("a failed removal notified: %d calls", b.Load())
	}
}
