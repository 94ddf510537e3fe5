package grpc_test

import (
	"encoding/json"
	"net"
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/grpc/grpcserver"
	"github.com/utcpd/utcpd/transports/grpc"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns it
// with its manual call template fields.
func serveFixture(t testing.TB, f *fixture.Fixture, opts grpcserver.Options) (*grpcserver.Server, map[string]any) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpcserver.New(f, opts)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return s, grpcserver.Template(ln.Addr().String())
}

// TestConformance discovers the demo service by server reflection.
func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: grpc.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, fields := serveFixture(t, f, grpcserver.Options{})
			delete(fields, "call_template_type")
			return transporttest.Template(t, grpc.Type, fields)
		},
		Required: []string{"host", "port"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}

// TestConformanceProtoFiles compiles demo.proto at registration against a
// server without reflection.
func TestConformanceProtoFiles(t *testing.T) {
	root := filepath.Join("..", "..", "proto")
	transporttest.Run(t, transporttest.Harness{
		Info: grpc.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, fields := serveFixture(t, f, grpcserver.Options{NoReflection: true})
			delete(fields, "call_template_type")
			fields["proto_files"] = []string{"utcpd/demo/v1/demo.proto"}
			fields["import_paths"] = []string{root}
			return transporttest.Template(t, grpc.Type, fields)
		},
		Required: []string{"host", "port"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}
