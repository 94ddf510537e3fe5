package api

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

// BenchmarkObserverOnCall measures the per-call log line and metrics with
// the daemon's text handler as it is and wrapped in utcp.RedactHandler
// (as the daemon runs it), to io.Discard.
//
//	go test -run '^$' -bench ObserverOnCall -benchmem ./api/
func BenchmarkObserverOnCall(b *testing.B) {
	rec := &gateway.CallRecord{Tool: "demo.add", Qualified: "demo.add", Protocol: "http", Principal: "agent-1",
		Verdict: guard.Verdict{Decision: guard.Allow}, Duration: 1200 * time.Microsecond}
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{
		{"plain", slog.NewTextHandler(io.Discard, nil)},
		{"redacting", utcp.RedactHandler(slog.NewTextHandler(io.Discard, nil))},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := NewObserver(slog.New(c.h), prometheus.NewRegistry())
			b.ReportAllocs()
			for b.Loop() {
				o.OnCall(rec)
			}
		})
	}
}

// TestObserverLineThroughRedactHandlerDoesNotAllocateMore: the redacting
// handler adds no allocation to a call's log line with nothing to redact.
func TestObserverLineThroughRedactHandlerDoesNotAllocateMore(t *testing.T) {
	rec := &gateway.CallRecord{Tool: "demo.add", Qualified: "demo.add", Protocol: "http", Principal: "agent-1",
		Verdict: guard.Verdict{Decision: guard.Allow}, Duration: time.Millisecond}
	plain := NewObserver(slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	red := NewObserver(slog.New(utcp.RedactHandler(slog.NewTextHandler(io.Discard, nil))), prometheus.NewRegistry())
	a := testing.AllocsPerRun(200, func() { plain.OnCall(rec) })
	b := testing.AllocsPerRun(200, func() { red.OnCall(rec) })
	if b > a {
		t.Errorf("OnCall: %v allocations through RedactHandler, %v without", b, a)
	}
}
