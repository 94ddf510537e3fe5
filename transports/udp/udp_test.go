package udp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/udp"
	"github.com/utcpd/utcpd/utcp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawServer answers each datagram on 127.0.0.1:0 with what handle
// returns (nothing for nil). It returns the port.
func rawServer(t *testing.T, handle func(req []byte) [][]byte) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 70000)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			for _, out := range handle(append([]byte(nil), buf[:n]...)) {
				_, _ = pc.WriteTo(out, addr)
			}
		}
	})
	t.Cleanup(func() { _ = pc.Close(); wg.Wait() })
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func newTransport(t *testing.T) *udp.Transport {
	t.Helper()
	tr, err := udp.New(transports.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func parse(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "m", "call_template_type": "udp", "host": "127.0.0.1"}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	tmpl, err := udp.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

func call(t *testing.T, tr *udp.Transport, tmpl *utcp.CallTemplate, name string, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return tr.CallTool(ctx, &utcp.Call{Tool: "m." + name, Manual: "m", Name: name, Template: tmpl, Arguments: args})
}

func TestTemplateValidation(t *testing.T) {
	cases := []struct {
		name  string
		field map[string]any
		want  string
	}{
		{"minimal", nil, ""},
		{"python fields", map[string]any{"number_of_response_datagrams": 0, "request_data_format": "text",
			"request_data_template": "UTCP_ARG_metric_UTCP_ARG:1|c", "response_byte_format": nil, "timeout": 30000}, ""},
		{"bad port", map[string]any{"port": 0}, "port"},
		{"bad format", map[string]any{"request_data_format": "xml"}, "request_data_format"},
		{"bad response", map[string]any{"response_format": "yaml"}, "response_format"},
		{"negative datagrams", map[string]any{"number_of_response_datagrams": -1}, "number_of_response_datagrams"},
		{"datagram cap", map[string]any{"max_datagram_size": 70000}, "max_datagram_size"},
		{"envelope with text", map[string]any{"envelope": true, "request_data_format": "text"}, "envelope"},
		{"bad byte format", map[string]any{"response_byte_format": "latin-1"}, "response_byte_format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{"name": "m", "call_template_type": "udp", "host": "127.0.0.1", "port": 9}
			for k, v := range c.field {
				m[k] = v
			}
			raw, _ := json.Marshal(m)
			_, err := udp.ParseTemplate(raw)
			if c.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want invalid_template naming %s", err, c.want)
			}
		})
	}
}

// TestEcho covers the conformance echo cases that fit one datagram.
func TestEcho(t *testing.T) {
	_, fields := serveFixture(t, fixture.New())
	tr := newTransport(t)
	tmpl := parse(t, fields)
	for _, args := range []map[string]any{
		{"text": "héllo, 世界 🌍 \u2028 \"quoted\" \\ back"},
		{"obj": map[string]any{"list": []any{1.0, "two", map[string]any{"three": true}}, "null": nil}},
		{"blob": strings.Repeat("x", 60000)},
	} {
		res, err := call(t, tr, tmpl, "echo", args)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(res.Value)
		want, _ := json.Marshal(args)
		if diff := cmp.Diff(string(want), string(got)); diff != "" && len(diff) < 3000 {
			t.Errorf("echo (-want +got):\n%s", diff)
		}
	}
	// A request too large for a datagram is refused before sending.
	_, err := call(t, tr, tmpl, "echo", map[string]any{"blob": strings.Repeat("x", 70000)})
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidArguments {
		t.Errorf("oversized request: err = %v (%s), want invalid_arguments", err, code)
	}
}

// TestFaults: a misbehaving backend always ends the call with a clear
// error within the timeout.
func TestFaults(t *testing.T) {
	env := map[string]any{"envelope": true, "timeout": 800, "max_datagram_size": 1024}
	cases := []struct {
		name     string
		fields   map[string]any
		handle   func([]byte) [][]byte
		wantCode utcp.Code
		wantText string
	}{
		{"garbage", env, func([]byte) [][]byte { return [][]byte{[]byte("\x00\xff garbage")} }, utcp.CodeTransportError, "not a utcpd envelope"},
		{"truncated envelope", env, func([]byte) [][]byte { return [][]byte{[]byte(`{"type":"res`)} }, utcp.CodeTransportError, "not a utcpd envelope"},
		{"datagram over the cap", env, func([]byte) [][]byte { return [][]byte{make([]byte, 5000)} }, utcp.CodePayloadTooLarge, "max_datagram_size"},
		{"no reply", env, func([]byte) [][]byte { return nil }, utcp.CodeTimeout, ""},
		{"no reply without envelope", map[string]any{"timeout": 300}, func([]byte) [][]byte { return nil }, utcp.CodeTimeout, ""},
		{"fewer datagrams than expected", map[string]any{"timeout": 300, "number_of_response_datagrams": 3},
			func([]byte) [][]byte { return [][]byte{[]byte("1"), []byte("2")} }, utcp.CodeTimeout, ""},
		{"json format, text answer", map[string]any{"timeout": 300, "response_format": "json"},
			func([]byte) [][]byte { return [][]byte{[]byte("hello")} }, utcp.CodeTransportError, "not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := map[string]any{"port": rawServer(t, c.handle)}
			for k, v := range c.fields {
				fields[k] = v
			}
			tr := newTransport(t)
			start := time.Now()
			_, err := call(t, tr, parse(t, fields), "t", map[string]any{"x": 1})
			if err == nil {
				t.Fatal("no error")
			}
			if code := utcp.CodeOf(err); code != c.wantCode {
				t.Errorf("CodeOf(%v) = %s, want %s", err, code, c.wantCode)
			}
			if !strings.Contains(err.Error(), c.wantText) {
				t.Errorf("error %q does not say %q", err, c.wantText)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v, want within the timeout", took)
			}
		})
	}
}

