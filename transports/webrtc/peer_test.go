package webrtc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/webrtc"
	"github.com/utcpd/utcpd/utcp"
)

// TestNodePeer runs the transport against a tool server on another WebRTC
// stack: testdata/wrtc-peer.mjs, on @roamhq/wrtc (Chrome's libwebrtc for
// Node), written from the protocol's documentation. It proves that
// signaling (HTTP, and WebSocket with trickled candidates both ways), the
// SDP, the data channel, the envelope, chunking and cancel interoperate.
// It needs node and `npm ci` in testdata/peer; set UTCPD_NPM_PEERS=1 to
// run it (CI does), and it fails when that is set and the peer is
// missing.
func TestNodePeer(t *testing.T) {
	peer := transporttest.NPMPeer(t, "@roamhq/wrtc", "ws")
	var hello struct {
		Port   int    `json:"port"`
		PeerID string `json:"peer_id"`
	}
	peer.Start(t, filepath.Join("testdata", "wrtc-peer.mjs"), &hello)

	// libwebrtc leaves loopback out of its candidates, so this test lets
	// ICE use the machine's own interfaces (still without mDNS).
	tr, err := webrtc.New(transports.Options{Config: json.RawMessage(`{"network_types":["udp4"],"mdns":"disabled"}`), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	for _, sig := range []string{"http", "ws"} {
		t.Run(sig, func(t *testing.T) {
			u := fmt.Sprintf("http://127.0.0.1:%d/signal", hello.Port)
			if sig == "ws" {
				u = fmt.Sprintf("ws://127.0.0.1:%d/ws", hello.Port)
			}
			tmpl := parse(t, map[string]any{"name": "node_" + sig, "signaling_server": u, "peer_id": hello.PeerID})
			m, err := register(t, tr, tmpl)
			if err != nil {
				t.Fatalf("RegisterManual: %v", err)
			}
			if len(m.Tools) != 6 {
				t.Errorf("the peer's manual has %d tools, want 6", len(m.Tools))
			}
			big := strings.Repeat("libwebrtc ⇄ pion ", 20_000) // ~380 KB: chunked both ways
			res, err := call(t, tr, tmpl, "echo", map[string]any{"text": big, "n": 1.5})
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if got, _ := res.Value.(map[string]any)["text"].(string); got != big {
				t.Errorf("echo returned %d bytes of text, want %d", len(got), len(big))
			}
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() {
					res, err := call(t, tr, tmpl, "add", map[string]any{"a": i, "b": 100})
					if err != nil {
						t.Errorf("add %d: %v", i, err)
						return
					}
					if got, _ := json.Marshal(res.Value); string(got) != fmt.Sprintf(`{"sum":%d}`, i+100) {
						t.Errorf("add %d = %s", i, got)
					}
				})
			}
			wg.Wait()
			var te *utcp.ToolError
			if _, err := call(t, tr, tmpl, "fail", map[string]any{"message": "nope"}); !errors.As(err, &te) || te.Message != "nope" {
				t.Errorf("fail: err = %v, want a tool error saying nope", err)
			}
			if _, err := call(t, tr, tmpl, "missing", nil); !errors.Is(err, transports.ErrToolNotFound) {
				t.Errorf("missing: err = %v, want tool_not_found", err)
			}
			st, err := tr.CallToolStream(t.Context(), &utcp.Call{Tool: tmpl.Name + ".count", Manual: tmpl.Name, Name: "count", Template: tmpl, Arguments: map[string]any{"n": 4}})
			if err != nil {
				t.Fatal(err)
			}
			var got []any
			for {
				ev, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("count: %v", err)
				}
				got = append(got, ev.Data)
			}
			if b, _ := json.Marshal(got); string(b) != "[1,2,3,4]" {
				t.Errorf("count(4) streamed %s", b)
			}
			before := stats(t, tr, tmpl)
			cctx, ccancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer ccancel()
			if _, err := callCtx(cctx, tr, tmpl, "sleep", map[string]any{"ms": 10000}); utcp.CodeOf(err) != utcp.CodeTimeout {
				t.Errorf("sleep with a deadline: err = %v, want timeout", err)
			}
			deadline := time.Now().Add(3 * time.Second)
			for stats(t, tr, tmpl) <= before && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if stats(t, tr, tmpl) <= before {
				t.Errorf("the cancel message did not reach the peer")
			}
		})
	}
}

// stats returns how many calls the node peer saw cancelled.
func stats(t *testing.T, tr *webrtc.Transport, tmpl *utcp.CallTemplate) float64 {
	t.Helper()
	res, err := call(t, tr, tmpl, "stats", nil)
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var st struct {
		Cancelled float64 `json:"cancelled"`
	}
	b, _ := json.Marshal(res.Value)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("stats = %s: %v", b, err)
	}
	return st.Cancelled
}
