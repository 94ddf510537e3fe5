// Package loadgen is a small closed-loop HTTP load generator for
// benchmarks: N workers each send one request, wait for the whole answer,
// record its latency and send the next, until a request count or a
// duration is reached. It reports latency percentiles and throughput.
//
// It is meant for loopback benchmarks of utcpd (the REST front against
// the demo tool server it fronts), so every run is bounded: Options must
// set Requests, Duration, or both.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Target is the request every worker sends.
type Target struct {
	// Method defaults to GET, or POST when Body is set.
	Method string
	// URL is the absolute URL.
	URL string
	// Body is sent with each request (nil: none).
	Body []byte
	// Header is added to each request (Content-Type, Authorization).
	Header http.Header
}

// Options bound and shape a run.
type Options struct {
	// Concurrency is the number of workers, each with at most one
	// request outstanding (default 1).
	Concurrency int
	// Requests stops the run after this many requests in total (0: no
	// count limit).
	Requests int
	// Duration stops the run after this long (0: no time limit). A
	// request running at the deadline finishes and is counted.
	Duration time.Duration
	// Warmup is sent (per worker, not recorded) before the measured run,
	// to open connections and warm caches.
	Warmup int
	// Client sends the requests; default NewClient(Concurrency).
	Client *http.Client
	// Check judges an answer; default: status 200. A failed check counts
	// as an error and its latency is not recorded.
	Check func(status int, body []byte) error
}

// Result is what a run measured.
type Result struct {
	// Requests is the number of requests completed (successes and errors).
	Requests int
	// Errors counts failed requests; FirstError is the first failure.
	Errors     int
	FirstError error
	// Elapsed is the measured run's wall time.
	Elapsed time.Duration
	// CPU is the CPU time (user + system) the whole process used during
	// the measured run (0 where it cannot be read). When the servers under
	// test run in the same process, CPU / Requests is the total cost of
	// one request, which bounds throughput on a CPU-bound machine whatever
	// else the machine is doing.
	CPU time.Duration
	// Latencies of the successful requests, sorted ascending.
	Latencies []time.Duration
}

// Throughput returns successful requests per second.
func (r *Result) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Elapsed.Seconds()
}

// Percentile returns the latency below which a fraction p (0..1) of the
// successful requests fell (nearest rank), 0 when there were none.
func (r *Result) Percentile(p float64) time.Duration {
	n := len(r.Latencies)
	if n == 0 {
		return 0
	}
	i := int(p*float64(n)+0.5) - 1
	i = max(0, min(i, n-1))
	return r.Latencies[i]
}

// CPUPerRequest returns CPU / Requests, 0 when unknown.
func (r *Result) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests)
}

// Mean returns the mean latency of the successful requests.
func (r *Result) Mean() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	var sum time.Duration
	for _, l := range r.Latencies {
		sum += l
	}
	return sum / time.Duration(len(r.Latencies))
}

// String summarises the result on one line.
func (r *Result) String() string {
	return fmt.Sprintf("%d requests (%d errors) in %v: %.0f req/s, p50 %v, p90 %v, p99 %v, max %v, cpu/req %v",
		r.Requests, r.Errors, r.Elapsed.Round(time.Millisecond), r.Throughput(),
		r.Percentile(.5), r.Percentile(.9), r.Percentile(.99), r.Percentile(1), r.CPUPerRequest())
}

// Merge combines results of runs of the same target (for interleaved
// rounds): counts and elapsed times add up, latencies are pooled.
func Merge(rs ...*Result) *Result {
	out := &Result{}
	for _, r := range rs {
		out.Requests += r.Requests
		out.Errors += r.Errors
		if out.FirstError == nil {
			out.FirstError = r.FirstError
		}
		out.Elapsed += r.Elapsed
		out.CPU += r.CPU
		out.Latencies = append(out.Latencies, r.Latencies...)
	}
	slices.Sort(out.Latencies)
	return out
}

// NewClient returns an HTTP client for concurrency workers: keep-alive
// connections pooled (one per worker), no proxy, no compression.
func NewClient(concurrency int) *http.Client {
	concurrency = max(concurrency, 1)
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency * 2,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// ErrUnbounded is returned by Run when Options set neither Requests nor
// Duration.
var ErrUnbounded = errors.New("loadgen: set Options.Requests or Options.Duration")

// Run sends t's request from Options.Concurrency workers until the count
// or the duration is reached, or ctx ends, and returns what it measured.
func Run(ctx context.Context, t Target, o Options) (*Result, error) {
	if o.Requests <= 0 && o.Duration <= 0 {
		return nil, ErrUnbounded
	}
	o.Concurrency = max(o.Concurrency, 1)
	if o.Client == nil {
		o.Client = NewClient(o.Concurrency)
	}
	if o.Check == nil {
		o.Check = func(status int, _ []byte) error {
			if status != http.StatusOK {
				return fmt.Errorf("status %d", status)
			}
			return nil
		}
	}
	if t.Method == "" {
		t.Method = http.MethodGet
		if t.Body != nil {
			t.Method = http.MethodPost
		}
	}
	if _, err := http.NewRequestWithContext(ctx, t.Method, t.URL, nil); err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}

	workers := make([]*worker, o.Concurrency)
	for i := range workers {
		workers[i] = &worker{t: t, o: &o}
	}
	if o.Warmup > 0 {
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Go(func() {
				for range o.Warmup {
					_, _ = w.once(ctx)
				}
			})
		}
		wg.Wait()
	}

	var (
		issued atomic.Int64
		wg     sync.WaitGroup
	)
	cpu0 := processCPU()
	start := time.Now()
	deadline := time.Time{}
	if o.Duration > 0 {
		deadline = start.Add(o.Duration)
	}
	for _, w := range workers {
		w.lat = make([]time.Duration, 0, 1024)
		wg.Go(func() {
			for ctx.Err() == nil {
				if o.Requests > 0 && issued.Add(1) > int64(o.Requests) {
					return
				}
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				d, err := w.once(ctx)
				w.n++
				if err != nil {
					w.errs++
					if w.first == nil {
						w.first = err
					}
					continue
				}
				w.lat = append(w.lat, d)
			}
		})
	}
	wg.Wait()
	res := &Result{Elapsed: time.Since(start), CPU: processCPU() - cpu0}
	for _, w := range workers {
		res.Requests += w.n
		res.Errors += w.errs
		if res.FirstError == nil {
			res.FirstError = w.first
		}
		res.Latencies = append(res.Latencies, w.lat...)
	}
	slices.Sort(res.Latencies)
	return res, ctx.Err()
}

// worker is one closed loop.
type worker struct {
	t     Target
	o     *Options
	buf   bytes.Buffer
	lat   []time.Duration
	n     int
	errs  int
	first error
}

// once sends one request and reads the whole answer.
func (w *worker) once(ctx context.Context) (time.Duration, error) {
	var body io.Reader
	if w.t.Body != nil {
		body = bytes.NewReader(w.t.Body)
	}
	req, err := http.NewRequestWithContext(ctx, w.t.Method, w.t.URL, body)
	if err != nil {
		return 0, err
	}
	for k, v := range w.t.Header {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	w.buf.Reset()
	_, err = w.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if err := w.o.Check(resp.StatusCode, w.buf.Bytes()); err != nil {
		return 0, err
	}
	return d, nil
}
