package webrtc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/pion/webrtc/v4"
)

// This file holds the client's side of the wire formats: the signaling
// messages, the data-channel envelope, and the chunk envelope that
// carries messages larger than one data-channel message. The demo server
// in examples/servers/webrtc has its own implementation of them, written
// from docs/transports.md, so that the conformance suite tests one
// against the other.

// The signaling message types.
const (
	SignalOffer     = "offer"     // utcpd → signaling: the SDP offer
	SignalAnswer    = "answer"    // signaling → utcpd: the SDP answer
	SignalCandidate = "candidate" // both ways over ws(s)://: one trickled ICE candidate
	SignalError     = "error"     // signaling → utcpd: the exchange failed
)

// Signal is one signaling message: the body of the HTTP POST and of its
// answer, or one WebSocket text message.
type Signal struct {
	// Type is one of the Signal* constants.
	Type string `json:"type"`
	// SDP is the session description (offer, answer).
	SDP string `json:"sdp,omitempty"`
	// PeerID names the peer the offer is for (offer).
	PeerID string `json:"peer_id,omitempty"`
	// Candidate is one trickled ICE candidate in the browser's
	// RTCIceCandidateInit form (candidate). A candidate message without
	// one, or with an empty candidate string, marks the end of
	// candidates.
	Candidate *webrtc.ICECandidateInit `json:"candidate,omitempty"`
	// Error says why the exchange failed (error): a string, or an object
	// with a message.
	Error json.RawMessage `json:"error,omitempty"`
}

// The data-channel message types (see the package documentation).
const (
	TypeToolCall     = "tool_call"     // utcpd → peer: run a tool
	TypeCancel       = "cancel"        // utcpd → peer: the caller gave up
	TypeDiscover     = "utcp"          // utcpd → peer: send your manual
	TypeToolResponse = "tool_response" // peer → utcpd: the result; ends the call
	TypeToolEvent    = "tool_event"    // peer → utcpd: one streamed item
	TypeToolError    = "tool_error"    // peer → utcpd: the call failed; ends it
	TypeManual       = "manual"        // peer → utcpd: the manual asked for
	TypeChunk        = "chunk"         // both ways: one piece of a larger message
)

// Message is one data-channel message of the envelope, as JSON. utcpd
// sends tool_call, cancel and utcp; the peer answers by id with
// tool_event, tool_response, tool_error and manual.
type Message struct {
	// Type is one of the Type* constants other than TypeChunk.
	Type string `json:"type"`
	// ID correlates a request and its answers: a string the sender of
	// the request chose, unique among its requests in flight.
	ID string `json:"id,omitempty"`
	// Tool is the tool's name as the peer knows it (tool_call).
	Tool string `json:"tool,omitempty"`
	// Inputs are the call's arguments (tool_call).
	Inputs map[string]any `json:"inputs,omitempty"`
	// Output is the tool's result (tool_response). Absent after
	// tool_event messages, it means "the events were the result".
	Output json.RawMessage `json:"output,omitempty"`
	// Event is one streamed item (tool_event).
	Event json.RawMessage `json:"event,omitempty"`
	// Error describes a failure (tool_error): a string, or an object
	// {"code", "message", "data"}.
	Error json.RawMessage `json:"error,omitempty"`
	// Manual is the peer's UTCP manual (manual).
	Manual json.RawMessage `json:"manual,omitempty"`
}

// Chunk is one piece of a message too large for one data-channel
// message. The pieces of a message travel in order (seq 0, 1, ...) on
// the ordered channel; the one with last set completes it. Data is the
// standard base64 (padded) of the piece's bytes; the pieces' bytes,
// joined, are the message. ID is the id of the message carried, and a
// sender never interleaves two chunked messages with the same id, so a
// receiver reassembles per id (chunks of different ids may interleave).
type Chunk struct {
	// Type is always TypeChunk.
	Type string `json:"type"`
	// ID is the id of the message the chunk belongs to.
	ID string `json:"id"`
	// Seq numbers the chunks of one message from 0.
	Seq int `json:"seq"`
	// Last marks the final chunk.
	Last bool `json:"last"`
	// Data is the piece, base64-encoded.
	Data string `json:"data"`
}

// DefaultMaxChunkBytes is the largest data-channel message utcpd sends
// unless configured otherwise: 16 KiB, which every WebRTC stack accepts.
// Larger messages are sent as chunks of at most this size.
const DefaultMaxChunkBytes = 16 << 10

// minChunkBytes is the smallest usable chunk size: the chunk envelope
// itself needs room.
const minChunkBytes = 1024

