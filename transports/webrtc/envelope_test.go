package webrtc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports/webrtc"
)

func TestSplitReassemble(t *testing.T) {
	msg := []byte(`{"type":"tool_call","id":"7","tool":"echo","inputs":{"text":"` + strings.Repeat("ü€x", 40_000) + `"}}`)
	for _, max := range []int{1024, 4096, webrtc.DefaultMaxChunkBytes, 1 << 20} {
		parts := webrtc.Split(msg, "7", max)
		if max >= len(msg) {
			if len(parts) != 1 || !bytes.Equal(parts[0], msg) {
				t.Fatalf("max %d: a message that fits was changed", max)
			}
			continue
		}
		r := webrtc.NewReassembler(1 << 20)
		var got []byte
		for i, p := range parts {
			if len(p) > max {
				t.Fatalf("max %d: chunk %d is %d bytes", max, i, len(p))
			}
			var c webrtc.Chunk
			if err := json.Unmarshal(p, &c); err != nil || c.Type != webrtc.TypeChunk || c.ID != "7" || c.Seq != i || c.Last != (i == len(parts)-1) {
				t.Fatalf("max %d: chunk %d = %s (%v)", max, i, p[:min(len(p), 80)], err)
			}
			out, id, err := r.Add(p)
			if err != nil || id != "7" {
				t.Fatalf("max %d: Add chunk %d: id %q, err %v", max, i, id, err)
			}
			if out != nil {
				if i != len(parts)-1 {
					t.Fatalf("max %d: message complete after chunk %d of %d", max, i, len(parts))
				}
				got = out
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("max %d: reassembled %d bytes, want %d", max, len(got), len(msg))
		}
	}
}

func TestReassemblerInterleavedAndFaults(t *testing.T) {
	a := webrtc.Split(bytes.Repeat([]byte("a"), 5000), "a", 1024)
	b := webrtc.Split(bytes.Repeat([]byte("b"), 5000), "b", 1024)
	r := webrtc.NewReassembler(1 << 20)
	done := map[string]int{}
	for i := range max(len(a), len(b)) {
		for _, parts := range [][][]byte{a, b} {
			if i < len(parts) {
				out, id, err := r.Add(parts[i])
				if err != nil {
					t.Fatal(err)
				}
				if out != nil {
					done[id] = len(out)
				}
			}
		}
	}
	if done["a"] != 5000 || done["b"] != 5000 {
		t.Fatalf("interleaved messages reassembled as %v", done)
	}
	// Not a chunk: returned as it is.
	plain := []byte(`{"type":"tool_response","id":"1","output":"chunk"}`)
	if out, _, err := r.Add(plain); err != nil || !bytes.Equal(out, plain) {
		t.Errorf("plain message: %s, %v", out, err)
	}
	cases := []struct {
		name string
		msgs []string
		want error
	}{
		{"gap", []string{`{"type":"chunk","id":"x","seq":0,"last":false,"data":"YQ=="}`, `{"type":"chunk","id":"x","seq":2,"last":true,"data":"YQ=="}`}, webrtc.ErrChunk},
		{"no start", []string{`{"type":"chunk","id":"x","seq":1,"last":true,"data":"YQ=="}`}, webrtc.ErrChunk},
		{"bad base64", []string{`{"type":"chunk","id":"x","seq":0,"last":true,"data":"!!"}`}, webrtc.ErrChunk},
		{"no data", []string{`{"type":"chunk","id":"x","seq":0,"last":true}`}, webrtc.ErrChunk},
		{"too large", []string{`{"type":"chunk","id":"x","seq":0,"last":false,"data":"` + strings.Repeat("QUFB", 100) + `"}`}, webrtc.ErrChunkTooLarge},
	}
	// After a dropped message, its remaining chunks are ignored quietly,
	// and a new message with the same id (seq 0) is reassembled again.
	r = webrtc.NewReassembler(1 << 20)
	parts := webrtc.Split(bytes.Repeat([]byte("z"), 5000), "q", 1024)
	if _, _, err := r.Add(parts[1]); !errors.Is(err, webrtc.ErrChunk) {
		t.Fatalf("chunk 1 first: err = %v", err)
	}
	for _, p := range parts[2:] {
		if out, _, err := r.Add(p); err != nil || out != nil {
			t.Fatalf("a chunk of a dropped message: %q, %v", out, err)
		}
	}
	var whole []byte
	for _, p := range parts {
		whole, _, _ = r.Add(p)
	}
	if len(whole) != 5000 {
		t.Fatalf("the message sent again reassembled to %d bytes", len(whole))
	}
	for _, c := range cases {
		r := webrtc.NewReassembler(200)
		var err error
		for _, m := range c.msgs {
			if _, _, err = r.Add([]byte(m)); err != nil {
				break
			}
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

// FuzzReassembler feeds arbitrary messages to the reassembler: it must
// never panic nor hold more than its limit.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte(`{"type":"chunk","id":"1","seq":0,"last":false,"data":"YWJj"}`), []byte(`{"type":"chunk","id":"1","seq":1,"last":true,"data":"ZA=="}`))
	f.Add([]byte(`{"type":"chunk","id":1,"seq":0,"last":true,"data":""}`), []byte(`{"type":"tool_response","id":"1"}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		r := webrtc.NewReassembler(1 << 10)
		for _, m := range [][]byte{a, b, a} {
			out, _, err := r.Add(m)
			if err == nil && out != nil && len(out) > 1<<10 && !bytes.Equal(out, m) {
				t.Fatalf("reassembled %d bytes over the limit", len(out))
			}
		}
	})
}
