package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/internal/tracing"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestOffUnlessConfigured: an environment that does not ask for traces
// (nothing set, an exporter "none", the SDK disabled) creates no
// exporter and leaves tracing off.
func TestOffUnlessConfigured(t *testing.T) {
	for name, kv := range map[string]map[string]string{
		"empty":           {},
		"service only":    {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
		"exporter none":   {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"sdk disabled":    {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		"metrics only ep": {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			tel, err := Setup(t.Context(), Options{Getenv: env(kv)})
			if err != nil || tel != nil {
				t.Fatalf("Setup = %v, %v; want no telemetry", tel, err)
			}
			if tracing.On() {
				t.Fatal("tracing is on")
			}
			if _, span := tracing.Start(context.Background(), "x", trace.SpanKindInternal); span != nil {
				t.Fatal("a span was made with tracing off")
			}
			if err := tel.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRefusesUnsupported: an exporter or protocol utcpd cannot serve is
// an error, not a silent no-op.
func TestRefusesUnsupported(t *testing.T) {
	for _, kv := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
	} {
		tel, err := Setup(t.Context(), Options{Getenv: env(kv)})
		if err == nil || tel != nil {
			t.Errorf("%v: Setup = %v, %v; want an error", kv, tel, err)
		}
		if tracing.On() {
			t.Errorf("%v: tracing is on", kv)
		}
	}
}

// TestExportsOverHTTP: with OTEL_EXPORTER_OTLP_ENDPOINT set, a span
// reaches an OTLP/HTTP receiver at Shutdown, with OTEL_SERVICE_NAME as
// its service, and tracing is off again after.
func TestExportsOverHTTP(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if r.URL.Path == "/v1/traces" && proto.Unmarshal(body, &ex) == nil {
			got.Store(&ex)
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "telemetry-test")
	tel, err := Setup(t.Context(), Options{Version: "1.2.3"})
	if err != nil || tel == nil {
		t.Fatalf("Setup = %v, %v", tel, err)
	}
	if tel.Protocol() != "http/protobuf" || !tracing.On() {
		t.Fatalf("protocol %q, on %v", tel.Protocol(), tracing.On())
	}
	_, span := tracing.Start(context.Background(), "unit", trace.SpanKindInternal)
	tracing.End(span, nil)
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tracing.On() {
		t.Error("tracing still on after Shutdown")
	}
	ex, _ := got.Load().(*coltracepb.ExportTraceServiceRequest)
	if ex == nil {
		t.Fatal("the receiver got no export")
	}
	rs := ex.ResourceSpans[0]
	attrs := map[string]string{}
	for _, a := range rs.GetResource().GetAttributes() {
		attrs[a.Key] = a.GetValue().GetStringValue()
	}
	if attrs["service.name"] != "telemetry-test" || attrs["service.version"] != "1.2.3" {
		t.Errorf("resource %v", attrs)
	}
	if n := rs.ScopeSpans[0].Spans[0].Name; n != "unit" {
		t.Errorf("span %q", n)
	}
}

type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	spans atomic.Int64
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans.Add(int64(len(ss.Spans)))
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestExportsOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports to an
// OTLP/gRPC receiver.
func TestExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, svc)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	tel, err := Setup(t.Context(), Options{})
	if err != nil || tel == nil || !strings.EqualFold(tel.Protocol(), "grpc") {
		t.Fatalf("Setup = %v, %v", tel, err)
	}
	for range 3 {
		_, span := tracing.Start(context.Background(), "unit", trace.SpanKindInternal)
		tracing.End(span, nil)
	}
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := svc.spans.Load(); n != 3 {
		t.Errorf("the gRPC receiver got %d spans, want 3", n)
	}
}
