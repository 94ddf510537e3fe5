package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// otlpReceiver is an OTLP/HTTP trace receiver on 127.0.0.1: it keeps
// every span it is sent, with its resource's service.name.
type otlpReceiver struct {
	URL string
	mu  sync.Mutex
	got []receivedSpan
}

type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLP(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			service := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					service = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					r.got = append(r.got, receivedSpan{service, sp})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// trace returns the spans of trace id (hex) by name; a name seen twice
// fails the test.
func (r *otlpReceiver) trace(t *testing.T, id string) map[string]receivedSpan {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]receivedSpan{}
	for _, s := range r.got {
		if hex.EncodeToString(s.span.TraceId) != id {
			continue
		}
		if _, dup := out[s.span.Name]; dup {
			t.Errorf("span %q twice in trace %s", s.span.Name, id)
		}
		out[s.span.Name] = s
	}
	return out
}

func (r *otlpReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// tracingEnv points a daemon's OTLP/HTTP exporter at r. The batch delay
// is long, so the spans reach r at shutdown: the flush is tested too.
func tracingEnv(r *otlpReceiver) []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.URL, "OTEL_SERVICE_NAME=utcpd-e2e", "OTEL_BSP_SCHEDULE_DELAY=600000",
		"OTEL_TRACES_SAMPLER=parentbased_always_on"}
}

// parseTraceparent returns the trace id and parent span id of a W3C
// traceparent ("" "" if malformed).
func parseTraceparent(tp string) (traceID, spanID string) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return "", ""
	}
	return parts[1], parts[2]
}

// headerRecorder wraps the demo HTTP server and keeps the traceparent of
// each tool call it serves (GET /tools/...).
type headerRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerRecorder) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/tools/") {
			h.mu.Lock()
			h.seen = append(h.seen, r.Header.Get("Traceparent"))
			h.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (h *headerRecorder) last(t *testing.T) string {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		t.Fatal("the backend served no tool call")
	}
	return h.seen[len(h.seen)-1]
}

func startTracedHTTPBackend(t *testing.T) (url string, rec *headerRecorder) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec = &headerRecorder{}
	srv := httpserver.NewServer(ln.Addr().String(), fixture.New(), httpserver.Options{})
	srv.Handler = rec.wrap(srv.Handler)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), rec
}

