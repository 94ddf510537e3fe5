package streamablehttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/streamablehttp"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t testing.TB, cfg map[string]any) *streamablehttp.Transport {
	t.Helper()
	return transporttest.NewTransport(t, streamablehttp.New, cfg)
}

func tmpl(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	return transporttest.ParseTemplate(t, streamablehttp.ParseTemplate, "streamable_http", fields)
}

func callOf(ct *utcp.CallTemplate, args map[string]any) *utcp.Call {
	return &utcp.Call{Tool: "m.t", Manual: "m", Name: "t", Template: ct, Arguments: args}
}

// answer serves body with contentType, written in pieces of piece bytes
// (all at once when piece is 0), flushing after each.
func answer(contentType, body string, piece int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		rc := http.NewResponseController(w)
		body, piece := body, piece
		if piece <= 0 {
			piece = len(body) + 1
		}
		for len(body) > 0 {
			n := min(piece, len(body))
			_, _ = io.WriteString(w, body[:n])
			_ = rc.Flush()
			body = body[n:]
		}
	}
}

func stream(t testing.TB, tr *streamablehttp.Transport, ct *utcp.CallTemplate, args map[string]any) []utcp.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	st, err := tr.CallToolStream(ctx, callOf(ct, args))
	if err != nil {
		t.Fatalf("CallToolStream: %v", err)
	}
	evs, err := transporttest.Collect(t, st)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	return evs
}

func callValue(t testing.TB, tr *streamablehttp.Transport, ct *utcp.CallTemplate, args map[string]any) any {
	t.Helper()
	res, err := tr.CallTool(t.Context(), callOf(ct, args))
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	return res.Value
}

func num(s string) json.Number { return json.Number(s) }

func TestNDJSON(t *testing.T) {
	body := "{\"a\":1}\n\n[1,2]\r\n  \"str\"  \nnot json\n7"
	want := []any{map[string]any{"a": num("1")}, []any{num("1"), num("2")}, "str", "not json", num("7")}
	for _, ct := range []string{"application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-ndjson; charset=utf-8"} {
		t.Run(ct, func(t *testing.T) {
			tr := newTransport(t, nil)
			tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer(ct, body, 3))})
			var got []any
			for _, ev := range stream(t, tr, tm, nil) {
				got = append(got, ev.Data)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stream (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, callValue(t, tr, tm, nil)); diff != "" {
				t.Errorf("CallTool (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSSE(t *testing.T) {
	body := ": hi\nevent: tick\nid: 1\ndata: {\"n\":1}\n\ndata: two\ndata: lines\n\n"
	tr := newTransport(t, nil)
	tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("text/event-stream", body, 5))})
	want := []utcp.Event{{Type: "tick", ID: "1", Data: map[string]any{"n": num("1")}}, {ID: "1", Data: "two\nlines"}}
	if diff := cmp.Diff(want, stream(t, tr, tm, nil)); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{map[string]any{"n": num("1")}, "two\nlines"}, callValue(t, tr, tm, nil)); diff != "" {
		t.Errorf("CallTool (-want +got):\n%s", diff)
	}
}

func TestJSONWholeBody(t *testing.T) {
	body := `{"big": [1, 2, 3], "nested": {"k": "v"}}`
	tr := newTransport(t, nil)
	for _, ct := range []string{"application/json", "application/problem+json"} {
		tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer(ct, body, 4))})
		want := map[string]any{"big": []any{num("1"), num("2"), num("3")}, "nested": map[string]any{"k": "v"}}
		evs := stream(t, tr, tm, nil)
		if len(evs) != 1 {
			t.Fatalf("%s: %d events, want the whole body as one", ct, len(evs))
		}
		if diff := cmp.Diff(want, evs[0].Data); diff != "" {
			t.Errorf("%s: stream (-want +got):\n%s", ct, diff)
		}
		if diff := cmp.Diff(want, callValue(t, tr, tm, nil)); diff != "" {
			t.Errorf("%s: CallTool (-want +got):\n%s", ct, diff)
		}
	}
	// An empty JSON body is nil.
	tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("application/json", "", 0))})
	if v := callValue(t, tr, tm, nil); v != nil {
		t.Errorf("empty body: %v, want nil", v)
	}
}

