package front

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/internal/tracing"
)

// The routes of the REST front's call spans.
const (
	routeCall   = "/v1/tools/{name}/call"
	routeStream = "/v1/tools/{name}/stream"
)

// startSpan starts the server span of a call on route, named as the
// OpenTelemetry HTTP conventions name it ("POST /v1/tools/{name}/call"),
// under the caller's trace context (which the perimeter extracted). Call
// it only while tracing.On.
func startSpan(r *http.Request, route string) (context.Context, trace.Span) {
	return tracing.Start(r.Context(), r.Method+" "+route, trace.SpanKindServer,
		tracing.HTTPRequestMethod.String(r.Method),
		tracing.HTTPRoute.String(route),
		tracing.GenAIOperationName.String(tracing.OperationExecuteTool),
		tracing.GenAIToolName.String(r.PathValue("name")),
		tracing.Front.String(FrontName))
}
