package transporttest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// NewTransport returns the transport newT (a transport package's New)
// builds from cfg, marshalled into Options.Config (nil leaves it empty),
// with a logger that discards; the transport is closed at cleanup. An
// error fails t.
func NewTransport[T interface{ Close() error }](t testing.TB, newT func(transports.Options) (T, error), cfg map[string]any) T {
	t.Helper()
	var raw json.RawMessage
	if cfg != nil {
		raw, _ = json.Marshal(cfg)
	}
	tr, err := newT(transports.Options{Config: raw, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// ParseTemplate parses, with parse (a transport package's
// ParseTemplate), the call template of type typ named "m" made of fields
// (which may rename it). An error fails t.
func ParseTemplate(t testing.TB, parse func(json.RawMessage) (utcp.CallTemplate, error), typ string, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "m", "call_template_type": typ}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	ct, err := parse(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &ct
}

// CallOf is the call of tool, with args, of ct's manual.
func CallOf(ct *utcp.CallTemplate, tool string, args map[string]any) *utcp.Call {
	return &utcp.Call{Tool: ct.Name + "." + tool, Manual: ct.Name, Name: tool, Template: ct, Arguments: args}
}

// Caller is what Do needs of a transport: a transports.Transport, or one
// wrapped by transports.Count.
type Caller interface {
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
}

// Do calls tool of ct's manual on tr, giving it 20 seconds, and returns
// the result's Value.
func Do(t testing.TB, tr Caller, ct *utcp.CallTemplate, tool string, args map[string]any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := tr.CallTool(ctx, CallOf(ct, tool, args))
	if err != nil {
		return nil, err
	}
	return res.Value, nil
}

// CloseInterruptsRecv checks a stream of f's count tool whose next event
// is far off (its first one already received): Close ends a Recv waiting
// on it with code canceled within two seconds, and f sees the call
// cancelled (the client went away).
func CloseInterruptsRecv(t *testing.T, st transports.Stream, f *fixture.Fixture) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	st.Close()
	select {
	case err := <-errc:
		if utcp.CodeOf(err) != utcp.CodeCanceled {
			t.Errorf("Recv after Close: err = %v, want canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not interrupt a waiting Recv")
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.Canceled() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Canceled() == 0 {
		t.Errorf("the server did not see the client go away")
	}
}
