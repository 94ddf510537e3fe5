// Package confserver is an MCP server (github.com/modelcontextprotocol/go-sdk)
// with everything the server scenarios of the MCP conformance suite
// (npm @modelcontextprotocol/conformance 0.1.16, `conformance server`)
// look for, under the names the suite calls. The suite ships no server of
// its own; this one lets it run against a backend behind utcpd as well as
// directly (internal/mcpconformance does both). It serves over stdio or
// Streamable HTTP; the command in examples/servers/mcpconformance runs it.
//
// Tools (no arguments unless named):
//
//	test_simple_text                  text "This is a simple text response for testing."
//	test_image_content                an image block (1×1 red PNG, image/png)
//	test_audio_content                an audio block (short silent WAV, audio/wav)
//	test_embedded_resource            an embedded text resource test://embedded-resource
//	test_multiple_content_types       text, image and an embedded JSON resource
//	test_tool_with_logging            three info log messages ~50 ms apart, then text
//	test_error_handling               an isError result
//	test_tool_with_progress           progress 0, 50, 100 of 100 ~50 ms apart (with a progress token)
//	test_sampling {prompt}            sampling/createMessage to the client; text "LLM response: …"
//	test_elicitation {message}        elicitation/create (username, email); text "User response: …"
//	test_elicitation_sep1034_defaults elicitation/create with a default for every primitive type
//	test_elicitation_sep1330_enums    elicitation/create with the five enum forms of SEP-1330
//	test_reconnection                 over HTTP, closes the call's SSE stream (SEP-1699) and
//	                                  answers after the client resumes; elsewhere it just answers
//	json_schema_2020_12_tool          an input schema with $schema, $defs, $ref, additionalProperties
//
// The sampling and elicitation tools ask in the multi-round-trip form of
// SEP-2322 (a result with inputRequests, answered by a retried call), which
// go-sdk turns into classic sampling/createMessage and elicitation/create
// requests during the call for clients before 2026-07-28; a go-sdk server
// refuses those classic requests on a 2026-07-28 session, so this is the
// form that works on every revision.
//
// Resources: test://static-text (text/plain), test://static-binary
// (image/png blob), the template test://template/{id}/data
// (application/json naming the id) and test://watched-resource, which
// accepts resources/subscribe and resources/unsubscribe (Subscribed
// reports the subscriptions).
//
// Prompts: test_simple_prompt, test_prompt_with_arguments {arg1, arg2},
// test_prompt_with_embedded_resource {resourceUri} and
// test_prompt_with_image. completion/complete suggests values for
// test_prompt_with_arguments' arguments and the template's id. The server
// declares logging (go-sdk answers logging/setLevel and drops messages
// below the level the client set; it sends none before a level is set).
//
// Over HTTP the handler is stateful (protocol 2025-11-25 and older, with
// sessions), keeps an in-memory event store so that streams resume with
// Last-Event-ID, and refuses a non-loopback Host (go-sdk's DNS-rebinding
// protection) and cross-origin browser requests with 403.
package confserver

//lint:file-ignore SA1019 the suite checks sampling and logging, deprecated only from protocol 2026-07-28 on

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The names the suite calls.
const (
	ToolSimpleText       = "test_simple_text"
	ToolImage            = "test_image_content"
	ToolAudio            = "test_audio_content"
	ToolEmbeddedResource = "test_embedded_resource"
	ToolMixedContent     = "test_multiple_content_types"
	ToolLogging          = "test_tool_with_logging"
	ToolError            = "test_error_handling"
	ToolProgress         = "test_tool_with_progress"
	ToolSampling         = "test_sampling"
	ToolElicitation      = "test_elicitation"
	ToolElicitDefaults   = "test_elicitation_sep1034_defaults"
	ToolElicitEnums      = "test_elicitation_sep1330_enums"
	ToolReconnection     = "test_reconnection"
	ToolJSONSchema       = "json_schema_2020_12_tool"

	ResourceStaticText   = "test://static-text"
	ResourceStaticBinary = "test://static-binary"
	ResourceTemplate     = "test://template/{id}/data"
	ResourceWatched      = "test://watched-resource"

	PromptSimple           = "test_simple_prompt"
	PromptWithArguments    = "test_prompt_with_arguments"
	PromptEmbeddedResource = "test_prompt_with_embedded_resource"
	PromptWithImage        = "test_prompt_with_image"
)

// Fixed texts the scenarios check for.
const (
	SimpleText       = "This is a simple text response for testing."
	ErrorText        = "This tool intentionally returns an error for testing"
	StaticText       = "This is the content of the static text resource."
	EmbeddedText     = "This is an embedded resource content."
	SimplePromptText = "This is a simple prompt for testing."
)

