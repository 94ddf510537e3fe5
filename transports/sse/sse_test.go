package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/internal/eventstream"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/sse"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// newTransport returns a transport configured with cfg (may be nil),
// closed when the test ends.
func newTransport(t testing.TB, cfg map[string]any) *sse.Transport {
	t.Helper()
	return transporttest.NewTransport(t, sse.New, cfg)
}

// tmpl parses an sse template made of fields.
func tmpl(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	return transporttest.ParseTemplate(t, sse.ParseTemplate, "sse", fields)
}

func callOf(ct *utcp.CallTemplate, args map[string]any) *utcp.Call {
	return &utcp.Call{Tool: "m.t", Manual: "m", Name: "t", Template: ct, Arguments: args}
}

// rawStream answers every request with body as a text/event-stream.
func rawStream(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}
}

func num(s string) json.Number { return json.Number(s) }

func TestParsingTable(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		fields map[string]any
		want   []utcp.Event
	}{
		{
			name: "json and text data",
			body: "data: {\"a\":1}\n\ndata: plain text\n\ndata: 42\n\n",
			want: []utcp.Event{{Data: map[string]any{"a": num("1")}}, {Data: "plain text"}, {Data: num("42")}},
		},
		{
			name: "multi-line data joined with newlines",
			body: "data: first\ndata: second\ndata:\ndata: fourth\n\n",
			want: []utcp.Event{{Data: "first\nsecond\n\nfourth"}},
		},
		{
			name: "multi-line JSON",
			body: "data: {\"list\": [1,\ndata: 2]}\n\n",
			want: []utcp.Event{{Data: map[string]any{"list": []any{num("1"), num("2")}}}},
		},
		{
			name: "comments ignored",
			body: ": keep-alive\n:another\ndata: x\n: inside\n\n:\n\n",
			want: []utcp.Event{{Data: "x"}},
		},
		{
			name: "event id and retry",
			body: "retry: 500\nevent: update\nid: 7\ndata: a\n\nevent: other\ndata: b\n\nid:\ndata: c\n\n",
			want: []utcp.Event{{Type: "update", ID: "7", Data: "a"}, {Type: "other", ID: "7", Data: "b"}, {Data: "c"}},
		},
		{
			name: "CRLF line ends",
			body: "event: e\r\ndata: one\r\ndata: two\r\n\r\ndata: three\r\n\r\n",
			want: []utcp.Event{{Type: "e", Data: "one\ntwo"}, {Data: "three"}},
		},
		{
			name: "lone CR line ends",
			body: "data: one\rdata: two\r\rdata: three\r\r",
			want: []utcp.Event{{Data: "one\ntwo"}, {Data: "three"}},
		},
		{
			name: "no trailing blank line",
			body: "data: one\n\ndata: last",
			want: []utcp.Event{{Data: "one"}, {Data: "last"}},
		},
		{
			name: "only one space after the colon is dropped",
			body: "data:  two spaces\ndata:none\n\n",
			want: []utcp.Event{{Data: " two spaces\nnone"}},
		},
		{
			name: "unknown fields and blocks without data",
			body: "foo: bar\nevent: lonely\n\nid: 3\n\ndata\n\n",
			want: []utcp.Event{{ID: "3", Data: ""}},
		},
		{
			name: "byte order mark",
			body: "\xEF\xBB\xBFdata: bom\n\n",
			want: []utcp.Event{{Data: "bom"}},
		},
		{
			name: "id with NUL ignored",
			body: "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n",
			want: []utcp.Event{{ID: "1", Data: "a"}, {ID: "1", Data: "b"}},
		},
		{
			name:   "event_type filter",
			body:   "event: tick\ndata: 1\n\nevent: update\ndata: 2\n\ndata: 3\n\nevent: update\ndata: 4\n\n",
			fields: map[string]any{"event_type": "update"},
			want:   []utcp.Event{{Type: "update", Data: num("2")}, {Type: "update", Data: num("4")}},
		},
		{
			name:   "event_type message matches unnamed events",
			body:   "event: tick\ndata: 1\n\ndata: 2\n\n",
			fields: map[string]any{"event_type": "message"},
			want:   []utcp.Event{{Data: num("2")}},
		},
		{
			name: "non-JSON data that looks like JSON",
			body: "data: {not json}\n\ndata: [1, 2\n\ndata: 1 2\n\n",
			want: []utcp.Event{{Data: "{not json}"}, {Data: "[1, 2"}, {Data: "1 2"}},
		},
		{
			name: "empty stream",
			body: "",
			want: nil,
		},
	}
	tr := newTransport(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := map[string]any{"url": transporttest.Serve(t, rawStream(c.body))}
			for k, v := range c.fields {
				fields[k] = v
			}
			ct := tmpl(t, fields)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := tr.CallToolStream(ctx, callOf(ct, nil))
			if err != nil {
				t.Fatal(err)
			}
			got, err := transporttest.Collect(t, st)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// CallTool collects the data of the same events into a list.
			res, err := tr.CallTool(ctx, callOf(ct, nil))
			if err != nil {
				t.Fatal(err)
			}
			wantList := []any{}
			for _, ev := range c.want {
				wantList = append(wantList, ev.Data)
			}
			if diff := cmp.Diff(wantList, res.Value); diff != "" {
				t.Errorf("CallTool (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSplitReads feeds an event stream one byte per write, with flushes, so
// every field and line end arrives split across reads.
func TestSplitReads(t *testing.T) {
	body := "\xEF\xBB\xBFevent: e\r\nid: 1\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: c\rdata: x\r\r"
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range len(body) {
			_, _ = io.WriteString(w, body[i:i+1])
			_ = rc.Flush()
		}
	})
	tr := newTransport(t, nil)
	res, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"a": num("1")}, "x"}
	if diff := cmp.Diff(want, res.Value); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// dropper serves numbered events with ids; a request without
