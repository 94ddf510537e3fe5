package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// ---- the fixture server process ----

// Environment of a re-executed test binary acting as a stdio MCP server.
const (
	envFixture    = "UTCPD_MCP_FIXTURE"         // "stdio": serve; "sleeper": sleep forever
	envBackend    = "UTCPD_MCP_FIXTURE_BACKEND" // base URL of the parent's fixture, else a local one
	envMarker     = "UTCPD_MCP_TEST_ID"         // finds the test's processes in /proc
	envPageSize   = "UTCPD_MCP_FIXTURE_PAGE_SIZE"
	envUnknownRes = "UTCPD_MCP_FIXTURE_UNKNOWN_AS_RESULT"
	envGrandchild = "UTCPD_MCP_FIXTURE_GRANDCHILD" // start a sleeper in the same process group
	envStderr     = "UTCPD_MCP_FIXTURE_STDERR"     // print n lines (one very long) to stderr first
	envExitAfter  = "UTCPD_MCP_FIXTURE_EXIT_AFTER" // exit this many milliseconds after starting
)

// IsFixtureProcess reports whether this test binary was started as the
// fixture server.
func IsFixtureProcess() bool { return os.Getenv(envFixture) != "" }

// FixtureMain runs the fixture server process and returns its exit
// status.
func FixtureMain() int {
	if os.Getenv(envFixture) == "sleeper" {
		select {}
	}
	if os.Getenv(envGrandchild) == "1" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), envFixture+"=sleeper")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "grandchild pid %d\n", cmd.Process.Pid)
	}
	if n, _ := strconv.Atoi(os.Getenv(envStderr)); n > 0 {
		fmt.Fprintln(os.Stderr, strings.Repeat("x", 100<<10))
		for i := range n {
			fmt.Fprintf(os.Stderr, "line %d\n", i)
		}
	}
	if ms, _ := strconv.Atoi(os.Getenv(envExitAfter)); ms > 0 {
		time.AfterFunc(time.Duration(ms)*time.Millisecond, func() { os.Exit(3) })
	}
	var b mcpserver.Backend = fixture.New()
	if url := os.Getenv(envBackend); url != "" {
		b = &remoteBackend{url: url}
	}
	opts := mcpserver.Options{UnknownToolAsResult: os.Getenv(envUnknownRes) == "1"}
	opts.PageSize, _ = strconv.Atoi(os.Getenv(envPageSize))
	if err := mcpserver.New(b, opts).RunStdio(context.Background()); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "fixture server:", err)
	}
	return 0
}

// remoteBackend runs the fixture tools on the parent test process's
// fixture (backendHandler), so the suite observes calls, cancellations and
// in-flight counts across the process boundary.
type remoteBackend struct {
	url    string
	client http.Client
}

func (r *remoteBackend) do(ctx context.Context, name string, args map[string]any, emit func(any) error) (any, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/call/"+name, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	for {
		var line struct {
			Emit    *json.RawMessage `json:"emit"`
			Result  *json.RawMessage `json:"result"`
			Error   string           `json:"error"`
			Failure bool             `json:"failure"`
		}
		if err := dec.Decode(&line); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		switch {
		case line.Emit != nil:
			if emit != nil {
				if err := emit(decodeJSON(*line.Emit, nil)); err != nil {
					return nil, err
				}
			}
		case line.Failure:
			return nil, &fixture.Failure{Message: line.Error}
		case line.Error != "":
			return nil, errors.New(line.Error)
		default:
			if line.Result == nil {
				return nil, nil
			}
			return decodeJSON(*line.Result, nil), nil
		}
	}
}

func (r *remoteBackend) Call(ctx context.Context, name string, args map[string]any) (any, error) {
	return r.do(ctx, name, args, nil)
}

func (r *remoteBackend) Stream(ctx context.Context, name string, args map[string]any, emit func(any) error) error {
	_, err := r.do(ctx, name, args, emit)
	return err
}

// backendHandler serves f to remoteBackend: POST /call/{name} with the
// arguments, answered by NDJSON lines {"emit": v}... then {"result": v}
// or {"error": msg, "failure": bool}.
func backendHandler(f *fixture.Fixture) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /call/{name}", func(w http.ResponseWriter, r *http.Request) {
		var args map[string]any
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		flush := func() {
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
		}
		name := r.PathValue("name")
		var v any
		var err error
		if name == fixture.Count {
			var out []any
			err = f.Stream(r.Context(), name, args, func(x any) error {
				out = append(out, x)
				if err := enc.Encode(map[string]any{"emit": x}); err != nil {
					return err
				}
				flush()
				return nil
			})
			v = out
		} else {
			v, err = f.Call(r.Context(), name, args)
		}
		var failure *fixture.Failure
		switch {
		case errors.As(err, &failure):
			_ = enc.Encode(map[string]any{"error": failure.Message, "failure": true})
		case err != nil:
			_ = enc.Encode(map[string]any{"error": err.Error()})
		default:
			_ = enc.Encode(map[string]any{"result": v})
		}
	})
	return mux
}

// newMarker returns a unique process marker for one test.
func newMarker() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// fixtureServer describes one stdio fixture server of a template.
type fixtureServer struct {
	f          *fixture.Fixture // nil: the process runs its own fixture
	marker     string
	pageSize   int
	unknownRes bool
	grandchild bool
	stderr     int
	exitAfter  time.Duration
}

func (fs fixtureServer) config(t testing.TB) map[string]any {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	env := map[string]string{envFixture: "stdio"}
	if fs.f != nil {
		srv := httptest.NewServer(backendHandler(fs.f))
		t.Cleanup(func() {
			srv.CloseClientConnections()
			srv.Close()
		})
		env[envBackend] = srv.URL
	}
	if fs.marker != "" {
		env[envMarker] = fs.marker
	}
	if fs.pageSize > 0 {
		env[envPageSize] = strconv.Itoa(fs.pageSize)
	}
	if fs.unknownRes {
		env[envUnknownRes] = "1"
	}
	if fs.grandchild {
		env[envGrandchild] = "1"
	}
	if fs.stderr > 0 {
		env[envStderr] = strconv.Itoa(fs.stderr)
	}
	if fs.exitAfter > 0 {
		env[envExitAfter] = strconv.Itoa(int(fs.exitAfter / time.Millisecond))
	}
	return map[string]any{"command": exe, "env": env}
}

// StdioFixtureTemplate returns a manual template with one stdio server,
// "demo", running the fixture tools on f (in this process).
// extra fields are added to the template.
func StdioFixtureTemplate(t testing.TB, f *fixture.Fixture, extra map[string]any) json.RawMessage {
	t.Helper()
	fields := map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{f: f, pageSize: 2}.config(t),
	}}}
	for k, v := range extra {
		fields[k] = v
	}
	return transporttest.Template(t, Type, fields)
}

// httpFixture is a Streamable HTTP fixture server whose sessions tests can
// expire.
type httpFixture struct {
	srv    *mcpserver.Server
	ts     *httptest.Server
	mu     sync.Mutex
	h      http.Handler
	expiry int // status for unknown sessions after expire: 404 or 400
	known  map[string]bool
	reqs   []*http.Request
}

