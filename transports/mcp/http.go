package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// connectHTTP opens a Streamable HTTP session, falling back to the legacy
// HTTP+SSE transport when the server answers the handshake with a 4xx
// (KindHTTP), or a legacy session only (KindSSE).
func (s *server) connectHTTP(ctx context.Context, sess *session) error {
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return utcp.NewError(utcp.CodeInvalidTemplate, "mcp: %s: url: %v", s.what(), err)
	}
	if err := httpclient.CheckURL(u, s.cfg.AllowInsecure); err != nil {
		return err
	}
	rt := &roundTripper{base: s.t.client.Transport, s: s, sess: sess, origin: originOf(u)}
	redirect := s.t.client.CheckRedirect
	hc := &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		return redirect(req.WithContext(httpclient.WithAllowInsecure(req.Context(), s.cfg.AllowInsecure)), via)
	}}
	if s.cfg.Transport == KindHTTP {
		sess.kind = "streamable_http"
		cs, err := s.newClient(sess).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if err == nil {
			sess.cs = cs
			return nil
		}
		status := int(rt.handshake.Load())
		if ctx.Err() != nil || status < 400 || status >= 500 {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: Streamable HTTP handshake with %s: %w", s.what(), utcp.RedactURL(u), err)}
		}
		s.log.Info("mcp: Streamable HTTP handshake refused; trying the legacy HTTP+SSE transport", "status", status)
		cs, errSSE := s.newClient(sess).Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if errSSE != nil {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: %s: Streamable HTTP handshake: %v; legacy HTTP+SSE: %w", s.what(), utcp.RedactURL(u), err, errSSE)}
		}
		sess.kind, sess.cs = "sse", cs
		return nil
	}
	sess.kind = "sse"
	cs, err := s.newClient(sess).Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
	if err != nil {
		return &utcp.TransportError{Err: fmt.Errorf("mcp: %s: legacy HTTP+SSE handshake with %s: %w", s.what(), utcp.RedactURL(u), err)}
	}
	sess.cs = cs
	return nil
}

// roundTripper adds the server's headers and the manual's auth to the
// requests sent to the server's origin, retries once after a 401 with a
// fresh oauth2 token, notices expired sessions (404, or 400, to a request
// carrying Mcp-Session-Id) and taps event streams for progress.
type roundTripper struct {
	base      http.RoundTripper
	s         *server
	sess      *session
	origin    string
	handshake atomic.Int64 // status of the last POST without a session id
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	send := func(again bool) (*http.Response, error) {
		r := req.Clone(req.Context())
		if again && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		if originOf(r.URL) == rt.origin {
			for k, v := range rt.s.cfg.Headers {
				r.Header.Set(k, v)
			}
			if err := httpclient.ApplyAuth(r.Context(), r, rt.s.auth, rt.s.t.tokens); err != nil {
				return nil, err
			}
		}
		return rt.base.RoundTrip(r)
	}
	resp, err := send(false)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized && rt.s.auth != nil && rt.s.auth.Type == utcp.AuthOAuth2 &&
		(req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) {
		resp.Body.Close()
		rt.s.t.tokens.Invalidate(rt.s.auth)
		if resp, err = send(true); err != nil {
			return nil, err
		}
	}
	withSession := req.Header.Get("Mcp-Session-Id") != ""
	if req.Method == http.MethodPost && !withSession {
		rt.handshake.Store(int64(resp.StatusCode))
	}
	if withSession && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest) {
		if d, ok := req.Context().Value(deliveryKey{}).(*delivery); ok {
			d.rejected.Store(true)
		}
		rt.sess.markExpired()
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream") {
		resp.Body = &sseTap{rc: resp.Body, fn: rt.sess.tapMessage, rewrite: rt.sess.stamper(req)}
	}
	return resp, nil
}

// originOf returns scheme://host:port of u, the default port explicit.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sseTap passes a server-sent event stream through to the SDK, shows
// the data of each complete event to fn first, and passes on
// rewrite(data) instead of the event's data when rewrite (if set)
// returns something. An event is held back until it is complete; one
// over tapLimit passes through as it arrives, untapped.
type sseTap struct {
	rc      io.ReadCloser
	fn      func([]byte)
	rewrite func([]byte) []byte
	buf     []byte // read, not yet split into lines
	out     []byte // ready for the SDK
	held    []byte // the raw lines of the current event
	data    []byte
	over    bool // the current event passes through
	err     error
	chunk   []byte
}

func (t *sseTap) Read(p []byte) (int, error) {
	for len(t.out) == 0 {
		if t.err != nil {
			return 0, t.err
		}
		if t.chunk == nil {
			t.chunk = make([]byte, 32<<10)
		}
		n, err := t.rc.Read(t.chunk)
		t.buf = append(t.buf, t.chunk[:n]...)
		for {
			i := bytes.IndexByte(t.buf, '\n')
			if i < 0 {
				break
			}
			t.line(t.buf[:i+1])
			t.buf = t.buf[i+1:]
		}
		if len(t.buf) > tapLimit && !t.over {
			t.over = true
			t.out = append(t.out, t.held...)
			t.held, t.data = t.held[:0], t.data[:0]
		}
		if t.over {
			t.out = append(t.out, t.buf...)
			t.buf = t.buf[:0]
		}
		if err != nil {
			t.out = append(t.out, t.held...)
			t.out = append(t.out, t.buf...)
			t.held, t.buf = nil, nil
			t.err = err
		}
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	if len(t.out) == 0 {
		t.out = nil
	}
	return n, nil
}

// line takes one raw line, its newline included.
func (t *sseTap) line(raw []byte) {
	line := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))
	if t.over {
		t.out = append(t.out, raw...)
		if len(line) == 0 {
			t.over = false
		}
		return
	}
	if len(line) > 0 {
		t.held = append(t.held, raw...)
		if bytes.HasPrefix(line, []byte("data:")) {
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(t.data) > 0 {
				t.data = append(t.data, '\n')
			}
			t.data = append(t.data, v...)
		}
		if len(t.held) > tapLimit {
			t.over = true
			t.out = append(t.out, t.held...)
			t.held, t.data = t.held[:0], t.data[:0]
		}
		return
	}
	var rewritten []byte
	if len(t.data) > 0 {
		t.fn(t.data)
		if t.rewrite != nil {
			rewritten = t.rewrite(t.data)
		}
	}
	if rewritten == nil {
		t.out = append(t.out, t.held...)
	} else {
		for _, l := range bytes.SplitAfter(t.held, []byte("\n")) {
			if len(l) > 0 && !bytes.HasPrefix(l, []byte("data:")) {
				t.out = append(t.out, l...)
			}
		}
		t.out = append(t.out, "data: "...)
		t.out = append(t.out, rewritten...)
		t.out = append(t.out, '\n')
	}
	t.out = append(t.out, raw...)
	t.held, t.data = t.held[:0], t.data[:0]
}

func (t *sseTap) Close() error { return t.rc.Close() }
