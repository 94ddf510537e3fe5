// Package grpcserver serves the fixture tools (echo, add, fail, sleep,
// count) over gRPC as the utcpd.demo.v1.Demo service of
// proto/utcpd/demo/v1/demo.proto, implemented with the generated code,
// plus the client-streaming sum and the bidirectional chat.
//
// Server reflection (grpc.reflection.v1 and v1alpha) and the standard
// health service (grpc.health.v1) are on unless Options turn them off. fail
// reports the status code it is asked for (FAILED_PRECONDITION by default)
// with two details: a google.rpc.ErrorInfo and a utcpd.demo.v1.FailDetail.
// The fixture sees each call's context, so a caller that gives up (a
// deadline, a cancelled stream) shows in its Canceled counter.
package grpcserver

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	demov1 "github.com/utcpd/utcpd/proto/utcpd/demo/v1"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// Options configure a Server. The zero value serves reflection and health.
type Options struct {
	// NoReflection leaves server reflection off, so clients need the
	// service's descriptors from elsewhere.
	NoReflection bool
	// NoHealth leaves the grpc.health.v1 service off.
	NoHealth bool
	// ServerOptions are passed to grpc.NewServer (TLS credentials,
	// message size limits, interceptors).
	ServerOptions []grpc.ServerOption
}

// Server is a gRPC server of the demo service. It is safe for concurrent
// use.
type Server struct {
	gs *grpc.Server
}

// New returns a Server whose demo service runs the tools of f.
func New(f *fixture.Fixture, opts Options) *Server {
	gs := grpc.NewServer(opts.ServerOptions...)
	demov1.RegisterDemoServer(gs, NewService(f))
	if !opts.NoHealth {
		hs := health.NewServer()
		hs.SetServingStatus(demov1.Demo_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
		healthpb.RegisterHealthServer(gs, hs)
	}
	if !opts.NoReflection {
		reflection.Register(gs) // v1 and v1alpha
	}
	return &Server{gs: gs}
}

// GRPC returns the underlying *grpc.Server.
func (s *Server) GRPC() *grpc.Server { return s.gs }

// Serve accepts connections on ln until Stop. It returns nil after Stop.
func (s *Server) Serve(ln net.Listener) error {
	err := s.gs.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop closes the listeners and every connection at once; calls in
// flight are cancelled.
func (s *Server) Stop() { s.gs.Stop() }

// Template returns the manual call template fields that reach the server
// listening at addr (host:port), to be given a name.
func Template(addr string) map[string]any {
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	return map[string]any{"call_template_type": "grpc", "host": host, "port": p}
}

// Service implements demov1.DemoServer with the tools of a
// fixture.Fixture.
type Service struct {
	demov1.UnimplementedDemoServer
	f     *fixture.Fixture
	fails atomic.Int64
}

// NewService returns the demo service for f.
func NewService(f *fixture.Fixture) *Service { return &Service{f: f} }

// toStatus turns an error of the fixture into a gRPC status error.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if s := status.FromContextError(err); s.Code() != codes.Unknown {
		return s.Err()
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// Echo returns its arguments unchanged.
func (s *Service) Echo(ctx context.Context, in *structpb.Struct) (*structpb.Struct, error) {
	v, err := s.f.Call(ctx, fixture.Echo, in.AsMap())
	if err != nil {
		return nil, toStatus(err)
	}
	out, err := structpb.NewStruct(v.(map[string]any))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return out, nil
}

// Add returns a + b.
func (s *Service) Add(ctx context.Context, in *demov1.AddRequest) (*demov1.AddReply, error) {
	v, err := s.f.Call(ctx, fixture.Add, map[string]any{"a": in.GetA(), "b": in.GetB()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &demov1.AddReply{Sum: v.(map[string]any)["sum"].(float64)}, nil
}

// Fail reports the status code the request asks for (FAILED_PRECONDITION
// when it is 0 or not a valid code) with the request's message and two
// details: a google.rpc.ErrorInfo and a demov1.FailDetail.
func (s *Service) Fail(ctx context.Context, in *demov1.FailRequest) (*demov1.FailReply, error) {
	_, err := s.f.Call(ctx, fixture.Fail, map[string]any{"message": in.GetMessage()})
	var failure *fixture.Failure
	if !errors.As(err, &failure) {
		return nil, toStatus(err)
	}
	code := codes.Code(in.GetCode())
	if code == codes.OK || code > codes.Unauthenticated {
		code = codes.FailedPrecondition
	}
	st, derr := status.New(code, failure.Message).WithDetails(
		&errdetails.ErrorInfo{Reason: "FIXTURE_FAIL", Domain: "utcpd.demo.v1", Metadata: map[string]string{"tool": fixture.Fail}},
		&demov1.FailDetail{Tool: fixture.Fail, Attempt: s.fails.Add(1)},
	)
	if derr != nil {
		return nil, status.Error(codes.Internal, derr.Error())
	}
	return nil, st.Err()
}

// Sleep waits in.Ms milliseconds or until the call's context ends.
func (s *Service) Sleep(ctx context.Context, in *demov1.SleepRequest) (*demov1.SleepReply, error) {
	v, err := s.f.Call(ctx, fixture.Sleep, map[string]any{"ms": int(in.GetMs())})
	if err != nil {
		return nil, toStatus(err)
	}
	return &demov1.SleepReply{SleptMs: v.(map[string]any)["slept_ms"].(int64)}, nil
}

// Count streams 1..n, waiting delay_ms between two numbers.
func (s *Service) Count(in *demov1.CountRequest, stream grpc.ServerStreamingServer[wrapperspb.Int32Value]) error {
	args := map[string]any{"n": int(in.GetN()), "delay_ms": int(in.GetDelayMs())}
	err := s.f.Stream(stream.Context(), fixture.Count, args, func(v any) error {
		return stream.Send(wrapperspb.Int32(int32(v.(int))))
	})
	return toStatus(err)
}

// Sum adds up the streamed values.
func (s *Service) Sum(stream grpc.ClientStreamingServer[demov1.SumRequest, demov1.SumReply]) error {
	var out demov1.SumReply
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&out)
		}
		if err != nil {
			return err
		}
		out.Sum += in.GetValue()
		out.Count++
	}
}

// Chat answers each message with its text and its position in the stream.
func (s *Service) Chat(stream grpc.BidiStreamingServer[demov1.ChatMessage, demov1.ChatMessage]) error {
	var seq int32
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		seq++
		if err := stream.Send(&demov1.ChatMessage{Text: in.GetText(), Seq: seq}); err != nil {
			return err
		}
	}
}