func newHTTPFixture(t testing.TB, b mcpserver.Backend, opts mcpserver.Options) *httpFixture {
	t.Helper()
	hf := &httpFixture{srv: mcpserver.New(b, opts), known: map[string]bool{}}
	hf.h = hf.srv.Handler(mcpserver.HTTPOptions{})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", hf.serve)
	hf.ts = httptest.NewServer(mux)
	t.Cleanup(func() {
		hf.ts.CloseClientConnections()
		hf.ts.Close()
	})
	return hf
}

func (hf *httpFixture) url() string { return hf.ts.URL + "/mcp" }

func (hf *httpFixture) serve(w http.ResponseWriter, r *http.Request) {
	hf.mu.Lock()
	hf.reqs = append(hf.reqs, r.Clone(context.Background()))
	h, expiry := hf.h, hf.expiry
	id := r.Header.Get("Mcp-Session-Id")
	unknown := expiry != 0 && id != "" && !hf.known[id]
	hf.mu.Unlock()
	if unknown {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(expiry)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}`)
		return
	}
	rec := &sessionRecorder{ResponseWriter: w, hf: hf}
	h.ServeHTTP(rec, r)
}

// expire forgets every session: later requests carrying one of them get
// status (404 as the spec says, or 400 as server-everything answers).
func (hf *httpFixture) expire(status int) {
	hf.mu.Lock()
	defer hf.mu.Unlock()
	hf.expiry = status
	clear(hf.known)
	hf.h = hf.srv.Handler(mcpserver.HTTPOptions{})
}

func (hf *httpFixture) requests() []*http.Request {
	hf.mu.Lock()
	defer hf.mu.Unlock()
	return append([]*http.Request(nil), hf.reqs...)
}

// sessionRecorder notes the session ids the current handler hands out.
type sessionRecorder struct {
	http.ResponseWriter
	hf *httpFixture
}

func (s *sessionRecorder) note() {
	if id := s.Header().Get("Mcp-Session-Id"); id != "" {
		s.hf.mu.Lock()
		s.hf.known[id] = true
		s.hf.mu.Unlock()
	}
}

func (s *sessionRecorder) WriteHeader(code int) {
	s.note()
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	s.note()
	return s.ResponseWriter.Write(b)
}

func (s *sessionRecorder) Flush() {
	s.note()
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// HTTPFixtureTemplate starts the fixture MCP server for f over Streamable
// HTTP on 127.0.0.1:0 and returns a manual template with one server,
// "demo", reaching it.
func HTTPFixtureTemplate(t testing.TB, f *fixture.Fixture) json.RawMessage {
	t.Helper()
	hf := newHTTPFixture(t, f, mcpserver.Options{PageSize: 2})
	return transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"url": hf.url()},
	}}})
}

// ---- test plumbing ----

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newTestTransport(t testing.TB, opts transports.Options) *Transport {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

// manualCaller is a *Transport, or one counted by transports.Count.
type manualCaller interface {
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
}

// countedTransport is a *Transport as the gateway uses it.
type countedTransport interface {
	manualCaller
	DeregisterManual(ctx context.Context, tmpl *utcp.CallTemplate) error
	Close() error
}

// counted wraps tr in transports.Count, which counts its registrations.
func counted(tr *Transport) countedTransport { return transports.Count(Type, tr) }

func parse(t testing.TB, raw json.RawMessage) *utcp.CallTemplate {
	t.Helper()
	tmpl, err := ParseTemplate(withName(raw, "m"))
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

func withName(raw json.RawMessage, name string) json.RawMessage {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	if _, ok := m["name"]; !ok {
		m["name"] = name
	}
	b, _ := json.Marshal(m)
	return b
}

func register(t testing.TB, tr manualCaller, tmpl *utcp.CallTemplate) *utcp.Manual {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m, err := tr.RegisterManual(ctx, tmpl)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	return m
}

func callTool(t testing.TB, tr manualCaller, tmpl *utcp.CallTemplate, name string, args map[string]any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := tr.CallTool(ctx, &utcp.Call{Tool: tmpl.Name + "." + name, Manual: tmpl.Name, Name: name, Template: tmpl, Arguments: args})
	if err != nil {
		return nil, err
	}
	return res.Value, nil
}

func mustCall(t testing.TB, tr manualCaller, tmpl *utcp.CallTemplate, name string, args map[string]any) any {
	t.Helper()
	v, err := callTool(t, tr, tmpl, name, args)
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return v
}

// normalize round-trips v through JSON for comparisons.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// serverOf returns the state of one server of a registered template.
func serverOf(t testing.TB, tr *Transport, tmpl *utcp.CallTemplate, name string) *server {
	t.Helper()
	m := tr.lookup(tmpl, tmpl.Name)
	if m == nil {
		t.Fatalf("manual %s not registered", tmpl.Name)
	}
	s := m.servers[name]
	if s == nil {
		t.Fatalf("no server %s", name)
	}
	return s
}

// pidOf returns the pid of a stdio server's live process.
func pidOf(t testing.TB, s *server) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.proc == nil {
		t.Fatalf("server %s has no live process", s.name)
	}
	return s.cur.proc.pid
}

// markedProcesses lists the live (not zombie) processes whose environment
// carries marker.
func markedProcesses(t testing.TB, marker string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("/proc: %v", err)
	}
	var pids []int
	want := []byte(envMarker + "=" + marker + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// logBuffer is a slog handler target safe for concurrent use.
type logBuffer struct{ transporttest.SyncBuffer }

func (l *logBuffer) lines(substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// ---- template ----

func TestParseTemplate(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		kinds   map[string]string // server → normalised transport
		unknown []string
		wantErr string // "" means valid
	}{
		{name: "stdio", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"fs":{"command":"npx","args":["-y","x"],"env":{"A":"1"},"cwd":"/"}}}}`,
			kinds: map[string]string{"fs": KindStdio}},
		{name: "http inferred", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"r":{"url":"https://x/mcp","headers":{"X-T":"1"},"timeout":30}}}}`,
			kinds: map[string]string{"r": KindHTTP}},
		{name: "python-utcp / @utcp/mcp variants", raw: `{"name":"mcp_tools","call_template_type":"mcp","config":{"mcpServers":{
			"filesystem":{"transport":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/data"],"env":{"LOG_LEVEL":"info"},"timeout":60},
			"remote":{"transport":"http","url":"https://mcp.example.com/mcp","headers":{"X-Tenant":"${TENANT}"},"sse_read_timeout":300,"terminate_on_close":true},
			"legacy":{"transport":"sse","url":"https://old.example.com/sse"},
			"streamable":{"transport":"streamable_http","url":"https://s.example.com/mcp"}}},
			"auth":{"auth_type":"oauth2","token_url":"https://auth.example.com/token","client_id":"${CID}","client_secret":"${CSECRET}","scope":"read:tools"},
			"register_resources_as_tools":true}`,
			kinds: map[string]string{"filesystem": KindStdio, "remote": KindHTTP, "legacy": KindSSE, "streamable": KindHTTP}},
		{name: "claude desktop type alias", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"type":"sse","url":"http://127.0.0.1:1/sse"},"b":{"type":"stdio","command":"x"}}}}`,
			kinds: map[string]string{"a": KindSSE, "b": KindStdio}},
		{name: "disabled server skipped", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x"},"b":{"command":"y","disabled":true}}}}`,
			kinds: map[string]string{"a": KindStdio, "b": KindStdio}},
		{name: "nested unknown fields", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","autoApprove":[]}},"extra":1}}`,
			kinds: map[string]string{"a": KindStdio}, unknown: []string{"config.extra", "config.mcpServers.a.autoApprove"}},
		{name: "no config", raw: `{"call_template_type":"mcp"}`, wantErr: "config.mcpServers"},
		{name: "no servers", raw: `{"call_template_type":"mcp","config":{"mcpServers":{}}}`, wantErr: "config.mcpServers"},
		{name: "only disabled", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","disabled":true}}}}`, wantErr: "not disabled"},
		{name: "null server", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":null}}}`, wantErr: "config.mcpServers.a"},
		{name: "empty server name", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"":{"command":"x"}}}}`, wantErr: "must not be empty"},
		{name: "neither command nor url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"args":["x"]}}}}`, wantErr: "config.mcpServers.a: field command"},
		{name: "both command and url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","url":"https://x"}}}}`, wantErr: "set transport"},
		{name: "unknown transport", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"carrier-pigeon","command":"x"}}}}`, wantErr: "carrier-pigeon"},
		{name: "stdio without command", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"stdio","url":"https://x"}}}}`, wantErr: "field command"},
		{name: "http without url", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"transport":"http","command":"x"}}}}`, wantErr: "field url"},
		{name: "bad header", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"url":"https://x","headers":{"Bad Name":"1"}}}}}`, wantErr: "headers"},
		{name: "header injection", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"url":"https://x","headers":{"X":"1\r\nY: 2"}}}}}`, wantErr: "CR, LF"},
		{name: "bad env name", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","env":{"A=B":"1"}}}}}`, wantErr: "env"},
		{name: "negative timeout", raw: `{"call_template_type":"mcp","config":{"mcpServers":{"a":{"command":"x","timeout":-1}}}}`, wantErr: "negative"},
		{name: "servers not a map", raw: `{"call_template_type":"mcp","config":{"mcpServers":[]}}`, wantErr: "mcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Info.ParseTemplate(json.RawMessage(c.raw))
			if c.wantErr != "" {
				if !errors.Is(err, transports.ErrInvalidTemplate) {
					t.Fatalf("err = %v, want ErrInvalidTemplate", err)
				}
				if !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("error %q does not mention %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTemplate: %v", err)
			}
			spec := tmpl.Spec.(*Template)
			for name, kind := range c.kinds {
				if got := spec.Config.MCPServers[name].Transport; got != kind {
					t.Errorf("server %s: Transport = %q, want %q", name, got, kind)
				}
			}
			if strings.Join(tmpl.Unknown, ",") != strings.Join(c.unknown, ",") {
				t.Errorf("Unknown = %v, want %v", tmpl.Unknown, c.unknown)
			}
		})
	}
}