// Last-Event-ID sends upTo events and then breaks the connection
// mid-stream; a reconnection
// resumes after the Last-Event-ID it carries and ends cleanly at total.
type dropper struct {
	upTo, total int
	retryMS     int // sent as a retry field when > 0
	requests    atomic.Int32
	lastIDs     chan string
	dropAlways  bool
}

func (d *dropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.requests.Add(1)
	if d.lastIDs != nil {
		d.lastIDs <- r.Header.Get("Last-Event-ID")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	if d.retryMS > 0 {
		fmt.Fprintf(w, "retry: %d\n\n", d.retryMS)
	}
	start, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	for i := start + 1; i <= d.total; i++ {
		if d.dropAlways || (start == 0 && i > d.upTo) {
			_ = rc.Flush()
			panic(http.ErrAbortHandler) // break the connection, no clean end
		}
		fmt.Fprintf(w, "id: %d\ndata: %d\n\n", i, i)
		_ = rc.Flush()
	}
}

func TestReconnectWithLastEventID(t *testing.T) {
	d := &dropper{upTo: 3, total: 6, retryMS: 20, lastIDs: make(chan string, 10)}
	url := transporttest.Serve(t, d.ServeHTTP)
	tr := newTransport(t, nil)
	// retry_timeout is long: only the server's retry field makes this quick.
	ct := tmpl(t, map[string]any{"url": url, "reconnect": true, "retry_timeout": 60000})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	st, err := tr.CallToolStream(ctx, callOf(ct, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := transporttest.Collect(t, st)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var data []any
	for _, ev := range got {
		data = append(data, ev.Data)
		if ev.ID != fmt.Sprint(ev.Data) {
			t.Errorf("event %v has id %q", ev.Data, ev.ID)
		}
	}
	want := []any{num("1"), num("2"), num("3"), num("4"), num("5"), num("6")}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if d.requests.Load() != 2 {
		t.Errorf("server saw %d requests, want 2", d.requests.Load())
	}
	if first, second := <-d.lastIDs, <-d.lastIDs; first != "" || second != "3" {
		t.Errorf("Last-Event-ID headers = %q, %q; want none, then 3", first, second)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v: the server's retry (20ms) was not honoured", took)
	}
}

func TestReconnectGivesUp(t *testing.T) {
	d := &dropper{total: 100, dropAlways: true}
	url := transporttest.Serve(t, d.ServeHTTP)
	tr := newTransport(t, map[string]any{"max_reconnects": 2})
	ct := tmpl(t, map[string]any{"url": url, "reconnect": true, "retry_timeout": 5})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := tr.CallTool(ctx, callOf(ct, nil))
	if utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Fatalf("err = %v (code %s), want transport_error", err, utcp.CodeOf(err))
	}
	if !strings.Contains(err.Error(), "gave up after 2") {
		t.Errorf("error %q does not say it gave up", err)
	}
	if n := d.requests.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 1 + 2 reconnections", n)
	}
}

func TestReconnectNoTimeLeft(t *testing.T) {
	d := &dropper{upTo: 1, total: 5}
	url := transporttest.Serve(t, d.ServeHTTP)
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url, "reconnect": true, "retry_timeout": 60000, "timeout": 2000})
	start := time.Now()
	_, err := tr.CallTool(t.Context(), callOf(ct, nil))
	if utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Fatalf("err = %v (code %s), want transport_error", err, utcp.CodeOf(err))
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %v: a reconnection that cannot happen before the deadline must fail at once", took)
	}
}

