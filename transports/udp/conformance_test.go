package udp_test

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/udp/udpserver"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/udp"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns it
// with its manual call template fields.
func serveFixture(t testing.TB, f *fixture.Fixture) (*udpserver.Server, map[string]any) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := udpserver.New(f, udpserver.Options{})
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(pc) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return s, s.Template(pc.LocalAddr().String())
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: udp.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, fields := serveFixture(t, f)
			delete(fields, "call_template_type")
			return transporttest.Template(t, udp.Type, fields)
		},
		Required: []string{"host", "port"},
		// Cancellation travels as a cancel datagram, which UDP may lose;
		// on loopback it arrives, so the suite checks it.
		Caps: transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
		Waive: map[string]string{
			"Call/Echo": "one UDP datagram carries at most 65507 bytes, so the 1 MiB echo case cannot be carried; echo of unicode and nested JSON is covered by TestEcho in udp_test.go",
		},
	})
}
