package mcpfront

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/internal/tracing"
)

// startCall starts the server span of a tools/call for tool, named and
// attributed as the OpenTelemetry MCP conventions say ("tools/call
// {tool}", mcp.method.name, gen_ai.tool.name, mcp.session.id), under the
// client's trace context: the traceparent of the request's _meta, else
// of the HTTP request that carried it. Call it only while tracing.On.
func startCall(ctx context.Context, req *mcp.CallToolRequest, tool string) (context.Context, trace.Span) {
	parent := ctx
	if req.Params != nil {
		parent = tracing.ExtractMeta(ctx, req.Params.GetMeta())
	}
	if parent == ctx && req.Extra != nil && req.Extra.Header != nil {
		parent = tracing.ExtractHeader(ctx, req.Extra.Header)
	}
	attrs := []attribute.KeyValue{
		tracing.MCPMethodName.String("tools/call"),
		tracing.GenAIOperationName.String(tracing.OperationExecuteTool),
		tracing.GenAIToolName.String(tool),
		tracing.Front.String(FrontName),
	}
	if req.Session != nil {
		if id := req.Session.ID(); id != "" {
			attrs = append(attrs, tracing.MCPSessionID.String(id))
		}
		if p := req.Session.InitializeParams(); p != nil && p.ProtocolVersion != "" {
			attrs = append(attrs, tracing.MCPProtocolVersion.String(p.ProtocolVersion))
		}
	}
	return tracing.Start(parent, "tools/call "+tool, trace.SpanKindServer, attrs...)
}
