package mcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/utcp"
)

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
