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
		cs, err := s.newClient().Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if err == nil {
			sess.cs = cs
			return nil
		}
		status := int(rt.handshake.Load())
		if ctx.Err() != nil || status < 400 || status >= 500 {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: Streamable HTTP handshake with %s: %w", s.what(), utcp.RedactURL(u), err)}
		}
		s.log.Info("mcp: Streamable HTTP handshake refused; trying the legacy HTTP+SSE transport", "status", status)
		cs, errSSE := s.newClient().Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if errSSE != nil {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: %s: Streamable HTTP handshake: %v; legacy HTTP+SSE: %w", s.what(), utcp.RedactURL(u), err, errSSE)}
		}
		sess.kind, sess.cs = "sse", cs
		return nil
	}
	sess.kind = "sse"
	cs, err := s.newClient().Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
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
		resp.Body = &sseTap{rc: resp.Body, fn: rt.sess.onMessage}
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

// sseTap passes a server-sent event stream through to the SDK and shows
// the data of each complete event to fn first.
type sseTap struct {
	rc       io.ReadCloser
	fn       func([]byte)
	line     []byte
	lineOver bool
	data     []byte
	dataOver bool
}

func (t *sseTap) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if !t.lineOver {
			if len(t.line)+len(seg) > tapLimit {
				t.lineOver = true
			} else {
				t.line = append(t.line, seg...)
			}
		}
		if i < 0 {
			break
		}
		t.endLine()
		b = b[i+1:]
	}
	return n, err
}

func (t *sseTap) endLine() {
	line := bytes.TrimSuffix(t.line, []byte("\r"))
	switch {
	case len(line) == 0 && !t.lineOver:
		if len(t.data) > 0 && !t.dataOver {
			t.fn(t.data)
		}
		t.data, t.dataOver = t.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		if t.lineOver || len(t.data)+len(line) > tapLimit {
			t.dataOver = true
			break
		}
		v := bytes.TrimPrefix(line[5:], []byte(" "))
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, v...)
	}
	t.line, t.lineOver = t.line[:0], false
}

func (t *sseTap) Close() error { return t.rc.Close() }
