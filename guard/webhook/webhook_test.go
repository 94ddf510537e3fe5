package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/guardtest"
	"github.com/utcpd/utcpd/guard/webhook"
)

const secret = "test-secret-0123456789"

// server is a decision service on 127.0.0.1 that checks every request's
// signature and answers by the requested tool's name.
type server struct {
	*httptest.Server
	done     chan struct{} // closed when the test ends: slow handlers return
	badSigs  atomic.Int32
	mu       sync.Mutex
	last     webhook.Request
	lastHdr  http.Header
	lastBody []byte
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{done: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(s.done) }) // runs first
	return s
}

func (s *server) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ts := r.Header.Get(webhook.TimestampHeader)
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		!webhook.Verify([]byte(secret), ts, body, r.Header.Get(webhook.SignatureHeader)) {
		s.badSigs.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var req webhook.Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strconv.FormatInt(req.Timestamp, 10) != ts {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.last, s.lastHdr, s.lastBody = req, r.Header.Clone(), body
	s.mu.Unlock()
	answer := func(status int, b string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, b)
	}
	name := req.Qualified
	if name == "" {
		name = req.Tool
	}
	switch name {
	case "m.read", "allow":
		answer(200, `{"decision":"allow"}`)
	case "m.delete", "deny":
		answer(200, `{"decision":"deny","reason":"deleting is off today","details":{"rule": "no-delete" ,"n":[1, 2]},"extra":1}`)
	case "m.pay":
		answer(200, `{"decision":"review","reason":"money"}`)
	case "accepted":
		answer(202, `{"decision":"allow","reason":"fine"}`)
	case "slow":
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case "slow_body":
		w.WriteHeader(200)
		io.WriteString(w, `{"decision":`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case "500":
		answer(500, `{"decision":"allow"}`)
	case "401":
		answer(401, `{"decision":"allow"}`)
	case "redirect":
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	case "garbage":
		answer(200, `<html>not json</html>`)
	case "truncated":
		answer(200, `{"decision":"allow"`)
	case "trailing":
		answer(200, `{"decision":"allow"} {"decision":"deny"}`)
	case "array":
		answer(200, `[{"decision":"allow"}]`)
	case "empty":
		answer(200, ``)
	case "no_content":
		w.WriteHeader(http.StatusNoContent)
	case "invalid":
		answer(200, `{"decision":"maybe","reason":"?"}`)
	case "error":
		answer(200, `{"decision":"error"}`)
	case "uppercase":
		answer(200, `{"decision":"ALLOW"}`)
	case "missing":
		answer(200, `{"reason":"forgot"}`)
	case "wrong_type":
		answer(200, `{"decision":true}`)
	case "huge":
		answer(200, `{"decision":"allow","reason":"`+strings.Repeat("x", 2<<20)+`"}`)
	case "long_reason":
		answer(200, `{"decision":"deny","reason":"`+strings.Repeat("é", 5000)+`"}`)
	default:
		answer(200, `{"decision":"deny","reason":"unknown tool"}`)
	}
}

func config(url string, more string) json.RawMessage {
	cfg := fmt.Sprintf(`{"kind":"webhook","url":%q,"secret":%q`, url, secret)
	if more != "" {
		cfg += "," + more
	}
	return json.RawMessage(cfg + "}")
}

func newGuard(t *testing.T, cfg json.RawMessage, log *slog.Logger) guard.Guard {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g, err := webhook.New(cfg, log)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg, err)
	}
	t.Cleanup(func() { g.(*webhook.Guard).Close() })
	return g
}

func TestConformance(t *testing.T) {
	s := newServer(t)
	guardtest.Run(t, func(t *testing.T) guard.Guard { return newGuard(t, config(s.URL, ""), nil) }, []guardtest.Case{
		{Name: "allow", Call: &guard.Call{Tool: "read", Qualified: "m.read", Arguments: map[string]any{"p": "x"}}, Want: guard.Allow},
		{Name: "deny", Call: &guard.Call{Tool: "m.delete", Qualified: "m.delete"}, Want: guard.Deny},
		{Name: "review", Call: &guard.Call{Tool: "m.pay"}, Want: guard.Review},
		{Name: "server_error", Call: &guard.Call{Tool: "500"}, Want: guard.Error},
		{Name: "garbage", Call: &guard.Call{Tool: "garbage"}, Want: guard.Error},
		{Name: "invalid_decision", Call: &guard.Call{Tool: "invalid"}, Want: guard.Error},
		{Name: "unanswered", Call: &guard.Call{Tool: "slow"}, Want: guard.Error, Blocks: true},
	})
	if n := s.badSigs.Load(); n != 0 {
		t.Errorf("%d requests had a bad signature", n)
	}
}