func TestRawChunks(t *testing.T) {
	text := strings.Repeat("0123456789abcdef", 700) // 11200 bytes
	t.Run("chunk_size bounds every chunk", func(t *testing.T) {
		for _, piece := range []int{0, 300, 5000} {
			tr := newTransport(t, nil)
			tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("application/octet-stream", text, piece)), "chunk_size": 1000})
			var joined strings.Builder
			evs := stream(t, tr, tm, nil)
			for _, ev := range evs {
				s := ev.Data.(string)
				if ev.Type != "text" || len(s) == 0 || len(s) > 1000 {
					t.Fatalf("piece %d: chunk of type %q and %d bytes", piece, ev.Type, len(s))
				}
				joined.WriteString(s)
			}
			if joined.String() != text {
				t.Errorf("piece %d: the chunks do not join to the body", piece)
			}
			if piece == 0 && len(evs) != 12 {
				t.Errorf("body sent at once: %d chunks, want 12 of at most 1000 bytes", len(evs))
			}
			if v := callValue(t, tr, tm, nil); v != text {
				t.Errorf("CallTool: %d bytes, want the concatenated text", len(fmt.Sprint(v)))
			}
		}
	})
	t.Run("the default chunk_size is 4096", func(t *testing.T) {
		tr := newTransport(t, nil)
		tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("application/octet-stream", text, 0))})
		for _, ev := range stream(t, tr, tm, nil) {
			if n := len(ev.Data.(string)); n > 4096 {
				t.Errorf("chunk of %d bytes", n)
			}
		}
	})
	t.Run("UTF-8 characters are never split", func(t *testing.T) {
		multi := strings.Repeat("é世🌍a", 500)
		tr := newTransport(t, nil)
		for _, size := range []int{4, 5, 7, 1000} {
			tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("text/plain; charset=utf-8", multi, 3)), "chunk_size": size})
			var joined strings.Builder
			for _, ev := range stream(t, tr, tm, nil) {
				s := ev.Data.(string)
				if ev.Type != "text" || !utf8.ValidString(s) || len(s) > size {
					t.Fatalf("chunk_size %d: %s chunk %q", size, ev.Type, s)
				}
				joined.WriteString(s)
			}
			if joined.String() != multi {
				t.Errorf("chunk_size %d: chunks do not join to the body", size)
			}
		}
	})
	t.Run("binary chunks are base64", func(t *testing.T) {
		bin := make([]byte, 3000)
		for i := range bin {
			bin[i] = byte(i * 7)
		}
		tr := newTransport(t, nil)
		tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("image/png", string(bin), 700)), "chunk_size": 512})
		var joined []byte
		for _, ev := range stream(t, tr, tm, nil) {
			b, err := base64.StdEncoding.DecodeString(ev.Data.(string))
			if ev.Type != "binary" || err != nil || len(b) > 512 {
				t.Fatalf("chunk of type %q, %d bytes, err %v", ev.Type, len(b), err)
			}
			joined = append(joined, b...)
		}
		if !bytes.Equal(joined, bin) {
			t.Errorf("binary chunks do not join to the body")
		}
		want := map[string]any{"content_type": "image/png", "encoding": "base64", "data": base64.StdEncoding.EncodeToString(bin)}
		if diff := cmp.Diff(want, callValue(t, tr, tm, nil)); diff != "" {
			t.Errorf("CallTool (-want +got):\n%.500s", diff)
		}
	})
	t.Run("a character cut by the end of the body", func(t *testing.T) {
		tr := newTransport(t, nil)
		tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("text/plain", "ab\xe4\xb8", 0))})
		want := []utcp.Event{{Type: "text", Data: "ab"}, {Type: "binary", Data: base64.StdEncoding.EncodeToString([]byte("\xe4\xb8"))}}
		if diff := cmp.Diff(want, stream(t, tr, tm, nil)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestDemoServerFormats(t *testing.T) {
	base := serveFixture(t, fixture.New())
	tr := newTransport(t, nil)
	want := []any{num("1"), num("2"), num("3")}
	for _, accept := range []string{"", "application/x-ndjson", "text/event-stream"} {
		fields := map[string]any{"url": base + "/tools/count"}
		if accept != "" {
			fields["headers"] = map[string]string{"Accept": accept}
		}
		tm := tmpl(t, fields)
		if diff := cmp.Diff(want, callValue(t, tr, tm, map[string]any{"n": 3})); diff != "" {
			t.Errorf("Accept %q (-want +got):\n%s", accept, diff)
		}
	}
	tm := tmpl(t, map[string]any{"url": base + "/tools/count", "headers": map[string]string{"Accept": "text/plain"}})
	if v := callValue(t, tr, tm, map[string]any{"n": 3}); v != "1\n2\n3\n" {
		t.Errorf("text: %q, want the numbers as lines", v)
	}
	// Each number is its own chunk: it is flushed as it is produced.
	var chunks []any
	for _, ev := range stream(t, tr, tm, map[string]any{"n": 3, "delay_ms": 30}) {
		chunks = append(chunks, ev.Data)
	}
	if diff := cmp.Diff([]any{"1\n", "2\n", "3\n"}, chunks); diff != "" {
		t.Errorf("text chunks (-want +got):\n%s", diff)
	}
}

func TestOversizedLine(t *testing.T) {
	tr := newTransport(t, map[string]any{"max_event_bytes": 1000})
	tm := tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("application/x-ndjson", "1\n\""+strings.Repeat("x", 2000)+"\"\n3\n", 100))})
	st, err := tr.CallToolStream(t.Context(), callOf(tm, nil))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := transporttest.Collect(t, st)
	if len(evs) != 1 || utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Fatalf("%d events, err %v; want 1 event then payload_too_large", len(evs), err)
	}
	tm = tmpl(t, map[string]any{"url": transporttest.Serve(t, answer("application/json", `"`+strings.Repeat("x", 2000)+`"`, 0))})
	tr = newTransport(t, map[string]any{"max_response_bytes": 1000})
	if _, err := tr.CallTool(t.Context(), callOf(tm, nil)); utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Errorf("JSON body over the cap: err = %v", err)
	}
}

