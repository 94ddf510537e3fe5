package utcpmanual_test

import (
	"bytes"
	"context"
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

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/api/utcpmanual"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

const apiKey = "k-utcp-s3cr3t"

// typedInputs is the input schema of the in-process "typed" tools: every
// JSON type, nested, so a test sees exactly what the gateway passed on.
const typedInputs = `{"type":"object","properties":{
 "count":{"type":"integer"},
 "ratio":{"type":"number"},
 "flag":{"type":"boolean"},
 "label":{"type":"string"},
 "tags":{"type":"array","items":{"type":"string"}},
 "ids":{"type":"array","items":{"type":"integer"}},
 "options":{"type":"object","properties":{"level":{"type":"integer"},"deep":{"type":"object","properties":{"on":{"type":"boolean"},"name":{"type":"string"}}}}},
 "config":{"type":"object"},
 "maybe":{"type":["integer","null"]},
 "ref":{"$ref":"#/$defs/point"}
},"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}}}}}`

// typedTransport is an in-process transport whose tools return the
// arguments they received, JSON types included: "echo" (typedInputs),
// "plain" (one string argument "body"), and "crash" (always a tool error).
type typedTransport struct{}

type typedSpec struct{}

func (typedTransport) info() transports.Info {
	return transports.Info{
		Type: "typed",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(typedSpec))
		},
		New:      func(transports.Options) (transports.Transport, error) { return typedTransport{}, nil },
		Template: new(typedSpec),
	}
}

func (typedTransport) RegisterManual(context.Context, *utcp.CallTemplate) (*utcp.Manual, error) {
	size := 64
	return &utcp.Manual{UTCPVersion: utcp.Version, Tools: []utcp.Tool{
		{Name: "echo", Description: "Echo returns its typed arguments <unchanged> & whole.", Tags: []string{"typed"},
			Inputs: json.RawMessage(typedInputs), Outputs: json.RawMessage(`{"type":"object"}`), AverageResponseSize: &size},
		{Name: "plain", Description: "Plain takes a string argument named body.",
			Inputs: json.RawMessage(`{"type":"object","properties":{"body":{"type":"string"},"n":{"type":"integer"}}}`)},
		{Name: "we ird/$HOME{x}", Description: "A name a URL path or variable substitution would change.",
			Inputs: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}}}`)},
		{Name: "crash", Description: "Crash always fails.", Inputs: json.RawMessage(`{"type":"object","properties":{"why":{"type":"string"}}}`)},
		{Name: "odd", Description: "Odd has a schema the TypeScript client would refuse as it is.",
			Inputs: json.RawMessage(`{"type":"object","properties":{"any":true,"never":false,"x":{"type":"integer","required":true,"minimum":"0"}},"required":["any"]}`)},
	}}, nil
}

func (typedTransport) Release(context.Context, *utcp.CallTemplate) error { return nil }

func (typedTransport) CallTool(_ context.Context, call *utcp.Call) (*utcp.Result, error) {
	if call.Name == "crash" {
		return nil, &utcp.ToolError{Message: "crashed", Value: map[string]any{"why": call.Arguments["why"]}}
	}
	args := call.Arguments
	if args == nil {
		args = map[string]any{}
	}
	return &utcp.Result{Value: args}, nil
}

func (typedTransport) Close() error { return nil }

// denyThirteen denies calls whose count argument is 13.
type denyThirteen struct{}

func (denyThirteen) Evaluate(_ context.Context, c *guard.Call) (guard.Verdict, error) {
	if n, ok := c.Arguments["count"].(json.Number); ok && n == "13" {
		return guard.Verdict{Decision: guard.Deny, Reason: "unlucky"}, nil
	}
	return guard.Verdict{Decision: guard.Allow}, nil
}

type env struct {
	t       testing.TB
	rt      http.Handler
	g       *gateway.Gateway
	url     string
	h       *utcpmanual.Handler
	mu      sync.Mutex
	records []gateway.CallRecord
	demoURL string
}

type envOptions struct {
	keys      []string
	publicURL string
}

// newEnv serves the fixture HTTP tool server on 127.0.0.1:0 as manual
// "demo" and the in-process typed tools as manual "typed" in a real
// gateway (guard denyThirteen), and serves this package's routes on
// 127.0.0.1:0 behind eo.keys.
func newEnv(t testing.TB, eo envOptions) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", fixture.New(), httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	e := &env{t: t, demoURL: "http://" + ln.Addr().String()}
	types := transports.NewRegistry()
	for _, info := range []transports.Info{utcphttp.Info, typedTransport{}.info()} {
		if err := types.Register(info); err != nil {
			t.Fatal(err)
		}
	}
	g, err := gateway.New(gateway.Options{Transports: types, Guard: denyThirteen{}, OnCall: func(r *gateway.CallRecord) {
		e.mu.Lock()
		e.records = append(e.records, *r)
		e.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	e.g = g
	e.register(fmt.Sprintf(`{"name":"demo","call_template_type":"http","url":%q}`, e.demoURL+"/utcp"))
	e.register(`{"name":"typed","call_template_type":"typed"}`)

	h, err := utcpmanual.New(utcpmanual.Options{Gateway: g, RequireAPIKey: len(eo.keys) > 0, PublicURL: eo.publicURL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	e.h = h
	rt := httpx.NewRouter()
	h.Register(rt, httpx.RequireKeys(httpx.NewKeys(eo.keys), "utcpd"))
	e.rt = rt
	hs := httptest.NewServer(rt)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

func (e *env) register(raw string) {
	e.t.Helper()
	if _, err := e.g.RegisterManual(e.t.Context(), json.RawMessage(raw), gateway.RegisterOptions{}); err != nil {
		e.t.Fatalf("RegisterManual: %v", err)
	}
}

func (e *env) recs() []gateway.CallRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]gateway.CallRecord(nil), e.records...)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends one request; key "" sends no Authorization header.
func (e *env) do(method, path, key, body string, headers map[string]string) reply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// decode decodes JSON with numbers as json.Number.
func decode(t testing.TB, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

func expectError(t *testing.T, r reply, status int, code utcp.Code) map[string]any {
	t.Helper()
	var env struct {
		Error struct {
			Code    utcp.Code      `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if r.status != status || json.Unmarshal(r.body, &env) != nil || env.Error.Code != code {
		t.Fatalf("got %s, want %d %s", r, status, code)
	}
	return env.Error.Details
}
