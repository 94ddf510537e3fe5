package main

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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// binPath is the utcpd binary TestMain builds for the end-to-end tests.
var binPath string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "utcpd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "utcpd")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building utcpd: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// backend is the demo HTTP tool server, in-process on 127.0.0.1:0.
type backend struct {
	URL string
	F   *fixture.Fixture
	// Discoveries counts the requests for the manual (GET /utcp).
	Discoveries atomic.Int64
}

func startBackend(t testing.TB) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{URL: "http://" + ln.Addr().String(), F: fixture.New()}
	srv := httpserver.NewServer(ln.Addr().String(), b.F, httpserver.Options{})
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" {
			b.Discoveries.Add(1)
		}
		inner.ServeHTTP(w, r)
	})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

// template returns an http manual call template named name for the
// backend's manual.
func (b *backend) template(name string) string {
	return fmt.Sprintf(`{"name": %q, "call_template_type": "http", "http_method": "GET", "url": %q}`, name, b.URL+"/utcp")
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running utcpd serve.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	URL    string
	stderr *syncBuffer
	done   chan struct{}
	err    error // Wait's result, once done is closed
	// printedToken is the admin token a daemon without a data dir
	// printed (a string).
	printedToken atomic.Value
}

// daemonOpts configure startDaemon.
type daemonOpts struct {
	args    []string // after "serve --listen 127.0.0.1:0"
	env     []string // KEY=VALUE added to a clean environment
	dir     string   // working directory; default a new temporary one
	dataDir string   // --data-dir; default a new temporary one
	noWait  bool     // do not wait for /readyz
	bin     string   // the binary; default binPath
	sys     *syscall.SysProcAttr
}

// cleanEnv is the test process's environment without UTCPD_* variables,
// with HOME and XDG_STATE_HOME pointing into dir.
func cleanEnv(dir string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UTCPD_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+dir, "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	if os.Getenv("GORACE") == "" {
		// A race-enabled binary sleeps 1 s at exit by default.
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return append(env, extra...)
}

// startDaemon starts utcpd serve on 127.0.0.1:0, reads the address it
// prints and waits until /readyz answers 200.
func startDaemon(t testing.TB, o daemonOpts) *proc {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	args := []string{"serve", "--listen", "127.0.0.1:0"}
	if o.dataDir == "" {
		o.dataDir = filepath.Join(t.TempDir(), "data")
	}
	args = append(args, "--data-dir", o.dataDir)
	args = append(args, o.args...)
	bin := binPath
	if o.bin != "" {
		bin = o.bin
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = o.sys
	cmd.Dir = o.dir
	cmd.Env = cleanEnv(o.dir, o.env...)
	p := &proc{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if tok, ok := strings.CutPrefix(sc.Text(), "utcpd admin token (this run only; no data dir): "); ok {
				p.printedToken.Store(tok)
			}
			if u, ok := strings.CutPrefix(sc.Text(), "utcpd listening on "); ok {
				urlc <- u
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("data race in the daemon:\n%s", p.stderr.String())
		} else if t.Failed() {
			t.Logf("daemon log:\n%s", p.stderr.String())
		}
	})
	select {
	case p.URL = <-urlc:
	case <-p.done:
		t.Fatalf("daemon exited before listening: %v\n%s", p.err, p.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon did not print its address\n%s", p.stderr.String())
	}
	if !o.noWait {
		p.waitReady()
		p.learnAdminToken(o)
	}
	return p
}

// createdTokens maps the URL of a daemon started without an admin token
// to the token it created in its data dir; request and cli send it to
// that daemon when they are given none.
var createdTokens sync.Map

// learnAdminToken records the token a daemon started without one
// created in its data dir.
func (p *proc) learnAdminToken(o daemonOpts) {
	for _, kv := range o.env {
		if strings.HasPrefix(kv, "UTCPD_ADMIN_TOKEN=") {
			return
		}
	}
	for _, a := range o.args {
		if a == "--admin-token" || strings.HasPrefix(a, "--admin-token=") {
			return
		}
	}
	if tok, ok := p.printedToken.Load().(string); ok {
		createdTokens.Store(p.URL, tok)
		return
	}
	b, err := os.ReadFile(filepath.Join(o.dataDir, "admin-token"))
	if err != nil {
		return
	}
	createdTokens.Store(p.URL, strings.TrimSpace(string(b)))
}

// tokenFor returns the created admin token of the daemon url belongs to.
func tokenFor(url string) string {
	tok := ""
	createdTokens.Range(func(k, v any) bool {
		if strings.HasPrefix(url, k.(string)) {
			tok = v.(string)
			return false
		}
		return true
	})
	return tok
}

// waitReady polls /readyz until it answers 200.
func (p *proc) waitReady() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(p.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.t.Fatalf("daemon not ready after 20s\n%s", p.stderr.String())
}

// signal sends sig to the daemon.
func (p *proc) signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v: %v", sig, err)
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop() int {
	p.t.Helper()
	p.signal(syscall.SIGTERM)
	return p.wait(30 * time.Second)
}

// wait waits for the daemon to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.kill()
		p.t.Fatalf("daemon did not exit within %v\n%s", d, p.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("daemon: %v", p.err)
	}
	return 0
}