// ---- results ----

func TestResultShapes(t *testing.T) {
	text := func(s string) *sdk.TextContent { return &sdk.TextContent{Text: s} }
	cases := []struct {
		name string
		res  *sdk.CallToolResult
		want any
	}{
		{"single text", &sdk.CallToolResult{Content: []sdk.Content{text("hello")}}, "hello"},
		{"single JSON object text", &sdk.CallToolResult{Content: []sdk.Content{text(`{"a": [1, 2.5]}`)}}, map[string]any{"a": []any{1.0, 2.5}}},
		{"JSON scalar text stays text", &sdk.CallToolResult{Content: []sdk.Content{text("42")}}, "42"},
		{"broken JSON stays text", &sdk.CallToolResult{Content: []sdk.Content{text("{nope")}}, "{nope"},
		{"no content", &sdk.CallToolResult{Content: []sdk.Content{}}, nil},
		{"structured wins over its text", &sdk.CallToolResult{Content: []sdk.Content{text(`{"t":1}`)}, StructuredContent: map[string]any{"t": 1}}, map[string]any{"t": 1.0}},
		{"structured without content", &sdk.CallToolResult{StructuredContent: []any{"x"}}, []any{"x"}},
		{"several texts", &sdk.CallToolResult{Content: []sdk.Content{text("a"), text("b")}},
			map[string]any{"content": []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "text", "text": "b"}}}},
		{"structured with an image keeps both", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: []byte{1}, MIMEType: "image/png"}}, StructuredContent: map[string]any{"k": "v"}},
			map[string]any{"content": []any{map[string]any{"type": "image", "data": "AQ==", "mimeType": "image/png"}}, "structured": map[string]any{"k": "v"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := normalize(resultValue(c.res))
			if diff := cmp.Diff(normalize(c.want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// Numbers come back as json.Number, like every other utcpd value.
	if v := resultValue(&sdk.CallToolResult{StructuredContent: map[string]any{"n": 12345678901234.0}}); v.(map[string]any)["n"] != json.Number("12345678901234") {
		t.Errorf("structured number = %#v, want json.Number", v.(map[string]any)["n"])
	}
}

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		name string
		err  *jsonrpc.Error
		code utcp.Code
	}{
		{"go-sdk unknown tool", &jsonrpc.Error{Code: -32602, Message: `unknown tool "nope"`}, utcp.CodeToolNotFound},
		{"method not found", &jsonrpc.Error{Code: -32601, Message: "Method not found"}, utcp.CodeToolNotFound},
		{"invalid params", &jsonrpc.Error{Code: -32602, Message: "invalid params: a must be a number"}, utcp.CodeInvalidArguments},
		{"internal error", &jsonrpc.Error{Code: -32603, Message: "boom"}, utcp.CodeToolError},
		{"application error", &jsonrpc.Error{Code: 42, Message: "quota"}, utcp.CodeToolError},
		{"server error range", &jsonrpc.Error{Code: -32000, Message: "Bad Request"}, utcp.CodeTransportError},
	}
	for _, c := range cases {
		if got := utcp.CodeOf(rpcError("x", "nope", c.err)); got != c.code {
			t.Errorf("%s: code %s, want %s", c.name, got, c.code)
		}
	}
	if !errors.Is(rpcError("x", "nope", &jsonrpc.Error{Code: -32601}), transports.ErrToolNotFound) {
		t.Errorf("-32601 does not match ErrToolNotFound")
	}
	// Only requests that provably never reached the server are retried.
	rejected := &delivery{}
	rejected.rejected.Store(true)
	for _, c := range []struct {
		err  error
		d    *delivery
		want bool
	}{
		{fmt.Errorf("calling \"tools/call\": %w", &writeFailed{syscall.EPIPE}), &delivery{}, true},
		{fmt.Errorf("%w: calling \"tools/call\": client is closing", sdk.ErrConnectionClosed), &delivery{}, true},
		{errors.New("Bad Request"), rejected, true},
		{fmt.Errorf("calling \"tools/call\": %w", io.EOF), &delivery{}, false},
		{fmt.Errorf("calling \"tools/call\": %w", os.ErrClosed), &delivery{}, false},
	} {
		if got := undelivered(c.err, c.d); got != c.want {
			t.Errorf("undelivered(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for msg, want := range map[string]bool{
		"MCP error -32602: Tool nope not found": true,
		`unknown tool "nope"`:                   true,
		"no such tool: nope":                    true,
		"Tool other not found":                  false,
		"MCP error -32602: Input validation error: Invalid arguments for tool nope": false,
	} {
		if got := unknownTool(msg, "nope"); got != want {
			t.Errorf("unknownTool(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestTapsSplitAnywhere(t *testing.T) {
	progress := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"utcpd-1","progress":2,"total":5,"message":"two"}}`
	other := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"progressToken"}]}}`
	for _, c := range []struct {
		name string
		wire string
		tap  func(r io.ReadCloser, fn func([]byte)) io.Reader
	}{
		{"stdio", progress + "\n" + other + "\n", func(r io.ReadCloser, fn func([]byte)) io.Reader {
			f, w, _ := os.Pipe()
			go func() { _, _ = io.Copy(w, r); w.Close() }()
			return &lineTap{r: f, fn: fn}
		}},
		{"sse", "id: 1\ndata: \n\nevent: message\ndata: " + progress + "\r\n\r\nevent: message\ndata: " + other + "\n\n", func(r io.ReadCloser, fn func([]byte)) io.Reader {
			return &sseTap{rc: r, fn: fn}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []any
			ss := &session{progress: map[string]func(*utcp.Event){"utcpd-1": func(ev *utcp.Event) { got = append(got, normalize(ev)) }}}
			r := c.tap(io.NopCloser(iotestOneByte(strings.NewReader(c.wire))), ss.onMessage)
			out, err := io.ReadAll(r)
			if err != nil || string(out) != c.wire {
				t.Fatalf("the tap changed the stream: %q, %v", out, err)
			}
			want := []any{map[string]any{"type": "progress", "data": map[string]any{"progress": 2.0, "total": 5.0, "message": "two"}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// iotestOneByte reads one byte at a time, so every split point is tried.
func iotestOneByte(r io.Reader) io.Reader { return oneByte{r} }

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// ---- behaviour over both transports ----

// both runs fn against the stdio and the HTTP fixture server.
func both(t *testing.T, fn func(t *testing.T, f *fixture.Fixture, raw json.RawMessage)) {
	t.Run("stdio", func(t *testing.T) {
		f := fixture.New()
		fn(t, f, StdioFixtureTemplate(t, f, nil))
	})
	t.Run("http", func(t *testing.T) {
		f := fixture.New()
		fn(t, f, HTTPFixtureTemplate(t, f))
	})
}

func TestRegisterNamesAndSchemas(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		m := register(t, tr, parse(t, raw))
		byName := map[string]utcp.Tool{}
		for _, tool := range m.Tools {
			byName[tool.Name] = tool
			if tool.ToolCallTemplate != nil {
				t.Errorf("%s has a tool_call_template; the manual's must be used", tool.Name)
			}
		}
		// Page size 2: every page of tools/list was followed.
		for _, want := range []string{"demo.echo", "demo.add", "demo.fail", "demo.sleep", "demo.count", "demo.add_tool", "demo.content_types"} {
			if _, ok := byName[want]; !ok {
				t.Errorf("tool %s missing (got %d tools)", want, len(m.Tools))
			}
		}
		add := byName["demo.add"]
		if diff := cmp.Diff([]string{"mcp", "demo", "read_only", "idempotent"}, add.Tags); diff != "" {
			t.Errorf("add tags (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(normalize(fixture.Tools()[1].Inputs), normalize(add.Inputs)); diff != "" {
			t.Errorf("add inputs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(normalize(fixture.Tools()[1].Outputs), normalize(add.Outputs)); diff != "" {
			t.Errorf("add outputs (-want +got):\n%s", diff)
		}
		if tags := byName["demo.fail"].Tags; !slices.Contains(tags, "destructive") {
			t.Errorf("fail tags %v lack destructive", tags)
		}
	})
}

func TestStreamProgressOrder(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		for range 3 { // the order holds every time, not by luck
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 5}})
			if err != nil {
				t.Fatalf("CallToolStream: %v", err)
			}
			var got []any
			for {
				ev, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				got = append(got, normalize(ev))
			}
			_ = st.Close()
			cancel()
			var want []any
			for i := 1; i <= 5; i++ {
				want = append(want, map[string]any{"type": "progress", "data": map[string]any{"progress": float64(i), "total": 5.0, "message": strconv.Itoa(i)}})
			}
			want = append(want, map[string]any{"type": "result", "data": []any{1.0, 2.0, 3.0, 4.0, 5.0}})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		}
		// Without a stream, count just returns its list.
		if diff := cmp.Diff([]any{1.0, 2.0}, normalize(mustCall(t, tr, tmpl, "demo.count", map[string]any{"n": 2}))); diff != "" {
			t.Errorf("count (-want +got):\n%s", diff)
		}
	})
}

func TestToolErrorsAndUnknownTools(t *testing.T) {
	for _, asResult := range []bool{false, true} {
		t.Run(fmt.Sprintf("unknown_as_result=%v", asResult), func(t *testing.T) {
			check := func(t *testing.T, tr *Transport, tmpl *utcp.CallTemplate) {
				_, err := callTool(t, tr, tmpl, "demo.no_such_tool", nil)
				if !errors.Is(err, transports.ErrToolNotFound) {
					t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
				}
				_, err = callTool(t, tr, tmpl, "other.echo", nil)
				if !errors.Is(err, transports.ErrToolNotFound) {
					t.Errorf("unknown server: err = %v, want ErrToolNotFound", err)
				}
				_, err = callTool(t, tr, tmpl, "demo.fail", map[string]any{"message": "disk on fire"})
				var te *utcp.ToolError
				if !errors.As(err, &te) || te.Message != "disk on fire" {
					t.Errorf("fail: err = %#v, want a ToolError carrying the message", err)
				} else if diff := cmp.Diff("disk on fire", te.Value); diff != "" {
					t.Errorf("ToolError.Value (-want +got):\n%s", diff)
				}
				_, err = callTool(t, tr, tmpl, "demo.add", map[string]any{"a": "x", "b": 1})
				if !errors.As(err, &te) || !strings.Contains(te.Message, "not a number") {
					t.Errorf("bad argument: err = %v, want a ToolError", err)
				}
			}
			t.Run("stdio", func(t *testing.T) {
				tr := newTestTransport(t, transports.Options{})
				tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
					"demo": fixtureServer{unknownRes: asResult}.config(t)}}}))
				register(t, tr, tmpl)
				check(t, tr, tmpl)
			})
			t.Run("http", func(t *testing.T) {
				hf := newHTTPFixture(t, fixture.New(), mcpserver.Options{UnknownToolAsResult: asResult})
				tr := newTestTransport(t, transports.Options{})
				tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
					"demo": map[string]any{"url": hf.url()}}}}))
				register(t, tr, tmpl)
				check(t, tr, tmpl)
			})
		})
	}
}

