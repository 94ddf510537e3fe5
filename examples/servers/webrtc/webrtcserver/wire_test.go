package webrtcserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// TestSplitReassemble: whatever split makes of a message, no part is
// larger than the limit, and the reassembler gives the message back,
// whole, exactly at the last part.
func TestSplitReassemble(t *testing.T) {
	unit := []byte(`{"s":"héllo <wörld> & ☃","n":[1,2]} `)
	for _, limit := range []int{minChunkBytes, defaultMaxChunkBytes} {
		for _, size := range []int{0, 10, limit - 1, limit, limit + 1, 3*limit + 7, 200_000} {
			for _, id := range []string{"7", "", `we"ird \ ☃ id`} {
				msg := bytes.Repeat(unit, size/len(unit)+1)[:size]
				parts := split(msg, id, limit)
				if size <= limit {
					if len(parts) != 1 || !bytes.Equal(parts[0], msg) {
						t.Fatalf("limit %d, %d bytes: split into %d parts, want the message itself", limit, size, len(parts))
					}
					continue
				}
				r := newReassembler(1 << 20)
				for i, p := range parts {
					if len(p) > limit {
						t.Fatalf("limit %d, %d bytes, id %q: part %d has %d bytes", limit, size, id, i, len(p))
					}
					var c chunk
					if err := json.Unmarshal(p, &c); err != nil || c.Type != typeChunk || c.ID != id || c.Seq != i || c.Last != (i == len(parts)-1) {
						t.Fatalf("part %d = %.100s (%v), want chunk %d of %q", i, p, err, i, id)
					}
					got, complete, err := r.add(p)
					if err != nil {
						t.Fatalf("add part %d: %v", i, err)
					}
					if complete != (i == len(parts)-1) {
						t.Fatalf("part %d of %d: complete = %v", i, len(parts), complete)
					}
					if complete && !bytes.Equal(got, msg) {
						t.Fatalf("limit %d, %d bytes, id %q: reassembled %d different bytes", limit, size, id, len(got))
					}
				}
				if r.held != 0 || len(r.parts) != 0 {
					t.Errorf("after the message the reassembler holds %d bytes in %d messages", r.held, len(r.parts))
				}
			}
		}
	}
}

// TestChunkWire pins the chunk message as docs/transports.md shows it,
// both ways.
func TestChunkWire(t *testing.T) {
	// Written by hand: `{"a` and `":1}` in standard padded base64.
	r := newReassembler(1 << 20)
	if _, complete, err := r.add([]byte(`{"type":"chunk","id":"7","seq":0,"last":false,"data":"eyJh"}`)); err != nil || complete {
		t.Fatalf("chunk 0: complete %v, %v", complete, err)
	}
	got, complete, err := r.add([]byte(`{"type":"chunk","id":"7","seq":1,"last":true,"data":"IjoxfQ=="}`))
	if err != nil || !complete || string(got) != `{"a":1}` {
		t.Fatalf("chunk 1: %q, %v, %v; want {\"a\":1}", got, complete, err)
	}

	msg := []byte(strings.Repeat("x", 2000))
	parts := split(msg, "9", minChunkBytes)
	if len(parts) != 3 {
		t.Fatalf("2000 bytes in 1024-byte messages: %d parts, want 3", len(parts))
	}
	if p := string(parts[0]); !strings.HasPrefix(p, `{"type":"chunk","id":"9","seq":0,"last":false,"data":"eHh4`) || !strings.HasSuffix(p, `"}`) {
		t.Errorf("first chunk = %.80s...", p)
	}
	if p := string(parts[2]); !strings.HasPrefix(p, `{"type":"chunk","id":"9","seq":2,"last":true,"data":"`) {
		t.Errorf("last chunk = %.80s...", p)
	}
}

// TestReassemblerInterleaved: chunks of different ids may interleave.
func TestReassemblerInterleaved(t *testing.T) {
	a, b := []byte(strings.Repeat("a", 5000)), []byte(strings.Repeat("b", 3000))
	pa, pb := split(a, "a", minChunkBytes), split(b, "b", minChunkBytes)
	r := newReassembler(1 << 20)
	var done []string
	for i := range max(len(pa), len(pb)) {
		for _, parts := range [][][]byte{pa, pb} {
			if i < len(parts) {
				msg, complete, err := r.add(parts[i])
				if err != nil {
					t.Fatal(err)
				}
				if complete {
					done = append(done, fmt.Sprintf("%c×%d", msg[0], len(msg)))
				}
			}
		}
	}
	if got := strings.Join(done, " "); got != "b×3000 a×5000" {
		t.Errorf("completed %s, want b×3000 a×5000", got)
	}
}