// restCall posts a REST call with the given traceparent header ("" for
// none) and returns the status and body.
func restCall(t *testing.T, base, tool, args, traceparent string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tools/"+tool+"/call", strings.NewReader(`{"arguments": `+args+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("Traceparent", traceparent)
		req.Header.Set("Tracestate", "e2e=1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientTP      = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// checkParent fails unless span name of spans has the parent span id
// parent (hex).
func checkParent(t *testing.T, spans map[string]receivedSpan, name, parent string) {
	t.Helper()
	s, ok := spans[name]
	if !ok {
		names := make([]string, 0, len(spans))
		for n := range spans {
			names = append(names, n)
		}
		t.Errorf("no span %q in the trace; spans: %v", name, names)
		return
	}
	if got := hex.EncodeToString(s.span.ParentSpanId); got != parent {
		t.Errorf("span %q has parent %q, want %q", name, got, parent)
	}
}

func spanID(spans map[string]receivedSpan, name string) string {
	if s, ok := spans[name]; ok {
		return hex.EncodeToString(s.span.SpanId)
	}
	return "missing:" + name
}

func attr(s receivedSpan, key string) string {
	for _, a := range s.span.Attributes {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTracingRESTToHTTPBackend: a REST call carrying a traceparent into
// an HTTP backend, in a real daemon exporting over OTLP/HTTP to a
// receiver in the test, is one connected trace (the caller's span → the
// front's server span → execute_tool → guard and dispatch), and the
// backend receives the same trace id with the dispatch span as parent.
// Replayed attack: a malformed traceparent (and an oversized tracestate)
// from an untrusted caller neither fails the call nor reaches the
// backend: the call starts a trace of its own.
func TestTracingRESTToHTTPBackend(t *testing.T) {
	otlp := startOTLP(t)
	backendURL, rec := startTracedHTTPBackend(t)
	d := startDaemon(t, daemonOpts{env: append(tracingEnv(otlp), "UTCPD_ADMIN_TOKEN=adm")})
	manual := fmt.Sprintf(`{"name": "demo", "call_template_type": "http", "http_method": "GET", "url": %q}`, backendURL+"/utcp")
	if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", manual); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("registering the manual: %d %s", status, body)
	}
	if status, body := restCall(t, d.URL, "demo.echo", `{"message": "traced"}`, clientTP); status != http.StatusOK || !strings.Contains(body, "traced") {
		t.Fatalf("call: %d %s", status, body)
	}
	backendTP := rec.last(t)
	backendTrace, backendParent := parseTraceparent(backendTP)
	if backendTrace != clientTrace {
		t.Errorf("the backend received traceparent %q, want trace id %s", backendTP, clientTrace)
	}

	// An untrusted caller's malformed trace context.
	bad := "00-" + strings.Repeat("zz", 16) + "-" + clientSpanID + "-01\r\nX-Injected: 1"
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/tools/demo.echo/call", strings.NewReader(`{"arguments": {"message": "m"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header["Traceparent"] = []string{strings.ReplaceAll(bad, "\r\n", " ")}
	req.Header.Set("Tracestate", strings.Repeat("k=v,", 4000))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a call with a malformed traceparent: status %d, want 200", resp.StatusCode)
	}
	freshTP := rec.last(t)
	freshTrace, _ := parseTraceparent(freshTP)
	if freshTrace == "" || freshTrace == clientTrace || strings.Contains(freshTP, "zz") {
		t.Errorf("after a malformed traceparent the backend received %q, want a new valid trace", freshTP)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit code %d", code)
	}
	spans := otlp.trace(t, clientTrace)
	front := "POST /v1/tools/{name}/call"
	checkParent(t, spans, front, clientSpanID)
	checkParent(t, spans, "execute_tool demo.echo", spanID(spans, front))
	checkParent(t, spans, "guard", spanID(spans, "execute_tool demo.echo"))
	checkParent(t, spans, "dispatch http", spanID(spans, "execute_tool demo.echo"))
	if got := spanID(spans, "dispatch http"); got != backendParent {
		t.Errorf("the backend's parent span is %q, want the dispatch span %q", backendParent, got)
	}
	if s := spans["execute_tool demo.echo"]; attr(s, "gen_ai.operation.name") != "execute_tool" || attr(s, "gen_ai.tool.name") != "demo.echo" ||
		attr(s, "utcpd.front") != "rest" || s.service != "utcpd-e2e" {
		t.Errorf("execute_tool span: attributes %v, service %q", s.span.GetAttributes(), s.service)
	}
	if s := spans["guard"]; attr(s, "utcpd.guard.decision") != "allow" {
		t.Errorf("guard span: attributes %v", s.span.GetAttributes())
	}
	if s := spans[front]; s.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER || attr(s, "http.route") != "/v1/tools/{name}/call" {
		t.Errorf("front span: kind %v attributes %v", s.span.GetKind(), s.span.GetAttributes())
	}
	if s := spans["dispatch http"]; s.span.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("dispatch span: kind %v", s.span.GetKind())
	}
	if fresh := otlp.trace(t, freshTrace); len(fresh) == 0 || hex.EncodeToString(fresh[front].span.GetParentSpanId()) != "" {
		t.Errorf("the call with a malformed traceparent: spans %v, want a root front span", fresh)
	}
}

// clientTrace is clientTraceID, under the name the tests compare with.
const clientTrace = clientTraceID

// TestTracingMCPToMCPBackend: a tools/call on /mcp carrying a
// traceparent in _meta into an MCP backend (the demo MCP server over
// Streamable HTTP) is one connected trace (the caller's span → "tools/call
// {tool}" → execute_tool → guard and dispatch), and the backend receives
// the trace id in the _meta of its tools/call (and in the HTTP header).
func TestTracingMCPToMCPBackend(t *testing.T) {
	otlp := startOTLP(t)
	demo := mcpserver.New(fixture.New(), mcpserver.Options{})
	var (
		mu       sync.Mutex
		metaTP   string
		headerTP string
	)
	demo.MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				mu.Lock()
				metaTP, _ = req.GetParams().GetMeta()["traceparent"].(string)
				if extra := req.GetExtra(); extra != nil && extra.Header != nil {
					headerTP = extra.Header.Get("Traceparent")
				}
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	backend := httptest.NewServer(demo.Handler(mcpserver.HTTPOptions{}))
	t.Cleanup(backend.Close)

	d := startDaemon(t, daemonOpts{env: append(tracingEnv(otlp), "UTCPD_ADMIN_TOKEN=adm")})
	manual := fmt.Sprintf(`{"name": "be", "call_template_type": "mcp", "config": {"mcpServers": {"demo": {"url": %q}}}}`, backend.URL)
	if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", manual); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("registering the manual: %d %s", status, body)
	}
	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", MaxRetries: -1}, "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	tool := ""
	for _, n := range c.toolNames(t) {
		if strings.HasSuffix(n, ".echo") && strings.HasPrefix(n, "be.") {
			tool = n
		}
	}
	if tool == "" {
		t.Fatalf("no echo tool of manual be in %v", c.toolNames(t))
	}
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(`{"message": "traced"}`),
		Meta: mcp.Meta{"traceparent": clientTP}}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := c.s.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("tools/call %s: %v %+v", tool, err, res)
	}
	mu.Lock()
	gotMeta, gotHeader := metaTP, headerTP
	mu.Unlock()
	metaTrace, metaParent := parseTraceparent(gotMeta)
	if metaTrace != clientTrace {
		t.Errorf("the MCP backend received _meta traceparent %q, want trace id %s", gotMeta, clientTrace)
	}
	if gotHeader != gotMeta {
		t.Errorf("the MCP backend's HTTP traceparent %q differs from its _meta one %q", gotHeader, gotMeta)
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit code %d", code)
	}
	spans := otlp.trace(t, clientTrace)
	front := "tools/call " + tool
	exec := "execute_tool " + tool
	checkParent(t, spans, front, clientSpanID)
	checkParent(t, spans, exec, spanID(spans, front))
	checkParent(t, spans, "guard", spanID(spans, exec))
	checkParent(t, spans, "dispatch mcp", spanID(spans, exec))
	if got := spanID(spans, "dispatch mcp"); got != metaParent {
		t.Errorf("the backend's parent span is %q, want the dispatch span %q", metaParent, got)
	}
	if s := spans[front]; attr(s, "mcp.method.name") != "tools/call" || attr(s, "gen_ai.tool.name") != tool ||
		attr(s, "mcp.session.id") == "" || s.span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("tools/call span: kind %v attributes %v", s.span.GetKind(), s.span.GetAttributes())
	}
}

