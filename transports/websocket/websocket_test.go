package websocket_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	gws "github.com/gorilla/websocket"

	"github.com/utcpd/utcpd/examples/servers/websocket/websocketserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/websocket"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t testing.TB, cfg map[string]any) *websocket.Transport {
	t.Helper()
	return transporttest.NewTransport(t, websocket.New, cfg)
}

func tmpl(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	return transporttest.ParseTemplate(t, websocket.ParseTemplate, "websocket", fields)
}

func callOf(ct *utcp.CallTemplate, tool string, args map[string]any) *utcp.Call {
	return transporttest.CallOf(ct, tool, args)
}

func do(t testing.TB, tr transporttest.Caller, ct *utcp.CallTemplate, tool string, args map[string]any) (any, error) {
	t.Helper()
	return transporttest.Do(t, tr, ct, tool, args)
}

func num(s string) json.Number { return json.Number(s) }

// wsServer starts a WebSocket server whose connections run handle. Its
// cleanup breaks the connections still open and waits for their handlers.
func wsServer(t testing.TB, protocols []string, handle func(ws *gws.Conn, r *http.Request)) string {
	t.Helper()
	up := gws.Upgrader{Subprotocols: protocols, CheckOrigin: func(*http.Request) bool { return true }}
	var (
		mu      sync.Mutex
		closing bool
		conns   = map[*gws.Conn]struct{}{}
		wg      sync.WaitGroup
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		if closing {
			mu.Unlock()
			ws.Close()
			return
		}
		wg.Add(1)
		conns[ws] = struct{}{}
		mu.Unlock()
		defer func() {
			ws.Close()
			mu.Lock()
			delete(conns, ws)
			mu.Unlock()
			wg.Done()
		}()
		handle(ws, r)
	}))
	t.Cleanup(func() {
		mu.Lock()
		closing = true
		for ws := range conns {
			_ = ws.NetConn().Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// readFrame reads one JSON frame from a test server's connection.
func readFrame(ws *gws.Conn) (map[string]any, error) {
	var f map[string]any
	err := ws.ReadJSON(&f)
	return f, err
}

func TestConcurrentCallsShareOneConnection(t *testing.T) {
	srv, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	if _, err := tr.RegisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			// Slow and fast calls interleave, so answers come out of order.
			if i%4 == 0 {
				if _, err := do(t, tr, ct, fixture.Sleep, map[string]any{"ms": 50}); err != nil {
					errs <- err
				}
			}
			v, err := do(t, tr, ct, fixture.Add, map[string]any{"a": i, "b": 0.5})
			if err != nil {
				errs <- err
				return
			}
			if want := map[string]any{"sum": num(fmt.Sprint(float64(i) + 0.5))}; !cmp.Equal(want, v) {
				errs <- fmt.Errorf("call %d: got %v, want %v", i, v, want)
			}
		})
	}
	wg.Go(func() {
		v, err := do(t, tr, ct, fixture.Count, map[string]any{"n": 20})
		if err != nil {
			errs <- err
		} else if l, _ := v.([]any); len(l) != 20 {
			errs <- fmt.Errorf("count: %v", v)
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if c := srv.Connections(); c != 1 {
		t.Errorf("the server accepted %d connections, want one shared by discovery and every call", c)
	}
}

func TestReconnectAfterDrop(t *testing.T) {
	srv, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	if _, err := do(t, tr, ct, fixture.Echo, map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := do(t, tr, ct, fixture.Sleep, map[string]any{"ms": 10000})
		inFlight <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if n := srv.DropConnections(); n != 1 {
		t.Fatalf("dropped %d connections, want 1", n)
	}
	select {
	case err := <-inFlight:
		if utcp.CodeOf(err) != utcp.CodeTransportError {
			t.Errorf("call in flight at the drop: err = %v, want transport_error", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the call in flight failed %v after the drop", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call in flight did not fail after the drop")
	}
	v, err := do(t, tr, ct, fixture.Add, map[string]any{"a": 1, "b": 2})
	if err != nil {
		t.Fatalf("call after the drop: %v", err)
	}
	if !cmp.Equal(map[string]any{"sum": num("3")}, v) {
		t.Errorf("got %v", v)
	}
	if c := srv.Connections(); c != 2 {
		t.Errorf("%d connections, want 2 (one reconnection)", c)
	}
}

func TestRedialBackoff(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
	srv.Close() // nothing listens there any more
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	_, err := do(t, tr, ct, fixture.Echo, nil)
	if utcp.CodeOf(err) != utcp.CodeTransportError {
		t.Fatalf("err = %v, want transport_error", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = tr.CallTool(ctx, callOf(ct, fixture.Echo, nil))
	if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), "next connection attempt") {
		t.Errorf("a call inside the backoff: err = %v, want the last transport error and the wait", err)
	}
}

func TestSubprotocols(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, nil)

	t.Run("negotiated", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"envelope": true, "url": url, "subprotocols": []string{"x-other", "utcpd.v1"}})
		m, err := tr.RegisterManual(t.Context(), ct)
		if err != nil {
			t.Fatal(err)
		}
		// The demo server names the negotiated subprotocol in its templates.
		var tt struct{ Protocol string }
		_ = json.Unmarshal(m.Tools[0].ToolCallTemplate.Raw, &tt)
		if tt.Protocol != "utcpd.v1" {
			t.Errorf("tool template protocol = %q", tt.Protocol)
		}
	})
	t.Run("refused", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"envelope": true, "url": url, "protocol": "graphql-ws"})
		_, err := do(t, tr, ct, fixture.Echo, nil)
		if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), `refused subprotocol "graphql-ws"`) {
			t.Errorf("err = %v, want a transport_error saying the subprotocol was refused", err)
		}
		_, err = tr.RegisterManual(t.Context(), ct)
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "refused subprotocol") {
			t.Errorf("discovery: err = %v, want discovery_failed naming the refusal", err)
		}
	})
	t.Run("server selects one not offered", func(t *testing.T) {
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			up := gws.Upgrader{}
			ws, err := up.Upgrade(w, r, http.Header{"Sec-Websocket-Protocol": {"surprise"}})
			if err == nil {
				_, _, _ = ws.ReadMessage()
				ws.Close()
			}
		}))
		t.Cleanup(bad.Close)
		ct := tmpl(t, map[string]any{"envelope": true, "url": "ws" + strings.TrimPrefix(bad.URL, "http"), "protocol": "utcpd.v1"})
		_, err := do(t, tr, ct, fixture.Echo, nil)
		if !strings.Contains(fmt.Sprint(err), `selected "surprise"`) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestGarbageFrames(t *testing.T) {
	cases := []struct {
		name  string
		reply func(ws *gws.Conn, id any) error
		want  string
	}{
		{"not JSON", func(ws *gws.Conn, id any) error { return ws.WriteMessage(gws.TextMessage, []byte("hello, stranger")) }, `not a JSON object; the server does not speak the utcpd envelope (a call template without "envelope": true talks to it plainly): "hello, stranger"`},
		{"binary", func(ws *gws.Conn, id any) error { return ws.WriteMessage(gws.BinaryMessage, []byte{0xff, 0, 1}) }, "a binary frame arrived"},
		{"no type", func(ws *gws.Conn, id any) error { return ws.WriteJSON(map[string]any{"id": id, "ok": true}) }, `has no "type"`},
		{"unknown type", func(ws *gws.Conn, id any) error { return ws.WriteJSON(map[string]any{"id": id, "type": "banana"}) }, `unknown type "banana"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
				f, err := readFrame(ws)
				if err != nil {
					return
				}
				_ = c.reply(ws, f["id"])
				_, _, _ = ws.ReadMessage() // until the client closes
			})
			tr := newTransport(t, nil)
			ct := tmpl(t, map[string]any{"envelope": true, "url": url})
			start := time.Now()
			_, err := do(t, tr, ct, "echo", nil)
			if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a transport_error containing %q", err, c.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

// TestPlainDefault: without message and envelope, a call sends its
// arguments as one JSON text frame and the first answer frame is its
// result, as python-utcp does.
func TestPlainDefault(t *testing.T) {
	type got struct {
		mt   int
		data string
	}
	frames := make(chan got, 16)
	url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
		for {
			mt, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			frames <- got{mt, string(data)}
			// Two answers: only the first is the call's result.
			if ws.WriteMessage(gws.TextMessage, data) != nil || ws.WriteMessage(gws.TextMessage, []byte(`"second"`)) != nil {
				return
			}
		}
	})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url})
	args := map[string]any{"text": "héllo", "n": 2, "deep": map[string]any{"list": []any{true, nil}}}
	v, err := do(t, tr, ct, "anything", args)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"text": "héllo", "n": num("2"), "deep": map[string]any{"list": []any{true, nil}}}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if f := <-frames; f.mt != gws.TextMessage || f.data != `{"deep":{"list":[true,null]},"n":2,"text":"héllo"}` {
		t.Errorf("sent %d %q, want the arguments as one JSON text frame", f.mt, f.data)
	}
	// No arguments are an empty object (a connection of its own, so that
	// the first call's second answer cannot reach it).
	tr2 := newTransport(t, nil)
	ct2 := tmpl(t, map[string]any{"url": url, "keep_alive": false})
	if v, err := do(t, tr2, ct2, "x", nil); err != nil || !cmp.Equal(map[string]any{}, v) {
		t.Errorf("no arguments: %v, %v; want {} echoed", v, err)
	}
	if f := <-frames; f.data != `{}` {
		t.Errorf("no arguments sent %q, want {}", f.data)
	}
}

// TestPlainAgainstEnvelopeServer: templates written when the envelope
// was the default, without "envelope": true, meet a server that speaks
// the envelope. Discovery works and warns, naming how many tools would be
// called without the envelope; such a call fails with a transport_error
// that says to set "envelope": true. Setting it in the manual template
// fixes the tools without a template of their own and those whose own
// template points at the same URL; a tool elsewhere is still counted.
func TestPlainAgainstEnvelopeServer(t *testing.T) {
	url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
		self := "ws://" + r.Host + r.URL.Path
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var f struct {
				Type string          `json:"type"`
				ID   json.RawMessage `json:"id"`
			}
			var answer string
			switch {
			case json.Unmarshal(data, &f) != nil || f.Type == "":
				answer = `{"type":"error","error":{"code":"invalid_request","message":"expected a utcpd envelope frame"}}`
			case f.Type == "utcp":
				answer = `{"type":"manual","id":` + string(f.ID) + `,"manual":{"utcp_version":"1.1.0","manual_version":"1","tools":[` +
					`{"name":"echo","description":"d","inputs":{"type":"object"}},` +
					`{"name":"own","description":"d","inputs":{"type":"object"},"tool_call_template":{"call_template_type":"websocket","url":"` + self + `"}},` +
					`{"name":"elsewhere","description":"d","inputs":{"type":"object"},"tool_call_template":{"call_template_type":"websocket","url":"ws://127.0.0.1:1/other"}}]}}`
			default:
				answer = `{"type":"result","id":` + string(f.ID) + `,"result":"ok"}`
			}
			if ws.WriteMessage(gws.TextMessage, []byte(answer)) != nil {
				return
			}
		}
	})
	logged := func() (*websocket.Transport, *transporttest.SyncBuffer) {
		var logs transporttest.SyncBuffer
		tr, err := websocket.New(transports.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr, &logs
	}
	tr, logs := logged()
	envelopeOf := func(m *utcp.Manual, tool string) bool {
		for _, tl := range m.Tools {
			if tl.Name == tool {
				ct, err := websocket.ParseTemplate(tl.ToolCallTemplate.Raw)
				if err != nil {
					t.Fatalf("%s's template: %v", tool, err)
				}
				return ct.Spec.(*websocket.Template).Envelope
			}
		}
		t.Fatalf("no tool %s", tool)
		return false
	}

	url += "/ws" // the path the server names in its tool templates
	old := tmpl(t, map[string]any{"name": "old", "url": url})
	m, err := tr.RegisterManual(t.Context(), old)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	if l := logs.String(); !strings.Contains(l, "speaks the utcpd envelope") || !strings.Contains(l, "tools=3") || !strings.Contains(l, `\"envelope\": true`) {
		t.Errorf("discovery log %q: want a warning naming 3 tools and the envelope field", l)
	}
	if envelopeOf(m, "own") {
		t.Errorf("a tool template got the envelope although the manual template does not set it")
	}
	_, err = do(t, tr, old, "echo", map[string]any{"a": 1})
	if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(fmt.Sprint(err), `set "envelope": true`) {
		t.Errorf("call without the envelope: %v, want a transport_error saying to set \"envelope\": true", err)
	}

	tr, logs = logged()
	fixed := tmpl(t, map[string]any{"name": "fixed", "url": url, "envelope": true})
	if m, err = tr.RegisterManual(t.Context(), fixed); err != nil {
		t.Fatalf("RegisterManual with the envelope: %v", err)
	}
	if v, err := do(t, tr, fixed, "echo", nil); err != nil || v != "ok" {
		t.Errorf("call with the envelope: %v, %v", v, err)
	}
	if !envelopeOf(m, "own") || envelopeOf(m, "elsewhere") {
		t.Errorf("envelope inherited: own %v, elsewhere %v; want true, false", envelopeOf(m, "own"), envelopeOf(m, "elsewhere"))
	}
	if l := logs.String(); !strings.Contains(l, "tools=1") {
		t.Errorf("discovery log %q: want the warning to name only the tool elsewhere", l)
	}
}

func TestMessageTemplate(t *testing.T) {
	// The server echoes every text frame, so the call's result is the
	// message utcpd sent.
	url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
		for {
			mt, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if err := ws.WriteMessage(mt, data); err != nil {
				return
			}
		}
	})
	tr := newTransport(t, nil)
	args := map[string]any{"query": `he said "hi" } {`, "n": 3, "opts": map[string]any{"deep": []any{true}}}
	cases := []struct {
		name    string
		message any
		format  string
		want    any
	}{
		{
			name:    "object template keeps types and escapes strings",
			message: map[string]any{"op": "search", "q": "UTCP_ARG_query_UTCP_END", "n": "UTCP_ARG_n_UTCP_END", "opts": "UTCP_ARG_opts_UTCP_ARG", "label": "n=UTCP_ARG_n_UTCP_END"},
			want:    map[string]any{"op": "search", "q": `he said "hi" } {`, "n": num("3"), "opts": map[string]any{"deep": []any{true}}, "label": "n=3"},
		},
		{
			name:    "python-utcp string holding JSON",
			message: `{"q": "UTCP_ARG_query_UTCP_ARG", "list": ["UTCP_ARG_n_UTCP_END"]}`,
			want:    map[string]any{"q": `he said "hi" } {`, "list": []any{num("3")}},
		},
		{
			name:    "text template",
			message: "search UTCP_ARG_query_UTCP_END limit UTCP_ARG_n_UTCP_END",
			want:    `search he said "hi" } { limit 3`,
		},
		{
			name:    "response_format text",
			message: map[string]any{"n": "UTCP_ARG_n_UTCP_END"},
			format:  "text",
			want:    `{"n":3}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fields := map[string]any{"url": url, "message": c.message}
			if c.format != "" {
				fields["response_format"] = c.format
			}
			v, err := do(t, tr, tmpl(t, fields), "search", args)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, v); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing argument", func(t *testing.T) {
		_, err := do(t, tr, tmpl(t, map[string]any{"url": url, "message": "q=UTCP_ARG_absent_UTCP_END"}), "search", args)
		if utcp.CodeOf(err) != utcp.CodeInvalidArguments || !strings.Contains(err.Error(), `"absent"`) {
			t.Errorf("err = %v, want invalid_arguments naming the argument", err)
		}
	})
	t.Run("response_format json refuses text", func(t *testing.T) {
		_, err := do(t, tr, tmpl(t, map[string]any{"url": url, "message": "plain", "response_format": "json"}), "search", nil)
		if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), "not JSON") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("one call at a time per connection", func(t *testing.T) {
		ct := tmpl(t, map[string]any{"url": url, "message": map[string]any{"i": "UTCP_ARG_i_UTCP_END"}})
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				v, err := do(t, tr, ct, "x", map[string]any{"i": i})
				if err != nil || !cmp.Equal(map[string]any{"i": num(fmt.Sprint(i))}, v) {
					t.Errorf("call %d: %v, %v", i, v, err)
				}
			})
		}
		wg.Wait()
	})
}

func TestRenderMessage(t *testing.T) {
	args := map[string]any{"s": "a\"b", "n": json.Number("1.5"), "b": false, "o": map[string]any{"k": nil}}
	cases := []struct {
		message, want string
	}{
		{`"plain UTCP_ARG_s_UTCP_END UTCP_ARG_n_UTCP_END UTCP_ARG_b_UTCP_END"`, `plain a"b 1.5 false`},
		{`{"s":"UTCP_ARG_s_UTCP_END","n":"UTCP_ARG_n_UTCP_END","b":"UTCP_ARG_b_UTCP_END","o":"UTCP_ARG_o_UTCP_END"}`, `{"b":false,"n":1.5,"o":{"k":null},"s":"a\"b"}`},
		{`{"UTCP_ARG_s_UTCP_END":1}`, `{"a\"b":1}`},
		{`["x-UTCP_ARG_o_UTCP_END"]`, `["x-{\"k\":null}"]`},
		{`"  [\"UTCP_ARG_n_UTCP_END\"]"`, `[1.5]`},
		{`"{not json UTCP_ARG_s_UTCP_END"`, `{not json a"b`},
		{`"no placeholders"`, `no placeholders`},
	}
	for _, c := range cases {
		got, err := websocket.RenderMessage(json.RawMessage(c.message), args)
		if err != nil || string(got) != c.want {
			t.Errorf("RenderMessage(%s) = %s, %v; want %s", c.message, got, err, c.want)
		}
	}
}

