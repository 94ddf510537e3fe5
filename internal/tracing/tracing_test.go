package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestOffDoesNothing: with tracing off no helper makes a span, reads a
// caller's trace context, writes one, or allocates.
func TestOffDoesNothing(t *testing.T) {
	tracing.Enable(nil)
	h := http.Header{"Traceparent": {tp}}
	meta := map[string]any{"traceparent": tp}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c := tracing.ExtractHeader(ctx, h)
		c = tracing.ExtractMeta(c, meta)
		if _, span := tracing.Start(c, "x", trace.SpanKindInternal); span != nil {
			t.Fatal("span made while off")
		}
		tracing.InjectHeader(c, h)
		tracing.End(nil, nil)
		if tracing.Pairs(c) != nil || tracing.HasContext(c) {
			t.Fatal("trace context while off")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per call while off, want 0", allocs)
	}
	if trace.SpanContextFromContext(tracing.ExtractHeader(ctx, h)).IsValid() {
		t.Error("a caller's traceparent was read while off")
	}
}

// TestPropagation: on, a caller's traceparent from HTTP headers or MCP
// _meta parents a span, and the span's context is written to headers,
// _meta and gRPC pairs with the same trace id; a malformed traceparent
// is ignored; an error sets error.type to its utcp code.
func TestPropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp2 := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tracing.Enable(tp2)
	t.Cleanup(func() { tracing.Enable(nil) })

	for name, ctx := range map[string]context.Context{
		"header": tracing.ExtractHeader(context.Background(), http.Header{"Traceparent": {tp}, "Tracestate": {"a=1"}}),
		"meta":   tracing.ExtractMeta(context.Background(), map[string]any{"traceparent": tp, "tracestate": "a=1"}),
	} {
		ctx, span := tracing.Start(ctx, name, trace.SpanKindServer)
		sc := span.SpanContext()
		if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: trace id %s", name, sc.TraceID())
		}
		h := http.Header{}
		tracing.InjectHeader(ctx, h)
		want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
		if h.Get("Traceparent") != want || h.Get("Tracestate") != "a=1" {
			t.Errorf("%s: injected %v, want traceparent %s", name, h, want)
		}
		meta := map[string]any{}
		tracing.InjectMeta(ctx, meta)
		if meta["traceparent"] != want {
			t.Errorf("%s: _meta %v", name, meta)
		}
		if p := tracing.Pairs(ctx); len(p) < 2 || p[0] != "traceparent" || p[1] != want {
			t.Errorf("%s: pairs %v", name, p)
		}
		tracing.End(span, utcp.NewError(utcp.CodeForbidden, "no"))
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	for _, s := range spans {
		if s.Parent.SpanID().String() != "00f067aa0ba902b7" || !s.Parent.IsRemote() {
			t.Errorf("%s: parent %v", s.Name, s.Parent)
		}
		found := false
		for _, a := range s.Attributes {
			if a.Key == tracing.ErrorType && a.Value.AsString() == string(utcp.CodeForbidden) {
				found = true
			}
		}
		if !found || s.Status.Description != "no" {
			t.Errorf("%s: attributes %v status %v", s.Name, s.Attributes, s.Status)
		}
	}

	bad := tracing.ExtractHeader(context.Background(), http.Header{"Traceparent": {"00-zz-yy-01"}})
	if trace.SpanContextFromContext(bad).IsValid() {
		t.Error("a malformed traceparent was taken")
	}
	_, span := tracing.Start(bad, "fresh", trace.SpanKindServer)
	if !span.SpanContext().IsValid() || span.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Error("no fresh trace after a malformed traceparent")
	}
	tracing.End(span, errors.New("plain"))
}