func TestDecisions(t *testing.T) {
	s := newServer(t)
	// Timeouts are tested with a short one; every other case has room
	// for a loaded machine.
	short := newGuard(t, config(s.URL, `"timeout":"300ms"`), nil)
	g := newGuard(t, config(s.URL, `"timeout":"20s"`), nil)
	tests := []struct {
		tool    string
		want    guard.Decision
		reason  string // substring
		details string // exact, "" for none
	}{
		{"allow", guard.Allow, "webhook decided allow", ""},
		{"deny", guard.Deny, "deleting is off today", `{"rule":"no-delete","n":[1,2]}`},
		{"accepted", guard.Allow, "fine", ""},
		{"m.pay", guard.Review, "money", ""},
		{"slow", guard.Error, "webhook: no answer within 300ms", ""},
		{"slow_body", guard.Error, "webhook: no answer within 300ms", ""},
		{"500", guard.Error, "answered HTTP 500", `{"status":500}`},
		{"401", guard.Error, "answered HTTP 401", `{"status":401}`},
		{"redirect", guard.Error, "answered HTTP 307", `{"status":307}`},
		{"garbage", guard.Error, "not a JSON object", `{"status":200}`},
		{"truncated", guard.Error, "does not parse", `{"status":200}`},
		{"trailing", guard.Error, "unexpected text after", `{"status":200}`},
		{"array", guard.Error, "not a JSON object", `{"status":200}`},
		{"empty", guard.Error, "not a JSON object", `{"status":200}`},
		{"no_content", guard.Error, "not a JSON object", `{"status":204}`},
		{"invalid", guard.Error, `invalid decision "maybe"`, `{"status":200}`},
		{"error", guard.Error, `invalid decision "error"`, `{"status":200}`},
		{"uppercase", guard.Error, `invalid decision "ALLOW"`, `{"status":200}`},
		{"missing", guard.Error, "has no decision", `{"status":200}`},
		{"wrong_type", guard.Error, "does not parse", `{"status":200}`},
		{"huge", guard.Error, "answer exceeds 1048576 bytes", `{"status":200}`},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			g := g
			if strings.HasPrefix(tc.tool, "slow") {
				g = short
			}
			start := time.Now()
			v, err := g.Evaluate(t.Context(), &guard.Call{Tool: tc.tool})
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); g == short && took > 300*time.Millisecond+guardtest.Prompt {
				t.Errorf("took %v with a 300ms timeout", took)
			}
			if v.Decision != tc.want || !strings.Contains(v.Reason, tc.reason) || string(v.Details) != tc.details {
				t.Errorf("verdict {%s %q %s}, want {%s ...%q... %s}", v.Decision, v.Reason, v.Details, tc.want, tc.reason, tc.details)
			}
		})
	}
	t.Run("long_reason", func(t *testing.T) {
		v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: "long_reason"})
		if v.Decision != guard.Deny || len([]rune(v.Reason)) != 1001 || !strings.HasSuffix(v.Reason, "é…") {
			t.Errorf("reason of %d runes: %.40q", len([]rune(v.Reason)), v.Reason)
		}
	})
	if n := s.badSigs.Load(); n != 0 {
		t.Errorf("%d requests had a bad signature", n)
	}
}

