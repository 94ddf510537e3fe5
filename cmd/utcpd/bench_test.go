package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// Measurements, not assertions. Run them with
//
//	go test -run '^$' -bench 'Startup|IdleRSS' -benchtime 5x ./cmd/utcpd/
//
// BenchmarkStartup times the real binary from exec to the first 200 of
// /readyz with 1,000 manuals (5 tools each, text manuals: no network) in
// its SQLite store; BenchmarkIdleRSS reads VmRSS of the daemon a second
// after it is ready, with the quickstart configuration (one http manual,
// served by the in-process demo server) and with the 1,000 stored manuals.

const benchManuals = 1000

func BenchmarkStartup(b *testing.B) {
	data := filepath.Join(b.TempDir(), "data")
	populateStore(b, data, benchManuals)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d, took := execUntilReady(b, []string{"--data-dir", data})
		total += took
		b.StopTimer()
		if n := len(manualNames(b, d)); n != benchManuals {
			b.Fatalf("%d manuals after start, want %d", n, benchManuals)
		}
		d.kill()
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-ready")
	b.ReportMetric(0, "ns/op")
}

func BenchmarkIdleRSS(b *testing.B) {
	b.Run("quickstart", func(b *testing.B) {
		be := startBackend(b)
		src, err := os.ReadFile(filepath.Join("..", "..", "examples", "manuals", "quickstart.json"))
		if err != nil {
			b.Fatal(err)
		}
		cfg := filepath.Join(b.TempDir(), "quickstart.json")
		writeFile(b, cfg, strings.ReplaceAll(string(src), "http://127.0.0.1:8081", be.URL))
		measureRSS(b, []string{"--config", cfg, "--data-dir", filepath.Join(b.TempDir(), "data")}, 1)
	})
	b.Run("1000-stored-manuals", func(b *testing.B) {
		data := filepath.Join(b.TempDir(), "data")
		populateStore(b, data, benchManuals)
		measureRSS(b, []string{"--data-dir", data}, benchManuals)
	})
}

func measureRSS(b *testing.B, args []string, wantManuals int) {
	var total float64
	for i := 0; i < b.N; i++ {
		d, _ := execUntilReady(b, args)
		b.StopTimer()
		if n := len(manualNames(b, d)); n != wantManuals {
			b.Fatalf("%d manuals, want %d\n%s", n, wantManuals, d.stderr.String())
		}
		time.Sleep(time.Second) // background rediscovery settles; idle
		total += vmRSS(b, d.cmd.Process.Pid)
		d.kill()
		b.StartTimer()
	}
	b.ReportMetric(total/float64(b.N), "MB-RSS")
	b.ReportMetric(0, "ns/op")
}

// execUntilReady starts the binary and returns once /readyz answers 200,
// with the time from exec to then.
func execUntilReady(b *testing.B, args []string) (*proc, time.Duration) {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(dir)
	p := &proc{t: b, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.Cleanup(p.kill)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "utcpd listening on "); ok {
			p.URL = u
			break
		}
	}
	if p.URL == "" {
		b.Fatalf("no address printed\n%s", p.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(p.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, time.Since(start)
			}
		}
		if time.Since(start) > 60*time.Second {
			b.Fatalf("not ready after 60s\n%s", p.stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// populateStore writes n text manuals of the 5 fixture tools into a
// SQLite store in dir, as the gateway would after n registrations.
func populateStore(b *testing.B, dir string, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	manual := fixture.Manual(nil)
	content, err := json.Marshal(manual)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range n {
		name := fmt.Sprintf("stored_%04d", i)
		tmpl, _ := json.Marshal(map[string]any{"name": name, "call_template_type": "text", "content": string(content)})
		m := *manual
		if err := st.Put(ctx, &registry.Record{Name: name, Template: tmpl, Manual: &m, Source: registry.SourceAPI, Registered: now, Refreshed: now}); err != nil {
			b.Fatal(err)
		}
	}
}

// vmRSS returns the resident set size of process pid in MB (Linux).
func vmRSS(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS line")
	return 0
}