func TestMidStreamDisconnectIsError(t *testing.T) {
	d := &dropper{upTo: 2, total: 10}
	url := transporttest.Serve(t, d.ServeHTTP)
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url}) // no reconnect
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	st, err := tr.CallToolStream(ctx, callOf(ct, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := transporttest.Collect(t, st)
	if len(got) != 2 {
		t.Errorf("got %d events before the drop, want 2", len(got))
	}
	if utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Fatalf("err = %v (code %s), want transport_error", err, utcp.CodeOf(err))
	}
	if _, err := tr.CallTool(ctx, callOf(ct, nil)); utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Errorf("CallTool: err = %v, want transport_error", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	if d.requests.Load() != 2 {
		t.Errorf("server saw %d requests for 2 calls; without reconnect there is no retry", d.requests.Load())
	}
}

// endless streams an event every 5ms until the client goes away.
func endless(gone *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				gone.Add(1)
				return
			case <-tick.C:
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
		}
	}
}

func TestEndlessStreamCutAtTimeout(t *testing.T) {
	var gone atomic.Int32
	url := transporttest.Serve(t, endless(&gone))
	tr := newTransport(t, nil)

	t.Run("template timeout", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"url": url, "timeout": 300})
		start := time.Now()
		_, err := tr.CallTool(t.Context(), callOf(ct, nil))
		if utcp.CodeOf(err) != utcp.CodeTimeout {
			t.Fatalf("err = %v (code %s), want timeout", err, utcp.CodeOf(err))
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("cut after %v, want about 300ms", took)
		}
	})
	t.Run("context deadline", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"url": url})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		st, err := tr.CallToolStream(ctx, callOf(ct, nil))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err = st.Recv()
			if err != nil {
				break
			}
			n++
		}
		st.Close()
		if utcp.CodeOf(err) != utcp.CodeTimeout {
			t.Fatalf("err = %v (code %s), want timeout", err, utcp.CodeOf(err))
		}
		if n == 0 {
			t.Errorf("no events before the deadline")
		}
	})
	deadline := time.Now().Add(3 * time.Second)
	for gone.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if gone.Load() < 2 {
		t.Errorf("the server saw %d of 2 clients go away", gone.Load())
	}
}