func TestRequest(t *testing.T) {
	s := newServer(t)
	g := newGuard(t, config(s.URL, `"headers":{"Authorization":"Bearer hdr-secret-value","X-Team":"ops"}`), nil)
	call := &guard.Call{Tool: "read", Qualified: "m.read", Manual: "m", Protocol: "http", Principal: "alice",
		Arguments: map[string]any{"path": "<a&b>", "n": 1.5, "nested": map[string]any{"ok": true}},
		Template:  json.RawMessage(`{"url":"https://x"}`)}
	before := time.Now().Unix()
	if v, _ := g.Evaluate(t.Context(), call); v.Decision != guard.Allow {
		t.Fatalf("verdict %+v", v)
	}
	s.mu.Lock()
	req, hdr, body := s.last, s.lastHdr, s.lastBody
	s.mu.Unlock()
	if req.Tool != "read" || req.Qualified != "m.read" || req.Manual != "m" || req.Protocol != "http" || req.Principal != "alice" ||
		req.Arguments["path"] != "<a&b>" || req.Timestamp < before || req.Timestamp > time.Now().Unix() {
		t.Errorf("request %+v", req)
	}
	// Field order and HTML characters as documented.
	if !bytes.HasPrefix(body, []byte(`{"tool":"read","qualified":"m.read","manual":"m","protocol":"http","arguments":{"n":1.5,"nested":{"ok":true},"path":"<a&b>"},"principal":"alice","kind":"tool","timestamp":`)) {
		t.Errorf("body %s", body)
	}
	// An MCP resource read says so.
	read := &guard.Call{Tool: "utcpd://m.srv/file:///a", Qualified: "utcpd://m.srv/file:///a", Manual: "m", Protocol: "mcp",
		Kind: guard.ActionResource, Arguments: map[string]any{"uri": "file:///a"}}
	if v, _ := g.Evaluate(t.Context(), read); v.Decision != guard.Deny || v.Reason != "unknown tool" {
		t.Fatalf("verdict %+v: want the test service's deny", v)
	}
	s.mu.Lock()
	req, body = s.last, s.lastBody
	s.mu.Unlock()
	if req.Kind != "resource" || req.Tool != read.Tool || !bytes.Contains(body, []byte(`"kind":"resource"`)) {
		t.Errorf("resource read: request %+v, body %s", req, body)
	}
	if hdr.Get("Authorization") != "Bearer hdr-secret-value" || hdr.Get("X-Team") != "ops" || hdr.Get("User-Agent") != "utcpd-guard-webhook" {
		t.Errorf("headers %v", hdr)
	}
	if sig := hdr.Get(webhook.SignatureHeader); !strings.HasPrefix(sig, "sha256=") || len(sig) != 7+64 {
		t.Errorf("signature header %q", sig)
	}
	// No arguments: an empty object, not null.
	g.Evaluate(t.Context(), &guard.Call{Tool: "allow"})
	s.mu.Lock()
	body = s.lastBody
	s.mu.Unlock()
	if !bytes.Contains(body, []byte(`"qualified":"","manual":"","protocol":"","arguments":{},"principal":""`)) {
		t.Errorf("body for an unresolved call without arguments: %s", body)
	}
	// Arguments with no JSON form fail closed without a request.
	v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: "allow", Arguments: map[string]any{"c": make(chan int)}})
	if v.Decision != guard.Error || !strings.Contains(v.Reason, "cannot encode") {
		t.Errorf("verdict %+v", v)
	}
}

func TestSign(t *testing.T) {
	// Computed independently (Python's hmac module).
	const want = "sha256=8f9010ec95b8f4a11a00a86456f53ae7dc8c97e9c569af0c7f0429763693f5cd"
	if got := webhook.Sign([]byte(secret), "1764500000", []byte(`{"tool":"a"}`)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
	if !webhook.Verify([]byte(secret), "1764500000", []byte(`{"tool":"a"}`), want) {
		t.Error("Verify refused a good signature")
	}
	for _, bad := range []struct{ ts, body, sig string }{
		{"1764500001", `{"tool":"a"}`, want},
		{"1764500000", `{"tool":"b"}`, want},
		{"1764500000", `{"tool":"a"}`, strings.ToUpper(want)},
		{"1764500000", `{"tool":"a"}`, ""},
	} {
		if webhook.Verify([]byte(secret), bad.ts, []byte(bad.body), bad.sig) {
			t.Errorf("Verify accepted %+v", bad)
		}
	}
}

func TestWrongSecret(t *testing.T) {
	s := newServer(t)
	g, err := webhook.New(json.RawMessage(fmt.Sprintf(`{"url":%q,"secret":"another-secret-entirely"}`, s.URL)), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: "allow"})
	if v.Decision != guard.Error || s.badSigs.Load() != 1 {
		t.Errorf("verdict %+v with %d bad signatures seen", v, s.badSigs.Load())
	}
}

func TestUnreachable(t *testing.T) {
	s := newServer(t)
	g := newGuard(t, config(s.URL, ""), nil)
	s.Close()
	v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: "allow"})
	if v.Decision != guard.Error || !strings.Contains(v.Reason, "request failed") {
		t.Errorf("verdict %+v", v)
	}
}