func TestMessageModeStreamEndsWhenServerCloses(t *testing.T) {
	url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
		if _, _, err := ws.ReadMessage(); err != nil {
			return
		}
		for i := 1; i <= 3; i++ {
			_ = ws.WriteMessage(gws.TextMessage, fmt.Appendf(nil, `{"n":%d}`, i))
		}
		_ = ws.WriteMessage(gws.BinaryMessage, []byte{0xff, 0xfe})
		_ = ws.WriteMessage(gws.CloseMessage, gws.FormatCloseMessage(gws.CloseNormalClosure, "done"))
		_, _, _ = ws.ReadMessage()
	})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"url": url, "message": "go"})
	st, err := tr.CallToolStream(t.Context(), callOf(ct, "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []utcp.Event
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		got = append(got, *ev)
	}
	want := []utcp.Event{
		{Data: map[string]any{"n": num("1")}}, {Data: map[string]any{"n": num("2")}}, {Data: map[string]any{"n": num("3")}},
		{Type: "binary", Data: "//4="},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestInsecureURLRefused(t *testing.T) {
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": "ws://example.com/ws"})
	_, err := do(t, tr, ct, fixture.Echo, nil)
	if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("call: err = %v, want invalid_template explaining the loopback rule", err)
	}
	if _, err := tr.RegisterManual(t.Context(), ct); utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
		t.Errorf("discovery: err = %v, want invalid_template", err)
	}
}