// TestTracingOffByDefault: without OTEL_* configuration the daemon makes
// no span and passes no trace context on: a caller's traceparent does
// not reach the backend, and the backend gets none of its own.
func TestTracingOffByDefault(t *testing.T) {
	otlp := startOTLP(t)
	backendURL, rec := startTracedHTTPBackend(t)
	// The receiver's address is in the environment under another name,
	// so nothing but the default could lead the daemon to it.
	d := startDaemon(t, daemonOpts{env: []string{"UTCPD_ADMIN_TOKEN=adm", "OTEL_SERVICE_NAME=utcpd-e2e", "UNRELATED_ENDPOINT=" + otlp.URL}})
	manual := fmt.Sprintf(`{"name": "demo", "call_template_type": "http", "http_method": "GET", "url": %q}`, backendURL+"/utcp")
	if status, body := request(t, "POST", d.URL+"/admin/manuals", "adm", manual); status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("registering the manual: %d %s", status, body)
	}
	for _, tp := range []string{clientTP, ""} {
		if status, body := restCall(t, d.URL, "demo.echo", `{"message": "untraced"}`, tp); status != http.StatusOK {
			t.Fatalf("call: %d %s", status, body)
		}
		if got := rec.last(t); got != "" {
			t.Errorf("tracing off, caller traceparent %q: the backend received traceparent %q, want none", tp, got)
		}
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon exit code %d", code)
	}
	if strings.Contains(d.stderr.String(), "tracing on") {
		t.Errorf("the daemon turned tracing on without configuration:\n%s", d.stderr.String())
	}
	if n := otlp.count(); n != 0 {
		t.Errorf("the receiver got %d spans from a daemon without tracing", n)
	}
}