func TestPostBody(t *testing.T) {
	type seen struct{ Method, ContentType, Body, Query string }
	ch := make(chan seen, 1)
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.Method, r.Header.Get("Content-Type"), string(b), r.URL.RawQuery}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "1\n")
	})
	tr := newTransport(t, nil)
	tm := tmpl(t, map[string]any{"url": url, "http_method": "post", "content_type": "application/json", "body_field": "prompt"})
	callValue(t, tr, tm, map[string]any{"prompt": map[string]any{"q": "hi"}, "stream": true})
	if diff := cmp.Diff(seen{"POST", "application/json", `{"q":"hi"}`, "stream=true"}, <-ch); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The default content type sends a string as it is.
	tm = tmpl(t, map[string]any{"url": url, "http_method": "POST", "body_field": "data"})
	callValue(t, tr, tm, map[string]any{"data": "raw bytes"})
	if diff := cmp.Diff(seen{"POST", "application/octet-stream", "raw bytes", ""}, <-ch); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMidStreamDisconnect(t *testing.T) {
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "1\n2\n")
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	tr := newTransport(t, nil)
	tm := tmpl(t, map[string]any{"url": url})
	st, err := tr.CallToolStream(t.Context(), callOf(tm, nil))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := transporttest.Collect(t, st)
	if len(evs) != 2 || utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Fatalf("%d events, err %v; want 2 then transport_error", len(evs), err)
	}
	if _, err := tr.CallTool(t.Context(), callOf(tm, nil)); utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Errorf("CallTool: err = %v, want transport_error", err)
	}
}

func TestTimeoutCutsEndlessStream(t *testing.T) {
	var gone atomic.Int32
	url := transporttest.Serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		rc := http.NewResponseController(w)
		for i := 0; ; i++ {
			select {
			case <-r.Context().Done():
				gone.Add(1)
				return
			case <-time.After(5 * time.Millisecond):
			}
			fmt.Fprintf(w, "%d\n", i)
			_ = rc.Flush()
		}
	})
	tr := newTransport(t, nil)
	start := time.Now()
	_, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": url, "timeout": 300}), nil))
	if utcp.CodeOf(err) != utcp.CodeTimeout {
		t.Fatalf("err = %v (code %s), want timeout", err, utcp.CodeOf(err))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cut after %v, want about 300ms", took)
	}
	deadline := time.Now().Add(3 * time.Second)
	for gone.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if gone.Load() == 0 {
		t.Errorf("the server did not see the client go away")
	}
}