// step is the pause between the log messages and between the progress
// notifications, as the scenarios describe them (~50 ms).
const step = 50 * time.Millisecond

// reconnectRetry is the retry the SSE stream of test_reconnection
// announces when it closes.
const reconnectRetry = 200 * time.Millisecond

// PNG is a 1×1 red PNG image: the image the tools, the binary resource
// and the image prompt return.
var PNG = redPixel()

// WAV is 10 ms of silence, 8 kHz mono 16-bit PCM: the audio
// test_audio_content returns.
var WAV = silence(80)

func redPixel() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // encoding to memory does not fail
	}
	return b.Bytes()
}

// silence is a RIFF WAVE file of n zero samples.
func silence(n int) []byte {
	const rate, bits, channels = 8000, 16, 1
	data := n * bits / 8 * channels
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + data))
	b.WriteString("WAVEfmt ")
	le(uint32(16))                         // fmt chunk size
	le(uint16(1))                          // PCM
	le(uint16(channels))                   //
	le(uint32(rate))                       //
	le(uint32(rate * channels * bits / 8)) // byte rate
	le(uint16(channels * bits / 8))        // block align
	le(uint16(bits))                       //
	b.WriteString("data")
	le(uint32(data))
	b.Write(make([]byte, data))
	return b.Bytes()
}

// Server is the conformance fixture. It is safe for concurrent use; one
// Server serves any number of sessions.
type Server struct {
	srv *mcp.Server

	mu   sync.Mutex
	subs map[string]int // subscribed URI → number of sessions subscribed
}

// New returns the fixture with every tool, resource, prompt and the
// completion handler registered.
func New() *Server {
	s := &Server{subs: map[string]int{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "utcpd-mcp-conformance-fixture", Version: "1.0.0"}, &mcp.ServerOptions{
		CompletionHandler:  complete,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: s.unsubscribe,
	})
	s.addTools()
	s.addResources()
	addPrompts(s.srv)
	return s
}

// MCP returns the underlying go-sdk server.
func (s *Server) MCP() *mcp.Server { return s.srv }

// RunStdio serves one client over standard input and output until ctx
// ends or standard input closes.
func (s *Server) RunStdio(ctx context.Context) error {
	return s.srv.Run(ctx, &mcp.StdioTransport{})
}

// Handler returns the Streamable HTTP handler, to be mounted at the MCP
// endpoint (for example /mcp): stateful, resumable from an in-memory
// event store, refusing non-loopback Host headers on a loopback listener
// and cross-origin browser requests (403).
func (s *Server) Handler() http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	return http.NewCrossOriginProtection().Handler(h)
}

// Subscribed returns the URIs some session is subscribed to, sorted.
func (s *Server) Subscribed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var uris []string
	for u, n := range s.subs {
		if n > 0 {
			uris = append(uris, u)
		}
	}
	slices.Sort(uris)
	return uris
}

func (s *Server) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[req.Params.URI]++
	return nil
}

func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[req.Params.URI] > 0 {
		s.subs[req.Params.URI]--
	}
	return nil
}

// noArgs is the input schema of the tools without arguments.
var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

// stringArg is an input schema with one required string argument.
func stringArg(name, description string) json.RawMessage {
	schema, _ := json.Marshal(map[string]any{
		"type":       "object",
		"properties": map[string]any{name: map[string]any{"type": "string", "description": description}},
		"required":   []string{name},
	})
	return schema
}

// jsonSchema2020 is the input schema json-schema-2020-12 checks, keyword
// for keyword.
var jsonSchema2020 = json.RawMessage(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
  "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
  "additionalProperties": false
}`)

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func (s *Server) addTools() {
	add := func(name, description string, schema json.RawMessage, h mcp.ToolHandler) {
		s.srv.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: schema}, h)
	}
	add(ToolSimpleText, "Returns a fixed text.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(SimpleText), nil
	})
	add(ToolImage, "Returns a 1×1 PNG image.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: PNG, MIMEType: "image/png"}}}, nil
	})
	add(ToolAudio, "Returns a short WAV clip.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: WAV, MIMEType: "audio/wav"}}}, nil
	})
	add(ToolEmbeddedResource, "Returns an embedded text resource.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: EmbeddedText,
		}}}}, nil
	})
	add(ToolMixedContent, "Returns text, an image and an embedded resource.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: PNG, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`,
			}},
		}}, nil
	})
	add(ToolLogging, "Sends three log messages while it runs.", noArgs, logging)
	add(ToolError, "Always fails.", noArgs, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text(ErrorText)
		r.IsError = true
		return r, nil
	})
	add(ToolProgress, "Reports progress 0, 50 and 100 of 100.", noArgs, progress)
	add(ToolSampling, "Asks the client's LLM to answer a prompt.", stringArg("prompt", "The prompt to send to the LLM"), sampling)
	add(ToolElicitation, "Asks the user for a username and an email address.", stringArg("message", "The message to show the user"), elicitation)
	add(ToolElicitDefaults, "Asks the user for values that all have defaults (SEP-1034).", noArgs, elicitDefaults)
	add(ToolElicitEnums, "Asks the user to choose from the five enum forms of SEP-1330.", noArgs, elicitEnums)
	add(ToolReconnection, "Closes its SSE stream mid-call, then answers on the resumed stream (SEP-1699).", noArgs, reconnection)
	add(ToolJSONSchema, "Tool with JSON Schema 2020-12 features", jsonSchema2020, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("Received: " + string(req.Params.Arguments)), nil
	})
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func logging(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
		if i > 0 {
			if err := pause(ctx, step); err != nil {
				return nil, err
			}
		}
		if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: ToolLogging, Data: msg}); err != nil {
			return nil, fmt.Errorf("sending log message: %w", err)
		}
	}
	return text("Tool with logging executed successfully"), nil
}