func TestTemplateValidation(t *testing.T) {
	for _, raw := range []string{
		`{"call_template_type":"websocket"}`,
		`{"call_template_type":"websocket","url":"http://127.0.0.1/ws"}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","response_format":"xml"}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","header_fields":["X-Id"]}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","headers":{"Sec-WebSocket-Protocol":"x"}}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","message":42}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","protocol":"bad proto"}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","timeout":-1}`,
		`{"call_template_type":"websocket","url":"ws://127.0.0.1/ws","envelope":true,"message":"go"}`,
	} {
		if _, err := websocket.ParseTemplate(json.RawMessage(raw)); !errors.Is(err, transports.ErrInvalidTemplate) {
			t.Errorf("ParseTemplate(%s) = %v, want invalid_template", raw, err)
		}
	}
	// python-utcp's shape loads unchanged.
	ct, err := websocket.ParseTemplate(json.RawMessage(`{"name":"rt","call_template_type":"websocket","url":"wss://h/ws","message":{"op":"UTCP_ARG_op_UTCP_ARG"},"protocol":null,"keep_alive":true,"response_format":null,"timeout":30,"headers":null,"header_fields":null,"auth":null}`))
	if err != nil || len(ct.Unknown) != 0 {
		t.Errorf("python-utcp template: %v, unknown %v", err, ct.Unknown)
	}
}