func TestContentTypesRoundTrip(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		size := float64(len(mcpserver.ReadmeText))
		blocks := []any{
			map[string]any{"type": "text", "text": "one of each"},
			map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(mcpserver.TinyPNG), "mimeType": "image/png"},
			map[string]any{"type": "audio", "data": base64.StdEncoding.EncodeToString(mcpserver.TinyWAV), "mimeType": "audio/wav"},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": mcpserver.ReadmeURI, "mimeType": "text/plain", "text": mcpserver.ReadmeText}},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "fixture://blob", "mimeType": "application/octet-stream", "blob": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})}},
			map[string]any{"type": "resource_link", "uri": mcpserver.ReadmeURI, "name": "readme", "mimeType": "text/plain", "size": size},
		}
		got := normalize(mustCall(t, tr, tmpl, "demo.content_types", nil))
		if diff := cmp.Diff(map[string]any{"content": blocks}, got); diff != "" {
			t.Errorf("content_types (-want +got):\n%s", diff)
		}
		got = normalize(mustCall(t, tr, tmpl, "demo.content_types", map[string]any{"structured": true}))
		if diff := cmp.Diff(map[string]any{"content": blocks, "structured": map[string]any{"blocks": 6.0}}, got); diff != "" {
			t.Errorf("content_types structured (-want +got):\n%s", diff)
		}
	})
}

