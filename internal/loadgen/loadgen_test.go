package loadgen_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/internal/loadgen"
)

func server(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/fail" && n%2 == 0 {
			w.WriteHeader(500)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestRunCount(t *testing.T) {
	srv, hits := server(t)
	res, err := loadgen.Run(t.Context(), loadgen.Target{URL: srv.URL + "/ok", Body: []byte(`{"x":1}`), Header: http.Header{"Content-Type": {"application/json"}}},
		loadgen.Options{Concurrency: 4, Requests: 200, Warmup: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 200 || res.Errors != 0 || len(res.Latencies) != 200 {
		t.Errorf("result: %v", res)
	}
	if got := hits.Load(); got != 200+4*3 {
		t.Errorf("server saw %d requests, want 212", got)
	}
	p50, p99 := res.Percentile(.5), res.Percentile(.99)
	if p50 <= 0 || p99 < p50 || res.Percentile(1) < p99 || res.Throughput() <= 0 || res.Mean() <= 0 {
		t.Errorf("stats: %v", res)
	}
}

func TestRunDurationAndErrors(t *testing.T) {
	srv, _ := server(t)
	start := time.Now()
	res, err := loadgen.Run(t.Context(), loadgen.Target{URL: srv.URL + "/fail"}, loadgen.Options{Concurrency: 2, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ran %v", d)
	}
	if res.Errors == 0 || res.FirstError == nil || res.Errors+len(res.Latencies) != res.Requests {
		t.Errorf("errors not counted: %v (%v)", res, res.FirstError)
	}
}

func TestRunNeedsABound(t *testing.T) {
	if _, err := loadgen.Run(t.Context(), loadgen.Target{URL: "http://127.0.0.1:1/"}, loadgen.Options{}); !errors.Is(err, loadgen.ErrUnbounded) {
		t.Errorf("err %v", err)
	}
}

func TestPercentileAndMerge(t *testing.T) {
	a := &loadgen.Result{Requests: 2, Elapsed: time.Second, Latencies: []time.Duration{1, 3}}
	b := &loadgen.Result{Requests: 3, Errors: 1, Elapsed: time.Second, Latencies: []time.Duration{2, 4}}
	m := loadgen.Merge(a, b)
	if m.Requests != 5 || m.Errors != 1 || m.Elapsed != 2*time.Second || m.Percentile(.5) != 2 || m.Percentile(1) != 4 || m.Percentile(0) != 1 {
		t.Errorf("merge: %+v", m)
	}
	if m.Throughput() != 2 {
		t.Errorf("throughput %v", m.Throughput())
	}
	if (&loadgen.Result{}).Percentile(.5) != 0 {
		t.Errorf("empty percentile")
	}
}
