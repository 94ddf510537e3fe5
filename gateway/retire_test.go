package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// held is an in-process transport whose one tool, "wait", blocks until the
// test releases it or the transport closes. It reports its
// deregistrations.
type held struct {
	release      chan struct{}
	closed       chan struct{}
	closeOnce    sync.Once
	started      chan struct{}
	deregistered chan string
}

func newHeld() *held {
	return &held{release: make(chan struct{}), closed: make(chan struct{}), started: make(chan struct{}, 8), deregistered: make(chan string, 8)}
}

func (h *held) info() transports.Info {
	return transports.Info{
		Type: "held",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(struct{}))
		},
		New: func(transports.Options) (transports.Transport, error) { return h, nil },
	}
}

func (h *held) RegisterManual(context.Context, *utcp.CallTemplate) (*utcp.Manual, error) {
	return &utcp.Manual{UTCPVersion: utcp.Version, Tools: []utcp.Tool{{Name: "wait", Description: "blocks"}}}, nil
}

func (h *held) Release(_ context.Context, tmpl *utcp.CallTemplate) error {
	h.deregistered <- tmpl.Name
	return nil
}

func (h *held) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return &utcp.Result{Value: "done"}, nil
	case <-h.closed:
		return nil, utcp.NewError(utcp.CodeUnavailable, "held: transport closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *held) Close() error {
	h.closeOnce.Do(func() { close(h.closed) })
	return nil
}

func newHeldGateway(t *testing.T) (*gateway.Gateway, *held) {
	t.Helper()
	h := newHeld()
	reg := transports.NewRegistry()
	if err := reg.Register(h.info()); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	if _, err := g.RegisterManual(t.Context(), json.RawMessage(`{"name":"m","call_template_type":"held"}`), gateway.RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	return g, h
}

// A deregistered manual's transport state is released once its calls in
// flight have finished, not before.
func TestRetireWaitsForCallsInFlight(t *testing.T) {
	g, h := newHeldGateway(t)
	done := make(chan error, 1)
	go func() {
		_, err := g.CallTool(context.Background(), "m.wait", nil, gateway.CallOptions{})
		done <- err
	}()
	<-h.started
	if err := g.DeregisterManual(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-h.deregistered:
		t.Fatalf("manual %q deregistered while a call was in flight", name)
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatalf("the call in flight failed: %v", err)
	}
	select {
	case name := <-h.deregistered:
		if name != "m" {
			t.Errorf("deregistered %q, want m", name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the manual was not deregistered after its last call ended")
	}
}

// Close does not wait for a retirement that waits for a call in flight:
// the retirement is abandoned (closing the transport releases the
// manual), and its goroutine ends with Close (goleak checks in TestMain).
func TestCloseEndsPendingRetirement(t *testing.T) {
	g, h := newHeldGateway(t)
	done := make(chan error, 1)
	go func() {
		_, err := g.CallTool(context.Background(), "m.wait", nil, gateway.CallOptions{})
		done <- err
	}()
	<-h.started
	if err := g.DeregisterManual(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- g.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a call in flight on a retired manual")
	}
	if err := <-done; utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("call in flight at Close: %v, want the transport's unavailable", err)
	}
	select {
	case name := <-h.deregistered:
		t.Errorf("manual %q deregistered after Close began", name)
	default:
	}
}
