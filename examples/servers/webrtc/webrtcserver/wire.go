package webrtcserver

// This file is the server's side of the wire: the signaling messages,
// the data-channel envelope and its chunks, as docs/transports.md
// (section webrtc) describes them. It is written from that description,
// independently of the client in transports/webrtc, so that the
// conformance suite tests one against the other.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/pion/ice/v4"
	pion "github.com/pion/webrtc/v4"
)

// The signaling message types.
const (
	signalOffer     = "offer"     // client → server: the SDP offer
	signalAnswer    = "answer"    // server → client: the SDP answer
	signalCandidate = "candidate" // both ways over a WebSocket: one trickled ICE candidate
	signalError     = "error"     // server → client: the offer is refused
)

// signal is one signaling message: an HTTP body, or one WebSocket text
// message.
type signal struct {
	Type   string `json:"type"`
	SDP    string `json:"sdp,omitempty"`
	PeerID string `json:"peer_id,omitempty"`
	// Candidate is the browser's RTCIceCandidateInit; a candidate
	// message without one ends the sender's candidates.
	Candidate *pion.ICECandidateInit `json:"candidate,omitempty"`
	// Error says why the offer is refused (error).
	Error string `json:"error,omitempty"`
}

// The data-channel message types.
const (
	typeToolCall     = "tool_call"     // client → server: run a tool
	typeCancel       = "cancel"        // client → server: the caller gave up
	typeDiscover     = "utcp"          // client → server: send your manual
	typeToolResponse = "tool_response" // server → client: the result; ends the call
	typeToolEvent    = "tool_event"    // server → client: one streamed item
	typeToolError    = "tool_error"    // server → client: the call failed; ends it
	typeManual       = "manual"        // server → client: the manual
	typeChunk        = "chunk"         // both ways: a piece of a larger message
)

// inbound is a client's request as the server reads it. The id may be a
// JSON string or number (see idString).
type inbound struct {
	Type   string          `json:"type"`
	ID     json.RawMessage `json:"id"`
	Tool   string          `json:"tool"`
	Inputs map[string]any  `json:"inputs"`
}

// message is one answer the server sends.
type message struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	// Output is the tool's result (tool_response); absent after
	// tool_event messages, meaning the events were the result.
	Output json.RawMessage `json:"output,omitempty"`
	// Event is one streamed item (tool_event).
	Event json.RawMessage `json:"event,omitempty"`
	// Error says why the call failed (tool_error).
	Error *wireError `json:"error,omitempty"`
	// Manual is the server's UTCP manual (manual).
	Manual json.RawMessage `json:"manual,omitempty"`
}

// wireError is the error object of a tool_error message.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// chunk is one piece of a message too large for one data-channel
// message: Data is the standard padded base64 of the piece, Seq counts
// the pieces of one message from 0, Last marks the final one, and ID is
// the carried message's id.
type chunk struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Seq  int    `json:"seq"`
	Last bool   `json:"last"`
	Data string `json:"data"`
}

// defaultMaxChunkBytes is the largest data-channel message the server
// sends unless Options say otherwise: 16 KiB, which every WebRTC stack
// accepts. minChunkBytes is the smallest it allows, room for a chunk's
// envelope and some data.
const (
	defaultMaxChunkBytes = 16 << 10
	minChunkBytes        = 1 << 10
)

// split returns the data-channel messages that carry msg, whose id is
// id: msg itself when it has at most limit bytes, otherwise chunk
// messages of at most limit bytes each (an id too long to leave room for data makes
// them larger: each still carries 3 bytes).
func split(msg []byte, id string, limit int) [][]byte {
	if len(msg) <= limit {
		return [][]byte{msg}
	}
	// The largest envelope around a piece: the highest seq, last false.
	envelope, _ := json.Marshal(chunk{Type: typeChunk, ID: id, Seq: len(msg)})
	piece := max((limit-len(envelope))/4*3, 3) // base64 turns 3 bytes into 4
	var out [][]byte
	for seq := 0; len(msg) > 0; seq++ {
		n := min(piece, len(msg))
		b, _ := json.Marshal(chunk{Type: typeChunk, ID: id, Seq: seq, Last: n == len(msg),
			Data: base64.StdEncoding.EncodeToString(msg[:n])})
		out = append(out, b)
		msg = msg[n:]
	}
	return out
}