func TestResourcesAsTools(t *testing.T) {
	f := fixture.New()
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, StdioFixtureTemplate(t, f, map[string]any{"register_resources_as_tools": true}))
	m := register(t, tr, tmpl)
	var found *utcp.Tool
	for i := range m.Tools {
		if m.Tools[i].Name == "demo.resource_readme" {
			found = &m.Tools[i]
		}
	}
	if found == nil || found.Description != "What this server serves." {
		t.Fatalf("resource tool missing or undescribed: %+v", found)
	}
	if got := mustCall(t, tr, tmpl, "demo.resource_readme", nil); got != mcpserver.ReadmeText {
		t.Errorf("resource_readme = %#v", got)
	}
}

func TestListChangedCallsBack(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		changed := make(chan string, 10)
		tr := counted(newTestTransport(t, transports.Options{OnToolsChanged: func(m string) { changed <- m }}))
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		select {
		case m := <-changed:
			t.Fatalf("OnToolsChanged(%q) before any change", m)
		case <-time.After(3 * ToolsChangedDebounce):
		}
		mustCall(t, tr, tmpl, "demo.add_tool", map[string]any{"name": "late"})
		select {
		case m := <-changed:
			if m != "m" {
				t.Errorf("OnToolsChanged(%q), want m", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no OnToolsChanged after the server added a tool")
		}
		// The gateway re-registers: the same template re-lists over the
		// same session and finds the new tool.
		m := register(t, tr, tmpl)
		if !slices.ContainsFunc(m.Tools, func(tool utcp.Tool) bool { return tool.Name == "demo.late" }) {
			t.Errorf("re-registration does not list demo.late")
		}
		if got := normalize(mustCall(t, tr, tmpl, "demo.late", map[string]any{"x": 1})); !cmp.Equal(map[string]any{"x": 1.0}, got) {
			t.Errorf("late = %v", got)
		}
		if err := tr.DeregisterManual(t.Context(), tmpl); err != nil { // second registration
			t.Fatal(err)
		}
		mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 1}) // the first still holds the session
	})
}

// ---- stdio supervision ----

func TestStdioRestartAfterKill(t *testing.T) {
	changed := make(chan string, 10)
	tr := newTestTransport(t, transports.Options{OnToolsChanged: func(m string) { changed <- m }})
	tmpl := parse(t, StdioFixtureTemplate(t, fixture.New(), nil))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2})
	pid := pidOf(t, s)

	// A call in flight when the server dies fails; the next one waits
	// for the restart and succeeds.
	inflight := make(chan error, 1)
	go func() {
		_, err := callTool(t, tr, tmpl, "demo.sleep", map[string]any{"ms": 5000})
		inflight <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-inflight; err == nil {
		t.Errorf("the call in flight survived its server's death")
	} else if code := utcp.CodeOf(err); code != utcp.CodeTransportError {
		t.Errorf("in-flight call: code %s (%v), want transport_error", code, err)
	}
	got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 2, "b": 3})
	if diff := cmp.Diff(map[string]any{"sum": 5.0}, normalize(got)); diff != "" {
		t.Errorf("add after restart (-want +got):\n%s", diff)
	}
	if n := s.spawns.Load(); n != 2 {
		t.Errorf("spawns = %d, want 2", n)
	}
	if newPid := pidOf(t, s); newPid == pid {
		t.Errorf("same pid after restart")
	}
	if st, _ := transporttest.ProcState(pid); st != "" {
		t.Errorf("the killed server %d is still in /proc (state %s): not reaped", pid, st)
	}
	select {
	case <-changed: // tools may differ after a restart
	case <-time.After(5 * time.Second):
		t.Errorf("no OnToolsChanged after the restart")
	}
}

func TestStdioUnresponsiveRestarted(t *testing.T) {
	tr := newTestTransport(t, transports.Options{Config: json.RawMessage(`{"ping_interval_ms":100,"ping_timeout_ms":200,"ping_failures":2,"shutdown_grace_ms":200}`)})
	tmpl := parse(t, StdioFixtureTemplate(t, fixture.New(), nil))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	pid := pidOf(t, s)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	transporttest.WaitUntil(t, 10*time.Second, "a restart of the stopped server", func() bool { return s.restarts.Load() >= 1 })
	mustCall(t, tr, tmpl, "demo.echo", map[string]any{"ok": true})
	if st, _ := transporttest.ProcState(pid); st != "" {
		t.Errorf("the stopped server %d is still in /proc (state %s)", pid, st)
	}
}

func TestCrashLoopBacksOff(t *testing.T) {
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{exitAfter: 300 * time.Millisecond}.config(t)}}}))
	register(t, tr, tmpl)
	s := serverOf(t, tr, tmpl, "demo")
	time.Sleep(3 * time.Second)
	// Each process lives 300 ms; restarts wait 100, 200, 400, 800 ms...:
	// about 5 processes in 3 s, against 10 without backoff.
	if n := s.spawns.Load(); n < 2 || n > 6 {
		t.Errorf("%d processes started in 3 s, want 2..6 (exponential backoff)", n)
	}
}