func TestPlainDatagrams(t *testing.T) {
	var mu sync.Mutex
	var got []string
	port := rawServer(t, func(req []byte) [][]byte {
		mu.Lock()
		got = append(got, string(req))
		mu.Unlock()
		if strings.HasPrefix(string(req), "stats") {
			return nil
		}
		return [][]byte{[]byte(`{"n":1}`), []byte("two"), {0xff, 0xfe}}
	})
	tr := newTransport(t)
	// Fire-and-forget: returns null once sent.
	res, err := call(t, tr, parse(t, map[string]any{"port": port, "number_of_response_datagrams": 0, "request_data_format": "text",
		"request_data_template": "stats UTCP_ARG_metric_UTCP_ARG:1|c"}), "t", map[string]any{"metric": "hits"})
	if err != nil || res.Value != nil {
		t.Fatalf("fire-and-forget = %v, %v", res, err)
	}
	res, err = call(t, tr, parse(t, map[string]any{"port": port, "number_of_response_datagrams": 3}), "t", map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"n": json.Number("1")}, "two", base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe})}
	if diff := cmp.Diff(want, res.Value); diff != "" {
		t.Errorf("three datagrams (-want +got):\n%s", diff)
	}
	res, err = call(t, tr, parse(t, map[string]any{"port": port, "response_format": "raw"}), "t", nil)
	if err != nil || res.Value != base64.StdEncoding.EncodeToString([]byte(`{"n":1}`)) {
		t.Errorf("raw = %v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got[0] != "stats hits:1|c" || got[1] != `{"a":1}` {
		t.Errorf("requests = %q", got)
	}
}

func TestLoopbackOnly(t *testing.T) {
	tr := newTransport(t)
	_, err := call(t, tr, parse(t, map[string]any{"host": "192.0.2.1", "port": 9}), "t", nil)
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || !strings.Contains(err.Error(), "allow_insecure") {
		t.Errorf("non-loopback host: err = %v, want invalid_template naming allow_insecure", err)
	}
	_, err = tr.RegisterManual(t.Context(), parse(t, map[string]any{"host": "example.com", "port": 9}))
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("RegisterManual: err = %v, want invalid_template", err)
	}
}

func TestDiscovery(t *testing.T) {
	port := rawServer(t, func(req []byte) [][]byte {
		if string(req) != `{"type":"utcp"}` {
			return nil
		}
		b, _ := json.Marshal(fixture.Manual(nil))
		return [][]byte{b}
	})
	tr := newTransport(t)
	m, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"port": port}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != len(fixture.Tools()) {
		t.Errorf("%d tools", len(m.Tools))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	silent := rawServer(t, func([]byte) [][]byte { return nil })
	if _, err := tr.RegisterManual(ctx, parse(t, map[string]any{"port": silent})); utcp.CodeOf(err) != utcp.CodeTimeout {
		t.Errorf("silent discovery: err = %v, want timeout", err)
	}
}

// BenchmarkCalls compares calls per second through the transport with a
// direct client speaking the same envelope to the same demo server, at
// concurrency 32. The direct client keeps one connected socket per
// goroutine; the transport opens one per call, as its isolation needs.
//
//	go test -run '^$' -bench Calls -benchtime 3s ./transports/udp/
func BenchmarkCalls(b *testing.B) {
	_, fields := serveFixture(b, fixture.New())
	tmpl := parse(b, fields)
	parallelism := func(b *testing.B) { b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) }
	b.Run("transport", func(b *testing.B) {
		tr, _ := udp.New(transports.Options{})
		defer tr.Close()
		parallelism(b)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := tr.CallTool(b.Context(), &utcp.Call{Manual: "m", Name: "add", Template: tmpl, Arguments: map[string]any{"a": 1, "b": 2}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	})
	b.Run("direct", func(b *testing.B) {
		addr := net.JoinHostPort(fields["host"].(string), fmt.Sprint(fields["port"]))
		parallelism(b)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			c, err := net.Dial("udp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 65536)
			i := 0
			for pb.Next() {
				i++
				req, _ := json.Marshal(udp.Frame{Type: udp.FrameCall, ID: fmt.Sprint(i), Tool: "add", Arguments: map[string]any{"a": 1, "b": 2}})
				if _, err := c.Write(req); err != nil {
					b.Error(err)
					return
				}
				n, err := c.Read(buf)
				if err != nil {
					b.Error(err)
					return
				}
				var ans map[string]any
				if err := json.Unmarshal(buf[:n], &ans); err != nil || ans["type"] != "result" {
					b.Errorf("answer %s: %v", buf[:n], err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	})
}
