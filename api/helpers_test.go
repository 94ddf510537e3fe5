package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	utcpmcp "github.com/utcpd/utcpd/transports/mcp"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// backend is the demo HTTP tool server on 127.0.0.1:0.
type backend struct {
	f    *fixture.Fixture
	base string
	srv  *http.Server
}

func serveBackend(t *testing.T) *backend {
	t.Helper()
	f := fixture.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", f, httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &backend{f: f, base: "http://" + ln.Addr().String(), srv: srv}
}

// manual returns a manual call template for the demo server.
func (b *backend) manual(name string) string {
	return fmt.Sprintf(`{"name":%q,"call_template_type":"http","url":%q}`, name, b.base+"/utcp")
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is one assembled API in front of a gateway.
type env struct {
	t       *testing.T
	g       *gateway.Gateway
	srv     *httptest.Server
	handler http.Handler
	server  *server
	reg     *prometheus.Registry
	logs    *logBuffer
	records chan *gateway.CallRecord
	// adminToken, set when the options named none, is sent on /admin/
	// requests that carry no Authorization.
	adminToken string
}

type envOptions struct {
	api   Options
	guard guard.Guard
	// streamer adds the in-process "seq" transport.
	streamer *seqTransport
}

func newEnv(t *testing.T, eo envOptions) *env {
	t.Helper()
	e := &env{t: t, reg: prometheus.NewRegistry(), logs: &logBuffer{}, records: make(chan *gateway.CallRecord, 100)}
	obs := NewObserver(slog.New(slog.NewJSONHandler(e.logs, nil)), e.reg)
	types := transports.NewRegistry()
	for _, info := range []transports.Info{utcphttp.Info, utcpmcp.Info} {
		if err := types.Register(info); err != nil {
			t.Fatal(err)
		}
	}
	if eo.streamer != nil {
		if err := types.Register(eo.streamer.info()); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gateway.New(gateway.Options{
		Transports: types,
		Guard:      eo.guard,
		OnCall: func(rec *gateway.CallRecord) {
			obs.OnCall(rec)
			c := *rec
			select {
			case e.records <- &c:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	e.g = g
	opts := eo.api
	if opts.AdminToken == "" {
		opts.AdminToken = testAdminToken
		e.adminToken = testAdminToken
	}
	opts.Gateway = g
	opts.Observer = obs
	opts.Version = "test"
	s, err := newServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.server = s
	e.handler = s.handler
	e.srv = httptest.NewServer(s.handler)
	t.Cleanup(e.srv.Close)
	return e
}

// register registers a manual directly through the gateway.
func (e *env) register(raw, source string) {
	e.t.Helper()
	if _, err := e.g.RegisterManual(e.t.Context(), json.RawMessage(raw), gateway.RegisterOptions{Source: source}); err != nil {
		e.t.Fatalf("RegisterManual: %v", err)
	}
}

// reply is an answer, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// json decodes the body into a generic value.
func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("answer %s is not a JSON object: %v", r, err)
	}
	return v
}

// code returns the envelope's error code, failing when the body is not an
// envelope of the documented shape.
func (r reply) code(t *testing.T) utcp.Code {
	t.Helper()
	var env struct {
		Error *struct {
			Code    utcp.Code       `json:"code"`
			Message *string         `json:"message"`
			Details json.RawMessage `json:"details"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Error == nil || env.Error.Message == nil || !bytes.HasPrefix(env.Error.Details, []byte("{")) {
		t.Fatalf("answer %s is not an error envelope (err %v)", r, err)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answer has Content-Type %q", ct)
	}
	return env.Error.Code
}

type req struct {
	method, path string
	body         string
	rawBody      io.Reader // overrides body
	ctype        string    // default application/json when there is a body
	headers      map[string]string
}

// testAdminToken is the admin token of an env whose options set none.
const testAdminToken = "test-admin-token"

// do sends r to the env's server. In an env whose options set no admin
// token, a request to /admin/ without an Authorization header gets the
// test token.
func (e *env) do(r req) reply {
	e.t.Helper()
	if e.adminToken != "" && strings.HasPrefix(r.path, "/admin/") {
		if _, ok := r.headers["Authorization"]; !ok {
			h := map[string]string{"Authorization": "Bearer " + e.adminToken}
			for k, v := range r.headers {
				h[k] = v
			}
			r.headers = h
		}
	}
	return doCtx(e.t, e.t.Context(), e.srv.URL, r)
}

func doCtx(t *testing.T, ctx context.Context, base string, r req) reply {
	t.Helper()
	var body io.Reader
	if r.rawBody != nil {
		body = r.rawBody
	} else if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil || r.method == http.MethodPost || r.method == http.MethodPut {
		ct := r.ctype
		if ct == "" {
			ct = "application/json"
		}
		if ct != "-" {
			hr.Header.Set("Content-Type", ct)
		}
	}
	for k, v := range r.headers {
		if k == "Host" {
			hr.Host = v
			continue
		}
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", r.method, r.path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// alive checks the server still serves after an error.
func (e *env) alive() {
	e.t.Helper()
	if r := e.do(req{method: "GET", path: "/healthz"}); r.status != http.StatusOK {
		e.t.Fatalf("the server stopped serving: /healthz answered %s", r)
	}
}

// expectError checks status and code of an error answer.
func expectError(t *testing.T, r reply, status int, code utcp.Code) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d (%s)", r.status, status, r)
	}
	if got := r.code(t); got != code {
		t.Errorf("code %q, want %q (%s)", got, code, r)
	}
}

// seqTransport is an in-process streaming transport: tool "count" streams
// 1..n, waiting before each event after the first until the test lets it
// go through gate (when gate is set), so tests can see events flushed one
// by one. Tool "boom" fails after one event.
type seqTransport struct {
	gate chan struct{}
}

type seqSpec struct{}

func (s *seqTransport) info() transports.Info {
	return transports.Info{
		Type: "seq",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(seqSpec))
		},
		New:      func(transports.Options) (transports.Transport, error) { return s, nil },
		Template: new(seqSpec),
	}
}

func (s *seqTransport) RegisterManual(context.Context, *utcp.CallTemplate) (*utcp.Manual, error) {
	return &utcp.Manual{UTCPVersion: utcp.Version, Tools: []utcp.Tool{
		{Name: "count", Description: "Count streams 1..n.", Inputs: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		{Name: "boom", Description: "Boom fails after one event."},
	}}, nil
}

func (s *seqTransport) Release(context.Context, *utcp.CallTemplate) error { return nil }

func (s *seqTransport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	return nil, errors.New("seq: use streaming")
}

func (s *seqTransport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	n := 1
	if call.Name == "count" {
		v, err := fixture.Number(call.Arguments, "n")
		if err != nil {
			return nil, err
		}
		n = int(v)
	}
	return &seqStream{ctx: ctx, s: s, n: n, boom: call.Name == "boom"}, nil
}

func (s *seqTransport) Close() error { return nil }

type seqStream struct {
	ctx  context.Context
	s    *seqTransport
	n, i int
	boom bool
}

func (st *seqStream) Recv() (*utcp.Event, error) {
	if st.i >= st.n {
		if st.boom {
			return nil, &utcp.ToolError{Message: "boom", Value: map[string]any{"error": "boom"}}
		}
		return nil, io.EOF
	}
	if st.i > 0 && st.s.gate != nil {
		select {
		case <-st.s.gate:
		case <-st.ctx.Done():
			return nil, st.ctx.Err()
		case <-time.After(5 * time.Second):
			return nil, errors.New("seq: the test never opened the gate")
		}
	}
	st.i++
	return &utcp.Event{Data: st.i, ID: fmt.Sprint(st.i)}, nil
}

func (st *seqStream) Close() error { return nil }

func newTestLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
