// Package telemetry sets up OpenTelemetry tracing from the standard
// OTEL_* environment variables and turns internal/tracing on. It is the
// only package of the module that imports the OpenTelemetry SDK and its
// exporters; the daemon and `utcpd mcp` call Setup once at start and
// Shutdown on exit.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/utcpd/utcpd/internal/tracing"
)

// Options name the process in its resource.
type Options struct {
	// Service is the default service.name (OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it); "utcpd" when empty.
	Service string
	// Version is service.version, when set.
	Version string
	// Log receives the SDK's export errors; slog.Default when nil.
	Log *slog.Logger
	// Getenv reads the environment; os.Getenv when nil. (The OTLP
	// exporters read their endpoint, headers, TLS and timeout variables
	// from the process environment themselves.)
	Getenv func(string) string
}

// Telemetry is the running tracer provider. A nil *Telemetry is tracing
// off: its methods do nothing.
type Telemetry struct {
	tp       *sdktrace.TracerProvider
	protocol string
}

// Protocol is the OTLP protocol in use ("grpc" or "http/protobuf").
func (t *Telemetry) Protocol() string {
	if t == nil {
		return ""
	}
	return t.protocol
}

// Shutdown turns tracing off and flushes the spans not yet exported,
// within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	tracing.Enable(nil)
	return t.tp.Shutdown(ctx)
}

// Configured reports whether the environment asks for traces: tracing is
// on when OTEL_SDK_DISABLED is not "true", OTEL_TRACES_EXPORTER is not
// "none", and either OTEL_TRACES_EXPORTER is "otlp" or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set. Unlike the specification's default, an unset environment is off:
// utcpd exports nothing nobody asked for.
func Configured(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	switch exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return true
	}
}

// Setup reads the environment and, when Configured, creates the OTLP
// exporter (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or
// OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf", the default, or "grpc")
// and a batching tracer provider (sampler from OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, batching from OTEL_BSP_*, resource from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES), and turns
// internal/tracing on. It returns nil, nil when tracing is not
// configured: then no exporter exists and no span is made. An exporter
// other than "otlp" or an unknown protocol is an error.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if !Configured(getenv) {
		return nil, nil
	}
	if exp := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); exp != "" && exp != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: utcpd exports traces with otlp only (or none)", exp)
	}
	protocol := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if protocol == "" {
		protocol = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if protocol == "" {
		protocol = "http/protobuf"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: utcpd supports http/protobuf and grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP %s trace exporter: %w", protocol, err)
	}
	service := opts.Service
	if service == "" {
		service = "utcpd"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if opts.Version != "" {
		attrs = append(attrs, attribute.String("service.version", opts.Version))
	}
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err)
	}))
	tracing.Enable(tp)
	return &Telemetry{tp: tp, protocol: protocol}, nil
}
