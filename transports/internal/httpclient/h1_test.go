package httpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// isH1Body reports whether r is a body of the pool.
func isH1Body(r io.Reader) bool {
	_, ok := r.(*h1Body)
	return ok
}

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func get(t *testing.T, c *http.Client, ctx context.Context, method, target, body string) (*http.Response, string, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// TestH1ReusesOneConnection: sequential plain-http calls take the pool's
// path (the body is an h1Body) and share one keep-alive connection; the
// request's method, path, headers and body arrive as sent, chunked or not.
func TestH1ReusesOneConnection(t *testing.T) {
	srv, conns := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s te=%v cl=%d %s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"), r.TransferEncoding, r.ContentLength, b)
	}))
	c := New(Options{})
	for i := range 20 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/p?i="+fmt.Sprint(i), strings.NewReader(`{"a":1}`))
		req.Header.Set("X-Test", "yes")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if !isH1Body(resp.Body) {
			t.Fatalf("call %d: the body is a %T, not the pool's", i, resp.Body)
		}
		b, _ := io.ReadAll(resp.Body)
		if n, err := resp.Body.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("a Read after the end: %d, %v; want 0, EOF", n, err)
		}
		resp.Body.Close()
		if want := fmt.Sprintf(`POST /p?i=%d yes te=[] cl=7 {"a":1}`, i); string(b) != want {
			t.Fatalf("got %q, want %q", b, want)
		}
	}
	// A body of unknown length goes chunked.
	pr, pw := io.Pipe()
	go func() { fmt.Fprint(pw, "streamed"); pw.Close() }()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/c", pr)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "PUT /c  te=[chunked] cl=-1 streamed"; string(b) != want {
		t.Fatalf("got %q, want %q", b, want)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 21 sequential calls, want 1", n)
	}
}

// TestH1Eligible: https, a proxy, an upgrade, Expect and user info take
// net/http.Transport.
func TestH1Eligible(t *testing.T) {
	proxied, _ := url.Parse("http://proxy.invalid:3128")
	p := &h1Pool{proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "via-proxy.invalid" {
			return proxied, nil
		}
		return nil, nil
	}}
	for _, c := range []struct {
		url    string
		header string
		want   bool
	}{
		{"http://127.0.0.1:8080/x", "", true},
		{"http://localhost/x", "", true},
		{"https://127.0.0.1/x", "", false},
		{"http://via-proxy.invalid/x", "", false},
		{"http://u:p@127.0.0.1/x", "", false},
		{"http://127.0.0.1/x", "Expect: 100-continue", false},
		{"http://127.0.0.1/x", "Upgrade: websocket", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, c.url, nil)
		if k, v, ok := strings.Cut(c.header, ": "); ok {
			req.Header.Set(k, v)
		}
		if got := p.eligible(req); got != c.want {
			t.Errorf("eligible(%s, %q) = %v, want %v", c.url, c.header, got, c.want)
		}
	}
	// And a TLS server is reached through the Transport.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "tls") }))
	defer srv.Close()
	tc := srv.Client().Transport.(*http.Transport).TLSClientConfig
	c := New(Options{TLSClientConfig: tc})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if isH1Body(resp.Body) {
		t.Error("an https response came through the plain-http pool")
	}
}

