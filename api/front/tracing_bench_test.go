package front_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// BenchmarkCallHandlerTracing is BenchmarkCallHandler with tracing off
// (as the daemon runs without OTEL_* configuration) and on (the SDK's
// tracer provider, every span sampled, batched to an exporter that drops
// them; the caller sends a traceparent): the cost of the spans of one
// call (front, execute_tool, guard, dispatch) and of reading the trace
// context, without the export itself.
func BenchmarkCallHandlerTracing(b *testing.B) {
	types := transports.NewRegistry()
	if err := types.Register(transports.Info{
		Type: "echo",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(echoSpec))
		},
		New:      func(transports.Options) (transports.Transport, error) { return echoTransport{}, nil },
		Template: new(echoSpec),
	}); err != nil {
		b.Fatal(err)
	}
	obs := api.NewObserver(slog.New(slog.NewJSONHandler(io.Discard, nil)), prometheus.NewRegistry())
	g, err := gateway.New(gateway.Options{Transports: types, OnCall: obs.OnCall})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	if _, err := g.RegisterManual(b.Context(), json.RawMessage(`{"name":"demo","call_template_type":"echo"}`), gateway.RegisterOptions{Source: "api"}); err != nil {
		b.Fatal(err)
	}
	h, err := api.New(api.Options{Gateway: g, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"arguments":{"a":1,"b":2}}`)
	run := func(b *testing.B, traceparent string) {
		req, _ := http.NewRequest("POST", "http://127.0.0.1/v1/tools/demo.add/call", nil)
		req.Header.Set("Content-Type", "application/json")
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		w := &discardWriter{h: http.Header{}}
		b.ReportAllocs()
		for b.Loop() {
			r := req.Clone(b.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			clear(w.h)
			h.ServeHTTP(w, r)
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		}
	}
	b.Run("off", func(b *testing.B) {
		tracing.Enable(nil)
		run(b, "")
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		tracing.Enable(tp)
		b.Cleanup(func() {
			tracing.Enable(nil)
			_ = tp.Shutdown(b.Context())
		})
		run(b, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	})
}