func progress(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	token := req.Params.GetProgressToken()
	for i, p := range []float64{0, 50, 100} {
		if i > 0 {
			if err := pause(ctx, step); err != nil {
				return nil, err
			}
		}
		if token == nil {
			continue
		}
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: p, Total: 100, Message: fmt.Sprintf("%g of 100", p),
		}); err != nil {
			return nil, fmt.Errorf("sending progress: %w", err)
		}
	}
	return text("Tool with progress executed successfully"), nil
}

// stringArgument reads the string argument name of a call.
func stringArgument(req *mcp.CallToolRequest, name string) (string, error) {
	var args map[string]any
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return "", fmt.Errorf("arguments are not a JSON object: %w", err)
		}
	}
	v, ok := args[name].(string)
	if !ok {
		return "", fmt.Errorf("argument %q (a string) is required", name)
	}
	return v, nil
}

// failure is an isError result with msg.
func failure(msg string) *mcp.CallToolResult {
	r := text(msg)
	r.IsError = true
	return r
}

// inputKey is the id of the one input request the sampling and
// elicitation tools make.
const inputKey = "input"

// ask returns the client's answer to ir, a sampling or elicitation
// request, in the multi-round-trip form of SEP-2322: the first call
// answers with a result that asks for it, and the client calls again with
// the answer (and the requestState, the tool's name, echoed). go-sdk
// turns that first result into a classic server-to-client request
// (sampling/createMessage, elicitation/create) for a client before
// 2026-07-28 and calls the handler again itself, so the tool works on
// every revision. Exactly one of the returns is non-nil.
func ask(req *mcp.CallToolRequest, ir mcp.InputRequest) (mcp.InputResponse, *mcp.CallToolResult) {
	if req.Params.InputResponses == nil {
		return nil, &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputKey: ir}, RequestState: req.Params.Name}
	}
	if req.Params.RequestState != req.Params.Name {
		return nil, failure(fmt.Sprintf("requestState %q was not echoed (want %q)", req.Params.RequestState, req.Params.Name))
	}
	answer, ok := req.Params.InputResponses[inputKey]
	if !ok || answer == nil {
		return nil, failure("inputResponses has no answer for " + inputKey)
	}
	return answer, nil
}

func sampling(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	prompt, err := stringArgument(req, "prompt")
	if err != nil {
		return failure(err.Error()), nil
	}
	answer, res := ask(req, &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: 100,
	})
	if res != nil {
		return res, nil
	}
	var content []mcp.Content
	switch a := answer.(type) {
	case *mcp.CreateMessageResult:
		content = []mcp.Content{a.Content}
	case *mcp.CreateMessageWithToolsResult:
		content = a.Content
	default:
		return failure(fmt.Sprintf("the answer to sampling/createMessage is a %T", answer)), nil
	}
	var texts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return text("LLM response: " + strings.Join(texts, " ")), nil
}

// elicit asks the user with message and schema and answers
// "<prefix>: action=…, content={…}".
func elicit(req *mcp.CallToolRequest, prefix, message, schema string) *mcp.CallToolResult {
	answer, res := ask(req, &mcp.ElicitParams{Message: message, RequestedSchema: json.RawMessage(schema)})
	if res != nil {
		return res
	}
	er, ok := answer.(*mcp.ElicitResult)
	if !ok {
		return failure(fmt.Sprintf("the answer to elicitation/create is a %T", answer))
	}
	content, _ := json.Marshal(er.Content)
	return text(fmt.Sprintf("%s: action=%s, content=%s", prefix, er.Action, content))
}

