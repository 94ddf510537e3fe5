package webrtc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	pion "github.com/pion/webrtc/v4"
	"go.uber.org/goleak"

	"github.com/utcpd/utcpd/examples/servers/webrtc/webrtcserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/webrtc"
	"github.com/utcpd/utcpd/utcp"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newTransport(t testing.TB, log *slog.Logger) *webrtc.Transport {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr, err := webrtc.New(transports.Options{Config: loopbackConfig, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func parse(t testing.TB, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "m", "call_template_type": "webrtc", "peer_id": webrtcserver.DefaultPeerID}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	tmpl, err := webrtc.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

// manualCaller is a *webrtc.Transport, or one wrapped by transports.Count.
type manualCaller interface {
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
}

func callCtx(ctx context.Context, tr manualCaller, tmpl *utcp.CallTemplate, tool string, args map[string]any) (*utcp.Result, error) {
	return tr.CallTool(ctx, &utcp.Call{Tool: tmpl.Name + "." + tool, Manual: tmpl.Name, Name: tool, Template: tmpl, Arguments: args})
}

func call(t *testing.T, tr manualCaller, tmpl *utcp.CallTemplate, tool string, args map[string]any) (*utcp.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return callCtx(ctx, tr, tmpl, tool, args)
}

func register(t *testing.T, tr manualCaller, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return tr.RegisterManual(ctx, tmpl)
}

// closedURL returns a URL of scheme on a loopback port nobody listens on.
func closedURL(t *testing.T, scheme, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return scheme + "://" + addr + path
}

func TestTemplateValidation(t *testing.T) {
	cases := []struct {
		name  string
		field map[string]any
		want  string // substring of the error; "" means valid
	}{
		{"minimal http", nil, ""},
		{"ws", map[string]any{"signaling_server": "wss://signal.example.com/socket"}, ""},
		{"v0.1 example", map[string]any{"signaling_server": "wss://signaling.example.com/socket", "peer_id": "server-endpoint-123", "data_channel_name": "tools"}, ""},
		{"no signaling", map[string]any{"signaling_server": nil}, "signaling_server"},
		{"bad scheme", map[string]any{"signaling_server": "ftp://x/y"}, "signaling_server"},
		{"no host", map[string]any{"signaling_server": "http:///signal"}, "signaling_server"},
		{"variable url", map[string]any{"signaling_server": "${SIGNAL_URL}"}, ""},
		{"no peer", map[string]any{"peer_id": nil}, "peer_id"},
		{"ice string urls", map[string]any{"ice_servers": []any{map[string]any{"urls": "stun:stun.example.com:3478"}}}, ""},
		{"ice list urls", map[string]any{"ice_servers": []any{map[string]any{"urls": []string{"turn:turn.example.com", "turns:turn.example.com"}, "username": "u", "credential": "${TURN_PASSWORD}"}}}, ""},
		{"ice legacy url", map[string]any{"ice_servers": []any{map[string]any{"url": "stun:stun.example.com"}}}, ""},
		{"ice bad url", map[string]any{"ice_servers": []any{map[string]any{"urls": "http://stun.example.com"}}}, "ice_servers"},
		{"ice no url", map[string]any{"ice_servers": []any{map[string]any{"username": "u"}}}, "ice_servers"},
		{"ice urls number", map[string]any{"ice_servers": []any{map[string]any{"urls": 7}}}, "ice_servers"},
		{"bad header", map[string]any{"headers": map[string]string{"Bad Header": "x"}}, "headers"},
		{"negative connect", map[string]any{"connect_timeout": -1}, "connect_timeout"},
		{"negative timeout", map[string]any{"timeout": -5}, "timeout"},
		{"trickle over http", map[string]any{"trickle": true}, "trickle"},
		{"no trickle over ws", map[string]any{"signaling_server": "ws://127.0.0.1:1/ws", "trickle": false}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := map[string]any{"name": "m", "call_template_type": "webrtc", "signaling_server": "http://127.0.0.1:1/signal", "peer_id": "p"}
			for k, v := range c.field {
				if v == nil {
					delete(m, k)
					continue
				}
				m[k] = v
			}
			raw, _ := json.Marshal(m)
			_, err := webrtc.ParseTemplate(raw)
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

// TestInsecureSignalingRefused: plain http:// and ws:// signaling reach
// only loopback hosts unless the template sets allow_insecure.
func TestInsecureSignalingRefused(t *testing.T) {
	tr := newTransport(t, nil)
	for _, u := range []string{"http://192.0.2.1/signal", "ws://192.0.2.1/ws", "http://example.com/signal"} {
		_, err := register(t, tr, parse(t, map[string]any{"signaling_server": u}))
		if utcp.CodeOf(err) != utcp.CodeInvalidTemplate || !strings.Contains(err.Error(), "allow_insecure") {
			t.Errorf("%s: err = %v, want invalid_template mentioning allow_insecure", u, err)
		}
	}
	// With allow_insecure the URL is tried (and here fails to connect
	// within the short connect timeout).
	_, err := register(t, tr, parse(t, map[string]any{"signaling_server": "http://192.0.2.1/signal", "allow_insecure": true, "connect_timeout": 200}))
	if code := utcp.CodeOf(err); code == utcp.CodeInvalidTemplate || err == nil {
		t.Errorf("allow_insecure: err = %v (%s), want a connection failure", err, code)
	}
}

// TestSignalingDown: an endpoint nobody listens on is discovery_failed
// (registration) or transport_error (a call), naming the endpoint; a
// failed attempt delays the next one (backoff), and a call whose
// deadline comes first fails at once saying so.
func TestSignalingDown(t *testing.T) {
	for _, scheme := range []string{"http", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			tr := newTransport(t, nil)
			u := closedURL(t, scheme, "/signal")
			tmpl := parse(t, map[string]any{"signaling_server": u})
			_, err := register(t, tr, tmpl)
			if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), u) {
				t.Fatalf("register: err = %v (%s), want discovery_failed naming %s", err, utcp.CodeOf(err), u)
			}
			other := parse(t, map[string]any{"name": "other", "signaling_server": u})
			_, err = call(t, tr, other, "add", map[string]any{"a": 1, "b": 2})
			if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), u) {
				t.Fatalf("call: err = %v (%s), want transport_error naming %s", err, utcp.CodeOf(err), u)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			defer cancel()
			_, err = callCtx(ctx, tr, other, "add", map[string]any{"a": 1, "b": 2})
			if err == nil || !strings.Contains(err.Error(), "next connection attempt") {
				t.Errorf("call during backoff: err = %v, want it to mention the next connection attempt", err)
			}
		})
	}
}

// TestSignalingBadAnswers: answers that are not usable are
// discovery_failed naming the endpoint and what was wrong.
func TestSignalingBadAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"malformed sdp", 200, `{"type":"answer","sdp":"this is not SDP"}`, "SDP cannot be used"},
		{"no sdp", 200, `{"type":"answer"}`, `no "sdp"`},
		{"not json", 200, `<html>oops</html>`, "not a JSON signaling message"},
		{"wrong type", 200, `{"type":"offer","sdp":"v=0"}`, `got "offer"`},
		{"refused", 200, `{"type":"error","error":"peer busy"}`, "peer busy"},
		{"http 500", 500, `{"type":"error","error":"boom"}`, "HTTP 500"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
			}))
			t.Cleanup(srv.Close)
			tr := newTransport(t, nil)
			tmpl := parse(t, map[string]any{"signaling_server": srv.URL + "/signal"})
			_, err := register(t, tr, tmpl)
			if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v (%s), want discovery_failed naming %s and %q", err, utcp.CodeOf(err), srv.URL, c.want)
			}
		})
	}
	t.Run("websocket malformed sdp", func(t *testing.T) {
		up := websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
			_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"answer","sdp":"garbage"}`))
			_, _, _ = ws.ReadMessage() // until the client hangs up
		}))
		t.Cleanup(srv.Close)
		tr := newTransport(t, nil)
		u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"
		_, err := register(t, tr, parse(t, map[string]any{"signaling_server": u}))
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "SDP cannot be used") {
			t.Fatalf("err = %v (%s), want discovery_failed naming %s and the SDP", err, utcp.CodeOf(err), u)
		}
	})
}

// TestICENeverConnects: an answer whose peer is gone (its candidates lead
// nowhere) ends with timeout once connect_timeout passes, long before
// ICE itself would give up.
func TestICENeverConnects(t *testing.T) {
	api, err := webrtc.LoopbackNetwork().API()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sig webrtc.Signal
		_ = json.NewDecoder(r.Body).Decode(&sig)
		pc, err := api.NewPeerConnection(pion.Configuration{})
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer pc.GracefulClose() // gone before the client's checks arrive
		_ = pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: sig.SDP})
		ans, _ := pc.CreateAnswer(nil)
		done := pion.GatheringCompletePromise(pc)
		_ = pc.SetLocalDescription(ans)
		<-done
		_ = json.NewEncoder(w).Encode(webrtc.Signal{Type: webrtc.SignalAnswer, SDP: pc.LocalDescription().SDP})
	}))
	t.Cleanup(srv.Close)
	tr := newTransport(t, nil)
	tmpl := parse(t, map[string]any{"signaling_server": srv.URL + "/signal", "connect_timeout": 300})
	start := time.Now()
	_, err = register(t, tr, tmpl)
	took := time.Since(start)
	if utcp.CodeOf(err) != utcp.CodeTimeout || !strings.Contains(err.Error(), "connect_timeout") {
		t.Fatalf("err = %v (%s), want timeout naming connect_timeout", err, utcp.CodeOf(err))
	}
	if took > 10*time.Second {
		t.Errorf("took %v with connect_timeout 300ms", took)
	}
}

// TestPeerClosesChannelMidCall: the calls in flight fail with a
// transport_error when the peer closes the data channel, and the next
// call reconnects.
func TestPeerClosesChannelMidCall(t *testing.T) {
	f := fixture.New()
	s, httpURL, _ := serveFixture(t, f, webrtcserver.Options{})
	tr := newTransport(t, nil)
	tmpl := parse(t, map[string]any{"signaling_server": httpURL})
	if _, err := register(t, tr, tmpl); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := call(t, tr, tmpl, "sleep", map[string]any{"ms": 20000})
			errc <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.InFlight() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.CloseChannels(); n != 1 {
		t.Fatalf("CloseChannels closed %d channels, want 1", n)
	}
	for range 2 {
		select {
		case err := <-errc:
			if utcp.CodeOf(err) != utcp.CodeTransportError {
				t.Errorf("call in flight: err = %v (%s), want transport_error", err, utcp.CodeOf(err))
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the calls in flight did not end after the channel closed")
		}
	}
	res, err := call(t, tr, tmpl, "add", map[string]any{"a": 2, "b": 3})
	if err != nil {
		t.Fatalf("call after the channel closed: %v", err)
	}
	if got, _ := json.Marshal(res.Value); string(got) != `{"sum":5}` {
		t.Errorf("add = %s", got)
	}
	if n := s.Peers(); n != 2 {
		t.Errorf("the server accepted %d peer connections, want 2 (one reconnection)", n)
	}
}

// TestOnePeerConnectionPerManual: discovery and every call share one peer
// connection.
func TestOnePeerConnectionPerManual(t *testing.T) {
	s, _, wsURL := serveFixture(t, fixture.New(), webrtcserver.Options{})
	tr := newTransport(t, nil)
	tmpl := parse(t, map[string]any{"signaling_server": wsURL})
	m, err := register(t, tr, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tools) != len(fixture.Tools()) {
		t.Errorf("manual has %d tools", len(m.Tools))
	}
	for i := range 10 {
		if _, err := call(t, tr, tmpl, "add", map[string]any{"a": i, "b": 1}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Peers(); n != 1 {
		t.Errorf("the server accepted %d peer connections, want 1", n)
	}
}

// TestBadMessagesIgnored: answers with unknown ids, invalid JSON or
// unknown types are logged and dropped, and the waiting call ends with
// timeout at its deadline; a chunk out of sequence fails its call at once
// (its answer is lost); the connection keeps working throughout.
func TestBadMessagesIgnored(t *testing.T) {
	intercept := func(msg []byte, send func([]byte)) bool {
		var m struct {
			Type, ID, Tool string
		}
		if json.Unmarshal(msg, &m) != nil || m.Type != webrtc.TypeToolCall {
			return false
		}
		if m.Tool == "sleep" {
			// A chunk out of sequence: the answer is lost, the call fails.
			send([]byte(`{"type":"chunk","id":"` + m.ID + `","seq":3,"last":true,"data":"e30="}`))
			return true
		}
		if m.Tool != "echo" {
			return false
		}
		send([]byte(`{"type":"tool_response","id":"no-such-call","output":1}`))
		send([]byte(`{"type":"tool_response","id":12345,"output":1}`))
		send([]byte(`this is not JSON`))
		send([]byte(`{"type":"bogus","id":"` + m.ID + `"}`))
		send([]byte(`{"id":"` + m.ID + `"}`))
		send([]byte{0xff, 0x00, 0x01})
		return true
	}
	s, httpURL, _ := serveFixture(t, fixture.New(), webrtcserver.Options{Intercept: intercept})
	logs := &syncBuffer{}
	tr := newTransport(t, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	tmpl := parse(t, map[string]any{"signaling_server": httpURL, "timeout": 300})
	if _, err := register(t, tr, tmpl); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, tr, tmpl, "echo", map[string]any{"x": 1})
	if utcp.CodeOf(err) != utcp.CodeTimeout {
		t.Fatalf("echo with garbage answers: err = %v (%s), want timeout", err, utcp.CodeOf(err))
	}
	_, err = call(t, tr, tmpl, "sleep", map[string]any{"ms": 1})
	if utcp.CodeOf(err) != utcp.CodeTransportError || !strings.Contains(err.Error(), "chunk 3") {
		t.Errorf("sleep answered by a chunk out of sequence: err = %v (%s), want transport_error naming the chunk", err, utcp.CodeOf(err))
	}
	res, err := call(t, tr, tmpl, "add", map[string]any{"a": 1, "b": 1})
	if err != nil {
		t.Fatalf("add after the garbage: %v", err)
	}
	if got, _ := json.Marshal(res.Value); string(got) != `{"sum":2}` {
		t.Errorf("add = %s", got)
	}
	if n := s.Peers(); n != 1 {
		t.Errorf("the connection was replaced (%d peer connections); garbage must not drop it", n)
	}
	out := logs.String()
	for _, want := range []string{"not a JSON object", `unknown type \"bogus\"`, `no \"type\"`, "no-such-call", "12345", "unusable chunk"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log does not mention %s:\n%s", want, out)
		}
	}
}

