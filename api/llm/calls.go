package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/utcp"
)

// Call is one tool call a model made.
type Call struct {
	// ID is the provider's call id (Gemini's may be empty).
	ID string
	// Name is the function name the model used.
	Name string
	// Args are the decoded arguments (numbers as json.Number).
	Args map[string]any
	// ArgsErr, when set, says why the arguments could not be used; the
	// call is then answered with it, not run.
	ArgsErr error
}

// Outcome is what running one Call gave.
type Outcome struct {
	// Value is the tool's result (when Err is nil).
	Value any
	// Err is the failure, model-visible: a *utcp.ToolError, a utcp.Error
	// or another error.
	Err error
}

// Request is a parsed tool-call request.
type Request struct {
	// Calls are the tool calls, in the model's order.
	Calls []Call
	// ModelContent is Gemini's model content, echoed first in the reply.
	ModelContent json.RawMessage
}

func malformed(format string, args ...any) error {
	return httpx.Errorf(utcp.CodeInvalidRequest, format, args...)
}

func decodeLoose(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return malformed("malformed JSON: %w", err)
	}
	return nil
}

// decodeArgs decodes a JSON object of arguments; empty or null is none.
func decodeArgs(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("the arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the arguments have data after the JSON object")
	}
	return m, nil
}

// ParseRequest reads a model's tool calls from body:
//
//   - openai: a Chat Completions response ({"choices": [{"message": ...}]},
//     the first choice) or an assistant message ({"role": "assistant",
//     "tool_calls": [...]}); each call's function.arguments is a JSON
//     string.
//   - anthropic: a Messages response or assistant message ({"role":
//     "assistant", "content": [...]}); the tool_use blocks are the calls.
//   - gemini: a generateContent response ({"candidates": [{"content":
//     ...}]}, the first candidate) or a model content ({"role": "model",
//     "parts": [...]}); the functionCall parts are the calls.
//
// A body of another shape, or a call without an id (OpenAI, Anthropic) or
// name, is an invalid_request error. Arguments that cannot be used are
// recorded in Call.ArgsErr, not refused.
func ParseRequest(p Provider, body []byte) (*Request, error) {
	switch p {
	case OpenAI:
		return parseOpenAI(body)
	case Anthropic:
		return parseAnthropic(body)
	case Gemini:
		return parseGemini(body)
	}
	return nil, malformed("unknown provider %q", p)
}

