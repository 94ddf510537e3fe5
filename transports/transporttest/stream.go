package transporttest

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Serve starts an httptest server running h, closed at cleanup, and
// returns its URL.
func Serve(t testing.TB, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Collect reads st to its end and closes it. It returns the events read
// and nil at io.EOF, or the events read before the error that ended st
// and that error.
func Collect(t testing.TB, st transports.Stream) ([]utcp.Event, error) {
	t.Helper()
	defer st.Close()
	var out []utcp.Event
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, *ev)
	}
}

// BenchEvents runs b's loop over run, which does one stream of n events
// begun at t0 and returns how many it read and the time from t0 to the
// first. Each iteration must read n, or b fails. It sets bodyBytes as the
// bytes of one iteration and reports allocations, events/s and the mean
// ns/first-event.
func BenchEvents(b *testing.B, n int, bodyBytes int64, run func(t0 time.Time) (got int, first time.Duration)) {
	b.SetBytes(bodyBytes)
	b.ReportAllocs()
	var firsts time.Duration
	start := time.Now()
	for b.Loop() {
		got, first := run(time.Now())
		firsts += first
		if got != n {
			b.Fatalf("%d events", got)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(firsts.Nanoseconds())/float64(b.N), "ns/first-event")
}

// Drain reads st to io.EOF, failing t on another error, closes it, and
// returns the number of events and the time from t0 to the first.
func Drain(t testing.TB, st transports.Stream, t0 time.Time) (int, time.Duration) {
	t.Helper()
	defer st.Close()
	got := 0
	var first time.Duration
	for {
		if _, err := st.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return got, first
		}
		if got == 0 {
			first = time.Since(t0)
		}
		got++
	}
}