func TestUnknownToolIs404ToolError(t *testing.T) {
	tr := newTransport(t, nil)
	_, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": serveFixture(t, fixture.New()) + "/tools/nope"}), nil))
	var te *utcp.ToolError
	if !errors.As(err, &te) || te.Status != http.StatusNotFound {
		t.Fatalf("err = %v (%T), want *utcp.ToolError with status 404", err, err)
	}
}

func TestTemplate(t *testing.T) {
	for _, raw := range []string{
		`{"call_template_type":"streamable_http"}`,
		`{"call_template_type":"streamable_http","url":"http://127.0.0.1/","http_method":"PUT"}`,
		`{"call_template_type":"streamable_http","url":"http://127.0.0.1/","chunk_size":-1}`,
		`{"call_template_type":"streamable_http","url":"http://127.0.0.1/","timeout":-5}`,
		`{"call_template_type":"streamable_http","url":"ws://127.0.0.1/"}`,
	} {
		if _, err := streamablehttp.ParseTemplate(json.RawMessage(raw)); !errors.Is(err, transports.ErrInvalidTemplate) {
			t.Errorf("ParseTemplate(%s) = %v, want invalid_template", raw, err)
		}
	}
	ct, err := streamablehttp.ParseTemplate(json.RawMessage(`{"name":"x","call_template_type":"streamable_http","url":"https://h/g","http_method":"get","headers":null,"body_field":null,"header_fields":null,"auth":null}`))
	if err != nil || len(ct.Unknown) != 0 {
		t.Fatalf("%v, unknown %v", err, ct.Unknown)
	}
	spec := ct.Spec.(*streamablehttp.Template)
	if spec.HTTPMethod != "GET" || spec.ContentType != "application/octet-stream" || spec.ChunkSize != 4096 {
		t.Errorf("defaults: %+v", spec)
	}
	tr := newTransport(t, nil)
	if _, err := tr.CallTool(t.Context(), callOf(tmpl(t, map[string]any{"url": "http://10.1.2.3/x"}), nil)); utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("plain http to a non-loopback host: err = %v, want invalid_template", err)
	}
}

func TestDiscovery(t *testing.T) {
	tr := newTransport(t, nil)
	m, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": serveFixture(t, fixture.New()) + "/utcp"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != len(fixture.Tools()) {
		t.Errorf("%d tools", len(m.Tools))
	}
	bad := transporttest.Serve(t, answer("application/json", `{"openapi":"3.0.0"}`, 0))
	if _, err := tr.RegisterManual(t.Context(), tmpl(t, map[string]any{"url": bad})); utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
		t.Errorf("not a manual: err = %v, want discovery_failed", err)
	}
}

// BenchmarkCount streams count(n) as NDJSON from the demo server, through
// the transport and, for comparison, with a plain net/http client reading
// lines. It reports events/s, MB/s of body and the mean time to the first
// event.
func BenchmarkCount(b *testing.B) {
	const n = 10000
	base := serveFixture(b, fixture.New())
	bodyBytes := int64(0)
	for i := 1; i <= n; i++ {
		bodyBytes += int64(len(strconv.Itoa(i)) + 1)
	}
	b.Run("transport", func(b *testing.B) {
		tr := newTransport(b, nil)
		tm := tmpl(b, map[string]any{"url": base + "/tools/count"})
		transporttest.BenchEvents(b, n, bodyBytes, func(t0 time.Time) (int, time.Duration) {
			st, err := tr.CallToolStream(b.Context(), callOf(tm, map[string]any{"n": n}))
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
			req, _ := http.NewRequestWithContext(b.Context(), http.MethodGet, base+"/tools/count?n="+strconv.Itoa(n), nil)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			got := 0
			var first time.Duration
			for sc.Scan() {
				if got == 0 {
					first = time.Since(t0)
				}
				got++
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
