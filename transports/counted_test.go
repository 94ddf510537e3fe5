package transports_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// lifecycle records the Release calls a Count wrapper makes.
type lifecycle struct {
	mu       sync.Mutex
	fail     bool // RegisterManual fails
	released []string
	calls    int
}

func (l *lifecycle) RegisterManual(_ context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail {
		return nil, utcp.NewError(utcp.CodeDiscoveryFailed, "no manual")
	}
	return &utcp.Manual{}, nil
}

func (l *lifecycle) CallTool(context.Context, *utcp.Call) (*utcp.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return &utcp.Result{Value: "ok"}, nil
}

func (l *lifecycle) Release(_ context.Context, tmpl *utcp.CallTemplate) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, tmpl.Name)
	return nil
}

func (l *lifecycle) Close() error { return nil }

func (l *lifecycle) releases() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.released)
}

type streamingLifecycle struct{ lifecycle }

func (*streamingLifecycle) CallToolStream(context.Context, *utcp.Call) (transports.Stream, error) {
	return transports.SingleEvent(&utcp.Event{Data: "ok"}), nil
}

func TestCountReleasesOnceAfterTheLastRegistration(t *testing.T) {
	ctx := t.Context()
	l := &lifecycle{}
	tr := transports.Count("demo", l)
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	call := &utcp.Call{Tool: "m.echo", Manual: "m", Name: "echo", Template: m}
	for range 2 {
		if _, err := tr.RegisterManual(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.DeregisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := l.releases(); n != 0 {
		t.Fatalf("released with a registration left (%d)", n)
	}
	if _, err := tr.CallTool(ctx, call); err != nil {
		t.Fatalf("call with a registration left: %v", err)
	}
	for range 3 {
		if err := tr.DeregisterManual(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.releases(); n != 1 {
		t.Fatalf("Release called %d times, want 1", n)
	}
	_, err := tr.CallTool(ctx, call)
	if !errors.Is(err, transports.ErrNotRegistered) || utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Fatalf("call after the last deregistration: %v, want manual_not_found", err)
	}
	if l.calls != 1 {
		t.Fatalf("the refused call reached the transport")
	}
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.CallTool(ctx, call); err != nil {
		t.Fatalf("call after registering again: %v", err)
	}
	other := &utcp.Call{Tool: "x.echo", Manual: "x", Name: "echo", Template: m}
	if _, err := tr.CallTool(ctx, other); err != nil {
		t.Fatalf("call of a manual never registered: %v", err)
	}
	if err := tr.DeregisterManual(ctx, &utcp.CallTemplate{Name: "never"}); err != nil || l.releases() != 1 {
		t.Fatalf("deregistering a manual never registered: %v, %d releases", err, l.releases())
	}
	if err := tr.DeregisterManual(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func TestCountReleasesAfterAFailedFirstRegistration(t *testing.T) {
	ctx := t.Context()
	l := &lifecycle{}
	tr := transports.Count("demo", l)
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	l.fail = true
	if _, err := tr.RegisterManual(ctx, m); err == nil {
		t.Fatal("RegisterManual succeeded")
	}
	if n := l.releases(); n != 1 {
		t.Fatalf("a failed registration of an unheld manual: %d releases, want 1", n)
	}
	if _, err := tr.CallTool(ctx, &utcp.Call{Manual: "m", Template: m}); err != nil {
		t.Fatalf("a failed registration refuses calls: %v", err)
	}
	l.fail = false
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	l.fail = true
	if _, err := tr.RegisterManual(ctx, m); err == nil {
		t.Fatal("RegisterManual succeeded")
	}
	if n := l.releases(); n != 1 {
		t.Fatalf("a failed registration of a held manual released it (%d)", n)
	}
}

func TestCountAfterClose(t *testing.T) {
	ctx := t.Context()
	l := &lifecycle{}
	tr := transports.Count("demo", l)
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.DeregisterManual(ctx, m); err != nil || l.releases() != 0 {
		t.Fatalf("DeregisterManual after Close: %v, %d releases", err, l.releases())
	}
}

func TestCountStreamsOnlyWhenTheTransportDoes(t *testing.T) {
	l := &lifecycle{}
	plain := transports.Count("demo", l)
	if _, ok := plain.(transports.Streamer); ok {
		t.Error("a non-streaming transport became a Streamer")
	}
	if plain.Unwrap() != l {
		t.Error("Unwrap does not return the wrapped transport")
	}
	tr := transports.Count("demo", &streamingLifecycle{})
	s, ok := tr.(transports.Streamer)
	if !ok {
		t.Fatal("a streaming transport lost CallToolStream")
	}
	ctx := t.Context()
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	call := &utcp.Call{Manual: "m", Template: m}
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallToolStream(ctx, call); err != nil {
		t.Fatal(err)
	}
	if err := tr.DeregisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallToolStream(ctx, call); utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Fatalf("stream after the last deregistration: %v", err)
	}
}

// keyedLifecycle keys registrations by the whole template.
type keyedLifecycle struct{ lifecycle }

func (*keyedLifecycle) RegistrationKey(tmpl *utcp.CallTemplate) string {
	return tmpl.Name + "#" + string(tmpl.Raw)
}

func TestCountKeysByRegistrationKey(t *testing.T) {
	ctx := t.Context()
	l := &keyedLifecycle{}
	tr := transports.Count("demo", l)
	a := &utcp.CallTemplate{Name: "m", Type: "demo", Raw: []byte(`{"v":1}`)}
	b := &utcp.CallTemplate{Name: "m", Type: "demo", Raw: []byte(`{"v":2}`)}
	call := &utcp.Call{Manual: "m", Template: b}
	for _, tmpl := range []*utcp.CallTemplate{a, b} {
		if _, err := tr.RegisterManual(ctx, tmpl); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.DeregisterManual(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := l.releases(); n != 1 {
		t.Fatalf("the replaced template: %d releases, want 1", n)
	}
	if _, err := tr.CallTool(ctx, call); err != nil {
		t.Fatalf("call while the new template is registered: %v", err)
	}
	if err := tr.DeregisterManual(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := l.releases(); n != 2 {
		t.Fatalf("%d releases, want 2", n)
	}
	if _, err := tr.CallTool(ctx, call); utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Fatalf("call after the last deregistration: %v", err)
	}
}

// gatedLifecycle's RegisterManual waits for gate and then fails when
// fail is set.
type gatedLifecycle struct {
	lifecycle
	gate    chan struct{}
	entered chan struct{}
}

func (g *gatedLifecycle) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	return g.lifecycle.RegisterManual(ctx, tmpl)
}

func TestCountWaitsForRegistrationsUnderWay(t *testing.T) {
	ctx := t.Context()
	g := &gatedLifecycle{}
	tr := transports.Count("demo", g)
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	g.gate, g.entered = make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.fail = true
	g.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := tr.RegisterManual(ctx, m)
		done <- err
	}()
	<-g.entered
	if err := tr.DeregisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := g.releases(); n != 0 {
		t.Fatalf("released while a registration was under way (%d)", n)
	}
	if _, err := tr.CallTool(ctx, &utcp.Call{Manual: "m", Template: m}); utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Fatalf("call after the last deregistration: %v", err)
	}
	close(g.gate)
	if err := <-done; err == nil {
		t.Fatal("the gated registration succeeded")
	}
	if n := g.releases(); n != 1 {
		t.Fatalf("after the registration under way failed: %d releases, want 1", n)
	}
}

func TestCountHold(t *testing.T) {
	ctx := t.Context()
	l := &lifecycle{}
	tr := transports.Count("demo", l)
	m := &utcp.CallTemplate{Name: "m", Type: "demo"}
	call := &utcp.Call{Manual: "m", Template: m}
	if _, err := tr.RegisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	tr.Hold(m) // a stored copy replaces the discovered entry
	if err := tr.DeregisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.CallTool(ctx, call); err != nil || l.releases() != 0 {
		t.Fatalf("call of a held manual: %v, %d releases", err, l.releases())
	}
	if err := tr.DeregisterManual(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.CallTool(ctx, call); utcp.CodeOf(err) != utcp.CodeManualNotFound || l.releases() != 1 {
		t.Fatalf("after the held copy went: %v, %d releases", err, l.releases())
	}
	tr.Hold(m)
	if _, err := tr.CallTool(ctx, call); err != nil {
		t.Fatalf("a held copy after the release: %v", err)
	}
}
