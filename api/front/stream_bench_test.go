package front_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/examples/servers/sse/sseserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/eventstream"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/sse"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// readStream sends req and reads its SSE events to the end. It returns the
// time to the first event whose type is in want ("" matches an event
// without a type), the number of such events, and the bytes read.
func readStream(b *testing.B, client *http.Client, req *http.Request, want string) (time.Duration, int, int64) {
	b.Helper()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("%s: %s: %s", req.URL, resp.Status, body)
	}
	cr := &countingReader{r: resp.Body}
	rd := eventstream.NewReader(cr, 0)
	var first time.Duration
	n := 0
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if ev.Type != want {
			continue
		}
		if n == 0 {
			first = time.Since(start)
		}
		n++
	}
	return first, n, cr.n
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkStreamFrontVsDirect measures streaming through the gateway: the
// fixture's count tool streams n events from the SSE demo server, read
// directly (GET /tools/count?n=N) and through the REST front (POST
// /v1/tools/demo.count/stream, each event re-encoded as "event: chunk"),
// alternating in one process. Reported: events/s and MB/s of each, their
// ratio (gateway / direct), and the time to the first event of each,
// measured on one-event streams so it is not skewed by the previous
// stream's garbage.
//
//	go test -run '^$' -bench StreamFrontVsDirect -benchtime 20x ./api/front/
func BenchmarkStreamFrontVsDirect(b *testing.B) {
	const n = 5000
	direct := serve(b, sseserver.Handler(fixture.New()))
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Close() })
	h, err := api.New(api.Options{Gateway: g})
	if err != nil {
		b.Fatal(err)
	}
	front := serve(b, h)
	manual := fmt.Appendf(nil, `{"name":"demo","call_template_type":"sse","url":%q}`, direct+"/utcp")
	if _, err := g.RegisterManual(context.Background(), manual, gateway.RegisterOptions{Source: "api"}); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	body := fmt.Appendf(nil, `{"arguments":{"n":%d}}`, n)
	one := []byte(`{"arguments":{"n":1}}`)

	var dTime, gTime, dFirst, gFirst time.Duration
	var dBytes, gBytes int64
	for b.Loop() {
		req, _ := http.NewRequestWithContext(b.Context(), "GET", fmt.Sprintf("%s/tools/count?n=%d", direct, n), nil)
		req.Header.Set("Accept", "text/event-stream")
		start := time.Now()
		_, got, nb := readStream(b, client, req, "")
		dTime += time.Since(start)
		dBytes += nb
		if got != n {
			b.Fatalf("direct: %d events, want %d", got, n)
		}

		req, _ = http.NewRequestWithContext(b.Context(), "POST", front+"/v1/tools/demo.count/stream", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		start = time.Now()
		_, got, nb = readStream(b, client, req, "chunk")
		gTime += time.Since(start)
		gBytes += nb
		if got != n {
			b.Fatalf("gateway: %d events, want %d", got, n)
		}

		// Time to first event, on a one-event stream of each.
		req, _ = http.NewRequestWithContext(b.Context(), "GET", direct+"/tools/count?n=1", nil)
		req.Header.Set("Accept", "text/event-stream")
		first, _, _ := readStream(b, client, req, "")
		dFirst += first
		req, _ = http.NewRequestWithContext(b.Context(), "POST", front+"/v1/tools/demo.count/stream", bytes.NewReader(one))
		req.Header.Set("Content-Type", "application/json")
		first, _, _ = readStream(b, client, req, "chunk")
		gFirst += first
	}
	runs := float64(b.N)
	dRate := float64(n) * runs / dTime.Seconds()
	gRate := float64(n) * runs / gTime.Seconds()
	b.ReportMetric(dRate, "direct-events/s")
	b.ReportMetric(gRate, "gateway-events/s")
	b.ReportMetric(gRate/dRate, "ratio")
	b.ReportMetric(float64(dBytes)/dTime.Seconds()/1e6, "direct-MB/s")
	b.ReportMetric(float64(gBytes)/gTime.Seconds()/1e6, "gateway-MB/s")
	b.ReportMetric(float64(dFirst.Microseconds())/runs, "direct-first-µs")
	b.ReportMetric(float64(gFirst.Microseconds())/runs, "gateway-first-µs")
}