func TestOversizedEvent(t *testing.T) {
	t.Run("data lines over the cap", func(t *testing.T) {
		url := transporttest.Serve(t, rawStream("data: small\n\ndata: "+strings.Repeat("x", 600)+"\ndata: "+strings.Repeat("y", 600)+"\n\n"))
		tr := newTransport(t, map[string]any{"max_event_bytes": 1024})
		st, err := tr.CallToolStream(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
		if err != nil {
			t.Fatal(err)
		}
		got, err := transporttest.Collect(t, st)
		if len(got) != 1 || !errors.Is(err, transports.ErrTooLarge) || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
			t.Fatalf("got %d events, err %v; want 1 event, then payload_too_large", len(got), err)
		}
	})
	t.Run("endless line", func(t *testing.T) {
		var written atomic.Int64
		url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			chunk := []byte(strings.Repeat("z", 32<<10))
			_, _ = io.WriteString(w, "data: ")
			for r.Context().Err() == nil {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
		tr := newTransport(t, map[string]any{"max_event_bytes": 1 << 20})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := tr.CallTool(ctx, callOf(tmpl(t, map[string]any{"url": url}), nil))
		if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
			t.Fatalf("err = %v, want payload_too_large", err)
		}
	})
	t.Run("default cap is 16 MiB", func(t *testing.T) {
		big := strings.Repeat("b", 17<<20)
		url := transporttest.Serve(t, rawStream("data: "+big+"\n\n"))
		tr := newTransport(t, nil)
		_, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
		if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
			t.Fatalf("err = %v, want payload_too_large", err)
		}
	})
}

func TestCollectedCap(t *testing.T) {
	var b strings.Builder
	for range 100 {
		b.WriteString("data: " + strings.Repeat("d", 100) + "\n\n")
	}
	url := transporttest.Serve(t, rawStream(b.String()))
	tr := newTransport(t, map[string]any{"max_response_bytes": 5000})
	_, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Fatalf("err = %v, want payload_too_large", err)
	}
}

// TestSlowConsumerBoundedHeap streams 100 MB to a consumer that keeps
// pausing and checks that the heap stays bounded: the transport reads one
// event at a time and TCP flow control holds the server back.
func TestSlowConsumerBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 100 MB")
	}
	const eventSize = 64 << 10
	const total = 100 << 20
	const events = total / eventSize
	var sent atomic.Int64
	payload := strings.Repeat("p", eventSize)
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		bw := bufio.NewWriterSize(w, 128<<10)
		for i := range events {
			if _, err := fmt.Fprintf(bw, "id: %d\ndata: %s\n\n", i, payload); err != nil {
				return
			}
			sent.Add(eventSize)
		}
		_ = bw.Flush()
	})
	tr := newTransport(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	st, err := tr.CallToolStream(ctx, callOf(tmpl(t, map[string]any{"url": url}), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got, peak uint64
	var lead int64
	for i := 0; ; i++ {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d events: %v", i, err)
		}
		got += uint64(len(ev.Data.(string)))
		if i%100 == 0 {
			time.Sleep(20 * time.Millisecond) // a slow consumer
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			lead = max(lead, sent.Load()-int64(got))
		}
	}
	if got != total {
		t.Fatalf("received %d bytes, want %d", got, total)
	}
	growth := int64(peak) - int64(base)
	t.Logf("100 MB streamed; heap peak %d MiB over a base of %d MiB; the server ran at most %d MiB ahead", growth>>20, base>>20, lead>>20)
	if growth > 48<<20 {
		t.Errorf("heap grew by %d MiB while streaming 100 MB: the stream is buffered", growth>>20)
	}
	if lead > 48<<20 {
		t.Errorf("the server ran %d MiB ahead of the consumer: no back-pressure", lead>>20)
	}
}

func TestUnknownToolIs404ToolError(t *testing.T) {
	url := serveFixture(t, fixture.New())
	tr := newTransport(t, nil)
	_, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url + "/tools/no_such_tool"}), nil))
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != http.StatusNotFound {
		t.Fatalf("err = %v (%T), want *utcp.ToolError with status 404", err, err)
	}
}

