package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/all"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// serveFixture starts the demo HTTP server on 127.0.0.1:0.
func serveFixture(t *testing.T) (*fixture.Fixture, string) {
	t.Helper()
	f := fixture.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", f, httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f, "http://" + ln.Addr().String()
}

// newGateway returns a gateway closed at the end of the test. Options
// without Transports get transports.Default (every transport, through
// transports/all): the helper's choice, not gateway.New's.
func newGateway(t *testing.T, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	if opts.Transports == nil {
		opts.Transports = transports.Default
	}
	g, err := gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func httpManual(name, url string, extra ...string) json.RawMessage {
	s := fmt.Sprintf(`{"name":%q,"call_template_type":"http","url":%q`, name, url)
	for _, e := range extra {
		s += "," + e
	}
	return json.RawMessage(s + "}")
}

func register(t *testing.T, g *gateway.Gateway, raw json.RawMessage) *gateway.RegisterResult {
	t.Helper()
	res, err := g.RegisterManual(t.Context(), raw, gateway.RegisterOptions{Source: "api"})
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	return res
}

func codeOf(t *testing.T, err error, want utcp.Code) *utcp.Error {
	t.Helper()
	if got := utcp.CodeOf(err); got != want {
		t.Fatalf("error %v: code %q, want %q", err, got, want)
	}
	var ue *utcp.Error
	errors.As(err, &ue)
	return ue
}

// Transports is required: New does not fall back to transports.Default.
func TestNewRequiresTransports(t *testing.T) {
	g, err := gateway.New(gateway.Options{})
	if err == nil {
		_ = g.Close()
		t.Fatal("gateway.New without Transports succeeded")
	}
	if !strings.Contains(err.Error(), "Options.Transports is required") {
		t.Errorf("error %q does not name the missing option", err)
	}
}

func TestRegisterAndCall(t *testing.T) {
	f, base := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	res := register(t, g, httpManual("demo", base+"/utcp"))
	want := []string{"demo.echo", "demo.add", "demo.fail", "demo.sleep", "demo.count"}
	if diff := cmp.Diff(want, res.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	for _, name := range []string{"demo.add", "add"} {
		out, err := g.CallTool(t.Context(), name, map[string]any{"a": 2, "b": 40}, gateway.CallOptions{})
		if err != nil {
			t.Fatalf("CallTool(%s): %v", name, err)
		}
		if diff := cmp.Diff(map[string]any{"sum": json.Number("42")}, out.Value); diff != "" {
			t.Errorf("%s result (-want +got):\n%s", name, diff)
		}
	}
	if got := f.Calls(); got != 2 {
		t.Errorf("backend saw %d calls, want exactly 2", got)
	}
	// A tool error is a *utcp.ToolError carrying the tool's message.
	_, err := g.CallTool(t.Context(), "demo.fail", map[string]any{"message": "nope"}, gateway.CallOptions{})
	var te *utcp.ToolError
	if !errors.As(err, &te) || !strings.Contains(te.Error(), "nope") {
		t.Errorf("fail: err = %v, want a tool error carrying the message", err)
	}
	// Deregistered tools are gone.
	if err := g.DeregisterManual(t.Context(), "demo"); err != nil {
		t.Fatal(err)
	}
	_, err = g.CallTool(t.Context(), "demo.add", map[string]any{"a": 1, "b": 1}, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeToolNotFound)
	codeOf(t, g.DeregisterManual(t.Context(), "demo"), utcp.CodeManualNotFound)
}

func TestRegisterErrors(t *testing.T) {
	_, base := serveFixture(t)
	g := newGateway(t, gateway.Options{Variables: mustResolver(t, nil)})
	register(t, g, httpManual("demo", base+"/utcp"))

	_, err := g.RegisterManual(t.Context(), httpManual("demo", base+"/utcp"), gateway.RegisterOptions{})
	codeOf(t, err, utcp.CodeManualExists)

	_, err = g.RegisterManual(t.Context(), json.RawMessage(`{"name":"x","call_template_type":"carrier_pigeon"}`), gateway.RegisterOptions{})
	ue := codeOf(t, err, utcp.CodeInvalidTemplate)
	if !strings.Contains(ue.Error(), "carrier_pigeon") || !strings.Contains(ue.Error(), "http") {
		t.Errorf("unknown type error %q should name the type and the valid types", ue)
	}

	_, err = g.RegisterManual(t.Context(), httpManual("web_scraper", base+"/utcp", `"headers":{"X-Key":"${API_KEY}"}`), gateway.RegisterOptions{})
	ue = codeOf(t, err, utcp.CodeVariableNotFound)
	if !strings.Contains(ue.Error(), "web__scraper_API_KEY") {
		t.Errorf("missing variable error %q should name the namespaced key", ue)
	}

	// A dead backend fails discovery and registers nothing.
	dead := deadURL(t)
	_, err = g.RegisterManual(t.Context(), httpManual("dead", dead+"/utcp"), gateway.RegisterOptions{})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if _, ok := g.Registry().Manual("dead"); ok {
		t.Errorf("a manual whose discovery failed was registered")
	}

	// Legacy v0.1 templates register after normalisation.
	res := register(t, g, json.RawMessage(fmt.Sprintf(`{"name":"legacy-api","provider_type":"http","url":%q}`, base+"/utcp")))
	if res.Name != "legacy_api" || len(res.Tools) != 5 {
		t.Errorf("legacy registration: name %q, %d tools", res.Name, len(res.Tools))
	}
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func mustResolver(t *testing.T, env map[string]string) *manuals.Resolver {
	t.Helper()
	r, err := manuals.NewResolver(nil, manuals.ResolverOptions{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolveErrors(t *testing.T) {
	_, base := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	register(t, g, httpManual("one", base+"/utcp"))
	register(t, g, httpManual("two", base+"/utcp"))

	_, err := g.CallTool(t.Context(), "add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	ue := codeOf(t, err, utcp.CodeAmbiguousTool)
	if diff := cmp.Diff([]string{"one.add", "two.add"}, ue.Details["candidates"]); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}

	_, err = g.CallTool(t.Context(), "one.addd", nil, gateway.CallOptions{})
	ue = codeOf(t, err, utcp.CodeToolNotFound)
	if !strings.Contains(fmt.Sprint(ue.Details["did_you_mean"]), "one.add") {
		t.Errorf("did_you_mean = %v, want it to include one.add", ue.Details["did_you_mean"])
	}

	_, err = g.CallTool(t.Context(), "one.add", map[string]any{"a": "two", "b": 2}, gateway.CallOptions{})
	ue = codeOf(t, err, utcp.CodeInvalidArguments)
	if !strings.Contains(fmt.Sprint(ue.Details["schema_path"]), "/properties/a") {
		t.Errorf("schema_path = %v, want it to point at /properties/a", ue.Details["schema_path"])
	}
	_, err = g.CallTool(t.Context(), "one.add", map[string]any{"a": 1}, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeInvalidArguments)
}

func TestTransportFailures(t *testing.T) {
	f, base := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	register(t, g, httpManual("demo", base+"/utcp"))

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := g.CallTool(ctx, "demo.sleep", map[string]any{"ms": 5000}, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeTimeout)
	if took := time.Since(start); took > time.Second {
		t.Errorf("slow backend: returned after %v", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.Canceled() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Canceled() == 0 {
		t.Errorf("the backend never saw the cancellation")
	}

	// A backend answering 5xx is a transport error carrying its status.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" {
			m := httpserver.Manual("http://"+r.Host, httpserver.Options{})
			_ = json.NewEncoder(w).Encode(m)
			return
		}
		http.Error(w, "backend on fire", http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	register(t, g, httpManual("broken", srv.URL+"/utcp"))
	_, err = g.CallTool(t.Context(), "broken.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeTransportError)
	var tr *utcp.TransportError
	if !errors.As(err, &tr) || tr.Status != http.StatusBadGateway {
		t.Errorf("5xx: err = %v, want a TransportError with status 502", err)
	}
	// Refused connection.
	srv.Close()
	_, err = g.CallTool(t.Context(), "broken.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeTransportError)
}

func TestGuard(t *testing.T) {
	f, base := serveFixture(t)
	var decide atomic.Value // guard.Decision
	decide.Store(guard.Allow)
	var seen atomic.Int64
	gd := guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		seen.Add(1)
		d := decide.Load().(guard.Decision)
		if d == "fail" {
			return guard.Verdict{}, errors.New("policy engine unreachable")
		}
		return guard.Verdict{Decision: d, Reason: "test says " + string(d)}, nil
	})
	g := newGateway(t, gateway.Options{Guard: gd})
	register(t, g, httpManual("demo", base+"/utcp"))
	args := map[string]any{"a": 1, "b": 2}

	cases := []struct {
		decision guard.Decision
		code     utcp.Code
	}{
		{guard.Allow, ""},
		{guard.Deny, utcp.CodeGuardDenied},
		{"fail", utcp.CodeGuardError},
		{guard.Decision("maybe"), utcp.CodeGuardError},
		{guard.Review, utcp.CodeGuardDenied},
	}
	for _, c := range cases {
		t.Run(string(c.decision), func(t *testing.T) {
			decide.Store(c.decision)
			before := f.Calls()
			_, err := g.CallTool(t.Context(), "demo.add", args, gateway.CallOptions{})
			if c.code == "" {
				if err != nil {
					t.Fatalf("allowed call failed: %v", err)
				}
				if got := f.Calls() - before; got != 1 {
					t.Errorf("allowed call dispatched %d times, want exactly once", got)
				}
				return
			}
			if got := utcp.CodeOf(err); got != c.code && !(c.decision == guard.Review && got == utcp.CodeReviewPending) {
				t.Errorf("decision %q: code %q (%v), want %q", c.decision, got, err, c.code)
			}
			if got := f.Calls() - before; got != 0 {
				t.Errorf("decision %q dispatched %d calls, want none", c.decision, got)
			}
		})
	}
	// The guard runs before lookup: an unknown tool is still judged, and
	// a denial does not reveal whether it exists.
	decide.Store(guard.Deny)
	n := seen.Load()
	_, err := g.CallTool(t.Context(), "demo.nope", nil, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeGuardDenied)
	if seen.Load() != n+1 {
		t.Errorf("the guard did not see the call to an unknown tool")
	}
}

func TestAllowedProtocols(t *testing.T) {
	g := newGateway(t, gateway.Options{})
	content := `{"utcp_version":"1.1.0","manual_version":"1","tools":[
	 {"name":"local","description":"runs a command","inputs":{},"tool_call_template":{"call_template_type":"cli","commands":[{"command":"echo hi"}]}},
	 {"name":"doc","description":"returns text","inputs":{},"tool_call_template":{"call_template_type":"text","content":"hello"}}]}`
	raw, _ := json.Marshal(map[string]any{"name": "mixed", "call_template_type": "text", "content": content})
	res := register(t, g, raw)
	if diff := cmp.Diff([]string{"mixed.doc"}, res.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if !strings.Contains(strings.Join(res.Warnings, "\n"), `"cli"`) {
		t.Errorf("warnings %q should name the refused protocol", res.Warnings)
	}
	out, err := g.CallTool(t.Context(), "mixed.doc", nil, gateway.CallOptions{})
	if err != nil || out.Value != "hello" {
		t.Errorf("mixed.doc = %v, %v", out, err)
	}
	_, err = g.CallTool(t.Context(), "mixed.local", nil, gateway.CallOptions{})
	codeOf(t, err, utcp.CodeToolNotFound)

	// Allowed explicitly, the cli tool registers and runs.
	raw, _ = json.Marshal(map[string]any{"name": "mixed2", "call_template_type": "text", "content": content, "allowed_communication_protocols": []string{"text", "cli"}})
	res = register(t, g, raw)
	if len(res.Tools) != 2 {
		t.Fatalf("tools = %v", res.Tools)
	}
	out, err = g.CallTool(t.Context(), "mixed2.local", nil, gateway.CallOptions{})
	if err != nil || out.Value != "hi" {
		t.Errorf("mixed2.local = %v, %v", out, err)
	}
}

func TestRegisterManualsParallel(t *testing.T) {
	_, base := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	raws := []json.RawMessage{
		httpManual("a", base+"/utcp"),
		httpManual("b", deadURL(t)+"/utcp"),
		json.RawMessage(`{"name":"c","call_template_type":"nope"}`),
		httpManual("d", base+"/openapi.json"),
	}
	results := g.RegisterManuals(t.Context(), raws, gateway.RegisterOptions{Source: "config"})
	var got []string
	for _, r := range results {
		got = append(got, fmt.Sprintf("%s:%s:%d", r.Name, utcp.CodeOf(r.Err), len(r.Tools)))
	}
	want := []string{"a::5", "b:discovery_failed:0", "c:invalid_template:0", "d::5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if _, err := g.CallTool(t.Context(), "d.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
		t.Errorf("tool discovered from OpenAPI: %v", err)
	}
}

func TestStreamingAndPostProcessing(t *testing.T) {
	_, base := serveFixture(t)
	pp := &manuals.FilterDict{ExcludeKeys: []string{"secret"}}
	g := newGateway(t, gateway.Options{PostProcessors: []manuals.PostProcessor{pp}})
	register(t, g, httpManual("demo", base+"/utcp"))
	out, err := g.CallTool(t.Context(), "demo.echo", map[string]any{"keep": "yes", "secret": "no"}, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"keep": "yes"}, out.Value); diff != "" {
		t.Errorf("post-processed result (-want +got):\n%s", diff)
	}
	stream, err := g.CallToolStreaming(t.Context(), "demo.echo", map[string]any{"keep": "yes", "secret": "no"}, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var events []any
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev.Data)
	}
	if diff := cmp.Diff([]any{map[string]any{"keep": "yes"}}, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestVariablesAndAuthMetadata(t *testing.T) {
	var gotKey atomic.Value
	gotKey.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("X-Api-Key"))
		if r.URL.Path == "/utcp" {
			m := httpserver.Manual("http://"+r.Host, httpserver.Options{})
			for i := range m.Tools {
				var tmpl map[string]any
				_ = json.Unmarshal(m.Tools[i].ToolCallTemplate.Raw, &tmpl)
				tmpl["auth"] = map[string]any{"auth_type": "api_key", "api_key": "${KEY}", "ownership": "user"}
				raw, _ := json.Marshal(tmpl)
				m.Tools[i].ToolCallTemplate.Raw = raw
			}
			_ = json.NewEncoder(w).Encode(m)
			return
		}
		httpserver.Handler(fixture.New()).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"my__api_KEY": "sekrit-1"}
	g := newGateway(t, gateway.Options{Variables: mustResolver(t, env)})
	register(t, g, httpManual("my_api", srv.URL+"/utcp"))
	if _, err := g.CallTool(t.Context(), "my_api.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := gotKey.Load(); got != "sekrit-1" {
		t.Errorf("backend saw api key %q, want the namespaced variable's value", got)
	}
	vars, err := g.RequiredVariables("my_api")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]gateway.Variable{{Name: "my__api_KEY", Resolves: true}}, vars); diff != "" {
		t.Errorf("required variables (-want +got):\n%s", diff)
	}
	md, err := g.AuthMetadata(t.Context(), "my_api.add")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(utcp.AuthMetadata{Type: "api_key", Ownership: "user"}, md); diff != "" {
		t.Errorf("auth metadata (-want +got):\n%s", diff)
	}
	// A variable that disappears fails the next call with its name.
	g.SetVariables(mustResolver(t, nil))
	_, err = g.CallTool(t.Context(), "my_api.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	ue := codeOf(t, err, utcp.CodeVariableNotFound)
	if !strings.Contains(ue.Error(), "my__api_KEY") {
		t.Errorf("error %q should name my__api_KEY", ue)
	}
}

func TestConcurrentRegisterAndCall(t *testing.T) {
	_, base := serveFixture(t)
	g := newGateway(t, gateway.Options{})
	register(t, g, httpManual("stable", base+"/utcp"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			name := fmt.Sprintf("churn_%d", i%3)
			_, _ = g.RegisterManual(ctx, httpManual(name, base+"/utcp"), gateway.RegisterOptions{Replace: true})
			_ = g.DeregisterManual(ctx, name)
		}
	}()
	for range 200 {
		if _, err := g.CallTool(ctx, "stable.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
			t.Fatalf("call during churn: %v", err)
		}
	}
	<-done
}

var _ transports.Stream = (transports.Stream)(nil)

// A backend announcing a new tool list (MCP notifications/tools/list_changed)
// makes the gateway discover the manual again.
func TestToolsChangedRefreshes(t *testing.T) {
	srv := mcpserver.New(fixture.New(), mcpserver.Options{})
	hs := httptest.NewServer(srv.Handler(mcpserver.HTTPOptions{}))
	t.Cleanup(hs.Close)
	g := newGateway(t, gateway.Options{})
	// The new tool is accepted at once with pin "warn" (hold would
	// withhold it until approved: TestPinHold*).
	raw := json.RawMessage(fmt.Sprintf(`{"name":"m","call_template_type":"mcp","pin":"warn","config":{"mcpServers":{"demo":{"url":%q}}}}`, hs.URL))
	res := register(t, g, raw)
	if !slices.Contains(res.Tools, "m.demo.add") {
		t.Fatalf("tools = %v", res.Tools)
	}
	srv.AddEchoTool("echo_again")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := g.Tool(t.Context(), "m.demo.echo_again"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new tool never appeared in the registry")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := g.CallTool(t.Context(), "m.demo.echo_again", map[string]any{"x": "y"}, gateway.CallOptions{}); err != nil {
		t.Errorf("calling the new tool: %v", err)
	}
}

// An MCP tool's result keeps the server's native result (Result.MCP) for
// the MCP front, in a call and on the stream's result event, unless a
// post-processor applies to the tool: the value is then post-processed,
// the native result dropped, and the listed output schema is the
// post-processed one.
func TestNativeResultAndPostProcessing(t *testing.T) {
	srv := mcpserver.New(fixture.New(), mcpserver.Options{})
	hs := httptest.NewServer(srv.Handler(mcpserver.HTTPOptions{}))
	t.Cleanup(hs.Close)
	pp := &manuals.FilterDict{ExcludeKeys: []string{"sum"}, ToolFilter: manuals.ToolFilter{OnlyIncludeTools: []string{"m.demo.add"}}}
	g := newGateway(t, gateway.Options{PostProcessors: []manuals.PostProcessor{pp}})
	register(t, g, json.RawMessage(fmt.Sprintf(`{"name":"m","call_template_type":"mcp","config":{"mcpServers":{"demo":{"url":%q}}}}`, hs.URL)))

	res, err := g.CallTool(t.Context(), "m.demo.content_types", nil, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var native struct {
		Content []struct {
			Type string `json:"type"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res.MCP, &native); err != nil || len(native.Content) != 6 || native.Content[1].Type != "image" {
		t.Errorf("Result.MCP = %s (%v); want the server's six blocks", res.MCP, err)
	}
	stream, err := g.CallToolStreaming(t.Context(), "m.demo.content_types", nil, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var last *utcp.Event
	for {
		ev, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		last = ev
	}
	stream.Close()
	if last == nil || !bytes.Equal(last.MCP, res.MCP) {
		t.Errorf("the stream's result event has MCP %s, want the call's", last.MCP)
	}

	res, err = g.CallTool(t.Context(), "m.demo.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.MCP != nil {
		t.Errorf("a post-processed result kept its native MCP result %s", res.MCP)
	}
	if v, ok := res.Value.(map[string]any); !ok || v["sum"] != nil {
		t.Errorf("post-processed value = %#v, want sum removed", res.Value)
	}
	add, err := g.Tool(t.Context(), "m.demo.add")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(add.Outputs), "sum") {
		t.Errorf("listed outputs of the post-processed tool still name sum: %s", add.Outputs)
	}
	echo, err := g.Tool(t.Context(), "m.demo.sleep")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(echo.Outputs), "slept_ms") {
		t.Errorf("a tool no post-processor applies to lost its outputs: %s", echo.Outputs)
	}
}