// TestSecretsNeverLogged runs every path with debug logging and checks
// that neither the secret nor a header value appears in the logs or the
// verdicts.
func TestSecretsNeverLogged(t *testing.T) {
	s := newServer(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	const hdrSecret = "hdr-secret-value"
	url := strings.Replace(s.URL, "http://", "http://user:url-password@", 1) + "/decide?token=url-token"
	g := newGuard(t, config(url, `"timeout":"200ms","headers":{"Authorization":"Bearer `+hdrSecret+`"}`), log)
	var verdicts []string
	for _, tool := range []string{"allow", "deny", "500", "garbage", "slow", "invalid", "redirect"} {
		v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: tool})
		verdicts = append(verdicts, v.Reason+string(v.Details))
	}
	s.Close()
	v, _ := g.Evaluate(t.Context(), &guard.Call{Tool: "allow"})
	verdicts = append(verdicts, v.Reason)
	// A short secret is warned about, by length only.
	if _, err := webhook.New(json.RawMessage(`{"url":"https://example.com","secret":"tiny-secret"}`), log); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, secretText := range []string{secret, hdrSecret, "url-password", "url-token", "tiny-secret"} {
		if strings.Contains(out, secretText) {
			t.Errorf("the logs contain %q:\n%s", secretText, out)
		}
		for _, r := range verdicts {
			if strings.Contains(r, secretText) {
				t.Errorf("a verdict contains %q: %s", secretText, r)
			}
		}
	}
	if !strings.Contains(out, "webhook secret is short") || !strings.Contains(out, "webhook decided") {
		t.Errorf("expected log lines missing:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestConfig(t *testing.T) {
	guardtest.RunConfig(t, webhook.Kind, []string{
		`{"url":"https://guard.example.com/decide","secret":"s3cret-s3cret-s3cret"}`,
		`{"kind":"webhook","name":"w","url":"http://127.0.0.1:9/x","secret":"s","timeout":"1s","headers":{"Authorization":"Bearer x"},"allow_insecure":false}`,
		`{"url":"http://localhost:8080","secret":"s"}`,
		`{"url":"http://[::1]:8080/","secret":"s"}`,
		`{"url":"http://127.8.9.10/","secret":"s"}`,
		`{"url":"http://guard.internal/decide","secret":"s","allow_insecure":true}`,
		`{"url":"HTTPS://guard.example.com","secret":"s"}`,
	}, []guardtest.ConfigCase{
		{Name: "empty", Config: `{}`, WantErr: "field url: a URL is required"},
		{Name: "no_secret", Config: `{"url":"https://x.example"}`, WantErr: "field secret is required"},
		{Name: "http_remote", Config: `{"url":"http://guard.example.com","secret":"s"}`, WantErr: "http is allowed only to a loopback address"},
		{Name: "http_lookalike", Config: `{"url":"http://127.0.0.1.example.com","secret":"s"}`, WantErr: "loopback"},
		{Name: "http_localhost_suffix", Config: `{"url":"http://localhost.example.com","secret":"s"}`, WantErr: "loopback"},
		{Name: "http_any", Config: `{"url":"http://0.0.0.0:80","secret":"s"}`, WantErr: "loopback"},
		{Name: "ftp", Config: `{"url":"ftp://x.example","secret":"s","allow_insecure":true}`, WantErr: `scheme "ftp"`},
		{Name: "relative", Config: `{"url":"/decide","secret":"s"}`, WantErr: "must be absolute"},
		{Name: "bad_url", Config: `{"url":"https://x.example/%zz","secret":"s"}`, WantErr: "invalid URL"},
		{Name: "typo", Config: `{"url":"https://x.example","secret":"s","timeot":"1s"}`, WantErr: `unknown field "timeot" (did you mean "timeout"?)`},
		{Name: "insecure_typo", Config: `{"url":"https://x.example","secret":"s","allow_unsafe":true}`, WantErr: `unknown field "allow_unsafe"`},
		{Name: "timeout", Config: `{"url":"https://x.example","secret":"s","timeout":"soon"}`, WantErr: `field timeout: invalid duration "soon"`},
		{Name: "headers_type", Config: `{"url":"https://x.example","secret":"s","headers":{"A":1}}`, WantErr: "want a string, got a JSON number"},
		{Name: "header_name", Config: `{"url":"https://x.example","secret":"s","headers":{"Bad Name":"x"}}`, WantErr: "not a valid header name"},
		{Name: "header_value", Config: `{"url":"https://x.example","secret":"s","headers":{"A":"x\r\nB: y"}}`, WantErr: "line break"},
		{Name: "header_reserved", Config: `{"url":"https://x.example","secret":"s","headers":{"x-utcpd-signature":"x"}}`, WantErr: "X-Utcpd-Signature is set by the guard"},
		{Name: "header_content_type", Config: `{"url":"https://x.example","secret":"s","headers":{"Content-Type":"text/plain"}}`, WantErr: "Content-Type is set by the guard"},
		{Name: "wrong_kind", Config: `{"kind":"holguard","url":"https://x.example","secret":"s"}`, WantErr: `field kind is "holguard"`},
	})
}
