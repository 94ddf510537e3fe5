// Package mcpserver is the demo MCP server of the fixture tools: an MCP
// server (github.com/modelcontextprotocol/go-sdk) that serves echo, add,
// fail, sleep and count of package fixture over stdio or Streamable HTTP.
// The mcp transport's conformance and unit tests run against it; the
// command in examples/servers/mcp serves it for the README.
//
// Tools and their results:
//
//	echo   a single text block: the arguments as JSON
//	add    structuredContent {"sum": a+b} (and the same JSON as text)
//	fail   an isError result whose text is the message argument
//	sleep  waits ms milliseconds or until the call is cancelled;
//	       structuredContent {"slept_ms": ms}
//	count  sends notifications/progress 1..n (total n, message "i") to a
//	       caller that gave a progress token, delay_ms apart, then
//	       returns the list [1..n] as one JSON text block
//
// Two more tools exist for tests and demos: add_tool {"name"} registers a
// tool of that name at run time (it echoes its arguments), which makes the
// server send notifications/tools/list_changed; content_types returns one
// block of every MCP content type (text, image, audio, an embedded text
// and blob resource, a resource link), with structuredContent when its
// argument structured is true. The server also has one resource,
// fixture://readme (text).
//
// A call of an unknown tool is a JSON-RPC error -32602 ("unknown tool"),
// as go-sdk servers answer; with Options.UnknownToolAsResult it is an
// isError result "MCP error -32602: Tool <name> not found", as the
// TypeScript SDK answers. Invalid arguments are isError results.
//
// Cancellation reaches the backend: a notifications/cancelled from the
// client cancels the context the tool runs under.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// Backend runs the fixture tools. *fixture.Fixture implements it; tests
// substitute backends that run the tools somewhere else.
type Backend interface {
	// Call runs one tool and returns its JSON-compatible result; a
	// *fixture.Failure is the tool's own failure.
	Call(ctx context.Context, name string, args map[string]any) (any, error)
	// Stream runs one tool, calling emit for each value it produces.
	Stream(ctx context.Context, name string, args map[string]any, emit func(any) error) error
}

// Options tune New. The zero value is valid.
type Options struct {
	// Name is the serverInfo name (default "utcpd-fixture").
	Name string
	// PageSize is the number of tools per tools/list page (0: the SDK's
	// default of 1000). Tests set it low to exercise pagination.
	PageSize int
	// UnknownToolAsResult answers a call of an unknown tool with an
	// isError result, as TypeScript servers do, instead of a JSON-RPC
	// error.
	UnknownToolAsResult bool
}

// Names of the extra tools.
const (
	AddTool      = "add_tool"
	ContentTypes = "content_types"
)

// ReadmeURI is the URI of the server's one resource.
const ReadmeURI = "fixture://readme"

// ReadmeText is the text of ReadmeURI.
const ReadmeText = "The fixture MCP server serves echo, add, fail, sleep and count."

// TinyPNG is the 1×1 PNG image content_types returns.
var TinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

// TinyWAV is the (silent, 4-sample) WAV audio content_types returns.
var TinyWAV = []byte("RIFF,\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00\x02\x00\x10\x00data\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// Server is the demo MCP server. It is safe for concurrent use.
type Server struct {
	srv  *mcp.Server
	b    Backend
	opts Options
	mu   sync.Mutex
	dyn  map[string]bool // tools added with AddEchoTool
}

// New returns a Server whose tools run on b.
func New(b Backend, opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "utcpd-fixture"
	}
	s := &Server{b: b, opts: opts, dyn: map[string]bool{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "1.0.0"},
		&mcp.ServerOptions{PageSize: opts.PageSize, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}})
	for _, t := range fixture.Tools() {
		tool := &mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.Inputs}
		switch t.Name {
		case fixture.Add, fixture.Sleep:
			tool.OutputSchema = t.Outputs
		}
		switch t.Name {
		case fixture.Echo, fixture.Add:
			ro := false
			tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &ro, Title: t.Name}
		case fixture.Fail:
			yes := true
			tool.Annotations = &mcp.ToolAnnotations{DestructiveHint: &yes}
		}
		s.srv.AddTool(tool, s.handler(t.Name))
	}
	s.srv.AddTool(&mcp.Tool{
		Name:        AddTool,
		Description: "AddTool registers a tool with the given name at run time; the new tool echoes its arguments.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
	}, s.addTool)
	s.srv.AddTool(&mcp.Tool{
		Name:        ContentTypes,
		Description: "ContentTypes returns one content block of every MCP content type.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"structured":{"type":"boolean"}}}`),
	}, contentTypes)
	s.srv.AddResource(&mcp.Resource{URI: ReadmeURI, Name: "readme", Description: "What this server serves.", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ReadmeURI, MIMEType: "text/plain", Text: ReadmeText}}}, nil
		})
	if opts.UnknownToolAsResult {
		s.srv.AddReceivingMiddleware(s.unknownToolAsResult)
	}
	return s
}