// kill sends SIGKILL (when still running) and waits.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// waitLog waits until the daemon's log contains s.
func (p *proc) waitLog(s string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(p.stderr.String(), s) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("daemon log has no %q after %v\n%s", s, d, p.stderr.String())
}

// request sends one HTTP request with an optional bearer token and JSON
// body, and returns the status and body.
func request(t testing.TB, method, url, token, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" || method == http.MethodPost || method == http.MethodPut {
		req.Header.Set("Content-Type", "application/json")
	}
	if token == "" && strings.Contains(url, "/admin/") {
		token = tokenFor(url)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// manualNames lists the daemon's manuals through the admin API.
func manualNames(t testing.TB, p *proc) map[string]string {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/admin/manuals", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /admin/manuals: %d %s", status, body)
	}
	var list struct {
		Manuals []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"manuals"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range list.Manuals {
		out[m.Name] = m.Source
	}
	return out
}

// toolNames lists the daemon's tools through the REST front.
func toolNames(t testing.TB, p *proc) map[string]bool {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/v1/tools?limit=1000", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/tools: %d %s", status, body)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, tl := range list.Tools {
		out[tl.Name] = true
	}
	return out
}

// callTool calls a tool through the REST front and returns the decoded
// answer.
func callTool(t testing.TB, p *proc, tool, args string) (status int, result map[string]any) {
	t.Helper()
	status, body := request(t, http.MethodPost, p.URL+"/v1/tools/"+tool+"/call", "", `{"arguments": `+args+`}`)
	result = map[string]any{}
	if err := json.Unmarshal(body, &result); err != nil {
		t.Fatalf("call %s: %d %s", tool, status, body)
	}
	return status, result
}

// eventually polls cond until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// cli runs the utcpd binary with args in dir and returns stdout, stderr
// and the exit code.
func cli(t testing.TB, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir, withCreatedToken(env, args)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if strings.Contains(stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("utcpd %v: data race:\n%s", args, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("utcpd %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// withCreatedToken adds UTCPD_ADMIN_TOKEN to env for a command that
// talks to a daemon started without an admin token (by UTCPD_SERVER or
// --server), as its user would read it from the daemon's data dir.
func withCreatedToken(env, args []string) []string {
	server := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "UTCPD_ADMIN_TOKEN=") {
			return env
		}
		if v, ok := strings.CutPrefix(kv, "UTCPD_SERVER="); ok {
			server = v
		}
	}
	for i, a := range args {
		if (a == "--server" || a == "-s") && i+1 < len(args) {
			server = args[i+1]
		}
	}
	if server == "" {
		return env
	}
	if tok := tokenFor(server); tok != "" {
		return append(slices.Clone(env), "UTCPD_ADMIN_TOKEN="+tok)
	}
	return env
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// randomToken returns a new random admin token for a daemon started with
// an explicit UTCPD_ADMIN_TOKEN.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