// Split returns the data-channel messages that carry msg, a complete
// message whose id is id: msg itself when it is at most max bytes,
// otherwise chunk messages of at most max bytes each. max below 1024 is
// taken as 1024.
func Split(msg []byte, id string, max int) [][]byte {
	max = maxInt(max, minChunkBytes)
	if len(msg) <= max {
		return [][]byte{msg}
	}
	qid, _ := json.Marshal(id)
	// {"type":"chunk","id":<id>,"seq":<n>,"last":false,"data":"<b64>"}
	overhead := len(`{"type":"chunk","id":,"seq":,"last":false,"data":""}`) + len(qid) + 20
	piece := (max - overhead) / 4 * 3
	if piece < 3 {
		piece = 3
	}
	out := make([][]byte, 0, len(msg)/piece+1)
	for seq := 0; len(msg) > 0; seq++ {
		n := min(piece, len(msg))
		b := make([]byte, 0, overhead+base64.StdEncoding.EncodedLen(n))
		b = append(b, `{"type":"chunk","id":`...)
		b = append(b, qid...)
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		if n == len(msg) {
			b = append(b, `,"last":true,"data":"`...)
		} else {
			b = append(b, `,"last":false,"data":"`...)
		}
		b = base64.StdEncoding.AppendEncode(b, msg[:n])
		b = append(b, `"}`...)
		out = append(out, b)
		msg = msg[n:]
	}
	return out
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// ErrChunk is wrapped by the errors Reassembler.Add returns for a chunk
// that cannot be used.
var ErrChunk = errors.New("bad chunk")

// ErrChunkTooLarge is wrapped by the error Reassembler.Add returns when
// a message being reassembled passes the size limit.
var ErrChunkTooLarge = errors.New("chunked message too large")

// Reassembler joins chunk messages back into whole messages. It is not
// safe for concurrent use: one goroutine (the data channel's message
// callback) feeds it.
type Reassembler struct {
	max     int64
	pending int64 // bytes held across all partial messages
	parts   map[string]*partial
	skip    map[string]bool // ids whose message was dropped: their later chunks are ignored
}

type partial struct {
	next int
	buf  []byte
}

// NewReassembler returns a Reassembler holding at most max bytes of
// partial messages in all.
func NewReassembler(max int64) *Reassembler {
	return &Reassembler{max: max, parts: map[string]*partial{}, skip: map[string]bool{}}
}

// chunkProbe tells chunk messages from others without decoding the rest.
type chunkProbe struct {
	Type string          `json:"type"`
	ID   json.RawMessage `json:"id"`
	Seq  *int            `json:"seq"`
	Last bool            `json:"last"`
	Data *string         `json:"data"`
}

// Add takes one received data-channel message. It returns data itself
// when it is not a chunk, the whole message when data is the last chunk
// of one, and nil when more chunks are needed. A chunk that is out of
// sequence, badly encoded or over the size limit returns an error
// (wrapping ErrChunk or ErrChunkTooLarge) and the id of the message it
// belonged to, whose partial message is dropped; the rest of that
// message's chunks are then ignored quietly (nil, no error) until its
// last chunk or a new seq 0.
func (r *Reassembler) Add(data []byte) (msg []byte, id string, err error) {
	msg, id, err = r.add(data)
	if err != nil && len(r.skip) < 1024 {
		r.skip[id] = true
	}
	return msg, id, err
}

func (r *Reassembler) add(data []byte) (msg []byte, id string, err error) {
	trimmed := bytes.TrimSpace(data)
	if !bytes.Contains(trimmed, []byte(`"chunk"`)) {
		return data, "", nil
	}
	var c chunkProbe
	if json.Unmarshal(trimmed, &c) != nil || c.Type != TypeChunk {
		return data, "", nil
	}
	id = rawID(c.ID)
	if r.skip[id] {
		if c.Seq == nil || *c.Seq != 0 {
			if c.Last {
				delete(r.skip, id)
			}
			return nil, id, nil
		}
		delete(r.skip, id) // seq 0: a new message
	}
	if c.Seq == nil || c.Data == nil {
		r.Drop(id)
		return nil, id, fmt.Errorf("%w: a chunk of message %q lacks seq or data", ErrChunk, id)
	}
	piece, err := base64.StdEncoding.DecodeString(*c.Data)
	if err != nil {
		r.Drop(id)
		return nil, id, fmt.Errorf("%w: chunk %d of message %q: data is not base64: %w", ErrChunk, *c.Seq, id, err)
	}
	p := r.parts[id]
	if p == nil {
		if *c.Seq != 0 {
			return nil, id, fmt.Errorf("%w: chunk %d of message %q came without chunk 0", ErrChunk, *c.Seq, id)
		}
		p = &partial{}
		r.parts[id] = p
	} else if *c.Seq == 0 {
		// A new message with the same id: the old one was abandoned.
		r.Drop(id)
		p = &partial{}
		r.parts[id] = p
	} else if *c.Seq != p.next {
		r.Drop(id)
		return nil, id, fmt.Errorf("%w: chunk %d of message %q came after chunk %d", ErrChunk, *c.Seq, id, p.next-1)
	}
	if r.pending+int64(len(piece)) > r.max {
		r.Drop(id)
		return nil, id, fmt.Errorf("%w: message %q passes %d bytes", ErrChunkTooLarge, id, r.max)
	}
	p.buf = append(p.buf, piece...)
	p.next++
	r.pending += int64(len(piece))
	if !c.Last {
		return nil, id, nil
	}
	delete(r.parts, id)
	r.pending -= int64(len(p.buf))
	return p.buf, id, nil
}

// Drop forgets the partial message with id, if any.
func (r *Reassembler) Drop(id string) {
	if p := r.parts[id]; p != nil {
		r.pending -= int64(len(p.buf))
		delete(r.parts, id)
	}
}

// rawID renders an id given as a JSON string or number.
func rawID(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
