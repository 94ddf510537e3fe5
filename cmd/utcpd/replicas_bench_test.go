package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/utcpd/utcpd/internal/loadgen"
	"github.com/utcpd/utcpd/internal/pgtest"
)

// BenchmarkReplicaCalls measures tool calls per second through the REST
// front of 1 and of 3 replicas sharing one PostgreSQL database, with the
// load spread evenly (round robin: a third of the workers on each
// replica), against the same in-process demo backend. Every process runs
// on the same machine, so the replicas share its cores with the backend,
// the load generator and PostgreSQL. Run it without -race:
//
//	go test -run '^$' -bench ReplicaCalls -benchtime 1x ./cmd/utcpd/
func BenchmarkReplicaCalls(b *testing.B) {
	srv := pgtest.New(b)
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			be := startBackend(b)
			dsn := srv.Database(b)
			var ps []*proc
			for range n {
				ps = append(ps, startDaemon(b, daemonOpts{
					args: []string{"--log-level", "warn"},
					env:  []string{"UTCPD_STORE=" + dsn},
				}))
			}
			if st, body := request(b, http.MethodPost, ps[0].URL+"/admin/manuals", "", be.template("demo")); st != http.StatusCreated {
				b.Fatalf("register: %d %s", st, body)
			}
			for _, p := range ps {
				eventually(b, 5*time.Second, "demo on every replica", func() bool { return toolNames(b, p)["demo.add"] })
			}
			const workers = 48
			var total float64
			var all []*loadgen.Result
			for range b.N {
				var mu sync.Mutex
				var wg sync.WaitGroup
				var results []*loadgen.Result
				for _, p := range ps {
					wg.Go(func() {
						r, err := loadgen.Run(context.Background(), loadgen.Target{
							URL:    p.URL + "/v1/tools/demo.add/call",
							Body:   []byte(`{"arguments": {"a": 1, "b": 2}}`),
							Header: http.Header{"Content-Type": {"application/json"}},
						}, loadgen.Options{Concurrency: workers / len(ps), Duration: 3 * time.Second, Warmup: 20})
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						results = append(results, r)
						mu.Unlock()
					})
				}
				wg.Wait()
				for _, r := range results {
					if r.Errors > 0 {
						b.Fatalf("%d errors: %v", r.Errors, r.FirstError)
					}
					total += r.Throughput()
				}
				all = append(all, results...)
			}
			merged := loadgen.Merge(all...)
			b.ReportMetric(total/float64(b.N), "calls/s")
			b.ReportMetric(float64(merged.Percentile(.5).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(merged.Percentile(.99).Microseconds())/1000, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