// rawServer accepts connections and runs serve on each; it counts them.
func rawServer(t *testing.T, serve func(n int64, c net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open { // the client's pooled ones too
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			n := conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(n, c)
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &conns
}

// readRequest reads one request (and its body) from br.
func readRequest(br *bufio.Reader) (*http.Request, string, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(req.Body)
	return req, string(b), err
}

// TestH1ServerClosedIdleConnection: a server that closes every
// connection after one answer, without saying so, costs nothing but a new
// connection: even a POST, which is never retried, succeeds every time,
// because the pool notices the close before it reuses the connection.
func TestH1ServerClosedIdleConnection(t *testing.T) {
	base, conns := rawServer(t, func(_ int64, c net.Conn) {
		br := bufio.NewReader(c)
		if _, body, err := readRequest(br); err == nil {
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
	})
	c := New(Options{})
	for i := range 10 {
		_, got, err := get(t, c, t.Context(), http.MethodPost, base+"/", fmt.Sprint("call", i))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got != fmt.Sprint("call", i) {
			t.Fatalf("call %d: got %q", i, got)
		}
		time.Sleep(5 * time.Millisecond) // the server's close arrives
	}
	if n := conns.Load(); n != 10 {
		t.Errorf("%d connections, want 10 (one per call)", n)
	}
}

// TestH1RetryOnlyIdempotent: when a reused connection dies after the
// request was sent but before any byte of the answer, a GET is sent again
// on a new connection and a POST fails (the server may have run it): the
// server sees the POST once.
func TestH1RetryOnlyIdempotent(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	base, _ := rawServer(t, func(n int64, c net.Conn) {
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			seen[req.Method+" "+req.URL.Path]++
			mu.Unlock()
			if i == 1 { // the second request on any connection: hang up unanswered
				return
			}
			fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := New(Options{})
	for _, path := range []string{"/a", "/b"} { // connection 1: answered, then hung up on
		if _, got, err := get(t, c, t.Context(), http.MethodGet, base+path, ""); err != nil || got != "ok" {
			t.Fatalf("GET %s: %q, %v", path, got, err)
		}
	}
	// connection 2 answers /c; the POST after it is hung up on.
	if _, got, err := get(t, c, t.Context(), http.MethodGet, base+"/c", ""); err != nil || got != "ok" {
		t.Fatalf("GET /c: %q, %v", got, err)
	}
	if _, _, err := get(t, c, t.Context(), http.MethodPost, base+"/p", "x"); err == nil {
		t.Fatal("a POST hung up on after it was sent succeeded; want an error, not a retry")
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["GET /b"] != 2 || seen["POST /p"] != 1 {
		t.Errorf("the server saw %v; want GET /b twice (retried) and POST /p once", seen)
	}
}

// TestH1ResponseFraming: informational answers are skipped, a response
// without a length runs to the close (and the connection is not reused),
// and a "Connection: close" answer closes the connection.
func TestH1ResponseFraming(t *testing.T) {
	base, conns := rawServer(t, func(_ int64, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			switch req.URL.Path {
			case "/1xx":
				fmt.Fprint(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"+
					"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")
			case "/many1xx":
				fmt.Fprint(c, strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 6)+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			case "/chunked":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
			case "/untilclose":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\n\r\nto the end")
				return
			case "/close":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye")
				return
			case "/204":
				fmt.Fprint(c, "HTTP/1.1 204 No Content\r\n\r\n")
			}
		}
	})
	c := New(Options{})
	for _, tc := range []struct{ path, want string }{
		{"/1xx", "body"}, {"/chunked", "abcde"}, {"/204", ""}, {"/chunked", "abcde"},
		{"/untilclose", "to the end"}, {"/close", "bye"}, {"/chunked", "abcde"},
	} {
		resp, got, err := get(t, c, t.Context(), http.MethodGet, base+tc.path, "")
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if got != tc.want || (tc.path == "/1xx" && resp.StatusCode != 200) {
			t.Fatalf("GET %s: %d %q, want 200 %q", tc.path, resp.StatusCode, got, tc.want)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (a new one after the read-to-close and the Connection: close answers)", n)
	}
	if _, _, err := get(t, c, t.Context(), http.MethodGet, base+"/many1xx", ""); err == nil || !strings.Contains(err.Error(), "informational") {
		t.Errorf("six 1xx answers: err %v, want the informational limit", err)
	}
}

// TestH1HeaderLimit: a server that never ends its headers is cut off at
// maxResponseHeaderBytes, not read into memory without end.
func TestH1HeaderLimit(t *testing.T) {
	var sent atomic.Int64
	base, _ := rawServer(t, func(_ int64, c net.Conn) {
		br := bufio.NewReader(c)
		if _, _, err := readRequest(br); err != nil {
			return
		}
		fmt.Fprint(c, "HTTP/1.1 200 OK\r\n")
		line := []byte("X-Filler: " + strings.Repeat("a", 1000) + "\r\n")
		for {
			n, err := c.Write(line)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	_, _, err := get(t, New(Options{}), t.Context(), http.MethodGet, base+"/", "")
	if !errors.Is(err, errHeaderTooLarge) {
		t.Fatalf("err %v, want %v", err, errHeaderTooLarge)
	}
}

// TestH1Cancellation: a context that ends stops the exchange wherever it
// is (waiting for headers, or in the middle of the body) with the
// context's error; a body closed from another goroutine unblocks its Read
// and is not drained; the connection is not reused after either.
func TestH1Cancellation(t *testing.T) {
	release := make(chan struct{})
	base, conns := rawServer(t, func(_ int64, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			switch req.URL.Path {
			case "/ok":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			case "/noheaders":
				<-release
				return
			case "/stall": // headers, part of the body, then nothing
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
				<-release
				return
			case "/endless":
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
				for {
					if _, err := fmt.Fprint(c, "400\r\n"+strings.Repeat("z", 1024)+"\r\n"); err != nil {
						return
					}
				}
			}
		}
	})
	t.Cleanup(func() { close(release) }) // before rawServer's cleanup waits for its handlers
	c := New(Options{})

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := get(t, c, ctx, http.MethodGet, base+"/noheaders", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting for headers past the deadline: %v, want %v", err, context.DeadlineExceeded)
	}

	ctx2, cancel2 := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx2, http.MethodGet, base+"/stall", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
		t.Fatalf("first bytes: %q, %v", buf, err)
	}
	time.AfterFunc(50*time.Millisecond, cancel2)
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("reading a stalled body when the context is cancelled: %v, want %v", err, context.Canceled)
	}
	resp.Body.Close()

	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/endless", nil)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	resp.Body.Close() // while the copy reads
	select {
	case err := <-done:
		if err == nil {
			t.Error("a Read interrupted by Close returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not unblock the pending Read")
	}
	before := conns.Load()
	if _, got, err := get(t, c, t.Context(), http.MethodGet, base+"/ok", ""); err != nil || got != "ok" {
		t.Fatalf("GET /ok: %q, %v", got, err)
	}
	if conns.Load() == before {
		t.Error("a connection whose body was closed unread was reused")
	}
}

// TestH1PoolBounds: at most perHost idle connections stay pooled for a
// host, and the idle timeout closes them (the server sees them go).
func TestH1PoolBounds(t *testing.T) {
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond)
		fmt.Fprint(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := New(Options{MaxIdleConnsPerHost: 2})
	h1 := c.Transport.(guardedTransport).h1
	h1.idleTimeout = 200 * time.Millisecond
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, got, err := get(t, c, t.Context(), http.MethodGet, srv.URL, ""); err != nil || got != "ok" {
				t.Errorf("%q, %v", got, err)
			}
		})
	}
	wg.Wait()
	h1.mu.Lock()
	idle := h1.nidle
	h1.mu.Unlock()
	if idle != 2 {
		t.Errorf("%d idle connections after 6 concurrent calls, want 2 (perHost)", idle)
	}
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d connections still open on the server after the idle timeout, want 0", n)
	}
}