func TestStatelessHTTP(t *testing.T) {
	f := fixture.New()
	srv := mcpserver.New(f, mcpserver.Options{})
	ts := httptest.NewServer(srv.Handler(mcpserver.HTTPOptions{Stateless: true}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": map[string]any{"url": ts.URL}}}}))
	register(t, tr, tmpl)
	if v := serverOf(t, tr, tmpl, "demo").cur.cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Errorf("negotiated %s with a stateless server, want 2026-07-28 or later", v)
	}
	if diff := cmp.Diff(map[string]any{"sum": 3.0}, normalize(mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2}))); diff != "" {
		t.Errorf("add (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 3}})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for {
		ev, err := st.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("Recv: %v", err)
			}
			break
		}
		types = append(types, ev.Type)
	}
	if diff := cmp.Diff([]string{"progress", "progress", "progress", "result"}, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	ctx2, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	if _, err := tr.CallTool(ctx2, &utcp.Call{Manual: "m", Name: "demo.sleep", Template: tmpl, Arguments: map[string]any{"ms": 10000}}); utcp.CodeOf(err) != utcp.CodeTimeout {
		t.Errorf("sleep with a deadline: %v", err)
	}
	transporttest.WaitUntil(t, 3*time.Second, "the server to see the cancellation", func() bool { return f.Canceled() > 0 })
}

func TestConcurrentCallsShareOneProcess(t *testing.T) {
	marker := newMarker()
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{marker: marker}.config(t)}}}))
	register(t, tr, tmpl)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			v, err := callTool(t, tr, tmpl, "demo.add", map[string]any{"a": i, "b": 1000})
			if err != nil {
				errs <- err
				return
			}
			if !cmp.Equal(map[string]any{"sum": float64(i + 1000)}, normalize(v)) {
				errs <- fmt.Errorf("call %d: %v", i, v)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := serverOf(t, tr, tmpl, "demo").spawns.Load(); n != 1 {
		t.Errorf("spawns = %d, want 1", n)
	}
	if pids := markedProcesses(t, marker); len(pids) != 1 {
		t.Errorf("%d server processes in /proc (%v), want 1", len(pids), pids)
	}
}

func TestDeregisterLeavesNoProcess(t *testing.T) {
	for _, how := range []string{"deregister", "close"} {
		t.Run(how, func(t *testing.T) {
			marker := newMarker()
			tr := counted(newTestTransport(t, transports.Options{}))
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"a": fixtureServer{marker: marker, grandchild: true}.config(t),
				"b": fixtureServer{marker: marker}.config(t),
			}}}))
			register(t, tr, tmpl)
			mustCall(t, tr, tmpl, "a.echo", nil)
			transporttest.WaitUntil(t, 5*time.Second, "the grandchild to start", func() bool { return len(markedProcesses(t, marker)) == 3 })
			pids := markedProcesses(t, marker)
			start := time.Now()
			if how == "close" {
				_ = tr.Close()
			} else if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s took %v", how, time.Since(start))
			if left := markedProcesses(t, marker); len(left) != 0 {
				t.Errorf("processes left after %s: %v", how, left)
			}
			for _, pid := range pids {
				transporttest.WaitUntil(t, 5*time.Second, fmt.Sprintf("process %d to be gone", pid), func() bool {
					st, ppid := transporttest.ProcState(pid)
					if st == "Z" && ppid == os.Getpid() {
						t.Fatalf("process %d is our unreaped zombie", pid)
					}
					return st == ""
				})
			}
			if _, err := callTool(t, tr, tmpl, "a.echo", nil); err == nil {
				t.Errorf("call after %s succeeded", how)
			}
		})
	}
}

func TestStderrCappedAndRateLimited(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tr := counted(newTestTransport(t, transports.Options{Logger: log, Config: json.RawMessage(`{"max_stderr_line_bytes":100,"stderr_lines_per_second":5}`)}))
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
		"demo": fixtureServer{stderr: 500}.config(t)}}}))
	register(t, tr, tmpl)
	if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines("mcp: server stderr\"")
	if len(lines) == 0 || len(lines) > 12 {
		t.Fatalf("%d stderr lines logged, want 1..12 (burst 10 + refill)", len(lines))
	}
	if !strings.Contains(lines[0], strings.Repeat("x", 100)+" …[truncated]") || strings.Contains(lines[0], strings.Repeat("x", 101)) {
		t.Errorf("the long line was not capped at 100 bytes: %.200s", lines[0])
	}
	dropped := logs.lines("stderr lines dropped")
	if len(dropped) == 0 {
		t.Fatalf("no report of dropped stderr lines")
	}
	if !strings.Contains(logs.String(), "manual=m server=demo") {
		t.Errorf("stderr records lack the manual and server")
	}
}

func TestReplaceGetsItsOwnSession(t *testing.T) {
	marker := newMarker()
	tr := counted(newTestTransport(t, transports.Options{}))
	tmplFor := func(version string) *utcp.CallTemplate {
		cfg := fixtureServer{marker: marker}.config(t)
		cfg["env"].(map[string]string)["VERSION"] = version
		return parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"demo": cfg}}}))
	}
	old, repl := tmplFor("1"), tmplFor("2")
	register(t, tr, old)
	register(t, tr, repl) // Replace: new template, same manual name
	if n := len(markedProcesses(t, marker)); n != 2 {
		t.Fatalf("%d processes, want one per template", n)
	}
	if err := tr.DeregisterManual(t.Context(), old); err != nil { // the gateway retires the old one
		t.Fatal(err)
	}
	mustCall(t, tr, repl, "demo.echo", nil)
	if n := len(markedProcesses(t, marker)); n != 1 {
		t.Errorf("%d processes after retiring the old template, want 1", n)
	}
	// A call carrying the old template (variables re-resolved, say) falls
	// back to the manual's newest registration.
	mustCall(t, tr, old, "demo.echo", nil)
	if err := tr.DeregisterManual(t.Context(), repl); err != nil {
		t.Fatal(err)
	}
	if _, err := callTool(t, tr, repl, "demo.echo", nil); !errors.Is(err, transports.ErrNotRegistered) {
		t.Errorf("after the last deregistration: err = %v, want ErrNotRegistered", err)
	}
}

func TestRegisterFailures(t *testing.T) {
	tr := newTestTransport(t, transports.Options{})
	for name, server := range map[string]map[string]any{
		"missing command":   {"command": "/nonexistent/mcp-server"},
		"exits at once":     {"command": "/bin/sh", "args": []string{"-c", "echo broken config >&2; exit 3"}},
		"not an MCP server": {"command": "/bin/sh", "args": []string{"-c", "echo hello; sleep 30"}, "timeout": 1},
		"refused URL":       {"url": "http://127.0.0.1:1/mcp", "timeout": 2},
		"insecure URL":      {"url": "http://example.com/mcp"},
	} {
		t.Run(name, func(t *testing.T) {
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"x": server}}}))
			start := time.Now()
			_, err := tr.RegisterManual(t.Context(), tmpl)
			if err == nil {
				t.Fatalf("RegisterManual succeeded")
			}
			if code := utcp.CodeOf(err); code != utcp.CodeDiscoveryFailed {
				t.Errorf("code %s (%v), want discovery_failed", code, err)
			}
			if name == "exits at once" && !strings.Contains(err.Error(), "broken config") {
				t.Errorf("error %q lacks the server's stderr", err)
			}
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("took %v", took)
			}
			t.Logf("%v", err)
		})
	}
}

// ---- HTTP sessions ----

