package front_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// echoTransport answers every call with its arguments, in process.
type echoTransport struct{}

type echoSpec struct{}

func (echoTransport) RegisterManual(context.Context, *utcp.CallTemplate) (*utcp.Manual, error) {
	return &utcp.Manual{UTCPVersion: utcp.Version, Tools: []utcp.Tool{{Name: "add", Description: "Echoes."}}}, nil
}
func (echoTransport) Release(context.Context, *utcp.CallTemplate) error { return nil }
func (echoTransport) CallTool(_ context.Context, c *utcp.Call) (*utcp.Result, error) {
	return &utcp.Result{Value: c.Arguments}, nil
}
func (echoTransport) Close() error { return nil }

// discardWriter is a minimal http.ResponseWriter.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(s int)           { w.status = s }

// BenchmarkCallHandler measures the API layer of POST
// /v1/tools/{name}/call on its own: routing, body reading and decoding,
// deadline, gateway dispatch to an in-process echo transport, result
// encoding, the observer's metrics and JSON log line. No network.
func BenchmarkCallHandler(b *testing.B) {
	benchCalls(b, echoHandler(b), "")
}

// echoHandler is the daemon's HTTP handler over a gateway holding one
// manual, demo, of the in-process echo transport, with the observer's
// metrics and a JSON log line discarded.
func echoHandler(b *testing.B) http.Handler {
	b.Helper()
	types := transports.NewRegistry()
	if err := types.Register(transports.Info{
		Type: "echo",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(echoSpec))
		},
		New:      func(transports.Options) (transports.Transport, error) { return echoTransport{}, nil },
		Template: new(echoSpec),
	}); err != nil {
		b.Fatal(err)
	}
	obs := api.NewObserver(slog.New(slog.NewJSONHandler(io.Discard, nil)), prometheus.NewRegistry())
	g, err := gateway.New(gateway.Options{Transports: types, OnCall: obs.OnCall})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	if _, err := g.RegisterManual(b.Context(), json.RawMessage(`{"name":"demo","call_template_type":"echo"}`), gateway.RegisterOptions{Source: "api"}); err != nil {
		b.Fatal(err)
	}
	h, err := api.New(api.Options{Gateway: g, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	return h
}

// benchCalls sends POST /v1/tools/demo.add/call to h b.N times, with a
// traceparent header unless it is empty, and fails on any status but 200.
func benchCalls(b *testing.B, h http.Handler, traceparent string) {
	body := []byte(`{"arguments":{"a":1,"b":2}}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1/v1/tools/demo.add/call", nil)
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		r := req.Clone(b.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		clear(w.h)
		h.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
}
