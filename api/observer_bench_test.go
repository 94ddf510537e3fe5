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
// (as the daemon runs it), to io.Discard, and without a log line.
//
//	go test -run '^$' -bench ObserverOnCall -benchmem ./api/
func BenchmarkObserverOnCall(b *testing.B) {
	rec := &gateway.CallRecord{Tool: "demo.add", Qualified: "demo.add", Protocol: "http", Principal: "agent-1",
		Verdict: guard.Verdict{Decision: guard.Allow}, Duration: 1200 * time.Microsecond}
	for _, c := range []struct {
		name string
		h    slog.Handler
	}{
		{"metrics_only", slog.DiscardHandler}, // no log line: the metrics alone
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