// TestSignalingAuth: headers and auth go with the signaling request.
func TestSignalingAuth(t *testing.T) {
	s, err := webrtcserver.New(fixture.New(), webrtcserver.Options{Network: webrtc.LoopbackNetwork()})
	if err != nil {
		t.Fatal(err)
	}
	inner := s.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "secret" || r.Header.Get("X-Client") != "utcpd-test" {
			http.Error(w, `{"type":"error","error":"who are you?"}`, http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { _ = s.Close(); srv.Close() })
	tr := newTransport(t, nil)
	for _, path := range []string{"/signal", "/ws"} {
		u := srv.URL + path
		if path == "/ws" {
			u = "ws" + strings.TrimPrefix(u, "http")
		}
		bad := parse(t, map[string]any{"name": "bad" + path[1:], "signaling_server": u})
		_, err := register(t, tr, bad)
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "401") {
			t.Errorf("%s without credentials: err = %v, want discovery_failed with HTTP 401", path, err)
		}
		good := parse(t, map[string]any{"name": "good" + path[1:], "signaling_server": u, "headers": map[string]string{"X-Client": "utcpd-test"},
			"auth": map[string]any{"auth_type": "api_key", "api_key": "secret", "var_name": "X-Api-Key"}})
		if _, err := register(t, tr, good); err != nil {
			t.Errorf("%s with credentials: %v", path, err)
		}
	}
}