// MCP returns the underlying go-sdk server.
func (s *Server) MCP() *mcp.Server { return s.srv }

// AddEchoTool registers a tool named name that echoes its arguments, and
// notifies connected clients (notifications/tools/list_changed). Adding
// an existing name replaces it.
func (s *Server) AddEchoTool(name string) {
	s.mu.Lock()
	s.dyn[name] = true
	s.mu.Unlock()
	s.srv.AddTool(&mcp.Tool{Name: name, Description: "A tool added at run time; it echoes its arguments.",
		InputSchema: json.RawMessage(`{"type":"object"}`)}, s.handler(fixture.Echo))
}

// RunStdio serves one client over standard input and output until ctx
// ends or standard input closes.
func (s *Server) RunStdio(ctx context.Context) error {
	return s.srv.Run(ctx, &mcp.StdioTransport{})
}

// HTTPOptions tune Handler.
type HTTPOptions struct {
	// Stateless serves without sessions (and with the 2026-07-28
	// protocol); the default is a stateful server (2025-11-25 and older).
	Stateless bool
	// SessionTimeout closes sessions idle that long (0: never).
	SessionTimeout time.Duration
}

// Handler returns the Streamable HTTP handler of s, to be mounted at the
// MCP endpoint (for example /mcp). It refuses cross-origin browser
// requests (403) and, on a loopback listener, Host headers that are not
// loopback. A call is cancelled by notifications/cancelled, or, under the
// 2026-07-28 protocol, by the client closing the call's response stream.
func (s *Server) Handler(opts HTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: opts.Stateless, SessionTimeout: opts.SessionTimeout,
			// Under 2026-07-28 a client cancels a call by closing its
			// response stream; end the tool's context then.
			PropagateRequestCancellation: true})
	return http.NewCrossOriginProtection().Handler(h)
}

// decodeArgs reads tool arguments, numbers as json.Number.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return args, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments are not a JSON object: %w", err)
	}
	return args, nil
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

func textJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// handler adapts one fixture tool to an MCP tool handler.
func (s *Server) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := decodeArgs(req.Params.Arguments)
		if err != nil {
			return errorResult(err.Error()), nil
		}
		var v any
		if name == fixture.Count {
			v, err = s.count(ctx, req, args)
		} else {
			v, err = s.b.Call(ctx, name, args)
		}
		if err != nil {
			var failure *fixture.Failure
			switch {
			case errors.As(err, &failure):
				return errorResult(failure.Message), nil
			case ctx.Err() != nil:
				return nil, ctx.Err() // cancelled: the client does not wait for an answer
			default:
				return errorResult(err.Error()), nil
			}
		}
		text, err := textJSON(v)
		if err != nil {
			return nil, err
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
		if name == fixture.Add || name == fixture.Sleep {
			res.StructuredContent = json.RawMessage(text)
		}
		return res, nil
	}
}

// count streams through the backend and reports each number as a
// progress notification.
func (s *Server) count(ctx context.Context, req *mcp.CallToolRequest, args map[string]any) (any, error) {
	n, _ := fixture.Number(args, "n")
	token := req.Params.GetProgressToken()
	out := []any{}
	err := s.b.Stream(ctx, fixture.Count, args, func(v any) error {
		out = append(out, v)
		if token == nil {
			return nil
		}
		p, _ := fixture.Number(map[string]any{"v": v}, "v")
		return req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: p, Total: n, Message: strconv.FormatFloat(p, 'f', -1, 64),
		})
	})
	return out, err
}

func (s *Server) addTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := decodeArgs(req.Params.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	name, _ := args["name"].(string)
	if name == "" {
		return errorResult("argument name is required"), nil
	}
	s.AddEchoTool(name)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + name}}}, nil
}

func contentTypes(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := decodeArgs(req.Params.Arguments)
	if err != nil {
		return errorResult(err.Error()), nil
	}
	size := int64(len(ReadmeText))
	res := &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "one of each"},
		&mcp.ImageContent{Data: TinyPNG, MIMEType: "image/png"},
		&mcp.AudioContent{Data: TinyWAV, MIMEType: "audio/wav"},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: ReadmeURI, MIMEType: "text/plain", Text: ReadmeText}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "fixture://blob", MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 255}}},
		&mcp.ResourceLink{URI: ReadmeURI, Name: "readme", MIMEType: "text/plain", Size: &size},
	}}
	if b, _ := args["structured"].(bool); b {
		res.StructuredContent = map[string]any{"blocks": 6}
	}
	return res, nil
}

// unknownToolAsResult turns the JSON-RPC error for an unknown tool into an
// isError result, as the TypeScript SDK does.
func (s *Server) unknownToolAsResult(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err == nil {
			return res, err
		}
		params, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if !ok {
			return res, err
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidParams && we.Message == fmt.Sprintf("unknown tool %q", params.Name) {
			return errorResult(fmt.Sprintf("MCP error -32602: Tool %s not found", params.Name)), nil
		}
		return res, err
	}
}