// TestReassemblerRefuses: unusable chunks are errors that drop their
// message, and the reassembler goes on with the next one.
func TestReassemblerRefuses(t *testing.T) {
	c := func(id string, seq int, last bool, data string) []byte {
		b, _ := json.Marshal(chunk{Type: typeChunk, ID: id, Seq: seq, Last: last, Data: data})
		return b
	}
	r := newReassembler(10)
	for _, bad := range []struct {
		name string
		msg  []byte
	}{
		{"without chunk 0", c("x", 1, true, "YQ==")},
		{"numeric id", []byte(`{"type":"chunk","id":7,"seq":0,"last":true,"data":"YQ=="}`)},
		{"no seq", []byte(`{"type":"chunk","id":"x","last":true,"data":"YQ=="}`)},
		{"no data", []byte(`{"type":"chunk","id":"x","seq":0,"last":true}`)},
		{"not base64", c("x", 0, true, "not base64!")},
	} {
		if msg, complete, err := r.add(bad.msg); !errors.Is(err, errChunk) || complete {
			t.Errorf("%s: %q, %v, %v; want errChunk", bad.name, msg, complete, err)
		}
	}

	// Out of sequence: 0 then 2 drops the message; its 1 is then refused too.
	if _, _, err := r.add(c("x", 0, false, "YQ==")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.add(c("x", 2, true, "YQ==")); !errors.Is(err, errChunk) || !strings.Contains(err.Error(), "chunk 2") {
		t.Errorf("chunk 2 after chunk 0: %v, want errChunk naming chunk 2", err)
	}
	if _, _, err := r.add(c("x", 1, true, "YQ==")); !errors.Is(err, errChunk) {
		t.Errorf("chunk 1 of a dropped message: %v, want errChunk", err)
	}

	// Past the limit of 10 bytes: 6 + 6.
	if _, _, err := r.add(c("big", 0, false, "YWFhYWFh")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.add(c("big", 1, true, "YWFhYWFh")); !errors.Is(err, errChunk) {
		t.Errorf("12 bytes with a limit of 10: %v, want errChunk", err)
	}
	if r.held != 0 || len(r.parts) != 0 {
		t.Fatalf("after the errors the reassembler holds %d bytes in %d messages", r.held, len(r.parts))
	}

	// Seq 0 starts a message anew; exactly the limit is fine.
	for _, m := range [][]byte{c("y", 0, false, "YWFhYWFh"), c("y", 0, false, "YmJiYmI="), c("y", 1, true, "YmJiYmI=")} {
		if got, complete, err := r.add(m); err != nil || (complete && string(got) != "bbbbbbbbbb") {
			t.Fatalf("restarted message: %q, %v, %v", got, complete, err)
		}
	}
	if r.held != 0 {
		t.Errorf("after the restarted message the reassembler holds %d bytes", r.held)
	}
}

// TestReassemblerBoundsPartials: a client cannot start unbounded
// numbers of chunked messages.
func TestReassemblerBoundsPartials(t *testing.T) {
	r := newReassembler(1 << 20)
	for i := range maxPartials {
		if _, _, err := r.add([]byte(fmt.Sprintf(`{"type":"chunk","id":"%d","seq":0,"last":false,"data":""}`, i))); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if _, _, err := r.add([]byte(`{"type":"chunk","id":"one more","seq":0,"last":false,"data":""}`)); !errors.Is(err, errChunk) {
		t.Errorf("message %d in progress: %v, want errChunk", maxPartials+1, err)
	}
	if _, complete, err := r.add([]byte(`{"type":"chunk","id":"5","seq":1,"last":true,"data":"YQ=="}`)); err != nil || !complete {
		t.Errorf("finishing a message in progress: %v, %v", complete, err)
	}
}

// TestReassemblerPassesWholeMessages: anything but a chunk is complete
// as it is, for the envelope handler to judge.
func TestReassemblerPassesWholeMessages(t *testing.T) {
	r := newReassembler(1 << 20)
	for _, m := range []string{`{"type":"tool_call","id":"1","tool":"echo","inputs":{"chunk":"chunk"}}`, `not JSON "chunk"`, `{"type":"chunky"}`, ``, `{"id":"1"}`} {
		got, complete, err := r.add([]byte(m))
		if err != nil || !complete || string(got) != m {
			t.Errorf("add(%s) = %q, %v, %v; want it as it is", m, got, complete, err)
		}
	}
}

// TestSignalJSON pins the signaling messages the server writes.
func TestSignalJSON(t *testing.T) {
	for _, c := range []struct {
		sig  signal
		want string
	}{
		{errorSignal("unknown peer_id x"), `{"type":"error","error":"unknown peer_id x"}`},
		{signal{Type: signalAnswer, SDP: "v=0\r\n"}, `{"type":"answer","sdp":"v=0\r\n"}`},
		{signal{Type: signalCandidate}, `{"type":"candidate"}`},
	} {
		if b, _ := json.Marshal(c.sig); string(b) != c.want {
			t.Errorf("%s, want %s", b, c.want)
		}
	}
	var offer signal
	if err := json.Unmarshal([]byte(`{"type":"offer","sdp":"v=0","peer_id":"desk"}`), &offer); err != nil || offer.Type != signalOffer || offer.SDP != "v=0" || offer.PeerID != "desk" {
		t.Errorf("offer read as %+v, %v", offer, err)
	}
	var cand signal
	if err := json.Unmarshal([]byte(`{"type":"candidate","candidate":{"candidate":"candidate:1 1 udp 1 127.0.0.1 5000 typ host","sdpMid":"0","sdpMLineIndex":0}}`), &cand); err != nil ||
		cand.Candidate == nil || cand.Candidate.SDPMid == nil || *cand.Candidate.SDPMid != "0" || !strings.HasPrefix(cand.Candidate.Candidate, "candidate:1") {
		t.Errorf("candidate read as %+v, %v", cand, err)
	}
}

// TestMessageJSON pins the data-channel answers the server writes.
func TestMessageJSON(t *testing.T) {
	for _, c := range []struct {
		m    message
		want string
	}{
		{message{Type: typeToolResponse, ID: "1", Output: json.RawMessage(`null`)}, `{"type":"tool_response","id":"1","output":null}`},
		{message{Type: typeToolResponse, ID: "2"}, `{"type":"tool_response","id":"2"}`},
		{message{Type: typeToolEvent, ID: "3", Event: json.RawMessage(`1`)}, `{"type":"tool_event","id":"3","event":1}`},
		{message{Type: typeToolError, ID: "4", Error: &wireError{"tool_error", "boom"}}, `{"type":"tool_error","id":"4","error":{"code":"tool_error","message":"boom"}}`},
	} {
		if b, _ := json.Marshal(c.m); string(b) != c.want {
			t.Errorf("%s, want %s", b, c.want)
		}
	}
}

// TestHTTPSignalingRefusals: offers the server cannot take are refused
// with an error signal and a status, before any ICE.
func TestHTTPSignalingRefusals(t *testing.T) {
	s, err := New(fixture.New(), Options{Network: Loopback()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { _ = s.Close(); srv.Close() })
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`not JSON`, http.StatusBadRequest, `{"type":"error","error":"the body is not a JSON signaling message"}`},
		{`{"type":"answer","sdp":"v=0"}`, http.StatusBadRequest, `{"type":"error","error":"expected a message of type \"offer\""}`},
		{`{"type":"offer","sdp":" ","peer_id":"fixture"}`, http.StatusBadRequest, `{"type":"error","error":"the offer has no \"sdp\""}`},
		{`{"type":"offer","sdp":"v=0","peer_id":"someone"}`, http.StatusNotFound, `{"type":"error","error":"unknown peer_id someone"}`},
	} {
		resp, err := http.Post(srv.URL+"/signal", "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || strings.TrimSpace(string(b)) != c.want {
			t.Errorf("offer %s: %d %s, want %d %s", c.body, resp.StatusCode, b, c.status, c.want)
		}
	}
	if n := s.Peers(); n != 0 {
		t.Errorf("refused offers made %d peer connections", n)
	}
}