func TestDeregisterClosesConnection(t *testing.T) {
	f := fixture.New()
	srv, url := serveFixture(t, f, websocketserver.Options{})
	tr := transports.Count(websocket.Type, newTransport(t, nil))
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	if _, err := tr.RegisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	// A second registration (a refresh) is balanced by one deregistration.
	if _, err := tr.RegisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	if err := tr.DeregisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, tr, ct, fixture.Echo, nil); err != nil {
		t.Fatalf("call while one registration remains: %v", err)
	}
	if err := tr.DeregisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, tr, ct, fixture.Echo, nil); !errors.Is(err, transports.ErrNotRegistered) {
		t.Errorf("call after deregistration: err = %v, want manual_not_found", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for srv.DropConnections() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := srv.DropConnections(); n != 0 {
		t.Errorf("%d connections still open on the server after deregistration", n)
	}
	if _, err := tr.RegisterManual(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, tr, ct, fixture.Echo, nil); err != nil {
		t.Errorf("call after registering again: %v", err)
	}
	// Other manuals on the same server are not affected.
	other := tmpl(t, map[string]any{"envelope": true, "name": "other", "url": url})
	if _, err := do(t, tr, other, fixture.Echo, nil); err != nil {
		t.Errorf("a manual never registered with this transport: %v", err)
	}
}

func TestKeepAliveFalse(t *testing.T) {
	srv, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url, "keep_alive": false})
	for range 3 {
		if _, err := do(t, tr, ct, fixture.Echo, nil); err != nil {
			t.Fatal(err)
		}
	}
	if c := srv.Connections(); c != 3 {
		t.Errorf("%d connections for 3 calls without keep_alive", c)
	}
}

