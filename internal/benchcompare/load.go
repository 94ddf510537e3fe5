package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/loadgen"
)

// A httpTarget is one REST path under comparison.
type httpTarget struct {
	name   string
	method string
	url    string
	body   string // JSON; empty for GET
	cpu    cpuOf  // the processes serving it
}

// measurement is one timed run: calls/s of the successful calls, their
// number, and the CPU time the load generator used for them.
type measurement struct {
	rate    float64
	calls   int
	loadCPU time.Duration
}

// httpLoad runs one HTTP target for d at concurrency c with hey (when
// hey is set) or with the in-repository closed-loop generator.
func httpLoad(ctx context.Context, hey string, t httpTarget, c int, d time.Duration) (measurement, error) {
	if hey == "" {
		return builtinLoad(ctx, t, c, d)
	}
	args := []string{"-z", d.String(), "-c", strconv.Itoa(c), "-m", t.method}
	if t.body != "" {
		args = append(args, "-T", "application/json", "-d", t.body)
	}
	args = append(args, t.url)
	cmd := exec.CommandContext(ctx, hey, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return measurement{}, fmt.Errorf("hey %s: %w\n%s", t.name, err, out)
	}
	m, err := parseHey(out)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		m.loadCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return m, err
}

var (
	heyTotal  = regexp.MustCompile(`(?m)^\s*Total:\s+([0-9.]+) secs`)
	heyStatus = regexp.MustCompile(`(?m)^\s*\[(\d+)\]\s+(\d+) responses`)
	heyErrors = regexp.MustCompile(`(?m)^Error distribution:\s*\n\s*\[(\d+)\]\s+(.*)$`)
)

// parseHey reads hey's summary: the successful (200) responses over the
// total time. Any other status or an error fails the run. (hey's own
// Average has a resolution of 100 µs, too coarse here; at concurrency 1
// the mean is the wall time over the calls.)
func parseHey(out []byte) (measurement, error) {
	if m := heyErrors.FindSubmatch(out); m != nil {
		return measurement{}, fmt.Errorf("hey: %s errors, the first: %s", m[1], m[2])
	}
	t := heyTotal.FindSubmatch(out)
	if t == nil {
		return measurement{}, fmt.Errorf("hey: no total in its output:\n%s", out)
	}
	total, err := strconv.ParseFloat(string(t[1]), 64)
	if err != nil || total <= 0 {
		return measurement{}, fmt.Errorf("hey: total %q", t[1])
	}
	ok := 0
	for _, m := range heyStatus.FindAllSubmatch(out, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		if string(m[1]) != "200" {
			return measurement{}, fmt.Errorf("hey: %d responses with status %s", n, m[1])
		}
		ok += n
	}
	if ok == 0 {
		return measurement{}, fmt.Errorf("hey: no successful response:\n%s", out)
	}
	return measurement{rate: float64(ok) / total, calls: ok}, nil
}

func builtinLoad(ctx context.Context, t httpTarget, c int, d time.Duration) (measurement, error) {
	tg := loadgen.Target{Method: t.method, URL: t.url}
	if t.body != "" {
		tg.Body = []byte(t.body)
		tg.Header = map[string][]string{"Content-Type": {"application/json"}}
	}
	r, err := loadgen.Run(ctx, tg, loadgen.Options{Concurrency: c, Duration: d, Warmup: 2})
	if err != nil {
		return measurement{}, err
	}
	if r.Errors > 0 {
		return measurement{}, fmt.Errorf("%s: %d errors, the first: %v", t.name, r.Errors, r.FirstError)
	}
	// r.CPU is this whole process's, the generator's own work included.
	return measurement{rate: r.Throughput(), calls: len(r.Latencies), loadCPU: r.CPU}, nil
}

// An mcpTarget is one MCP path under comparison: a go-sdk client session
// and the name of server-everything's echo tool behind it.
type mcpTarget struct {
	name string
	sess *mcp.ClientSession
	tool string
	cpu  cpuOf // the processes serving it
}

// mcpLoad makes echo calls on one session with c callers for d. The load
// generator's CPU is this whole process's during the run: the go-sdk
// client's, and the little the harness's sampler takes.
func mcpLoad(ctx context.Context, t mcpTarget, c int, d time.Duration) (measurement, error) {
	params := &mcp.CallToolParams{Name: t.tool, Arguments: map[string]any{"message": "hi"}}
	var calls atomic.Int64
	var failed atomic.Pointer[error]
	stop := time.Now().Add(d)
	start := time.Now()
	cpu0 := cpuTime(0)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for time.Now().Before(stop) {
				res, err := t.sess.CallTool(ctx, params)
				if err == nil && (res.IsError || textOf(res) != "Echo: hi") {
					err = fmt.Errorf("%s: unexpected result %+v", t.name, res)
				}
				if err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	cpu := cpuTime(0) - cpu0
	if err := failed.Load(); err != nil {
		return measurement{}, *err
	}
	n := calls.Load()
	return measurement{rate: float64(n) / time.Since(start).Seconds(), calls: int(n), loadCPU: cpu}, nil
}

func textOf(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return strings.TrimSpace(b.String())
}