func TestPlainAnswer(t *testing.T) {
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	res, err := tr.CallTool(t.Context(), callOf(ct, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"ok": true}, res.Value); diff != "" {
		t.Errorf("CallTool (-want +got):\n%s", diff)
	}
	st, err := tr.CallToolStream(t.Context(), callOf(ct, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, err := transporttest.Collect(t, st)
	if err != nil || len(got) != 1 {
		t.Fatalf("stream: %v events, err %v; want one event", got, err)
	}
}

func TestNoContentIsEmptyStream(t *testing.T) {
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tr := newTransport(t, nil)
	res, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{}, res.Value); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestServerErrors(t *testing.T) {
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		status, _ := strconv.Atoi(r.URL.Query().Get("status"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":"status %d"}`, status)
	})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	_, err := tr.CallTool(t.Context(), callOf(ct, map[string]any{"status": 403}))
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != 403 || !strings.Contains(te.Error(), "status 403") {
		t.Errorf("403: err = %v, want a ToolError carrying the body", err)
	}
	_, err = tr.CallTool(t.Context(), callOf(ct, map[string]any{"status": 502}))
	var tre *utcp.TransportError
	if !errors.As(err, &tre) || tre.Status != 502 {
		t.Errorf("502: err = %v, want a TransportError with status 502", err)
	}
}

func TestRequestMapping(t *testing.T) {
	type seen struct {
		method, path, query, header, body, accept string
	}
	ch := make(chan seen, 1)
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("X-Trace"), string(b), r.Header.Get("Accept")}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: ok\n\n")
	})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{
		"url":           url + "/topics/{topic}",
		"body_field":    "payload",
		"header_fields": []string{"X-Trace"},
	})
	args := map[string]any{"topic": "a b/c", "payload": map[string]any{"k": "v"}, "X-Trace": "t1", "limit": 5, "flag": true}
	if _, err := tr.CallTool(t.Context(), callOf(ct, args)); err != nil {
		t.Fatal(err)
	}
	want := seen{"POST", "/topics/a%20b%2Fc", "flag=true&limit=5", "t1", `{"k":"v"}`, "text/event-stream"}
	if diff := cmp.Diff(want, <-ch, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	// Without the body argument the request is a GET.
	if _, err := tr.CallTool(t.Context(), callOf(ct, map[string]any{"topic": "x"})); err != nil {
		t.Fatal(err)
	}
	if got := <-ch; got.method != "GET" || got.body != "" {
		t.Errorf("without a body: %s with body %q, want GET without one", got.method, got.body)
	}
	// A missing path argument is invalid_arguments.
	if _, err := tr.CallTool(t.Context(), callOf(ct, nil)); utcp.CodeOf(err) != utcp.CodeInvalidArguments {
		t.Errorf("missing topic: err = %v, want invalid_arguments", err)
	}
}

func TestInsecureURLRefused(t *testing.T) {
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": "http://example.com/events"})
	_, err := tr.CallTool(t.Context(), callOf(ct, nil))
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("call: err = %v, want invalid_template", err)
	}
	_, err = tr.RegisterManual(t.Context(), ct)
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("discovery: err = %v, want invalid_template", err)
	}
}

func TestTemplateValidation(t *testing.T) {
	for _, raw := range []string{
		`{"call_template_type":"sse"}`,
		`{"call_template_type":"sse","url":"ftp://x/y"}`,
		`{"call_template_type":"sse","url":"http://127.0.0.1/","timeout":-1}`,
		`{"call_template_type":"sse","url":"http://127.0.0.1/","retry_timeout":-1}`,
		`{"call_template_type":"sse","url":"http://127.0.0.1/","headers":{"Bad Name":"x"}}`,
		`{"call_template_type":"sse","url":"http://127.0.0.1/","reconnect":"yes"}`,
		`{"call_template_type":"http","url":"http://127.0.0.1/"}`,
	} {
		if _, err := sse.ParseTemplate(json.RawMessage(raw)); !errors.Is(err, transports.ErrInvalidTemplate) {
			t.Errorf("ParseTemplate(%s) = %v, want invalid_template", raw, err)
		}
	}
	// python-utcp's declared defaults load unchanged.
	ct, err := sse.ParseTemplate(json.RawMessage(`{"name":"x","call_template_type":"sse","url":"https://h/e","event_type":null,"reconnect":true,"retry_timeout":30000,"headers":null,"body_field":null,"header_fields":null,"auth":null}`))
	if err != nil || len(ct.Unknown) != 0 {
		t.Errorf("python-utcp template: %v, unknown %v", err, ct.Unknown)
	}
}