func TestHeartbeat(t *testing.T) {
	t.Run("a silent server is dropped", func(t *testing.T) {
		url := wsServer(t, nil, func(ws *gws.Conn, r *http.Request) {
			// Swallow the raw bytes: pings are never answered.
			_, _ = io.Copy(io.Discard, ws.NetConn())
		})
		tr := newTransport(t, map[string]any{"ping_interval": 50})
		ct := tmpl(t, map[string]any{"envelope": true, "url": url, "timeout": 20})
		start := time.Now()
		_, err := do(t, tr, ct, fixture.Echo, nil)
		if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), "no pong") {
			t.Errorf("err = %v, want a transport_error for the silent connection", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("detected after %v", took)
		}
	})
	t.Run("an idle connection is closed and reopened", func(t *testing.T) {
		srv, url := serveFixture(t, fixture.New(), websocketserver.Options{})
		tr := newTransport(t, map[string]any{"ping_interval": 20, "idle_timeout": 100})
		ct := tmpl(t, map[string]any{"envelope": true, "url": url})
		if _, err := do(t, tr, ct, fixture.Echo, nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(3 * time.Second)
		for srv.DropConnections() != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if srv.DropConnections() != 0 {
			t.Fatalf("the idle connection was not closed")
		}
		if _, err := do(t, tr, ct, fixture.Echo, nil); err != nil {
			t.Fatal(err)
		}
		if c := srv.Connections(); c != 2 {
			t.Errorf("%d connections, want 2", c)
		}
	})
}

