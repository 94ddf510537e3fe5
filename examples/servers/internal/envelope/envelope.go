// Package envelope is the server side of utcpd's JSON envelope, which
// the tcp and udp demo servers speak (docs/transports.md, sections tcp
// and udp). A client sends
//
//	{"type":"call","id":"7","tool":"echo","arguments":{...}}
//	{"type":"cancel","id":"7"}
//	{"type":"utcp","id":"8"}
//
// and the server answers each request by its id with result, event, end,
// error and manual frames. How frames are delimited (a line, a length
// prefix, a datagram) is the server's business, not this package's.
//
// It is written from the protocol description, independently of the
// client in transports/, so that a misreading of the protocol on one
// side shows in the conformance suite instead of cancelling out.
package envelope

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// The frame types.
const (
	Call     = "call"   // client → server: run a tool
	Cancel   = "cancel" // client → server: the caller gave up on a call
	Discover = "utcp"   // client → server: send your manual
	Result   = "result" // server → client: the whole result; ends the call
	Event    = "event"  // server → client: one streamed item
	End      = "end"    // server → client: the stream is over; ends the call
	Error    = "error"  // server → client: the request failed; ends the call
	Manual   = "manual" // server → client: the manual asked for
)

// Frame is one envelope frame. Fields a frame type does not use are left
// empty and are then absent from the JSON.
type Frame struct {
	// Type is one of the frame types above.
	Type string `json:"type"`
	// ID is the request's id, repeated on each of its answers.
	ID string `json:"id,omitempty"`
	// Tool names the tool to run (call).
	Tool string `json:"tool,omitempty"`
	// Arguments are the tool's arguments (call).
	Arguments map[string]any `json:"arguments,omitempty"`
	// Result is the tool's result as JSON (result); a null result is
	// the JSON null, which is present.
	Result json.RawMessage `json:"result,omitempty"`
	// Data is one streamed item as JSON (event).
	Data json.RawMessage `json:"data,omitempty"`
	// Error says why the request failed (error).
	Error *WireError `json:"error,omitempty"`
	// Manual is the server's UTCP manual as JSON (manual).
	Manual json.RawMessage `json:"manual,omitempty"`
}

// WireError is the error object of an error frame.
type WireError struct {
	// Code is tool_error, tool_not_found, invalid_arguments or
	// invalid_request.
	Code string `json:"code"`
	// Message says what went wrong.
	Message string `json:"message"`
}

// ErrorFrame returns an error frame answering id.
func ErrorFrame(id, code, message string) Frame {
	return Frame{Type: Error, ID: id, Error: &WireError{Code: code, Message: message}}
}

// Decode reads one request frame. It fails when data is not a JSON
// object of the frame's shape (a non-string id, arguments that are not
// an object); the caller answers that with ErrorFrame and
// invalid_request.
func Decode(data []byte) (Frame, error) {
	var f Frame
	err := json.Unmarshal(data, &f)
	return f, err
}

// ErrorOf maps a fixture error to the error object utcpd understands:
// a *fixture.Failure is tool_error with the failure's message, an
// unknown tool is tool_not_found, anything else is invalid_arguments.
func ErrorOf(err error) *WireError {
	var fail *fixture.Failure
	switch {
	case errors.As(err, &fail):
		return &WireError{Code: "tool_error", Message: fail.Message}
	case errors.Is(err, fixture.ErrUnknownTool):
		return &WireError{Code: "tool_not_found", Message: err.Error()}
	}
	return &WireError{Code: "invalid_arguments", Message: err.Error()}
}

// ManualFrame returns the manual frame answering the discovery request
// id with the fixture manual (its tools carry no call templates: utcpd
// gives them the manual's own).
func ManualFrame(id string) Frame {
	raw, _ := json.Marshal(fixture.Manual(nil))
	return Frame{Type: Manual, ID: id, Manual: raw}
}

// Answer runs the call req on f and sends its answers with send: the
// count tool streams one event frame per item and then an end frame,
// every other tool one result frame. A failure is one error frame
// (ErrorOf), unless ctx has ended: then the caller went away and nobody
// reads an answer, so none is sent. Errors of send are not retried; a
// failed event ends the stream.
func Answer(ctx context.Context, f *fixture.Fixture, req Frame, send func(Frame) error) {
	var err error
	if req.Tool == fixture.Count {
		err = f.Stream(ctx, req.Tool, req.Arguments, func(v any) error {
			data, err := json.Marshal(v)
			if err != nil {
				return err
			}
			return send(Frame{Type: Event, ID: req.ID, Data: data})
		})
		if err == nil {
			_ = send(Frame{Type: End, ID: req.ID})
			return
		}
	} else {
		var v any
		if v, err = f.Call(ctx, req.Tool, req.Arguments); err == nil {
			var res []byte
			if res, err = json.Marshal(v); err == nil {
				_ = send(Frame{Type: Result, ID: req.ID, Result: res})
				return
			}
		}
	}
	if ctx.Err() != nil {
		return
	}
	_ = send(Frame{Type: Error, ID: req.ID, Error: ErrorOf(err)})
}