type openAIMessage struct {
	Role      *string `json:"role"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func parseOpenAI(body []byte) (*Request, error) {
	var top struct {
		Choices []struct {
			Message *openAIMessage `json:"message"`
		} `json:"choices"`
		openAIMessage
	}
	if err := decodeLoose(body, &top); err != nil {
		return nil, err
	}
	msg := &top.openAIMessage
	switch {
	case top.Choices != nil:
		if len(top.Choices) == 0 || top.Choices[0].Message == nil {
			return nil, malformed("the response has no choices[0].message")
		}
		msg = top.Choices[0].Message
	case top.Role == nil && top.ToolCalls == nil:
		return nil, malformed("the body is neither a Chat Completions response nor an assistant message")
	}
	if msg.Role != nil && *msg.Role != "assistant" {
		return nil, malformed("the message's role is %q, not assistant", *msg.Role)
	}
	req := &Request{Calls: make([]Call, 0, len(msg.ToolCalls))}
	for i, tc := range msg.ToolCalls {
		if tc.ID == "" || tc.Function == nil || tc.Function.Name == "" {
			return nil, malformed("tool_calls[%d] needs an id and a function name", i)
		}
		if tc.Type != "" && tc.Type != "function" {
			return nil, malformed("tool_calls[%d] has type %q; only function calls can be run", i, tc.Type)
		}
		c := Call{ID: tc.ID, Name: tc.Function.Name}
		var s string
		raw := bytes.TrimSpace(tc.Function.Arguments)
		switch {
		case len(raw) == 0 || string(raw) == "null":
		case raw[0] == '"':
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, malformed("tool_calls[%d].function.arguments: %w", i, err)
			}
		default:
			return nil, malformed("tool_calls[%d].function.arguments must be a JSON string", i)
		}
		c.Args, c.ArgsErr = decodeArgs([]byte(s))
		req.Calls = append(req.Calls, c)
	}
	return req, nil
}

func parseAnthropic(body []byte) (*Request, error) {
	var msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := decodeLoose(body, &msg); err != nil {
		return nil, err
	}
	if msg.Role != "assistant" {
		return nil, malformed("the body must be an assistant message or a Messages response (role %q)", msg.Role)
	}
	content := bytes.TrimSpace(msg.Content)
	if len(content) == 0 || content[0] == '"' {
		return &Request{Calls: []Call{}}, nil // text only: no tool use
	}
	var blocks []struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if err := decodeLoose(content, &blocks); err != nil {
		return nil, malformed("content: %w", err)
	}
	req := &Request{Calls: []Call{}}
	for i, b := range blocks {
		if b.Type != "tool_use" {
			continue
		}
		if b.ID == "" || b.Name == "" {
			return nil, malformed("content[%d]: a tool_use block needs an id and a name", i)
		}
		c := Call{ID: b.ID, Name: b.Name}
		c.Args, c.ArgsErr = decodeArgs(b.Input)
		req.Calls = append(req.Calls, c)
	}
	return req, nil
}

func parseGemini(body []byte) (*Request, error) {
	var top struct {
		Candidates []struct {
			Content json.RawMessage `json:"content"`
		} `json:"candidates"`
		Role  *string           `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	}
	if err := decodeLoose(body, &top); err != nil {
		return nil, err
	}
	content := json.RawMessage(body)
	switch {
	case top.Candidates != nil:
		if len(top.Candidates) == 0 || len(top.Candidates[0].Content) == 0 {
			return nil, malformed("the response has no candidates[0].content")
		}
		content = top.Candidates[0].Content
	case top.Parts == nil && top.Role == nil:
		return nil, malformed("the body is neither a generateContent response nor a model content")
	}
	var c struct {
		Role  string `json:"role"`
		Parts []struct {
			FunctionCall *struct {
				ID   string          `json:"id"`
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			} `json:"functionCall"`
		} `json:"parts"`
	}
	if err := decodeLoose(content, &c); err != nil {
		return nil, malformed("content: %w", err)
	}
	if c.Role != "" && c.Role != "model" {
		return nil, malformed("the content's role is %q, not model", c.Role)
	}
	req := &Request{Calls: []Call{}, ModelContent: bytes.TrimSpace(content)}
	for i, p := range c.Parts {
		fc := p.FunctionCall
		if fc == nil {
			continue
		}
		if fc.Name == "" {
			return nil, malformed("parts[%d].functionCall needs a name", i)
		}
		call := Call{ID: fc.ID, Name: fc.Name}
		call.Args, call.ArgsErr = decodeArgs(fc.Args)
		req.Calls = append(req.Calls, call)
	}
	return req, nil
}

// OpenAIToolMessage is an OpenAI tool result message.
type OpenAIToolMessage struct {
	// Role is always "tool".
	Role string `json:"role"`
	// ToolCallID is the call's id.
	ToolCallID string `json:"tool_call_id"`
	// Content is the result: a string result itself, else its JSON;
	// a failure is {"error": ..., "code": ...} as JSON.
	Content string `json:"content"`
}

// AnthropicMessage is the user message carrying Anthropic tool results.
type AnthropicMessage struct {
	// Role is always "user".
	Role string `json:"role"`
	// Content holds one tool_result block per call.
	Content []AnthropicToolResult `json:"content"`
}

