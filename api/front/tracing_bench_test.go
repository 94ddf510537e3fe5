package front_test

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/utcpd/utcpd/internal/tracing"
)

// BenchmarkCallHandlerTracing is BenchmarkCallHandler with tracing off
// (as the daemon runs without OTEL_* configuration) and on (the SDK's
// tracer provider, every span sampled, batched to an exporter that drops
// them; the caller sends a traceparent): the cost of the spans of one
// call (front, execute_tool, guard, dispatch) and of reading the trace
// context, without the export itself.
func BenchmarkCallHandlerTracing(b *testing.B) {
	h := echoHandler(b)
	b.Run("off", func(b *testing.B) {
		tracing.Enable(nil)
		benchCalls(b, h, "")
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
		tracing.Enable(tp)
		b.Cleanup(func() {
			tracing.Enable(nil)
			_ = tp.Shutdown(b.Context())
		})
		benchCalls(b, h, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	})
}