func TestOversizedMessage(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, map[string]any{"max_message_bytes": 1024})
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	_, err := do(t, tr, ct, fixture.Echo, map[string]any{"big": strings.Repeat("x", 4096)})
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge {
		t.Errorf("err = %v, want payload_too_large", err)
	}
	if _, err := do(t, tr, ct, fixture.Echo, map[string]any{"small": 1}); err != nil {
		t.Errorf("the next call reconnects: %v", err)
	}
}

func TestHandshake(t *testing.T) {
	seen := make(chan http.Header, 4)
	queries := make(chan string, 4)
	up := gws.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		queries <- r.URL.RawQuery
		if r.Header.Get("X-Deny") != "" {
			http.Error(w, "go away", http.StatusForbidden)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			f, err := readFrame(ws)
			if err != nil {
				return
			}
			_ = ws.WriteJSON(map[string]any{"type": "result", "id": f["id"], "result": "ok"})
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	tr := newTransport(t, nil)

	ct := tmpl(t, map[string]any{"envelope": true, "url": url, "headers": map[string]string{"X-Client": "utcpd"},
		"auth": map[string]any{"auth_type": "api_key", "api_key": "Bearer s3cret", "var_name": "Authorization"}})
	if _, err := do(t, tr, ct, "t", nil); err != nil {
		t.Fatal(err)
	}
	h := <-seen
	<-queries
	if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Client") != "utcpd" {
		t.Errorf("handshake headers: %v", h)
	}
	ct = tmpl(t, map[string]any{"envelope": true, "name": "q", "url": url, "auth": map[string]any{"auth_type": "api_key", "api_key": "k1", "var_name": "key", "location": "query"}})
	if _, err := do(t, tr, ct, "t", nil); err != nil {
		t.Fatal(err)
	}
	<-seen
	if q := <-queries; q != "key=k1" {
		t.Errorf("query = %q", q)
	}
	ct = tmpl(t, map[string]any{"envelope": true, "name": "b", "url": url, "auth": map[string]any{"auth_type": "basic", "username": "u", "password": "p"}})
	if _, err := do(t, tr, ct, "t", nil); err != nil {
		t.Fatal(err)
	}
	if h := <-seen; h.Get("Authorization") != "Basic dTpw" {
		t.Errorf("basic: %q", h.Get("Authorization"))
	}
	<-queries
	ct = tmpl(t, map[string]any{"envelope": true, "name": "d", "url": url, "headers": map[string]string{"X-Deny": "1"}})
	_, err := do(t, tr, ct, "t", nil)
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Status != http.StatusForbidden || !strings.Contains(err.Error(), "go away") {
		t.Errorf("refused handshake: err = %v, want a transport error with status 403 and the body", err)
	}
}

