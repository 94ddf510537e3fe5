package oauth2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// tokenServer is a real oauth2 token endpoint on 127.0.0.1.
type tokenServer struct {
	srv       *httptest.Server
	attempts  atomic.Int64 // every request
	issued    atomic.Int64 // successful ones
	basicOnly bool         // refuse credentials in the form
	expiresIn any          // nil: left out
	status    int          // non-zero: always answer this
	formReply bool         // answer form-encoded
	gate      chan struct{}
	scopes    sync.Map // scope → true
}

func newTokenServer(t *testing.T, configure func(*tokenServer)) *tokenServer {
	t.Helper()
	ts := &tokenServer{}
	if configure != nil {
		configure(ts)
	}
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.attempts.Add(1)
	if ts.gate != nil {
		<-ts.gate
	}
	if ts.status != 0 {
		w.WriteHeader(ts.status)
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		if ts.basicOnly {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client","error_description":"use basic"}`)
			return
		}
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != "cid" || secret != "csecret" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	ts.scopes.Store(r.PostForm.Get("scope"), true)
	n := ts.issued.Add(1)
	if ts.formReply {
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded")
		fmt.Fprintf(w, "access_token=tok-%d&token_type=bearer", n)
		return
	}
	body := map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "bearer"}
	if ts.expiresIn != nil {
		body["expires_in"] = ts.expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

func (ts *tokenServer) auth() *utcp.Auth {
	return &utcp.Auth{Type: utcp.AuthOAuth2, TokenURL: ts.srv.URL + "/token", ClientID: "cid", ClientSecret: "csecret", Scope: "read"}
}

func newCache(t *testing.T) *TokenCache {
	t.Helper()
	client := httpclient.New(httpclient.Options{})
	t.Cleanup(client.CloseIdleConnections)
	return NewTokenCache(client)
}

func token(t *testing.T, c *TokenCache, a *utcp.Auth) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	tok, err := c.Token(ctx, a)
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return tok
}

func TestTokenCacheCachesAndSendsScope(t *testing.T) {
	ts := newTokenServer(t, nil)
	c := newCache(t)
	got := []string{token(t, c, ts.auth()), token(t, c, ts.auth())}
	if diff := cmp.Diff([]string{"tok-1", "tok-1"}, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if n := ts.attempts.Load(); n != 1 {
		t.Errorf("token endpoint called %d times, want 1", n)
	}
	if _, ok := ts.scopes.Load("read"); !ok {
		t.Errorf("scope was not sent")
	}
}

func TestTokenCacheConcurrentCallersShareOneFetch(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.gate = make(chan struct{}) })
	c := newCache(t)
	const n = 32
	var wg sync.WaitGroup
	toks := make(chan string, n)
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			tok, err := c.Token(ctx, ts.auth())
			if err != nil {
				t.Error(err)
			}
			toks <- tok
		})
	}
	for ts.attempts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let the others pile up behind the fetch
	close(ts.gate)
	wg.Wait()
	close(toks)
	for tok := range toks {
		if tok != "tok-1" {
			t.Errorf("token %q, want tok-1", tok)
		}
	}
	if a := ts.attempts.Load(); a != 1 {
		t.Errorf("token endpoint called %d times, want 1", a)
	}
}

func TestTokenCacheExpiry(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.expiresIn = 100 })
	c := newCache(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	if tok := token(t, c, ts.auth()); tok != "tok-1" {
		t.Fatalf("first token %q", tok)
	}
	advance(89 * time.Second) // 100 s minus a 10 s margin
	if tok := token(t, c, ts.auth()); tok != "tok-1" {
		t.Errorf("at 89 s: token %q, want the cached tok-1", tok)
	}
	advance(2 * time.Second)
	if tok := token(t, c, ts.auth()); tok != "tok-2" {
		t.Errorf("at 91 s: token %q, want a fresh tok-2", tok)
	}
}

func TestTokenCacheDefaultLifetime(t *testing.T) {
	ts := newTokenServer(t, nil) // no expires_in
	c := newCache(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	token(t, c, ts.auth())
	mu.Lock()
	now = now.Add(58 * time.Minute)
	mu.Unlock()
	if tok := token(t, c, ts.auth()); tok != "tok-1" {
		t.Errorf("after 58 min: %q, want the cached tok-1", tok)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if tok := token(t, c, ts.auth()); tok != "tok-2" {
		t.Errorf("after 60 min: %q, want tok-2", tok)
	}
}

func TestTokenCacheNonPositiveExpiryNotCached(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.expiresIn = "0" })
	c := newCache(t)
	token(t, c, ts.auth())
	token(t, c, ts.auth())
	if n := ts.issued.Load(); n != 2 {
		t.Errorf("issued %d tokens, want 2 (expires_in 0 is not cached)", n)
	}
}

