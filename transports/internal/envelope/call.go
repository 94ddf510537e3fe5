package envelope

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// This file is the client side of one call over a byte transport that
// carries one envelope frame per unit it reads (a tcp frame, a udp
// datagram): finding the call's answers, collecting them into a result,
// and reading them as a stream.

// Answer is a server frame that answers a call (result, event, end or
// error), as read: the payloads stay raw until the caller decodes them.
type Answer struct {
	// Type is FrameResult, FrameEvent, FrameEnd or FrameError.
	Type string `json:"type"`
	// ID is the id of the call answered, as sent (see FrameID).
	ID json.RawMessage `json:"id"`
	// Result is the tool's whole result (result).
	Result json.RawMessage `json:"result"`
	// Event optionally names a streamed item (event).
	Event string `json:"event"`
	// Data is one streamed item (event).
	Data json.RawMessage `json:"data"`
	// Error is the error object (error), read with DecodeWireError.
	Error json.RawMessage `json:"error"`
}

// NextAnswer reads units with read until one is an answer frame with the
// call's id, which it returns; answers with another id (late answers
// for an earlier call) are skipped. The bytes read returns need stay
// valid only until its next call. A unit that is not an envelope frame,
// or a frame of a type other than result, event, end and error, is a
// *utcp.TransportError quoting it; prefix names the transport, unit what
// read returns ("frame", "datagram") and addr the server, in messages.
// read's errors are returned as they are.
func NextAnswer(read func() ([]byte, error), prefix, unit, addr, id string) (*Answer, error) {
	for {
		data, err := read()
		if err != nil {
			return nil, err
		}
		var a Answer
		if json.Unmarshal(data, &a) != nil || a.Type == "" {
			return nil, &utcp.TransportError{Err: fmt.Errorf("%s: %s answered something that is not a utcpd envelope %s: %s", prefix, addr, unit, jsonx.Excerpt(data))}
		}
		switch a.Type {
		case FrameResult, FrameEvent, FrameEnd, FrameError:
		default:
			return nil, &utcp.TransportError{Err: fmt.Errorf("%s: %s answered a %s of unknown type %q", prefix, addr, unit, a.Type)}
		}
		if FrameID(a.ID) != id {
			continue
		}
		return &a, nil
	}
}

// Collect reads a call's answers with next until one ends the call, and
// returns the call's value: a result frame's value, or at an end frame
// the data of the event frames before it as a list (empty, not nil,
// when there were none); an error frame is its CallError(prefix). Event
// data of more than limit bytes in all is a payload_too_large error
// wrapping transports.ErrTooLarge. ended reports whether a frame ended
// the call (result, end or error: the server has finished with it);
// it is false when next failed or the limit cut the call short.
func Collect(next func() (*Answer, error), prefix string, limit int64) (value any, ended bool, err error) {
	var events []any
	var size int64
	for {
		a, err := next()
		if err != nil {
			return nil, false, err
		}
		switch a.Type {
		case FrameResult:
			return jsonx.DecodeOptional(a.Result), true, nil
		case FrameEvent:
			if size += int64(len(a.Data)); size > limit {
				return nil, false, transports.TooLarge(limit)
			}
			events = append(events, jsonx.DecodeOptional(a.Data))
		case FrameEnd:
			if events == nil {
				events = []any{}
			}
			return events, true, nil
		case FrameError:
			return nil, true, DecodeWireError(a.Error).CallError(prefix)
		}
	}
}

// Stream is one call's answers read as a transports.Stream: each event
// frame is an event, a result frame one last event, an end frame io.EOF
// and an error frame its CallError. It is safe for concurrent use; Recv
// waits in next without holding the stream's lock, so that Close can
// end a Recv that waits.
type Stream struct {
	prefix string
	next   func() (*Answer, error)
	finish func(ended bool)
	abort  func()

	mu   sync.Mutex
	done bool
	err  error // returned by Recv once done
}

// NewStream returns the stream of a call whose answers next reads (see
// NextAnswer). finish is called exactly once, when the call ends, with
// whether a frame ended it (see Collect). abort, when not nil, is called
// just before finish(false), when the call ends without such a frame (an
// error reading it, or Close before its end): the transport tells the
// server the caller went away. prefix names the transport in messages.
func NewStream(prefix string, next func() (*Answer, error), finish func(ended bool), abort func()) *Stream {
	return &Stream{prefix: prefix, next: next, finish: finish, abort: abort}
}

// Recv returns the next event, io.EOF after the end frame (or after a
// result frame's event), or the error that ended the call.
func (s *Stream) Recv() (*utcp.Event, error) {
	s.mu.Lock()
	if s.done {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	a, err := s.next()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil, s.err
	}
	if err != nil {
		s.end(err, false)
		return nil, err
	}
	switch a.Type {
	case FrameEvent:
		return &utcp.Event{Type: a.Event, Data: jsonx.DecodeOptional(a.Data)}, nil
	case FrameResult:
		s.end(io.EOF, true)
		return &utcp.Event{Data: jsonx.DecodeOptional(a.Result)}, nil
	case FrameEnd:
		s.end(io.EOF, true)
		return nil, io.EOF
	}
	err = DecodeWireError(a.Error).CallError(s.prefix)
	s.end(err, true)
	return nil, err
}

// end records err as the call's end; s.mu is held.
func (s *Stream) end(err error, ended bool) {
	if !ended && s.abort != nil {
		s.abort()
	}
	s.done = true
	s.err = err
	s.finish(ended)
}

// Close ends the call; before its end it aborts it (see NewStream) and
// later Recvs return a canceled error. It is idempotent.
func (s *Stream) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.end(utcp.NewError(utcp.CodeCanceled, "%s: stream closed", s.prefix), false)
	}
	return nil
}