func TestCloseFailsCallsInFlight(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr, err := websocket.New(transports.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	errc := make(chan error, 1)
	go func() {
		_, err := tr.CallTool(t.Context(), callOf(ct, fixture.Sleep, map[string]any{"ms": 10000}))
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	tr.Close()
	select {
	case err := <-errc:
		if utcp.CodeOf(err) != utcp.CodeUnavailable {
			t.Errorf("err = %v, want unavailable", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the call in flight did not end at Close")
	}
	if _, err := tr.CallTool(t.Context(), callOf(ct, fixture.Echo, nil)); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("call after Close: %v", err)
	}
}

func TestStreamEvents(t *testing.T) {
	_, url := serveFixture(t, fixture.New(), websocketserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	st, err := tr.CallToolStream(t.Context(), callOf(ct, fixture.Echo, map[string]any{"a": "b"}))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Recv()
	if err != nil || !cmp.Equal(map[string]any{"a": "b"}, ev.Data) {
		t.Fatalf("result as an event: %v, %v", ev, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the result: %v, want io.EOF", err)
	}
	st.Close()
	st, err = tr.CallToolStream(t.Context(), callOf(ct, fixture.Fail, map[string]any{"message": "nope"}))
	if err != nil {
		t.Fatal(err)
	}
	var te *utcp.ToolError
	if _, err := st.Recv(); !errors.As(err, &te) || te.Message != "nope" {
		t.Errorf("fail: %v, want a ToolError", err)
	}
	st.Close()
}

// startWSPeer starts testdata/<script> on the ws npm peer (gated by
// transporttest.NPMPeer) and returns its ws:// URL.
func startWSPeer(t *testing.T, script string) string {
	t.Helper()
	peer := transporttest.NPMPeer(t, "ws")
	var hello struct {
		Port    int    `json:"port"`
		Version string `json:"ws_version"`
	}
	peer.Start(t, filepath.Join("testdata", script), &hello)
	t.Logf("%s: ws %s serving on 127.0.0.1:%d", script, hello.Version, hello.Port)
	return fmt.Sprintf("ws://127.0.0.1:%d/", hello.Port)
}

// TestNodePeer runs the transport against a WebSocket server built on the
// ws npm package (testdata/echo-server.mjs), a third-party implementation
// of the protocol. It needs node and `npm ci` in testdata/peer; set
// UTCPD_NPM_PEERS=1 to run it (CI does), and it fails when that is set
// and the peer is missing.
func TestNodePeer(t *testing.T) {
	url := startWSPeer(t, "echo-server.mjs")

	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "name": "peer", "url": url, "protocol": "utcpd.v1"})
	m, err := tr.RegisterManual(t.Context(), ct)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	if len(m.Tools) == 0 {
		t.Fatalf("the peer's manual has no tools")
	}
	v, err := do(t, tr, ct, "echo", map[string]any{"text": "héllo 🌍", "n": 1.5})
	if err != nil || !cmp.Equal(map[string]any{"text": "héllo 🌍", "n": num("1.5")}, v) {
		t.Errorf("echo: %v, %v", v, err)
	}
	v, err = do(t, tr, ct, "count", map[string]any{"n": 4})
	if err != nil || !cmp.Equal([]any{num("1"), num("2"), num("3"), num("4")}, v) {
		t.Errorf("count: %v, %v", v, err)
	}
	var te *utcp.ToolError
	if _, err := do(t, tr, ct, "fail", map[string]any{"message": "peer says no"}); !errors.As(err, &te) || te.Message != "peer says no" {
		t.Errorf("fail: %v", err)
	}
	if _, err := do(t, tr, ct, "nope", nil); !errors.Is(err, transports.ErrToolNotFound) {
		t.Errorf("unknown tool: %v", err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 32 {
		wg.Go(func() {
			v, err := do(t, tr, ct, "echo", map[string]any{"i": i})
			if err != nil || !cmp.Equal(map[string]any{"i": num(fmt.Sprint(i))}, v) {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d of 32 concurrent calls failed", bad.Load())
	}
	refused := tmpl(t, map[string]any{"envelope": true, "name": "peer2", "url": url, "protocol": "mqtt"})
	if _, err := do(t, tr, refused, "echo", nil); !strings.Contains(fmt.Sprint(err), "refused subprotocol") {
		t.Errorf("subprotocol the peer does not speak: %v", err)
	}
}

// TestNodePeerPlain runs the transport's default, python-utcp's plain
// frames, against a server built on the ws npm package
// (testdata/plain-server.mjs) that knows nothing of the utcpd envelope:
// the templates set neither message nor envelope. Discovery takes its
// bare manual; each tool, at a URL of its own, answers the arguments sent
// as one JSON text frame with one frame; count streams a frame a number
// and ends with a normal close. Gated like TestNodePeer.
func TestNodePeerPlain(t *testing.T) {
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"name": "plain", "url": startWSPeer(t, "plain-server.mjs")})
	m, err := tr.RegisterManual(t.Context(), ct)
	if err != nil {
		t.Fatalf("RegisterManual: %v", err)
	}
	tools := map[string]*utcp.CallTemplate{}
	for _, tool := range m.Tools {
		if tool.ToolCallTemplate == nil {
			t.Fatalf("tool %s has no template of its own", tool.Name)
		}
		own, err := websocket.ParseTemplate(tool.ToolCallTemplate.Raw)
		if err != nil {
			t.Fatalf("tool %s: %v", tool.Name, err)
		}
		tools[tool.Name] = &own
	}
	if len(tools) != 3 || tools["echo"] == nil || tools["greet"] == nil || tools["count"] == nil {
		t.Fatalf("the peer's manual: %v, want echo, greet and count", m.Tools)
	}

	args := map[string]any{"text": "héllo 🌍", "n": 1.5, "list": []any{1, "two", nil}}
	v, err := do(t, tr, tools["echo"], "echo", args)
	if err != nil || !cmp.Equal(map[string]any{"text": "héllo 🌍", "n": num("1.5"), "list": []any{num("1"), "two", nil}}, v) {
		t.Errorf("echo: %v, %v", v, err)
	}
	if v, err := do(t, tr, tools["greet"], "greet", map[string]any{"name": "Ada"}); err != nil || v != "hello, Ada" {
		t.Errorf("greet: %v, %v; want the text frame as a string", v, err)
	}
	st, err := tr.CallToolStream(t.Context(), callOf(tools["count"], "count", map[string]any{"n": 4}))
	if err != nil {
		t.Fatal(err)
	}
	events, err := transporttest.Collect(t, st)
	var got []any
	for _, ev := range events {
		got = append(got, ev.Data)
	}
	if err != nil || !cmp.Equal([]any{num("1"), num("2"), num("3"), num("4")}, got) {
		t.Errorf("count stream: %v, %v; want 1..4 and the end at the normal close", got, err)
	}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 16 {
		wg.Go(func() {
			v, err := do(t, tr, tools["echo"], "echo", map[string]any{"i": i})
			if err != nil || !cmp.Equal(map[string]any{"i": num(fmt.Sprint(i))}, v) {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d of 16 concurrent calls failed", bad.Load())
	}
}

// BenchmarkCount streams count(n) from the demo server, through the
// transport and, for comparison, with a plain gorilla client reading the
// envelope frames. It reports events/s, MB/s of frames and the mean time
// to the first event.
func BenchmarkCount(b *testing.B) {
	const n = 10000
	_, url := serveFixture(b, fixture.New(), websocketserver.Options{})
	frameBytes := int64(0)
	for i := 1; i <= n; i++ {
		frameBytes += int64(len(fmt.Sprintf(`{"type":"event","id":"1","data":%d}`, i)))
	}
	report := func(b *testing.B, start time.Time, firsts time.Duration) {
		b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "events/s")
		b.ReportMetric(float64(firsts.Nanoseconds())/float64(b.N), "ns/first-event")
	}
	b.Run("transport", func(b *testing.B) {
		tr := newTransport(b, nil)
		ct := tmpl(b, map[string]any{"envelope": true, "url": url})
		if _, err := tr.RegisterManual(b.Context(), ct); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(frameBytes)
		b.ReportAllocs()
		var firsts time.Duration
		start := time.Now()
		for b.Loop() {
			t0 := time.Now()
			st, err := tr.CallToolStream(b.Context(), callOf(ct, fixture.Count, map[string]any{"n": n}))
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for {
				if _, err := st.Recv(); err != nil {
					if !errors.Is(err, io.EOF) {
						b.Fatal(err)
					}
					break
				}
				if got == 0 {
					firsts += time.Since(t0)
				}
				got++
			}
			st.Close()
			if got != n {
				b.Fatalf("%d events", got)
			}
		}
		report(b, start, firsts)
	})
	b.Run("direct", func(b *testing.B) {
		ws, _, err := gws.DefaultDialer.DialContext(b.Context(), url, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ws.Close()
		b.SetBytes(frameBytes)
		b.ReportAllocs()
		var firsts time.Duration
		start := time.Now()
		id := 0
		for b.Loop() {
			id++
			t0 := time.Now()
			if err := ws.WriteJSON(map[string]any{"type": "call", "id": fmt.Sprint(id), "tool": "count", "arguments": map[string]any{"n": n}}); err != nil {
				b.Fatal(err)
			}
			got := 0
			for {
				var f struct {
					Type string `json:"type"`
					Data any    `json:"data"`
				}
				if err := ws.ReadJSON(&f); err != nil {
					b.Fatal(err)
				}
				if f.Type == "end" {
					break
				}
				if got == 0 {
					firsts += time.Since(t0)
				}
				got++
			}
			if got != n {
				b.Fatalf("%d events", got)
			}
		}
		report(b, start, firsts)
	})
}

func TestCloseInterruptsRecv(t *testing.T) {
	f := fixture.New()
	_, url := serveFixture(t, f, websocketserver.Options{})
	tr := newTransport(t, nil)
	ct := tmpl(t, map[string]any{"envelope": true, "url": url})
	st, err := tr.CallToolStream(t.Context(), callOf(ct, fixture.Count, map[string]any{"n": 2, "delay_ms": 10000}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	st.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Errorf("Recv returned an event after Close")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not interrupt a waiting Recv")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v", took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.Canceled() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if f.Canceled() == 0 {
		t.Errorf("the server did not see the cancel frame")
	}
}

// FuzzRenderMessage renders arbitrary message templates: it must never
// panic, and a JSON object or array template must always render to valid
// JSON whatever the argument values hold.
func FuzzRenderMessage(f *testing.F) {
	f.Add(`{"q":"UTCP_ARG_q_UTCP_END","n":"UTCP_ARG_n_UTCP_ARG"}`, `he said "}{`)
	f.Add(`"text UTCP_ARG_q_UTCP_END"`, `x`)
	f.Add(`"[\"UTCP_ARG_q_UTCP_END\"]"`, `\u0000`)
	f.Add(`["UTCP_ARG_missing_UTCP_END"]`, ``)
	f.Fuzz(func(t *testing.T, message, value string) {
		if !json.Valid([]byte(message)) {
			return
		}
		out, err := websocket.RenderMessage(json.RawMessage(message), map[string]any{"q": value, "n": 1})
		if err != nil {
			if c := utcp.CodeOf(err); c != utcp.CodeInvalidArguments && c != utcp.CodeInvalidTemplate {
				t.Fatalf("error with code %s: %v", c, err)
			}
			return
		}
		if m := strings.TrimSpace(message); strings.HasPrefix(m, "{") || strings.HasPrefix(m, "[") {
			if !json.Valid(out) {
				t.Fatalf("template %s rendered to invalid JSON %q", message, out)
			}
		}
	})
}
