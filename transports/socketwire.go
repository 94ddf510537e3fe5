package transports

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/utcp"
)

// This file holds what the raw-socket transports (tcp, udp) share: the
// error object of the utcpd envelope's error frame, rendering a request
// without the envelope, and reading an answer by response_format. prefix
// is the transport's name, used in error messages.

// The frame types of the utcpd envelope of the raw-socket transports
// (see the tcp and udp package documentation). They are the websocket
// transport's frame types too.
const (
	FrameCall     = "call"   // client → server: run a tool
	FrameCancel   = "cancel" // client → server: the caller gave up
	FrameDiscover = "utcp"   // client → server: send your manual
	FrameResult   = "result" // server → client: the whole result; ends the call
	FrameEvent    = "event"  // server → client: one streamed item
	FrameEnd      = "end"    // server → client: the stream is over
	FrameError    = "error"  // server → client: the call failed; ends the call
	FrameManual   = "manual" // server → client: the manual asked for
)

// Frame is one message of the utcpd envelope of the raw-socket
// transports: JSON in one frame of a tcp template's framing, or one udp
// datagram. Clients send call, cancel and utcp frames; servers answer with
// result, event, end, error and manual frames carrying the id of the
// request.
type Frame struct {
	// Type is one of the Frame* constants.
	Type string `json:"type"`
	// ID correlates a request and its answers.
	ID string `json:"id,omitempty"`
	// Tool is the tool's name as the server knows it (call).
	Tool string `json:"tool,omitempty"`
	// Arguments are the call's arguments (call).
	Arguments map[string]any `json:"arguments,omitempty"`
	// Result is the tool's whole result (result).
	Result any `json:"result,omitempty"`
	// Event optionally names a streamed item (event).
	Event string `json:"event,omitempty"`
	// Data is one streamed item (event).
	Data any `json:"data,omitempty"`
	// Error describes a failure (error).
	Error *WireError `json:"error,omitempty"`
	// Manual is the server's UTCP manual (manual).
	Manual json.RawMessage `json:"manual,omitempty"`
}

// WireError is the error object of an envelope error frame.
type WireError struct {
	// Code is "tool_error" (the default), "tool_not_found",
	// "invalid_arguments", "invalid_request" or "unsupported".
	Code string `json:"code,omitempty"`
	// Message says what went wrong.
	Message string `json:"message"`
	// Data is the tool's own error payload, if any.
	Data any `json:"data,omitempty"`
}

// DecodeWireError reads an error frame's error: an object with code,
// message and data, or a bare string (the message), or anything else
// (kept as the message text).
func DecodeWireError(raw json.RawMessage) *WireError {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &WireError{Message: s}
	}
	var e struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return &WireError{Message: string(bytes.TrimSpace(raw))}
	}
	return &WireError{Code: e.Code, Message: e.Message, Data: jsonx.DecodeOptional(e.Data)}
}

// CallError turns an error frame into the call's error: tool_not_found
// wraps ErrToolNotFound, invalid_request is a transport error, anything
// else a *utcp.ToolError carrying Data.
func (e *WireError) CallError(prefix string) error {
	msg := e.Message
	if msg == "" {
		msg = "the tool reported an error"
	}
	switch e.Code {
	case "tool_not_found":
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", prefix, msg, ErrToolNotFound)
	case "invalid_request":
		return &utcp.TransportError{Err: fmt.Errorf("%s: the server refused the request: %s", prefix, msg)}
	}
	return &utcp.ToolError{Message: msg, Value: e.Data}
}

// FrameID reads an envelope id: a JSON string, or any other JSON value as
// its text.
func FrameID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

// ConvertResponse turns an answer that is not an envelope into a value by
// response_format: "json" (an error when it is not JSON), "text", "raw"
// (base64); any other format takes JSON when it parses, else UTF-8 text,
// else base64.
func ConvertResponse(prefix, format string, data []byte) (any, error) {
	switch format {
	case "json":
		v, ok := jsonx.DecodeValue(data)
		if !ok {
			return nil, &utcp.TransportError{Err: fmt.Errorf("%s: response_format is json but the answer is not JSON: %s", prefix, jsonx.Excerpt(data))}
		}
		return v, nil
	case "text":
		return string(data), nil
	case "raw":
		return base64.StdEncoding.EncodeToString(data), nil
	}
	if v, ok := jsonx.DecodeValue(data); ok {
		return v, nil
	}
	if utf8.Valid(data) {
		return string(data), nil
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// socketPlaceholder matches UTCP_ARG_<name>_UTCP_END and python-utcp's
// UTCP_ARG_<name>_UTCP_ARG.
var socketPlaceholder = regexp.MustCompile(`UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_(?:END|ARG)`)

// RenderSocketRequest builds a request payload without the envelope:
// format "json" (or anything but "text") is the arguments as a compact
// JSON object; format "text" replaces each placeholder of tmpl by the
// argument as text (jsonx.ArgString), or, when tmpl is empty, joins the
// argument values by spaces in the order of their names. A placeholder
// naming a missing argument is an invalid_arguments error naming it.
func RenderSocketRequest(prefix, format, tmpl string, args map[string]any) ([]byte, error) {
	if format != "text" {
		if args == nil {
			args = map[string]any{}
		}
		return jsonx.Marshal(args)
	}
	if tmpl == "" {
		names := make([]string, 0, len(args))
		for k := range args {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, 0, len(names))
		for _, k := range names {
			if s, ok := jsonx.ArgString(args[k]); ok {
				parts = append(parts, s)
			}
		}
		return []byte(strings.Join(parts, " ")), nil
	}
	var missing error
	out := socketPlaceholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := socketPlaceholder.FindStringSubmatch(m)[1]
		s, ok := jsonx.ArgString(args[name])
		if !ok && missing == nil {
			missing = utcp.NewError(utcp.CodeInvalidArguments, "%s: request_data_template needs argument %q, which the call does not have", prefix, name).WithDetail("missing", []string{name})
		}
		return s
	})
	if missing != nil {
		return nil, missing
	}
	return []byte(out), nil
}
