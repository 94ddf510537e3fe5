// Package tracing is utcpd's thin layer over the OpenTelemetry trace
// API: the span names and attributes of a tool call, and W3C trace
// context (traceparent, tracestate) read from and written to HTTP
// headers, MCP _meta and gRPC metadata.
//
// Tracing is off until Enable is called (internal/telemetry does, when
// the OTEL_* environment configures an exporter). While off, On reports
// false and every function here returns at once without allocating:
// callers test On (or a nil span) before building attributes, so a call
// costs one atomic load per hook.
//
// The package imports only the OpenTelemetry API (no SDK, no exporter)
// and utcp, so that transports may use it to pass the trace context on.
package tracing

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/utcp"
)

// Attribute keys of the OpenTelemetry semantic conventions for GenAI and
// MCP (not yet in the Go semconv packages), and utcpd's own.
const (
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIToolType      = attribute.Key("gen_ai.tool.type")
	MCPMethodName      = attribute.Key("mcp.method.name")
	MCPSessionID       = attribute.Key("mcp.session.id")
	MCPProtocolVersion = attribute.Key("mcp.protocol.version")
	JSONRPCRequestID   = attribute.Key("jsonrpc.request.id")
	ErrorType          = attribute.Key("error.type")
	HTTPRequestMethod  = attribute.Key("http.request.method")
	HTTPRoute          = attribute.Key("http.route")
	RPCSystemName      = attribute.Key("rpc.system.name")
	RPCMethod          = attribute.Key("rpc.method")

	// Front is where a call came in (rest, mcp, codemode, llm, cli, ...).
	Front = attribute.Key("utcpd.front")
	// Manual is the manual of the called tool.
	Manual = attribute.Key("utcpd.manual")
	// Protocol is the call template type the dispatch used.
	Protocol = attribute.Key("utcpd.protocol")
	// Decision is the guard chain's decision; Guard the guard that made it.
	Decision = attribute.Key("utcpd.guard.decision")
	Guard    = attribute.Key("utcpd.guard.name")
	// ReviewID names the review a call waited for.
	ReviewID = attribute.Key("utcpd.review.id")
)

// OperationExecuteTool is gen_ai.operation.name of a tool call.
const OperationExecuteTool = "execute_tool"

// InstrumentationName names utcpd's tracer.
const InstrumentationName = "github.com/utcpd/utcpd"

var (
	on     atomic.Bool
	tracer atomic.Pointer[tracerBox]
)

type tracerBox struct{ t trace.Tracer }

// propagator reads and writes W3C traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Enable turns tracing on with tp's tracer; Enable(nil) turns it off.
// It is safe to call at any time (calls in flight finish with the
// tracer they started with).
func Enable(tp trace.TracerProvider) {
	if tp == nil {
		on.Store(false)
		tracer.Store(nil)
		return
	}
	tracer.Store(&tracerBox{tp.Tracer(InstrumentationName)})
	on.Store(true)
}

// On reports whether tracing is on.
func On() bool { return on.Load() }

// Start starts a span named name of kind under ctx's span. It returns
// ctx and a nil span while tracing is off; End and the other helpers
// accept a nil span.
func Start(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	b := tracer.Load()
	if b == nil || !on.Load() {
		return ctx, nil
	}
	return b.t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// End ends span (nil: nothing), recording err: an error status, and
// error.type set to err's utcp code (or "_OTHER" without one).
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	SetError(span, err)
	span.End()
}

// SetError records err on span (nil span or nil err: nothing).
func SetError(span trace.Span, err error) {
	if span == nil || err == nil {
		return
	}
	code := string(utcp.CodeOf(err))
	if code == "" {
		code = "_OTHER"
	}
	span.SetAttributes(ErrorType.String(code))
	span.SetStatus(codes.Error, err.Error())
}

// ExtractHeader returns ctx with the remote span context of h's
// traceparent and tracestate, when tracing is on and h holds a valid
// one; otherwise ctx. A malformed traceparent is ignored (the call
// starts a new trace).
func ExtractHeader(ctx context.Context, h http.Header) context.Context {
	if !on.Load() || len(h["Traceparent"]) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// InjectHeader sets traceparent (and tracestate) on h from ctx's span,
// when tracing is on and ctx carries a valid span context.
func InjectHeader(ctx context.Context, h http.Header) {
	if !on.Load() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// HasContext reports whether tracing is on and ctx carries a valid span
// context to pass on (so a caller can avoid copying a request or map
// that InjectHeader or InjectMeta would otherwise change).
func HasContext(ctx context.Context) bool {
	return on.Load() && trace.SpanContextFromContext(ctx).IsValid()
}

// MetaTraceparent and MetaTracestate are the MCP _meta keys of the trace
// context (the same names as the W3C headers, as MCP SDKs and the
// OpenTelemetry MCP conventions use).
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// ExtractMeta returns ctx with the remote span context of an MCP _meta's
// traceparent and tracestate (string values), when tracing is on and
// meta holds a valid one; otherwise ctx.
func ExtractMeta(ctx context.Context, meta map[string]any) context.Context {
	if !on.Load() || meta == nil {
		return ctx
	}
	tp, _ := meta[MetaTraceparent].(string)
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts, _ := meta[MetaTracestate].(string); ts != "" {
		c["tracestate"] = ts
	}
	return propagator.Extract(ctx, c)
}

// InjectMeta sets traceparent (and tracestate) in an MCP _meta from
// ctx's span, when HasContext(ctx). meta must not be nil.
func InjectMeta(ctx context.Context, meta map[string]any) {
	if !HasContext(ctx) {
		return
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	for k, v := range c {
		meta[k] = v
	}
}

// Pairs returns the trace context of ctx's span as gRPC metadata pairs
// ("traceparent", value[, "tracestate", value]), nil unless
// HasContext(ctx).
func Pairs(ctx context.Context) []string {
	if !HasContext(ctx) {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	out := make([]string, 0, 4)
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := c[k]; v != "" {
			out = append(out, k, v)
		}
	}
	return out
}
