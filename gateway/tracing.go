package gateway

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/internal/tracing"
)

// The spans of a call, made only while tracing is on (tracing.On): the
// call's "execute_tool {tool}" span (the OpenTelemetry GenAI convention
// for a tool execution) under the front's span, or under the caller's
// remote span context, with a "guard" child for the guard chain (the
// review queue adds a "review" child under it while a call waits) and a
// "dispatch {protocol}" client span for the transport call, whose
// context the transports pass on to the backend.

// startSpan starts rec's execute_tool span.
func startSpan(ctx context.Context, rec *CallRecord) context.Context {
	ctx, rec.span = tracing.Start(ctx, tracing.OperationExecuteTool+" "+rec.Tool, trace.SpanKindInternal,
		tracing.GenAIOperationName.String(tracing.OperationExecuteTool),
		tracing.GenAIToolName.String(rec.Tool),
		tracing.GenAIToolType.String("function"),
		tracing.Front.String(rec.Front))
	return ctx
}

// startDispatch starts rec's dispatch span for p.
func startDispatch(ctx context.Context, rec *CallRecord, p *prepared) context.Context {
	proto := p.call.Template.Type
	ctx, rec.dispatch = tracing.Start(ctx, "dispatch "+proto, trace.SpanKindClient,
		tracing.Protocol.String(proto),
		tracing.Manual.String(p.call.Manual),
		tracing.GenAIToolName.String(p.call.Tool),
		tracing.RPCMethod.String(p.call.Name))
	return ctx
}

// endGuard ends the guard chain's span with its verdict.
func endGuard(span trace.Span, v guard.Verdict) {
	span.SetAttributes(tracing.Decision.String(string(v.Decision)), tracing.Guard.String(v.Guard))
	if v.Decision == guard.Error {
		span.SetStatus(codes.Error, v.Reason)
	}
	span.End()
}

// endSpan ends rec's dispatch span (if any) and execute_tool span.
func endSpan(rec *CallRecord, t *review.Ticket, err error) {
	if rec.dispatch != nil {
		tracing.End(rec.dispatch, err)
		rec.dispatch = nil
	}
	if rec.Qualified != "" {
		rec.span.SetAttributes(tracing.GenAIToolName.String(rec.Qualified))
	}
	if id := t.ReviewID(); id != "" {
		rec.span.SetAttributes(tracing.ReviewID.String(id))
	}
	tracing.End(rec.span, err)
	rec.span = nil
}
