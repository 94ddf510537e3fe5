package front_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/examples/servers/sse/sseserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// streamFront serves the REST front over a gateway holding the SSE demo
// server's manual as "demo".
func streamFront(t *testing.T, heartbeat time.Duration) (*fixture.Fixture, string) {
	t.Helper()
	f := fixture.New()
	backend := serveT(t, sseserver.Handler(f))
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	h, err := api.New(api.Options{Gateway: g, StreamHeartbeat: heartbeat})
	if err != nil {
		t.Fatal(err)
	}
	manual := fmt.Appendf(nil, `{"name":"demo","call_template_type":"sse","url":%q}`, backend+"/utcp")
	if _, err := g.RegisterManual(t.Context(), manual, gateway.RegisterOptions{Source: "api"}); err != nil {
		t.Fatal(err)
	}
	return f, serveT(t, h)
}

func serveT(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ln := listen(t)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func postStream(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %s", resp.Status)
	}
	return resp
}

// An idle stream writes comment heartbeats between events.
func TestStreamHeartbeat(t *testing.T) {
	_, front := streamFront(t, 30*time.Millisecond)
	resp := postStream(t, t.Context(), front+"/v1/tools/demo.count/stream", `{"arguments":{"n":2,"delay_ms":300}}`)
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	text := strings.Join(lines, "\n")
	if !strings.Contains(text, ": heartbeat") {
		t.Errorf("no heartbeat comment in the stream:\n%s", text)
	}
	if strings.Count(text, "event: chunk") != 2 || !strings.Contains(text, "event: end") {
		t.Errorf("events missing from the stream:\n%s", text)
	}
}

// The caller going away mid-stream cancels the backend call within 1 s.
func TestStreamDisconnectCancelsBackend(t *testing.T) {
	f, front := streamFront(t, time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	resp := postStream(t, ctx, front+"/v1/tools/demo.count/stream", `{"arguments":{"n":1000,"delay_ms":50}}`)
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: chunk") {
			break
		}
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(time.Second)
	for f.Canceled() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the backend did not see the cancellation within 1 s (in flight: %d)", f.InFlight())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
