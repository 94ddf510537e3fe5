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

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: websocket.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, url := serveFixture(t, f, websocketserver.Options{})
			return transporttest.Template(t, websocket.Type, map[string]any{"url": url})
		},
		Required: []string{"url"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}
