package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

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