// TestUnknownPeerRefused: the signaling server's refusal of the peer_id
// is discovery_failed quoting it.
func TestUnknownPeerRefused(t *testing.T) {
	_, httpURL, wsURL := serveFixture(t, fixture.New(), webrtcserver.Options{})
	tr := newTransport(t, nil)
	for _, u := range []string{httpURL, wsURL} {
		_, err := register(t, tr, parse(t, map[string]any{"signaling_server": u, "peer_id": "someone-else"}))
		if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed || !strings.Contains(err.Error(), "unknown peer_id someone-else") {
			t.Errorf("%s: err = %v, want discovery_failed quoting the refusal", u, err)
		}
	}
}

// TestNoLeaksAfterDeregister: deregistering the last registration closes
// the peer connection and waits for every goroutine of it, on both
// sides, without closing the transport.
func TestNoLeaksAfterDeregister(t *testing.T) {
	for _, ws := range []bool{false, true} {
		t.Run(fmt.Sprintf("ws=%v", ws), func(t *testing.T) {
			_, httpURL, wsURL := serveFixture(t, fixture.New(), webrtcserver.Options{})
			u := httpURL
			if ws {
				u = wsURL
			}
			tr := transports.Count(webrtc.Type, newTransport(t, nil))
			ignore := goleak.IgnoreCurrent()
			tmpl := parse(t, map[string]any{"signaling_server": u})
			if _, err := register(t, tr, tmpl); err != nil {
				t.Fatal(err)
			}
			if _, err := call(t, tr, tmpl, "echo", map[string]any{"blob": strings.Repeat("x", 100_000)}); err != nil {
				t.Fatal(err)
			}
			if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
				t.Fatal(err)
			}
			if err := goleak.Find(ignore); err != nil {
				t.Errorf("goroutines left after DeregisterManual:\n%v", err)
			}
			if _, err := call(t, tr, tmpl, "add", map[string]any{"a": 1, "b": 1}); utcp.CodeOf(err) != utcp.CodeManualNotFound {
				t.Errorf("call after DeregisterManual: err = %v, want manual_not_found", err)
			}
		})
	}
}

