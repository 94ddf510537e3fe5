package front_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/loadgen"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

var (
	benchRound  = flag.Duration("loadgen.round", time.Second, "BenchmarkFrontVsDirect: length of one measured round")
	benchRounds = flag.Int("loadgen.rounds", 3, "BenchmarkFrontVsDirect: rounds per target, interleaved direct/gateway")
)

// serve serves h on 127.0.0.1:0 until the benchmark ends.
func serve(b *testing.B, h http.Handler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: httpserver.MaxHeaderBytes}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// BenchmarkFrontVsDirect measures what the REST front adds to a tool call:
// the same closed-loop load generator calls the demo HTTP tool server
// directly (GET /tools/add?a=1&b=2) and through the gateway (POST
// /v1/tools/demo.add/call), in interleaved rounds in one process, at
// concurrency 1 and 32. The gateway runs as the daemon would: observer
// with metrics and one JSON log line per call (to io.Discard).
//
// Reported: p50 and p99 of each path in µs, the added p50, the
// throughput of each and their ratio (gateway / direct), and the CPU time
// the whole process spent per request on each path (client, gateway and
// backend all run here), whose ratio predicts the throughput ratio on an
// otherwise idle CPU-bound machine and is far less sensitive to other
// load than throughput is. For reference it
// also measures a bare net/http forwarding hop (no JSON, no gateway),
// which bounds what any net/http-based gateway can reach. Run with
//
//	go test -run '^$' -bench FrontVsDirect -benchtime 1x ./api/front/
func BenchmarkFrontVsDirect(b *testing.B) {
	f := fixture.New()
	direct := serve(b, httpserver.Handler(f))

	reg := prometheus.NewRegistry()
	obs := api.NewObserver(slog.New(slog.NewJSONHandler(io.Discard, nil)), reg)
	g, err := gateway.New(gateway.Options{Transports: transports.Default, OnCall: obs.OnCall})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	h, err := api.New(api.Options{Gateway: g, Observer: obs})
	if err != nil {
		b.Fatal(err)
	}
	front := serve(b, h)
	manual := fmt.Appendf(nil, `{"name":"demo","call_template_type":"http","url":%q}`, direct+"/utcp")
	if _, err := g.RegisterManual(context.Background(), manual, gateway.RegisterOptions{Source: "api"}); err != nil {
		b.Fatal(err)
	}

	// hop is the floor of any HTTP-to-HTTP gateway built on net/http: a
	// handler that forwards the same GET to the backend over a pooled
	// keep-alive client and copies the answer back, doing nothing else.
	hopClient := loadgen.NewClient(64)
	hop := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", direct+"/tools/add?"+r.URL.RawQuery, nil)
		resp, err := hopClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, resp.Body)
	}))

	targets := []struct {
		name string
		t    loadgen.Target
	}{
		{"direct", loadgen.Target{Method: "GET", URL: direct + "/tools/add?a=1&b=2"}},
		{"gateway", loadgen.Target{Method: "POST", URL: front + "/v1/tools/demo.add/call",
			Body: []byte(`{"arguments":{"a":1,"b":2}}`), Header: http.Header{"Content-Type": {"application/json"}}}},
		{"bare-hop", loadgen.Target{Method: "GET", URL: hop + "/add?a=1&b=2"}},
	}
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			// One client per target, so neither reuses the other's
			// connections; the same generator and settings for both.
			clients := []*http.Client{loadgen.NewClient(conc), loadgen.NewClient(conc), loadgen.NewClient(conc)}
			results := [3][]*loadgen.Result{}
			for round := 0; round < *benchRounds; round++ {
				for i, tg := range targets {
					warm := 0
					if round == 0 {
						warm = 50
					}
					res, err := loadgen.Run(b.Context(), tg.t, loadgen.Options{
						Concurrency: conc, Duration: *benchRound, Warmup: warm, Client: clients[i],
					})
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors > 0 {
						b.Fatalf("%s: %d errors, first: %v", tg.name, res.Errors, res.FirstError)
					}
					results[i] = append(results[i], res)
				}
			}
			d, gw, bare := loadgen.Merge(results[0]...), loadgen.Merge(results[1]...), loadgen.Merge(results[2]...)
			us := func(x time.Duration) float64 { return float64(x) / float64(time.Microsecond) }
			b.ReportMetric(us(d.Percentile(.5)), "p50-direct-µs")
			b.ReportMetric(us(gw.Percentile(.5)), "p50-gateway-µs")
			b.ReportMetric(us(gw.Percentile(.5)-d.Percentile(.5)), "added-p50-µs")
			b.ReportMetric(us(d.Percentile(.99)), "p99-direct-µs")
			b.ReportMetric(us(gw.Percentile(.99)), "p99-gateway-µs")
			b.ReportMetric(d.Throughput(), "direct-req/s")
			b.ReportMetric(gw.Throughput(), "gateway-req/s")
			b.ReportMetric(gw.Throughput()/d.Throughput(), "throughput-ratio")
			b.ReportMetric(us(d.CPUPerRequest()), "cpu-direct-µs/req")
			b.ReportMetric(us(gw.CPUPerRequest()), "cpu-gateway-µs/req")
			b.ReportMetric(float64(d.CPUPerRequest())/float64(gw.CPUPerRequest()), "cpu-ratio")
			b.ReportMetric(us(bare.Percentile(.5)-d.Percentile(.5)), "bare-hop-added-p50-µs")
			b.ReportMetric(us(bare.CPUPerRequest()), "cpu-bare-hop-µs/req")
			b.ReportMetric(bare.Throughput()/d.Throughput(), "bare-hop-ratio")
			b.ReportMetric(float64(gw.Percentile(.5)), "ns/op")
			b.Logf("direct:  %v", d)
			b.Logf("gateway: %v", gw)
			b.Logf("bare hop: %v", bare)
		})
	}
}