func TestDiscovery(t *testing.T) {
	tr := newTransport(t, nil)
	m, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": serveFixture(t, fixture.New()) + "/utcp"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != len(fixture.Tools()) {
		t.Errorf("%d tools, want %d", len(m.Tools), len(fixture.Tools()))
	}
	notManual := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"hello":"world"}`) })
	if _, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": notManual})); utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Errorf("not a manual: err = %v, want discovery_failed", err)
	}
	missing := transporttest.Serve(t, http.NotFound)
	if _, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": missing})); utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Errorf("404: err = %v, want discovery_failed", err)
	}
}

func TestResumeFromDemoServer(t *testing.T) {
	// The demo server resumes count after Last-Event-ID.
	url := serveFixture(t, fixture.New())
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/tools/count?n=5", nil)
	req.Header.Set("Last-Event-ID", "3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := eventstream.NewReader(resp.Body, 0)
	var ids []string
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		ids = append(ids, ev.ID+"="+ev.Data)
	}
	if diff := cmp.Diff([]string{"4=4", "5=5"}, ids); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCloseEndsOpenStreams(t *testing.T) {
	var gone atomic.Int32
	url := transporttest.Serve(t, endless(&gone))
	tr, err := sse.New(transports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.CallToolStream(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	for {
		_, err = st.Recv()
		if err != nil {
			break
		}
	}
	if utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("after Close: err = %v, want unavailable", err)
	}
	st.Close()
	if _, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url}), nil)); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("call after Close: err = %v, want unavailable", err)
	}
}

// BenchmarkCount streams count(n) from the demo server, through the
// transport and, for comparison, with a plain net/http client that splits
// the body into lines. It reports events/s, MB/s of event-stream body and
// the mean time to the first event.
func BenchmarkCount(b *testing.B) {
	const n = 10000
	base := serveFixture(b, fixture.New())
	url := base + "/tools/count?n=" + strconv.Itoa(n)
	bodyBytes := int64(0)
	for i := 1; i <= n; i++ {
		bodyBytes += int64(len(fmt.Sprintf("id: %d\ndata: %d\n\n", i, i)))
	}
	b.Run("transport", func(b *testing.B) {
		tr := newTransport(b, nil)
		ct := tmpl(b, map[string]any{"url": base + "/tools/count"})
		transporttest.BenchEvents(b, n, bodyBytes, func(t0 time.Time) (int, time.Duration) {
			st, err := tr.CallToolStream(b.Context(), callOf(ct, map[string]any{"n": n}))
			if err != nil {
				b.Fatal(err)
			}
			return transporttest.Drain(b, st, t0)
		})
	})
	b.Run("direct", func(b *testing.B) {
		client := &http.Client{}
		defer client.CloseIdleConnections()
		transporttest.BenchEvents(b, n, bodyBytes, func(t0 time.Time) (int, time.Duration) {
			req, _ := http.NewRequestWithContext(b.Context(), http.MethodGet, url, nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			got := 0
			var first time.Duration
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data:") {
					if got == 0 {
						first = time.Since(t0)
					}
					got++
				}
			}
			return got, first
		})
	})
}

func TestCloseInterruptsRecv(t *testing.T) {
	f := fixture.New()
	url := serveFixture(t, f)
	tr := newTransport(t, nil)
	st, err := tr.CallToolStream(t.Context(), callOf(tmpl(t, map[string]any{"url": url + "/tools/count"}), map[string]any{"n": 2, "delay_ms": 10000}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	transporttest.CloseInterruptsRecv(t, st, f)
}