// TestConfig: the transport's configuration is checked.
func TestConfig(t *testing.T) {
	for _, cfg := range []string{`{"mdns":"loud"}`, `{"candidate_ips":["not-an-ip"]}`, `{"network_types":["sctp"]}`, `{"max_chunk_bytes":10}`, `{"max_message_bytes":-1}`, `[1]`} {
		if _, err := webrtc.New(transports.Options{Config: json.RawMessage(cfg)}); utcp.CodeOf(err) != utcp.CodeInvalidConfig {
			t.Errorf("%s: err = %v, want invalid_config", cfg, err)
		}
	}
	logs := &syncBuffer{}
	tr, err := webrtc.New(transports.Options{Config: json.RawMessage(`{"mdns":"disabled","max_chunk_byte":1}`), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = tr.Close()
	if !strings.Contains(logs.String(), "max_chunk_byte") {
		t.Errorf("an unknown configuration field was not logged: %s", logs)
	}
}

// TestSmallChunks: with tiny chunks on both sides, large arguments and
// results still arrive whole.
func TestSmallChunks(t *testing.T) {
	_, _, wsURL := serveFixture(t, fixture.New(), webrtcserver.Options{MaxChunkBytes: 1024})
	tr, err := webrtc.New(transports.Options{Config: json.RawMessage(`{"candidate_ips":["127.0.0.1"],"network_types":["udp4"],"mdns":"disabled","max_chunk_bytes":1024}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	tmpl := parse(t, map[string]any{"signaling_server": wsURL})
	if _, err := register(t, tr, tmpl); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("héllo wörld ", 20_000)
	res, err := call(t, tr, tmpl, "echo", map[string]any{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := res.Value.(map[string]any)["text"].(string); got != text {
		t.Errorf("echo returned %d bytes, want %d", len(got), len(text))
	}
}

// TestMessageTooLarge: an answer reassembled past max_message_bytes fails
// its call with payload_too_large; the connection goes on.
func TestMessageTooLarge(t *testing.T) {
	_, httpURL, _ := serveFixture(t, fixture.New(), webrtcserver.Options{})
	tr, err := webrtc.New(transports.Options{Config: json.RawMessage(`{"candidate_ips":["127.0.0.1"],"network_types":["udp4"],"mdns":"disabled","max_message_bytes":100000}`)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	tmpl := parse(t, map[string]any{"signaling_server": httpURL})
	_, err = call(t, tr, tmpl, "echo", map[string]any{"blob": strings.Repeat("x", 300_000)})
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge || !errors.Is(err, transports.ErrTooLarge) {
		t.Fatalf("echo of 300 KB with a 100 KB cap: err = %v (%s), want payload_too_large", err, utcp.CodeOf(err))
	}
	if _, err := call(t, tr, tmpl, "add", map[string]any{"a": 1, "b": 2}); err != nil {
		t.Errorf("add after the oversized answer: %v", err)
	}
}

// TestStreamCollected: CallTool on a streaming tool returns its events as
// a list.
func TestStreamCollected(t *testing.T) {
	_, httpURL, _ := serveFixture(t, fixture.New(), webrtcserver.Options{})
	tr := newTransport(t, nil)
	tmpl := parse(t, map[string]any{"signaling_server": httpURL})
	res, err := call(t, tr, tmpl, "count", map[string]any{"n": 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(res.Value); string(got) != `[1,2,3]` {
		t.Errorf("count(3) = %s, want [1,2,3]", got)
	}
}

func BenchmarkConnect(b *testing.B) {
	for _, ws := range []bool{false, true} {
		name := "http"
		if ws {
			name = "websocket"
		}
		b.Run(name, func(b *testing.B) {
			_, httpURL, wsURL := serveFixture(b, fixture.New(), webrtcserver.Options{})
			u := httpURL
			if ws {
				u = wsURL
			}
			tr := transports.Count(webrtc.Type, newTransport(b, nil))
			tmpl := parse(b, map[string]any{"name": "bench", "signaling_server": u})
			b.ResetTimer()
			for b.Loop() {
				// Offer to open channel, plus one discovery round trip.
				if _, err := tr.RegisterManual(b.Context(), tmpl); err != nil {
					b.Fatal(err)
				}
				if err := tr.DeregisterManual(b.Context(), tmpl); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCalls(b *testing.B) {
	_, httpURL, _ := serveFixture(b, fixture.New(), webrtcserver.Options{})
	tr := newTransport(b, nil)
	tmpl := parse(b, map[string]any{"name": "bench", "signaling_server": httpURL})
	if _, err := tr.RegisterManual(b.Context(), tmpl); err != nil {
		b.Fatal(err)
	}
	for _, concurrency := range []int{1, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			var wg sync.WaitGroup
			work := make(chan struct{})
			start := time.Now()
			for range concurrency {
				wg.Go(func() {
					for range work {
						if _, err := callCtx(b.Context(), tr, tmpl, "add", map[string]any{"a": 1, "b": 2}); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