func elicitation(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	msg, err := stringArgument(req, "message")
	if err != nil {
		return failure(err.Error()), nil
	}
	return elicit(req, "User response", msg, `{
	  "type": "object",
	  "properties": {
	    "username": {"type": "string", "description": "User's response"},
	    "email": {"type": "string", "description": "User's email address"}
	  },
	  "required": ["username", "email"]
	}`), nil
}

func elicitDefaults(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return elicit(req, "Elicitation completed", "Please review these values; each has a default.", `{
	  "type": "object",
	  "properties": {
	    "name": {"type": "string", "description": "User name", "default": "John Doe"},
	    "age": {"type": "integer", "description": "User age", "default": 30},
	    "score": {"type": "number", "description": "User score", "default": 95.5},
	    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
	    "verified": {"type": "boolean", "description": "Verification status", "default": true}
	  }
	}`), nil
}

func elicitEnums(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return elicit(req, "Elicitation completed", "Please choose from each list.", `{
	  "type": "object",
	  "properties": {
	    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
	    "titledSingle": {"type": "string", "oneOf": [
	      {"const": "value1", "title": "First Option"},
	      {"const": "value2", "title": "Second Option"},
	      {"const": "value3", "title": "Third Option"}]},
	    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
	    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
	    "titledMulti": {"type": "array", "items": {"anyOf": [
	      {"const": "value1", "title": "First Choice"},
	      {"const": "value2", "title": "Second Choice"},
	      {"const": "value3", "title": "Third Choice"}]}}
	  }
	}`), nil
}

// reconnection closes the call's SSE stream when the transport can (HTTP
// with sessions, protocol before 2026-07-28), so that the client resumes
// with GET and Last-Event-ID, and answers once it has had time to.
func reconnection(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if req.Extra != nil && req.Extra.CloseSSEStream != nil {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: reconnectRetry})
		if err := pause(ctx, 2*reconnectRetry); err != nil {
			return nil, err
		}
	}
	return text("Reconnection test completed successfully"), nil
}

func (s *Server) addResources() {
	s.srv.AddResource(&mcp.Resource{URI: ResourceStaticText, Name: "static-text", Description: "A fixed text resource.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ResourceStaticText, MIMEType: "text/plain", Text: StaticText}}}, nil
		})
	s.srv.AddResource(&mcp.Resource{URI: ResourceStaticBinary, Name: "static-binary", Description: "A 1×1 PNG image.", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ResourceStaticBinary, MIMEType: "image/png", Blob: PNG}}}, nil
		})
	s.srv.AddResource(&mcp.Resource{URI: ResourceWatched, Name: "watched-resource", Description: "A resource to subscribe to.", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: ResourceWatched, MIMEType: "text/plain", Text: "The watched resource."}}}, nil
		})
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: ResourceTemplate, Name: "template-data", Description: "Data for an id.", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			uri := req.Params.URI
			id, ok := strings.CutPrefix(uri, "test://template/")
			id, ok2 := strings.CutSuffix(id, "/data")
			if !ok || !ok2 || id == "" || strings.Contains(id, "/") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			body, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(body)}}}, nil
		})
}

func userText(s string) *mcp.PromptMessage {
	return &mcp.PromptMessage{Role: "user", Content: &mcp.TextContent{Text: s}}
}

func addPrompts(srv *mcp.Server) {
	srv.AddPrompt(&mcp.Prompt{Name: PromptSimple, Description: "A prompt without arguments."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{userText(SimplePromptText)}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: PromptWithArguments, Description: "A prompt with two arguments.", Arguments: []*mcp.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true},
		{Name: "arg2", Description: "Second test argument", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])),
		}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: PromptEmbeddedResource, Description: "A prompt that embeds a resource.", Arguments: []*mcp.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
	}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing.",
			}}},
			userText("Please process the embedded resource above."),
		}}, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: PromptWithImage, Description: "A prompt with an image."},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.ImageContent{Data: PNG, MIMEType: "image/png"}},
				userText("Please analyze the image above."),
			}}, nil
		})
}

// suggestions are the completion candidates per argument.
var suggestions = map[string][]string{
	"arg1": {"paris", "park", "party", "test", "testValue1"},
	"arg2": {"world", "wonder", "testValue2"},
	"id":   {"1", "123", "42"},
}

// complete suggests the candidates of the argument that start with the
// typed value, for test_prompt_with_arguments and the resource template;
// other references get no values.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{} // "values" is required: never null
	ref := req.Params.Ref
	if ref != nil && (ref.Type == "ref/prompt" && ref.Name == PromptWithArguments || ref.Type == "ref/resource" && ref.URI == ResourceTemplate) {
		for _, v := range suggestions[req.Params.Argument.Name] {
			if strings.HasPrefix(v, req.Params.Argument.Value) {
				values = append(values, v)
			}
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
