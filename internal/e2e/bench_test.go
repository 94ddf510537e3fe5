package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
)

// BenchmarkEverythingCalls measures echo calls per second to
// server-everything, sequentially and with 32 concurrent callers, along
// four paths set up in the same run:
//
//   - direct: the go-sdk client over stdio, one session;
//   - gateway: gateway.CallTool, the mcp transport over stdio;
//   - supergateway-http: supergateway (npm) fronting the stdio server as
//     stateful Streamable HTTP, driven by the go-sdk client;
//   - utcpd-mcp-http: utcpd's /mcp front (api.New) fronting the gateway
//     over the same kind of stdio server, driven by the go-sdk client.
//
// The HTTP clients use protocol 2025-11-25 (one session): supergateway
// spawns a stdio server per request in its stateless (2026-07-28) mode.
// Every sub-benchmark reports calls/s; the parent logs gateway/direct.
//
//	UTCPD_NPM_PEERS=1 go test -run '^$' -bench EverythingCalls -benchtime 3s ./internal/e2e/
func BenchmarkEverythingCalls(b *testing.B) {
	p := requirePeers(b)
	args := map[string]any{"message": "hi"}

	direct := stdioSession(b, p)
	s := newStack(b, p.stdioServer())
	port := freePort(b)
	startNode(b, p, port, nil, p.supergateway,
		"--stdio", p.node+" "+p.everything+" stdio",
		"--outputTransport", "streamableHttp", "--stateful",
		"--port", strconv.Itoa(port), "--logLevel", "none")
	super := mcpSession(b, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "2025-11-25", nil)
	front := mcpSession(b, s.base+"/mcp", "2025-11-25", nil)

	sdkCall := func(sess *mcp.ClientSession, name string) func(context.Context) error {
		params := &mcp.CallToolParams{Name: name, Arguments: args}
		return func(ctx context.Context) error {
			res, err := sess.CallTool(ctx, params)
			if err == nil && (res.IsError || textOf(res) != "Echo: hi") {
				err = fmt.Errorf("%s: unexpected result %+v", name, res)
			}
			return err
		}
	}
	targets := []struct {
		name string
		call func(context.Context) error
	}{
		{"direct", sdkCall(direct, "echo")},
		{"gateway", func(ctx context.Context) error {
			res, err := s.g.CallTool(ctx, toolPrefix+"echo", args, gateway.CallOptions{})
			if err == nil && res.Value != "Echo: hi" {
				err = fmt.Errorf("gateway: unexpected result %#v", res.Value)
			}
			return err
		}},
		{"supergateway-http", sdkCall(super, "echo")},
		{"utcpd-mcp-http", sdkCall(front, toolPrefix+"echo")},
	}

	rates := map[string]float64{}
	for _, conc := range []int{1, 32} {
		for _, tg := range targets {
			name := fmt.Sprintf("%s/c%d", tg.name, conc)
			b.Run(name, func(b *testing.B) {
				rates[name] = runCalls(b, conc, tg.call)
			})
		}
	}
	for _, conc := range []string{"c1", "c32"} {
		if d, g := rates["direct/"+conc], rates["gateway/"+conc]; d > 0 {
			b.Logf("%s: gateway %.0f calls/s = %.0f%% of direct %.0f calls/s", conc, g, 100*g/d, d)
		}
		if sg, f := rates["supergateway-http/"+conc], rates["utcpd-mcp-http/"+conc]; sg > 0 {
			b.Logf("%s: utcpd /mcp %.0f calls/s = %.0f%% of supergateway %.0f calls/s", conc, f, 100*f/sg, sg)
		}
	}
}

// runCalls makes b.N calls with conc callers and reports calls/s.
func runCalls(b *testing.B, conc int, call func(context.Context) error) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	b.ResetTimer()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := call(ctx); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "calls/s")
	return rate
}