func TestHTTPSessionExpiry(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := fixture.New()
			hf := newHTTPFixture(t, f, mcpserver.Options{})
			tr := newTestTransport(t, transports.Options{})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"url": hf.url()}}}}))
			register(t, tr, tmpl)
			mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 1})
			hf.expire(status)
			got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 2, "b": 2})
			if diff := cmp.Diff(map[string]any{"sum": 4.0}, normalize(got)); diff != "" {
				t.Errorf("add after expiry (-want +got):\n%s", diff)
			}
			if n := f.Calls(); n != 2 {
				t.Errorf("the backend ran %d calls, want 2 (the refused one is retried, never run twice)", n)
			}
			s := serverOf(t, tr, tmpl, "demo")
			transporttest.WaitUntil(t, 5*time.Second, "the session count", func() bool { return s.restarts.Load() == 1 })
		})
	}
}

func TestHTTPHeadersAndAuth(t *testing.T) {
	hf := newHTTPFixture(t, fixture.New(), mcpserver.Options{})
	tr := counted(newTestTransport(t, transports.Options{}))
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{
		"config": map[string]any{"mcpServers": map[string]any{"demo": map[string]any{"url": hf.url(), "headers": map[string]string{"X-Tenant": "t1"}}}},
		"auth":   map[string]any{"auth_type": "api_key", "api_key": "sekret", "var_name": "X-Api-Key"},
	}))
	register(t, tr, tmpl)
	mustCall(t, tr, tmpl, "demo.echo", nil)
	if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	for _, r := range hf.requests() {
		methods[r.Method] = true
		if r.Header.Get("X-Tenant") != "t1" || r.Header.Get("X-Api-Key") != "sekret" {
			t.Errorf("%s request without the headers: %v", r.Method, r.Header)
		}
	}
	for _, m := range []string{"POST", "GET", "DELETE"} {
		if !methods[m] {
			t.Errorf("no %s request seen (%v)", m, methods)
		}
	}
}

func TestLegacySSE(t *testing.T) {
	srv := mcpserver.New(fixture.New(), mcpserver.Options{})
	ts := httptest.NewServer(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv.MCP() }, nil))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	for _, transport := range []string{"http", "sse"} { // http falls back after the 4xx
		t.Run(transport, func(t *testing.T) {
			tr := newTestTransport(t, transports.Options{})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"url": ts.URL, "transport": transport}}}}))
			register(t, tr, tmpl)
			if kind := serverOf(t, tr, tmpl, "demo").cur.kind; kind != "sse" {
				t.Errorf("session kind %s, want sse", kind)
			}
			got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2})
			if diff := cmp.Diff(map[string]any{"sum": 3.0}, normalize(got)); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 3}})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				ev, err := st.Recv()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("Recv: %v", err)
					}
					break
				}
				if ev.Type == "progress" {
					n++
				}
			}
			if n != 3 {
				t.Errorf("%d progress events over legacy SSE, want 3", n)
			}
		})
	}
}

// ---- the real third-party peer: @modelcontextprotocol/server-everything ----

// peerScript returns node and the server-everything entry point. Without
// UTCPD_NPM_PEERS=1 the test is skipped; with it, a missing peer fails.
func peerScript(t testing.TB) (node, script string) {
	t.Helper()
	peer := transporttest.NPMPeer(t, "@modelcontextprotocol/server-everything")
	return peer.Node, filepath.Join(peer.Modules, "@modelcontextprotocol", "server-everything", "dist", "index.js")
}

// peerHTTP runs server-everything in mode ("streamableHttp" or "sse") on
// port (0: a free one), bound to 127.0.0.1, and returns its endpoint URL
// and a stop function (also run at cleanup).
func peerHTTP(t testing.TB, node, script, mode string, port int) (string, int, func()) {
	t.Helper()
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	preload, _ := filepath.Abs(filepath.Join("testdata", "peer", "loopback.cjs"))
	cmd := exec.Command(node, script, mode)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "NODE_OPTIONS=--require "+preload)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	transporttest.WaitUntil(t, 20*time.Second, "server-everything to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	path := "/mcp"
	if mode == "sse" {
		path = "/sse"
	}
	return "http://" + addr + path, port, stop
}

func TestServerEverything(t *testing.T) {
	node, script := peerScript(t)
	for _, kind := range []string{"stdio", "http", "legacy-sse"} {
		t.Run(kind, func(t *testing.T) {
			var server map[string]any
			var restart func()
			switch kind {
			case "stdio":
				t.Setenv("UTCPD_TEST_SECRET", "must-not-leak")
				server = map[string]any{"command": node, "args": []string{script, "stdio"}, "env": map[string]string{"FROM_TEMPLATE": "yes"}}
			case "http":
				url, port, stop := peerHTTP(t, node, script, "streamableHttp", 0)
				server = map[string]any{"url": url}
				restart = func() {
					stop()
					peerHTTP(t, node, script, "streamableHttp", port)
				}
			case "legacy-sse":
				// No transport given: Streamable HTTP is refused and the
				// legacy HTTP+SSE transport is used.
				url, _, _ := peerHTTP(t, node, script, "sse", 0)
				server = map[string]any{"url": url}
			}
			tr := newTestTransport(t, transports.Options{Logger: peerLogger(t)})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{"everything": server}}}))
			m := register(t, tr, tmpl)
			if kind == "legacy-sse" {
				if k := serverOf(t, tr, tmpl, "everything").cur.kind; k != "sse" {
					t.Errorf("session kind %s, want sse", k)
				}
			}
			var names []string
			for _, tool := range m.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"everything.echo", "everything.get-sum", "everything.get-structured-content", "everything.get-tiny-image", "everything.trigger-long-running-operation"} {
				if !slices.Contains(names, want) {
					t.Errorf("tool %s not discovered (got %v)", want, names)
				}
			}

			if got := mustCall(t, tr, tmpl, "everything.echo", map[string]any{"message": "héllo"}); got != "Echo: héllo" {
				t.Errorf("echo = %#v", got)
			}
			if got := mustCall(t, tr, tmpl, "everything.get-sum", map[string]any{"a": 2, "b": 40}); got != "The sum of 2 and 40 is 42." {
				t.Errorf("get-sum = %#v", got)
			}
			weather, ok := mustCall(t, tr, tmpl, "everything.get-structured-content", map[string]any{"location": "New York"}).(map[string]any)
			if !ok || weather["conditions"] == nil || weather["temperature"] == nil || weather["humidity"] == nil {
				t.Errorf("get-structured-content = %#v, want the structured weather object", weather)
			}
			img, _ := mustCall(t, tr, tmpl, "everything.get-tiny-image", nil).(map[string]any)
			found := false
			for _, b := range img["content"].([]any) {
				block := b.(map[string]any)
				if block["type"] == "image" && block["mimeType"] == "image/png" {
					data, err := base64.StdEncoding.DecodeString(block["data"].(string))
					found = err == nil && bytes.HasPrefix(data, []byte("\x89PNG"))
				}
			}
			if !found {
				t.Errorf("get-tiny-image has no PNG image block: %.300v", img)
			}
			_, err := callTool(t, tr, tmpl, "everything.get-sum", map[string]any{"a": "x", "b": 1})
			var te *utcp.ToolError
			if !errors.As(err, &te) || !strings.Contains(te.Message, "Input validation error") {
				t.Errorf("get-sum with a bad argument: err = %v, want a ToolError", err)
			}
			if _, err := callTool(t, tr, tmpl, "everything.nope", nil); !errors.Is(err, transports.ErrToolNotFound) {
				t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
			}

			// A long-running operation streams its progress, then its result.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "everything.trigger-long-running-operation", Template: tmpl,
				Arguments: map[string]any{"duration": 1, "steps": 3}})
			if err != nil {
				t.Fatal(err)
			}
			var events []any
			for {
				ev, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				events = append(events, normalize(ev))
			}
			_ = st.Close()
			if len(events) != 4 {
				t.Fatalf("events %v, want 3 progress and the result", events)
			}
			for i, ev := range events[:3] {
				data := ev.(map[string]any)["data"].(map[string]any)
				if data["progress"] != float64(i+1) || data["total"] != 3.0 {
					t.Errorf("progress event %d = %v", i, ev)
				}
			}
			if last := events[3].(map[string]any); last["type"] != "result" || !strings.Contains(fmt.Sprint(last["data"]), "Long running operation completed") {
				t.Errorf("last event = %v", last)
			}
			// Cancelling a long operation returns at once.
			start := time.Now()
			ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
			_, err = tr.CallTool(ctx2, &utcp.Call{Manual: "m", Name: "everything.trigger-long-running-operation", Template: tmpl, Arguments: map[string]any{"duration": 10, "steps": 2}})
			cancel2()
			if utcp.CodeOf(err) != utcp.CodeTimeout || time.Since(start) > 2*time.Second {
				t.Errorf("cancelled call: %v after %v", err, time.Since(start))
			}

			switch kind {
			case "stdio":
				env := fmt.Sprint(mustCall(t, tr, tmpl, "everything.get-env", nil))
				if !strings.Contains(env, "FROM_TEMPLATE") || strings.Contains(env, "must-not-leak") {
					t.Errorf("server environment: template env missing or a non-allowlisted variable leaked: %.500s", env)
				}
			case "http":
				// A restarted server forgets the session and answers 400
				// ("No valid session ID"): the transport re-initialises and
				// retries the call once.
				restart()
				if got := mustCall(t, tr, tmpl, "everything.echo", map[string]any{"message": "again"}); got != "Echo: again" {
					t.Errorf("echo after the server restarted = %#v", got)
				}
			}
		})
	}
}

