package mcpconformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "utcpd-mcpconformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	return m.Run()
}

// built are the binaries, built once by binaries.
var built struct {
	once           sync.Once
	utcpd, fixture string
	err            error
}

// binaries builds the utcpd binary (with the race detector when the test
// has it) and the fixture server once per test process, and returns
// their paths. Building happens only in tests that got past the peer
// gate.
func binaries(t testing.TB) (utcpd, fixture string) {
	t.Helper()
	built.once.Do(func() {
		build := func(out, pkg string, race bool) error {
			args := []string{"build", "-o", out}
			if race {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, pkg)...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("building %s: %w\n%s", pkg, err, b)
			}
			return nil
		}
		built.utcpd = filepath.Join(binDir, "utcpd")
		built.fixture = filepath.Join(binDir, "mcpconformance")
		if built.err = build(built.utcpd, "github.com/utcpd/utcpd/cmd/utcpd", raceEnabled); built.err != nil {
			return
		}
		built.err = build(built.fixture, "github.com/utcpd/utcpd/examples/servers/mcpconformance", false)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.utcpd, built.fixture
}

// serveFixture serves the fixture over Streamable HTTP on 127.0.0.1 in
// this process and returns its endpoint.
func serveFixture(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", confserver.New().Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// manualName and serverName name the fixture inside utcpd: its tools are
// listed as conf.everything.<tool>.
const (
	manualName = "conf"
	serverName = "everything"
)

// writeConfig writes a UTCP client configuration registering the fixture
// as an mcp manual with the given mcpServers entry, and returns its path.
func writeConfig(t testing.TB, dir string, server map[string]any) string {
	t.Helper()
	cfg := map[string]any{
		"manual_call_templates": []any{map[string]any{
			"name": manualName, "call_template_type": "mcp",
			"config": map[string]any{"mcpServers": map[string]any{serverName: server}},
		}},
		// The fixture's tools under their own names, as the suite calls
		// them (issue 16 item 6).
		"gateway": map[string]any{"mcp": map[string]any{"native_names": []string{manualName + "." + serverName}}},
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "utcpd.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cleanEnv is the test's environment without UTCPD_* variables, HOME and
// XDG_STATE_HOME inside dir.
func cleanEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "UTCPD_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+dir, "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=0") // a race binary sleeps 1 s at exit otherwise
	}
	return env
}

// startDaemon runs `utcpd serve` on 127.0.0.1:0 with the configuration at
// cfg and returns its base URL once its REST front lists the fixture's
// tools. The daemon is stopped (SIGTERM, then SIGKILL) at cleanup, and
// its log shown when the test failed.
func startDaemon(t testing.TB, utcpd, dir, cfg string) string {
	t.Helper()
	cmd := exec.Command(utcpd, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--config", cfg)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir)
	stderr := &tailBuffer{max: 256 << 10}
	cmd.Stderr = stderr
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "utcpd listening on "); ok {
				select {
				case urlc <- u:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if log := stderr.String(); strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("data race in the daemon:\n%s", log)
		} else if t.Failed() {
			t.Logf("daemon log (tail):\n%s", log)
		}
	})
	var base string
	select {
	case base = <-urlc:
	case <-done:
		t.Fatalf("utcpd serve exited before listening:\n%s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("utcpd serve did not listen within 60 s:\n%s", stderr.String())
	}
	waitTools(t, base)
	return base
}

// waitTools waits until the daemon's REST front lists the fixture's
// tools (the manual is registered in the background at start).
func waitTools(t testing.TB, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/tools?limit=1000", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), confserver.ToolSimpleText) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("utcpd did not list the fixture's tools within 60 s")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
