package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// noop is an in-process transport whose manual lists n tools and whose
// calls return their arguments. It measures the gateway's own overhead.
type noop struct{}

type noopSpec struct {
	Tools int `json:"tools"`
}

func noopInfo() transports.Info {
	return transports.Info{
		Type: "noop",
		ParseTemplate: func(raw json.RawMessage) (utcp.CallTemplate, error) {
			return transports.DecodeTemplate(raw, new(noopSpec))
		},
		New: func(transports.Options) (transports.Transport, error) { return &noop{}, nil },
	}
}

func (n *noop) RegisterManual(_ context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec := tmpl.Spec.(*noopSpec)
	m := &utcp.Manual{UTCPVersion: utcp.Version, Tools: make([]utcp.Tool, spec.Tools)}
	for i := range m.Tools {
		m.Tools[i] = utcp.Tool{
			Name:        fmt.Sprintf("tool_%d", i),
			Description: fmt.Sprintf("Tool number %d of manual %s does word%d things", i, tmpl.Name, i%50),
			Tags:        []string{fmt.Sprintf("tag%d", i%20), "bench"},
		}
	}
	return m, nil
}

func (n *noop) Release(context.Context, *utcp.CallTemplate) error { return nil }

func (n *noop) CallTool(_ context.Context, call *utcp.Call) (*utcp.Result, error) {
	return &utcp.Result{Value: call.Arguments}, nil
}

func (n *noop) Close() error { return nil }

func newNoopGateway(tb testing.TB) *gateway.Gateway {
	tb.Helper()
	reg := transports.NewRegistry()
	if err := reg.Register(noopInfo()); err != nil {
		tb.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: reg})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = g.Close() })
	return g
}

func registerNoop(tb testing.TB, g *gateway.Gateway, name string, tools int) {
	tb.Helper()
	raw := fmt.Appendf(nil, `{"name":%q,"call_template_type":"noop","tools":%d}`, name, tools)
	if _, err := g.RegisterManual(context.Background(), raw, gateway.RegisterOptions{Source: "api"}); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkCallToolNoop measures gateway.CallTool to an in-process no-op
// transport: guard, resolve, protocol check, dispatch.
func BenchmarkCallToolNoop(b *testing.B) {
	g := newNoopGateway(b)
	registerNoop(b, g, "bench", 10)
	args := map[string]any{"x": 1}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.CallTool(ctx, "bench.tool_3", args, gateway.CallOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallToolNoopParallel is the same under parallel load.
func BenchmarkCallToolNoopParallel(b *testing.B) {
	g := newNoopGateway(b)
	registerNoop(b, g, "bench", 10)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		args := map[string]any{"x": 1}
		for pb.Next() {
			if _, err := g.CallTool(ctx, "bench.tool_3", args, gateway.CallOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRegister100k registers 1,000 manuals of 100 tools each and
// reports the heap they take.
func BenchmarkRegister100k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g := newNoopGateway(b)
		b.StartTimer()
		for i := range 1000 {
			registerNoop(b, g, fmt.Sprintf("manual_%d", i), 100)
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
		if n := len(g.ListTools(context.Background())); n != 100000 {
			b.Fatalf("registered %d tools", n)
		}
		_ = g.Close()
		b.StartTimer()
	}
}

// BenchmarkSearch100k searches 100,000 registered tools.
func BenchmarkSearch100k(b *testing.B) {
	g := newNoopGateway(b)
	for i := range 1000 {
		registerNoop(b, g, fmt.Sprintf("manual_%d", i), 100)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := g.SearchTools(context.Background(), "find word7 things for tag3", 10, nil); len(got) != 10 {
			b.Fatalf("got %d tools", len(got))
		}
	}
}

// BenchmarkRefreshPinned refreshes a manual of 10,000 tools whose
// definitions did not change, with pin off and with pin hold (hash every
// tool, compare with the pin in memory): the pin check's cost.
func BenchmarkRefreshPinned(b *testing.B) {
	for _, pin := range []string{"off", "hold"} {
		b.Run(pin, func(b *testing.B) {
			g := newNoopGateway(b)
			raw := fmt.Appendf(nil, `{"name":"big","call_template_type":"noop","tools":10000,"pin":%q}`, pin)
			if _, err := g.RegisterManual(context.Background(), raw, gateway.RegisterOptions{Source: "api"}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := g.RefreshManual(context.Background(), "big"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