// maxPartials bounds how many chunked messages a client may have in
// progress at once.
const maxPartials = 1024

// errChunk is wrapped by the errors reassembler.add returns.
var errChunk = errors.New("unusable chunk")

// reassembler joins chunk messages back into whole messages, per id.
// It holds at most max bytes of unfinished messages in all, and at most
// maxPartials of them. It is not safe for concurrent use: the data
// channel's message callback alone feeds it.
type reassembler struct {
	max   int
	held  int
	parts map[string]*partial
}

type partial struct {
	next int // the seq expected next
	buf  []byte
}

func newReassembler(max int) *reassembler {
	return &reassembler{max: max, parts: map[string]*partial{}}
}

// add takes one data-channel message. A message that is not a chunk is
// complete as it is. A chunk is added to its id's message, which is
// complete at the chunk marked last. An unusable chunk (not of the
// chunk's shape, not base64, out of sequence, past the limits) returns
// an error wrapping errChunk and drops its id's message; a seq 0 chunk
// starts the id's message anew.
func (r *reassembler) add(data []byte) (msg []byte, complete bool, err error) {
	var probe struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Type != typeChunk {
		return data, true, nil // not a chunk: the handler judges it
	}
	var c struct {
		ID   string  `json:"id"`
		Seq  *int    `json:"seq"`
		Last bool    `json:"last"`
		Data *string `json:"data"`
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Seq == nil || c.Data == nil {
		return nil, false, fmt.Errorf("%w: not a chunk of a string id, a seq and data", errChunk)
	}
	piece, err := base64.StdEncoding.DecodeString(*c.Data)
	if err != nil {
		r.drop(c.ID)
		return nil, false, fmt.Errorf("%w: chunk %d of message %q is not base64: %w", errChunk, *c.Seq, c.ID, err)
	}
	p := r.parts[c.ID]
	switch {
	case *c.Seq == 0:
		r.drop(c.ID)
		if len(r.parts) >= maxPartials {
			return nil, false, fmt.Errorf("%w: more than %d chunked messages at once", errChunk, maxPartials)
		}
		p = &partial{}
		r.parts[c.ID] = p
	case p == nil || *c.Seq != p.next:
		r.drop(c.ID)
		return nil, false, fmt.Errorf("%w: chunk %d of message %q is out of sequence", errChunk, *c.Seq, c.ID)
	}
	if r.held+len(piece) > r.max {
		r.drop(c.ID)
		return nil, false, fmt.Errorf("%w: message %q passes %d bytes", errChunk, c.ID, r.max)
	}
	p.buf = append(p.buf, piece...)
	p.next++
	r.held += len(piece)
	if !c.Last {
		return nil, false, nil
	}
	r.drop(c.ID)
	return p.buf, true, nil
}

// drop forgets id's unfinished message, if any.
func (r *reassembler) drop(id string) {
	if p := r.parts[id]; p != nil {
		r.held -= len(p.buf)
		delete(r.parts, id)
	}
}

// Network builds the pion API the server's peer connections are made
// with, which decides the local addresses and networks ICE uses.
// Loopback returns one; the webrtc transport's Network configuration
// (transports/webrtc) fits too.
type Network interface {
	API() (*pion.API, error)
}

// Loopback returns the Network of tests and local demos: host
// candidates on 127.0.0.1 only, UDP over IPv4, mDNS off.
func Loopback() Network { return loopback{} }

type loopback struct{}

func (loopback) API() (*pion.API, error) {
	var se pion.SettingEngine
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	se.SetNetworkTypes([]pion.NetworkType{pion.NetworkTypeUDP4})
	se.SetIPFilter(func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) })
	se.SetIncludeLoopbackCandidate(true) // ICE leaves loopback out otherwise
	return pion.NewAPI(pion.WithSettingEngine(se)), nil
}
