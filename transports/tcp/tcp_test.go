package tcp_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/examples/servers/tcp/tcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/tcp"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// rawServer accepts connections on 127.0.0.1:0 and hands each to handle.
// It returns the port and a counter of accepted connections.
func rawServer(t *testing.T, handle func(net.Conn)) (int, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { defer c.Close(); handle(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).Port, &accepted
}

func newTransport(t *testing.T) *tcp.Transport {
	t.Helper()
	tr, err := tcp.New(transports.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func parse(t *testing.T, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "m", "call_template_type": "tcp", "host": "127.0.0.1"}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	tmpl, err := tcp.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

func call(t *testing.T, tr *tcp.Transport, tmpl *utcp.CallTemplate, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return tr.CallTool(ctx, &utcp.Call{Tool: "m.t", Manual: "m", Name: "t", Template: tmpl, Arguments: args})
}

func TestTemplateValidation(t *testing.T) {
	cases := []struct {
		name  string
		field map[string]any
		want  string // substring of the error; "" means valid
	}{
		{"minimal", nil, ""},
		{"no port", map[string]any{"port": nil}, "port"},
		{"bad port", map[string]any{"port": 70000}, "port"},
		{"bad format", map[string]any{"request_data_format": "xml"}, "request_data_format"},
		{"bad response", map[string]any{"response_format": "yaml"}, "response_format"},
		{"bad framing", map[string]any{"framing_strategy": "lines"}, "framing_strategy"},
		{"bad prefix", map[string]any{"framing_strategy": "length_prefix", "length_prefix_bytes": 3}, "length_prefix_bytes"},
		{"bad endian", map[string]any{"framing_strategy": "length_prefix", "length_prefix_endian": "middle"}, "length_prefix_endian"},
		{"fixed without length", map[string]any{"framing_strategy": "fixed_length"}, "fixed_message_length"},
		{"envelope with stream", map[string]any{"envelope": true}, "envelope"},
		{"envelope with text", map[string]any{"envelope": true, "framing_strategy": "delimiter", "request_data_format": "text"}, "envelope"},
		{"negative timeout", map[string]any{"timeout": -1}, "timeout"},
		{"python fields", map[string]any{"framing_strategy": "delimiter", "message_delimiter": "\\x00", "interpret_escape_sequences": true,
			"response_byte_format": nil, "max_response_size": 65536, "timeout": 30000}, ""},
		{"no host", map[string]any{"host": ""}, "host"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{"name": "m", "call_template_type": "tcp", "host": "127.0.0.1", "port": 9}
			for k, v := range c.field {
				if v == nil && k != "response_byte_format" {
					delete(m, k)
					continue
				}
				m[k] = v
			}
			raw, _ := json.Marshal(m)
			_, err := tcp.ParseTemplate(raw)
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

func TestRenderRequest(t *testing.T) {
	args := map[string]any{"channel": "a b", "n": json.Number("3"), "obj": map[string]any{"k": 1}}
	cases := []struct{ format, tmpl, want string }{
		{"json", "", `{"channel":"a b","n":3,"obj":{"k":1}}`},
		{"text", "READ UTCP_ARG_channel_UTCP_END UTCP_ARG_n_UTCP_ARG UTCP_ARG_obj_UTCP_END", `READ a b 3 {"k":1}`},
		{"text", "", `a b 3 {"k":1}`},
	}
	for _, c := range cases {
		got, err := tcp.RenderRequest(c.format, c.tmpl, args)
		if err != nil || string(got) != c.want {
			t.Errorf("RenderRequest(%s, %q) = %q, %v; want %q", c.format, c.tmpl, got, err, c.want)
		}
	}
	if _, err := tcp.RenderRequest("text", "X UTCP_ARG_missing_UTCP_END", args); utcp.CodeOf(err) != utcp.CodeInvalidArguments {
		t.Errorf("missing argument: err = %v, want invalid_arguments", err)
	}
}

func TestFramingRoundTrip(t *testing.T) {
	framings := []tcp.Framing{
		{Strategy: tcp.FramingDelimiter},
		{Strategy: tcp.FramingDelimiter, Delimiter: []byte("\r\n\x00")},
		{Strategy: tcp.FramingLengthPrefix, PrefixBytes: 1},
		{Strategy: tcp.FramingLengthPrefix, PrefixBytes: 2, LittleEndian: true},
		{Strategy: tcp.FramingLengthPrefix, PrefixBytes: 4},
		{Strategy: tcp.FramingLengthPrefix, PrefixBytes: 8, LittleEndian: true},
		{Strategy: tcp.FramingFixedLength, FixedLength: 5},
	}
	for _, f := range framings {
		t.Run(fmt.Sprintf("%s/%d/%q", f.Strategy, f.PrefixBytes, f.Delimiter), func(t *testing.T) {
			var wire []byte
			for _, p := range []string{"hello", "world"} {
				var err error
				if wire, err = f.Append(wire, []byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			br := bufio.NewReaderSize(strings.NewReader(string(wire)), 16)
			for _, want := range []string{"hello", "world"} {
				got, err := f.Read(br, 100)
				if err != nil || string(got) != want {
					t.Fatalf("Read = %q, %v; want %q", got, err, want)
				}
			}
			if _, err := f.Read(br, 100); !errors.Is(err, io.EOF) {
				t.Errorf("Read at the end = %v, want io.EOF", err)
			}
		})
	}
	if _, err := (tcp.Framing{Strategy: tcp.FramingLengthPrefix, PrefixBytes: 1}).Append(nil, make([]byte, 256)); err == nil {
		t.Errorf("256 bytes behind a 1-byte prefix: no error")
	}
}

// TestFaults: a misbehaving backend always ends the call with a clear
// error within the timeout, and never makes the transport buffer more
// than max_response_size.
func TestFaults(t *testing.T) {
	envelope := map[string]any{"envelope": true, "framing_strategy": "delimiter", "timeout": 1500, "max_response_size": 1024}
	prefix := map[string]any{"envelope": true, "framing_strategy": "length_prefix", "timeout": 1500, "max_response_size": 1024}
	readLine := func(c net.Conn) { _, _ = bufio.NewReader(c).ReadString('\n') }
	read4 := func(c net.Conn) {
		var p [4]byte
		br := bufio.NewReader(c)
		if _, err := io.ReadFull(br, p[:]); err == nil {
			_, _ = io.CopyN(io.Discard, br, int64(binary.BigEndian.Uint32(p[:])))
		}
	}
	hold := func(c net.Conn) { _, _ = io.Copy(io.Discard, c) } // keep the connection open, silent
	cases := []struct {
		name     string
		fields   map[string]any
		handle   func(net.Conn)
		wantCode utcp.Code
		wantText string
	}{
		{"garbage", envelope, func(c net.Conn) { readLine(c); _, _ = c.Write([]byte("\x00\xffnot json at all\n")) }, utcp.CodeTransportError, "not a utcpd envelope"},
		{"unknown frame type", envelope, func(c net.Conn) { readLine(c); _, _ = c.Write([]byte(`{"type":"bogus","id":"1"}` + "\n")) }, utcp.CodeTransportError, "unknown type"},
		{"partial delimited frame then close", envelope, func(c net.Conn) { readLine(c); _, _ = c.Write([]byte(`{"type":"res`)) }, utcp.CodeTransportError, "partial frame"},
		{"partial prefixed frame then close", prefix, func(c net.Conn) {
			read4(c)
			_, _ = c.Write([]byte{0, 0, 0, 100, '{', '"'})
		}, utcp.CodeTransportError, "partial frame"},
		{"partial frame then silence", prefix, func(c net.Conn) {
			read4(c)
			_, _ = c.Write([]byte{0, 0, 0, 100, '{', '"'})
			hold(c)
		}, utcp.CodeTimeout, ""},
		{"prefix over the cap", prefix, func(c net.Conn) {
			read4(c)
			_, _ = c.Write([]byte{0x7f, 0xff, 0xff, 0xff})
			hold(c)
		}, utcp.CodePayloadTooLarge, ""},
		{"delimited frame over the cap", envelope, func(c net.Conn) {
			readLine(c)
			_, _ = c.Write([]byte(strings.Repeat("x", 4096)))
			hold(c)
		}, utcp.CodePayloadTooLarge, ""},
		{"stream over the cap", map[string]any{"timeout": 1500, "max_response_size": 1024}, func(c net.Conn) {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Read(make([]byte, 100))
			_, _ = c.Write([]byte(strings.Repeat("x", 4096)))
			hold(c)
		}, utcp.CodePayloadTooLarge, ""},
		{"nothing at all", envelope, hold, utcp.CodeTimeout, ""},
		{"closes without answering", envelope, readLine, utcp.CodeTransportError, "closed the connection"},
		{"fixed length short", map[string]any{"framing_strategy": "fixed_length", "fixed_message_length": 10, "timeout": 1500}, func(c net.Conn) {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = c.Read(make([]byte, 100))
			_, _ = c.Write([]byte("abc"))
		}, utcp.CodeTransportError, "partial frame"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			port, _ := rawServer(t, c.handle)
			fields := map[string]any{"port": port}
			for k, v := range c.fields {
				fields[k] = v
			}
			tr := newTransport(t)
			start := time.Now()
			_, err := call(t, tr, parse(t, fields), map[string]any{"x": 1})
			took := time.Since(start)
			if err == nil {
				t.Fatalf("no error")
			}
			if code := utcp.CodeOf(err); code != c.wantCode {
				t.Errorf("CodeOf(%v) = %s, want %s", err, code, c.wantCode)
			}
			if !strings.Contains(err.Error(), c.wantText) {
				t.Errorf("error %q does not say %q", err, c.wantText)
			}
			if took > 3*time.Second {
				t.Errorf("took %v, want within the 1.5 s timeout", took)
			}
		})
	}
}

func TestLoopbackOnly(t *testing.T) {
	tr := newTransport(t)
	_, err := call(t, tr, parse(t, map[string]any{"host": "192.0.2.1", "port": 9}), nil)
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || !strings.Contains(err.Error(), "allow_insecure") {
		t.Errorf("non-loopback host: err = %v, want invalid_template naming allow_insecure", err)
	}
	_, err = tr.RegisterManual(t.Context(), parse(t, map[string]any{"host": "example.com", "port": 9}))
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("RegisterManual to a non-loopback host: err = %v, want invalid_template", err)
	}
	// allow_insecure lets the call through to the dial, which fails fast
	// here because the deadline is short.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = tr.CallTool(ctx, &utcp.Call{Manual: "m", Name: "t", Template: parse(t, map[string]any{"host": "192.0.2.1", "port": 9, "allow_insecure": true})})
	if utcp.CodeOf(err) == utcp.CodeInvalidTemplate {
		t.Errorf("allow_insecure: still refused: %v", err)
	}
}

func TestTextRequestDelimited(t *testing.T) {
	port, accepted := rawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "VALUE of %s\n", strings.TrimPrefix(strings.TrimSpace(line), "READ "))
		}
	})
	tr := newTransport(t)
	tmpl := parse(t, map[string]any{"port": port, "request_data_format": "text", "request_data_template": "READ UTCP_ARG_channel_UTCP_ARG",
		"framing_strategy": "delimiter", "message_delimiter": "\\n", "response_format": "text"})
	for i := range 3 {
		res, err := call(t, tr, tmpl, map[string]any{"channel": fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("VALUE of %d", i); res.Value != want {
			t.Errorf("result = %#v, want %q", res.Value, want)
		}
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for 3 sequential calls, want 1 (keep_alive pools it)", n)
	}
	tmpl = parse(t, map[string]any{"port": port, "request_data_format": "text", "request_data_template": "READ UTCP_ARG_channel_UTCP_ARG",
		"framing_strategy": "delimiter", "keep_alive": false})
	for range 2 {
		if _, err := call(t, tr, tmpl, map[string]any{"channel": "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("%d connections after 2 calls without keep_alive, want 3", n)
	}
}

func TestStreamFramingRawAndJSON(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		var p [64]byte
		n, _ := c.Read(p[:])
		_, _ = c.Write([]byte{0xff, 0x00})
		_, _ = c.Write(p[:n])
	})
	tr := newTransport(t)
	res, err := call(t, tr, parse(t, map[string]any{"port": port, "response_format": "raw"}), map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.StdEncoding.EncodeToString(append([]byte{0xff, 0}, `{"a":1}`...)); res.Value != want {
		t.Errorf("raw = %v, want %v", res.Value, want)
	}
	port, _ = rawServer(t, func(c net.Conn) {
		var p [64]byte
		n, _ := c.Read(p[:])
		_, _ = c.Write(p[:n])
	})
	res, err = call(t, tr, parse(t, map[string]any{"port": port, "response_format": "json"}), map[string]any{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := res.Value.(map[string]any); !ok || fmt.Sprint(m["a"]) != "1" {
		t.Errorf("json = %#v", res.Value)
	}
}

func TestDiscoveryBareManual(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		if strings.Contains(line, `"type":"utcp"`) {
			b, _ := json.Marshal(fixture.Manual(nil))
			_, _ = c.Write(append(b, '\n'))
		}
	})
	tr := newTransport(t)
	m, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"port": port, "framing_strategy": "delimiter"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != len(fixture.Tools()) {
		t.Errorf("%d tools, want %d", len(m.Tools), len(fixture.Tools()))
	}
	port, _ = rawServer(t, func(c net.Conn) { _, _ = c.Write([]byte("HELLO\n")) })
	_, err = tr.RegisterManual(t.Context(), parse(t, map[string]any{"port": port, "framing_strategy": "delimiter"}))
	if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Errorf("garbage discovery answer: err = %v, want discovery_failed", err)
	}
}

// TestLateAnswerSkipped: an answer with another id (a server answering
// an earlier call late) is skipped, not taken as this call's.
func TestLateAnswerSkipped(t *testing.T) {
	port, _ := rawServer(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		var f tcp.Frame
		_ = json.Unmarshal([]byte(line), &f)
		_, _ = fmt.Fprintf(c, "{\"type\":\"result\",\"id\":\"stale\",\"result\":1}\n{\"type\":\"result\",\"id\":%q,\"result\":2}\n", f.ID)
	})
	tr := newTransport(t)
	res, err := call(t, tr, parse(t, map[string]any{"port": port, "envelope": true, "framing_strategy": "delimiter"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.Value) != "2" {
		t.Errorf("result = %v, want 2", res.Value)
	}
}

// TestServerRestartPooled: a pooled connection the server closed is
// discarded before reuse, so the next call dials afresh and succeeds.
func TestServerRestartPooled(t *testing.T) {
	f := fixture.New()
	srv, fields := serveFixture(t, f, tcpserver.Options{})
	_ = srv
	tmpl := parse(t, fields)
	tr := newTransport(t)
	if _, err := tr.RegisterManual(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	c := &utcp.Call{Manual: "m", Name: "add", Template: tmpl, Arguments: map[string]any{"a": 1, "b": 2}}
	if _, err := tr.CallTool(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	// Closing the server's connections leaves the pooled one dead.
	_ = srv.Close()
	srv2 := tcpserver.New(f, tcpserver.Options{})
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%v", fields["port"]))
	if err != nil {
		t.Skipf("port not reusable: %v", err)
	}
	go func() { _ = srv2.Serve(ln) }()
	t.Cleanup(func() { _ = srv2.Close() })
	if _, err := tr.CallTool(t.Context(), c); err != nil {
		t.Errorf("call after the server restarted: %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// BenchmarkCalls compares calls per second through the transport with a
// direct net.Dial client speaking the same framing and envelope to the
// same demo server, at concurrency 32 (each direct goroutine owns one
// connection, as the transport's pool does).
//
//	go test -run '^$' -bench Calls -benchtime 3s ./transports/tcp/
func BenchmarkCalls(b *testing.B) {
	f := fixture.New()
	_, fields := serveFixture(b, f, tcpserver.Options{})
	fields["name"] = "bench"
	raw, _ := json.Marshal(fields)
	tmpl, err := tcp.ParseTemplate(raw)
	if err != nil {
		b.Fatal(err)
	}
	const concurrency = 32
	parallelism := func(b *testing.B) {
		p := concurrency / max(1, runtimeProcs())
		b.SetParallelism(max(1, p))
	}
	b.Run("transport", func(b *testing.B) {
		tr, err := tcp.New(transports.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.RegisterManual(b.Context(), &tmpl); err != nil {
			b.Fatal(err)
		}
		parallelism(b)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := tr.CallTool(b.Context(), &utcp.Call{Tool: "bench.add", Manual: "bench", Name: "add", Template: &tmpl, Arguments: map[string]any{"a": 1, "b": 2}})
				if err != nil || res == nil {
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
		var id atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for pb.Next() {
				req, _ := json.Marshal(tcp.Frame{Type: tcp.FrameCall, ID: fmt.Sprint(id.Add(1)), Tool: "add", Arguments: map[string]any{"a": 1, "b": 2}})
				if _, err := c.Write(append(req, '\n')); err != nil {
					b.Error(err)
					return
				}
				line, err := br.ReadBytes('\n')
				if err != nil {
					b.Error(err)
					return
				}
				var ans map[string]any
				if err := json.Unmarshal(line, &ans); err != nil || ans["type"] != "result" {
					b.Errorf("answer %s: %v", line, err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
