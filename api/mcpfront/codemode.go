package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/utcp"
)

// addCodeMode publishes codemode.run.
func (s *Server) addCodeMode() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("mcpfront: the MCP SDK refused codemode.run: %v", v)
		}
	}()
	t := codemode.Tool()
	s.mcp.AddTool(&mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.Inputs,
		Meta:        mcp.Meta{MetaQualifiedName: t.Name, MetaTags: t.Tags},
	}, s.runCode)
	return nil
}

// runCode serves tools/call of codemode.run: the run's answer (see
// codemode.Response) as JSON text and structuredContent; a program that
// failed is an isError result. A request that cannot run fails as any
// other call does.
func (s *Server) runCode(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := decodeArguments(req.Params.Arguments)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidArguments, err.Error(), nil)
	}
	creq, err := codemode.RequestFromArgs(args)
	if err != nil {
		return s.failure(req, err)
	}
	if t := s.opts.Tracker; t != nil {
		t.CallStarted()
		defer t.CallFinished()
	}
	res, err := s.opts.CodeMode.Run(ctx, codemode.Caller{Principal: s.principal(req)}, creq)
	if err != nil {
		return s.failure(req, err)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return s.failure(req, utcp.Errorf(utcp.CodeInternal, "encoding the CodeMode answer: %w", err))
	}
	var structured map[string]any
	_ = json.Unmarshal(body, &structured)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(body)}},
		StructuredContent: structured,
		IsError:           res.Error != nil,
	}, nil
}