func TestTokenCacheInvalidate(t *testing.T) {
	ts := newTokenServer(t, nil)
	c := newCache(t)
	a := ts.auth()
	token(t, c, a)
	c.Invalidate(a)
	if tok := token(t, c, a); tok != "tok-2" {
		t.Errorf("after Invalidate: %q, want tok-2", tok)
	}
	c.Invalidate(nil) // no panic
}

func TestTokenCacheBasicFallback(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.basicOnly = true })
	c := newCache(t)
	if tok := token(t, c, ts.auth()); tok != "tok-1" {
		t.Fatalf("token %q", tok)
	}
	if n := ts.attempts.Load(); n != 2 {
		t.Errorf("token endpoint called %d times, want 2 (form, then basic)", n)
	}
	token(t, c, ts.auth())
	if n := ts.attempts.Load(); n != 2 {
		t.Errorf("cached token refetched: %d calls", n)
	}
}

func TestTokenCacheFormResponse(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.formReply = true })
	if tok := token(t, newCache(t), ts.auth()); tok != "tok-1" {
		t.Errorf("token %q from a form-encoded answer", tok)
	}
}

func TestTokenCacheKeys(t *testing.T) {
	ts := newTokenServer(t, nil)
	c := newCache(t)
	a := ts.auth()
	b := ts.auth()
	b.Scope = "write"
	if token(t, c, a) == token(t, c, b) {
		t.Errorf("different scopes share a token")
	}
	// A wrong secret must not be answered from the cache of the right one.
	wrong := ts.auth()
	wrong.ClientSecret = "not-the-secret"
	if _, err := c.Token(t.Context(), wrong); err == nil {
		t.Errorf("a wrong client_secret got the cached token")
	}
}

func TestTokenCacheRejected(t *testing.T) {
	ts := newTokenServer(t, nil)
	a := ts.auth()
	a.ClientSecret = "very-secret-value"
	_, err := newCache(t).Token(t.Context(), a)
	if code := utcp.CodeOf(err); code != utcp.CodeUnauthorized {
		t.Fatalf("err = %v (code %s), want unauthorized", err, code)
	}
	if strings.Contains(err.Error(), "very-secret-value") {
		t.Errorf("error leaks the client secret: %v", err)
	}
	if !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("error %q does not carry the endpoint's error code", err)
	}
	if n := ts.attempts.Load(); n != 2 {
		t.Errorf("token endpoint called %d times, want 2 (form and basic)", n)
	}
}

func TestTokenCacheServerError(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.status = http.StatusBadGateway })
	_, err := newCache(t).Token(t.Context(), ts.auth())
	var te *utcp.TransportError
	if !errors.As(err, &te) || te.Status != http.StatusBadGateway {
		t.Errorf("err = %v, want a TransportError with status 502", err)
	}
}

func TestTokenCacheInsecureTokenURL(t *testing.T) {
	a := &utcp.Auth{Type: utcp.AuthOAuth2, TokenURL: "http://auth.example.com/token", ClientID: "cid", ClientSecret: "s"}
	_, err := newCache(t).Token(t.Context(), a)
	if code := utcp.CodeOf(err); code != utcp.CodeInvalidTemplate {
		t.Errorf("err = %v (code %s), want invalid_template", err, code)
	}
}

func TestTokenCacheCallerCancelDoesNotAbortFetch(t *testing.T) {
	ts := newTokenServer(t, func(ts *tokenServer) { ts.gate = make(chan struct{}) })
	c := newCache(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Token(ctx, ts.auth())
		errc <- err
	}()
	for ts.attempts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: err = %v, want context.Canceled", err)
	}
	close(ts.gate)
	if tok := token(t, c, ts.auth()); tok != "tok-1" {
		t.Errorf("second caller: %q, want tok-1 from the fetch the first started", tok)
	}
	if n := ts.attempts.Load(); n != 1 {
		t.Errorf("token endpoint called %d times, want 1", n)
	}
}

func TestTokenCacheWrongAuthType(t *testing.T) {
	c := newCache(t)
	for _, a := range []*utcp.Auth{nil, {Type: utcp.AuthBasic}, {Type: utcp.AuthOAuth2}} {
		if _, err := c.Token(t.Context(), a); utcp.CodeOf(err) != utcp.CodeInvalidTemplate {
			t.Errorf("Token(%+v) = %v, want invalid_template", a, err)
		}
	}
}

func TestApplyAuthOAuth2(t *testing.T) {
	ts := newTokenServer(t, nil)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://api.example.com/", nil)
	if err := httpclient.ApplyAuth(t.Context(), req, ts.auth(), newCache(t)); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer tok-1" {
		t.Errorf("Authorization = %q", got)
	}
}
