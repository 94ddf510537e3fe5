package webrtc_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/webrtc/webrtcserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/webrtc"
)

// loopbackConfig keeps ICE on 127.0.0.1 (host candidates only, no mDNS),
// so the tests need no network beyond loopback.
var loopbackConfig = json.RawMessage(`{"candidate_ips":["127.0.0.1"],"network_types":["udp4"],"mdns":"disabled"}`)

// serveFixture starts the demo peer for f with both signaling endpoints
// on 127.0.0.1:0 and returns it with its HTTP and WebSocket signaling
// URLs.
func serveFixture(t testing.TB, f *fixture.Fixture, opts webrtcserver.Options) (s *webrtcserver.Server, httpURL, wsURL string) {
	t.Helper()
	opts.Network = webrtc.LoopbackNetwork()
	s, err := webrtcserver.New(f, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		_ = s.Close()
		srv.Close()
	})
	return s, srv.URL + "/signal", "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

func harness(ws bool) transporttest.Harness {
	return transporttest.Harness{
		Info: webrtc.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, httpURL, wsURL := serveFixture(t, f, webrtcserver.Options{})
			url := httpURL
			if ws {
				url = wsURL
			}
			return transporttest.Template(t, webrtc.Type, map[string]any{"signaling_server": url, "peer_id": webrtcserver.DefaultPeerID})
		},
		Required: []string{"signaling_server", "peer_id"},
		Options:  transports.Options{Config: loopbackConfig},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	}
}

// TestConformance runs the suite with HTTP signaling (one POST, candidates
// gathered in full).
func TestConformance(t *testing.T) { transporttest.Run(t, harness(false)) }

// TestConformanceWebSocket runs the suite with WebSocket signaling and
// trickled candidates.
func TestConformanceWebSocket(t *testing.T) { transporttest.Run(t, harness(true)) }
