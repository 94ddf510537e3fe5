// Package envelope is the utcpd envelope the tcp, udp and websocket
// transports speak (and webrtc's error objects): its frames, the error
// object of an error frame and the call error it stands for, the payload
// of a call frame, the answer to a discovery request, and the client side
// of one call over tcp frames or udp datagrams (NextAnswer, Collect,
// Stream). prefix, where a function takes one, is the transport's name,
// used in error messages.
package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// The frame types of the utcpd envelope (see the tcp, udp and websocket
// package documentation).
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

// Frame is one message of the utcpd envelope: JSON in one frame of a tcp
// template's framing, one udp datagram, or one WebSocket text frame. Clients send call, cancel and utcp frames; servers answer with
// result, event, end, error and manual frames carrying the id of the
// request.
type Frame struct {
	// Type is one of the Frame* constants.
	Type string `json:"type"`
	// ID correlates a request and its answers: a string the client chose,
	// unique among the calls in flight on the connection.
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
	// Code is "tool_error" (the tool failed; the default),
	// "tool_not_found", "invalid_arguments", "invalid_request" (the server
	// did not understand the frame) or "unsupported" (for example, no
	// manual to offer).
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
// wraps transports.ErrToolNotFound, invalid_request is a transport error, anything
// else a *utcp.ToolError carrying Data.
func (e *WireError) CallError(prefix string) error {
	msg := e.Message
	if msg == "" {
		msg = "the tool reported an error"
	}
	switch e.Code {
	case "tool_not_found":
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", prefix, msg, transports.ErrToolNotFound)
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
