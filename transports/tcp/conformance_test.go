package tcp_test

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/tcp/tcpserver"
	"github.com/utcpd/utcpd/transports/tcp"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns it
// with its manual call template fields.
func serveFixture(t testing.TB, f *fixture.Fixture, opts tcpserver.Options) (*tcpserver.Server, map[string]any) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := tcpserver.New(f, opts)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close(); <-done })
	return s, s.Template(ln.Addr().String())
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: tcp.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, fields := serveFixture(t, f, tcpserver.Options{})
			delete(fields, "call_template_type")
			return transporttest.Template(t, tcp.Type, fields)
		},
		Required: []string{"host", "port"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}

func TestConformanceLengthPrefix(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: tcp.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, fields := serveFixture(t, f, tcpserver.Options{Framing: tcpserver.Framing{PrefixBytes: 8, LittleEndian: true}})
			delete(fields, "call_template_type")
			return transporttest.Template(t, tcp.Type, fields)
		},
		Required: []string{"host", "port"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}
