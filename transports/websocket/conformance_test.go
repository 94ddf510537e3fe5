package websocket_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/websocket/websocketserver"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/websocket"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns it
// with its ws:// URL.
func serveFixture(t testing.TB, f *fixture.Fixture, opts websocketserver.Options) (*websocketserver.Server, string) {
	t.Helper()
	s := websocketserver.New(f, opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.DropConnections()
		srv.Close()
	})
	return s, "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
}

// TestConformance runs the suite in both modes of the transport against
// the demo server: the utcpd envelope ("envelope": true, on /ws) and
// python-utcp's plain frames (the default, on /plain: one URL per tool).
func TestConformance(t *testing.T) {
	t.Run("envelope", func(t *testing.T) {
		transporttest.Run(t, transporttest.Harness{
			Info: websocket.Info,
			Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
				_, url := serveFixture(t, f, websocketserver.Options{})
				return transporttest.Template(t, websocket.Type, map[string]any{"url": url, "envelope": true})
			},
			Required: []string{"url"},
			Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
		})
	})
	t.Run("plain", func(t *testing.T) {
		transporttest.Run(t, transporttest.Harness{
			Info: websocket.Info,
			Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
				_, url := serveFixture(t, f, websocketserver.Options{})
				return transporttest.Template(t, websocket.Type, map[string]any{"url": strings.TrimSuffix(url, "/ws") + "/plain"})
			},
			// A plain tool is named by its URL.
			Retarget: func(raw json.RawMessage, tool string) json.RawMessage {
				return json.RawMessage(strings.Replace(string(raw), "/plain/"+fixture.Echo, "/plain/"+tool, 1))
			},
			Required: []string{"url"},
			Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
		})
	})
}