// ---- benchmarks ----

// benchTarget is a stdio MCP server to benchmark against.
type benchTarget struct {
	name    string
	command string
	args    []string
	env     map[string]string
	tool    string
	arg     map[string]any
}

func benchTargets(b *testing.B) []benchTarget {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	targets := []benchTarget{{name: "go-fixture", command: exe, env: map[string]string{envFixture: "stdio"},
		tool: "echo", arg: map[string]any{"message": "hi"}}}
	if os.Getenv("UTCPD_NPM_PEERS") == "1" {
		node, script := peerScript(b)
		targets = append(targets, benchTarget{name: "server-everything", command: node, args: []string{script, "stdio"},
			tool: "echo", arg: map[string]any{"message": "hi"}})
	}
	return targets
}

// BenchmarkStdioCalls compares tools/call throughput through the transport
// with the go-sdk client calling the same server directly, sequentially
// and with 32 concurrent callers over one session.
//
//	go test -run '^$' -bench StdioCalls -benchtime 3s ./transports/mcp/
//	UTCPD_NPM_PEERS=1 go test -run '^$' -bench StdioCalls -benchtime 3s ./transports/mcp/
func BenchmarkStdioCalls(b *testing.B) {
	for _, tgt := range benchTargets(b) {
		b.Run(tgt.name+"/transport", func(b *testing.B) {
			tr := newTestTransport(b, transports.Options{})
			tmpl := parse(b, transporttest.Template(b, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"s": map[string]any{"command": tgt.command, "args": tgt.args, "env": tgt.env}}}}))
			register(b, tr, tmpl)
			call := func() {
				if _, err := tr.CallTool(context.Background(), &utcp.Call{Manual: "m", Name: "s." + tgt.tool, Template: tmpl, Arguments: tgt.arg}); err != nil {
					b.Fatal(err)
				}
			}
			runBench(b, call)
		})
		b.Run(tgt.name+"/go-sdk", func(b *testing.B) {
			cmd := exec.Command(tgt.command, tgt.args...)
			cmd.Env = os.Environ()
			for k, v := range tgt.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = cs.Close() })
			call := func() {
				if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tgt.tool, Arguments: tgt.arg}); err != nil {
					b.Fatal(err)
				}
			}
			runBench(b, call)
		})
	}
}

func runBench(b *testing.B, call func()) {
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			call()
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
	b.Run("concurrent32", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				call()
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	})
}

// BenchmarkTwentyStdioServers registers one manual with 20 stdio servers
// and reports the time it takes, the daemon's heap and goroutines, and
// the servers' resident memory.
//
//	go test -run '^$' -bench TwentyStdioServers -benchtime 3x ./transports/mcp/
func BenchmarkTwentyStdioServers(b *testing.B) {
	for _, tgt := range benchTargets(b) {
		b.Run(tgt.name, func(b *testing.B) {
			for b.Loop() {
				marker := newMarker()
				servers := map[string]any{}
				for i := range 20 {
					env := map[string]string{envMarker: marker}
					for k, v := range tgt.env {
						env[k] = v
					}
					servers[fmt.Sprintf("s%02d", i)] = map[string]any{"command": tgt.command, "args": tgt.args, "env": env}
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				goroutines := runtime.NumGoroutine()
				tr, err := New(transports.Options{Logger: discard()})
				if err != nil {
					b.Fatal(err)
				}
				tmpl := parse(b, transporttest.Template(b, Type, map[string]any{"config": map[string]any{"mcpServers": servers}}))
				start := time.Now()
				m := register(b, tr, tmpl)
				b.ReportMetric(time.Since(start).Seconds()*1000, "register-ms")
				if len(m.Tools) < 20 {
					b.Fatalf("%d tools", len(m.Tools))
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(runtime.NumGoroutine()-goroutines), "goroutines")
				var rss int64
				for _, pid := range markedProcesses(b, marker) {
					rss += vmRSS(pid)
				}
				b.ReportMetric(float64(rss)/(1<<20), "servers-RSS-MiB")
				start = time.Now()
				_ = tr.Close()
				b.ReportMetric(time.Since(start).Seconds()*1000, "close-ms")
				if left := markedProcesses(b, marker); len(left) > 0 {
					b.Fatalf("processes left after Close: %v", left)
				}
			}
		})
	}
}

// vmRSS returns the resident set size of pid in bytes.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// peerLogger logs to the test log when UTCPD_MCP_TEST_LOG is set.
func peerLogger(t testing.TB) *slog.Logger {
	if os.Getenv("UTCPD_MCP_TEST_LOG") == "" {
		return discard()
	}
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