// AnthropicToolResult is one tool_result block.
type AnthropicToolResult struct {
	// Type is always "tool_result".
	Type string `json:"type"`
	// ToolUseID is the tool_use block's id.
	ToolUseID string `json:"tool_use_id"`
	// Content is one text block holding the result as
	// OpenAIToolMessage.Content.
	Content []AnthropicText `json:"content"`
	// IsError is set on a failure.
	IsError bool `json:"is_error,omitempty"`
}

// AnthropicText is a text content block.
type AnthropicText struct {
	// Type is always "text".
	Type string `json:"type"`
	// Text is the text.
	Text string `json:"text"`
}

// GeminiContent is a Gemini content of function responses.
type GeminiContent struct {
	// Role is always "user".
	Role string `json:"role"`
	// Parts hold one functionResponse per call.
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is a part holding a function response.
type GeminiPart struct {
	// FunctionResponse is the response.
	FunctionResponse GeminiFunctionResponse `json:"functionResponse"`
}

// GeminiFunctionResponse answers one functionCall.
type GeminiFunctionResponse struct {
	// ID is the call's id, when it had one.
	ID string `json:"id,omitempty"`
	// Name is the function name the model called.
	Name string `json:"name"`
	// Response is {"result": value} or {"error": ..., "code": ...}.
	Response map[string]any `json:"response"`
}

// errorValue is the model-visible form of a failure.
func errorValue(err error) map[string]any {
	var te *utcp.ToolError
	if errors.As(err, &te) {
		var v any = te.Error()
		if te.Value != nil {
			v = te.Value
		}
		return map[string]any{"error": v, "code": string(utcp.CodeToolError)}
	}
	code := utcp.CodeOf(err)
	if code == "" {
		code = utcp.CodeInternal
	}
	// A transport's or template's error may quote a URL with its
	// api_key, or a token: the model sees it redacted (utcp.RedactText).
	return map[string]any{"error": utcp.RedactText(err.Error()), "code": string(code)}
}

// text renders a result or failure as a string.
func text(o Outcome) (string, error) {
	var v any = o.Value
	if o.Err != nil {
		v = errorValue(o.Err)
	} else if s, ok := v.(string); ok {
		return s, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encoding a result: %w", err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// Reply builds p's result messages for the calls of req and their
// outcomes (same order):
//
//   - openai: []OpenAIToolMessage, one per call;
//   - anthropic: one AnthropicMessage with a tool_result per call,
//     is_error on failures;
//   - gemini: the model content of the request followed by a
//     GeminiContent with a functionResponse per call.
func Reply(p Provider, req *Request, outs []Outcome) (any, error) {
	switch p {
	case OpenAI:
		msgs := make([]OpenAIToolMessage, len(req.Calls))
		for i, c := range req.Calls {
			s, err := text(outs[i])
			if err != nil {
				return nil, err
			}
			msgs[i] = OpenAIToolMessage{Role: "tool", ToolCallID: c.ID, Content: s}
		}
		return msgs, nil
	case Anthropic:
		msg := AnthropicMessage{Role: "user", Content: make([]AnthropicToolResult, len(req.Calls))}
		for i, c := range req.Calls {
			s, err := text(outs[i])
			if err != nil {
				return nil, err
			}
			msg.Content[i] = AnthropicToolResult{Type: "tool_result", ToolUseID: c.ID, Content: []AnthropicText{{Type: "text", Text: s}}, IsError: outs[i].Err != nil}
		}
		return msg, nil
	case Gemini:
		resp := GeminiContent{Role: "user", Parts: make([]GeminiPart, len(req.Calls))}
		for i, c := range req.Calls {
			r := map[string]any{"result": outs[i].Value}
			if outs[i].Err != nil {
				r = errorValue(outs[i].Err)
			}
			resp.Parts[i] = GeminiPart{FunctionResponse: GeminiFunctionResponse{ID: c.ID, Name: c.Name, Response: r}}
		}
		return []any{req.ModelContent, resp}, nil
	}
	return nil, fmt.Errorf("unknown provider %q", p)
}
