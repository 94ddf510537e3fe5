package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityPprofListener replays, against the built binary, the two
// ways --pprof-listen could expose the daemon's profiles (its memory, its
// command line, goroutine stacks; no credentials): an address that is not
// a loopback IP must be refused at start, exit 2, before anything
// listens; and the profiles must be reachable on their own listener
// only, never on the main one.
func TestSecurityPprofListener(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "localhost:0", "192.0.2.7:6060", "127.0.0.1"} {
		t.Run(addr, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(binPath, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--pprof-listen", addr)
			cmd.Dir = dir
			cmd.Env = cleanEnv(dir)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("--pprof-listen %s: the daemon started instead of refusing\n%s", addr, out)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
				t.Fatalf("--pprof-listen %s: %v, want exit %d\n%s", addr, err, exitUsage, out)
			}
			if !strings.Contains(string(out), "--pprof-listen") || strings.Contains(string(out), "utcpd listening on") {
				t.Errorf("--pprof-listen %s: want a refusal naming the flag, before listening; got\n%s", addr, out)
			}
		})
	}

	t.Run("own listener only", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pprofAddr := ln.Addr().String()
		ln.Close()
		p := startDaemon(t, daemonOpts{args: []string{"--pprof-listen", pprofAddr}})
		get := func(url string) (int, string) {
			t.Helper()
			resp, err := http.Get(url)
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		if code, body := get("http://" + pprofAddr + "/debug/pprof/cmdline"); code != http.StatusOK || !strings.Contains(body, "serve") {
			t.Fatalf("pprof listener: /debug/pprof/cmdline = %d %q, want 200 with the command line", code, body)
		}
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2"} {
			if code, body := get(p.URL + path); code == http.StatusOK || strings.Contains(body, "--pprof-listen") || strings.Contains(body, "goroutine ") {
				t.Errorf("main listener serves %s: %d %.200q", path, code, body)
			}
		}
	})
}
