package webrtc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports/internal/envelope"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/internal/session"
	"github.com/utcpd/utcpd/utcp"
)

// This file opens peer connections: the offer, the signaling exchange
// over HTTP or a WebSocket, and waiting for the data channel to open.

// dial opens a peer connection to spec's peer and waits, at most
// connect_timeout, until its data channel is open. s is the connection's
// slot.
func (t *Transport) dial(ctx context.Context, spec *Template, auth *utcp.Auth, s *session.Slot[*peer]) (*peer, error) {
	u, err := spec.signalingURL()
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: %w", err)
	}
	if err := httpclient.CheckURL(u, spec.AllowInsecure); err != nil {
		return nil, err
	}
	pc, err := t.api.NewPeerConnection(webrtc.Configuration{ICEServers: iceServers(spec.ICEServers)})
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: peer connection: %w", err)
	}
	p := &peer{
		t:       t,
		slot:    s,
		url:     utcp.RedactURL(u),
		peerID:  spec.PeerID,
		pc:      pc,
		reasm:   NewReassembler(t.cfg.MaxMessageBytes),
		chunk:   t.cfg.MaxChunkBytes,
		calls:   map[string]*pending{},
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	if err := t.pool.Adopt(p, s, p.closer); err != nil {
		_ = pc.GracefulClose()
		return nil, err
	}

	if err := t.connect(ctx, p, spec, auth, u); err != nil {
		p.fail(err)
		select {
		case <-p.done:
		case <-ctx.Done():
		}
		return nil, err
	}
	if remote := pc.SCTP().GetCapabilities().MaxMessageSize; remote > 0 && int64(remote) < int64(p.chunk) {
		p.mu.Lock()
		p.chunk = max(int(remote), minChunkBytes)
		p.mu.Unlock()
	}
	return p, nil
}

// connect creates the data channel, runs the signaling exchange and waits
// for the channel to open.
func (t *Transport) connect(ctx context.Context, p *peer, spec *Template, auth *utcp.Auth, u *url.URL) error {
	limit := spec.connectTimeout()
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ordered := true
	dc, err := p.pc.CreateDataChannel(spec.channelName(), &webrtc.DataChannelInit{Ordered: &ordered})
	if err != nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: data channel %q: %w", spec.channelName(), err)
	}
	p.dc = dc
	opened := make(chan struct{})
	var openOnce sync.Once
	dc.OnOpen(func() { openOnce.Do(func() { close(opened) }) })
	dc.OnClose(func() {
		p.fail(&utcp.TransportError{Err: fmt.Errorf("webrtc peer %q via %s: the data channel %q closed", p.peerID, p.url, spec.channelName())})
	})
	dc.OnMessage(p.onMessage)
	p.pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		switch st {
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateDisconnected, webrtc.PeerConnectionStateClosed:
			p.fail(&utcp.TransportError{Err: fmt.Errorf("webrtc peer %q via %s: peer connection %s (ICE %s)", p.peerID, p.url, st, p.pc.ICEConnectionState())})
		}
	})
	timedOut := func() error {
		if ctx.Err() != nil {
			return ctxError(ctx, spec)
		}
		return utcp.Errorf(utcp.CodeTimeout, "webrtc peer %q via %s: not connected within connect_timeout %v (signaling %s, ICE %s, peer connection %s): %w",
			p.peerID, p.url, limit, p.pc.SignalingState(), p.pc.ICEConnectionState(), p.pc.ConnectionState(), context.DeadlineExceeded).
			WithDetail("connect_timeout_ms", limit.Milliseconds())
	}
	wait := func(extra <-chan error) error {
		select {
		case <-opened:
			return nil
		case <-p.closing:
			return p.failure()
		case err := <-extra:
			return err
		case <-cctx.Done():
			return timedOut()
		}
	}
	if strings.HasPrefix(strings.ToLower(u.Scheme), "ws") {
		return t.signalWebSocket(cctx, p, spec, auth, u, wait, timedOut)
	}
	if err := t.signalHTTP(cctx, p, spec, auth, u, timedOut); err != nil {
		return err
	}
	return wait(nil)
}

// signalErr is the transport_error of a signaling exchange that failed.
func signalErr(p *peer, format string, args ...any) error {
	return &utcp.TransportError{Err: fmt.Errorf("webrtc signaling server %s (peer %q): "+format, append([]any{p.url, p.peerID}, args...)...)}
}

// offer creates the offer and sets it as the local description; with
// gather it waits until every candidate is in it.
func offer(ctx context.Context, p *peer, gather bool, timedOut func() error) (string, error) {
	o, err := p.pc.CreateOffer(nil)
	if err != nil {
		return "", &utcp.TransportError{Err: fmt.Errorf("webrtc: creating the offer: %w", err)}
	}
	done := webrtc.GatheringCompletePromise(p.pc)
	if err := p.pc.SetLocalDescription(o); err != nil {
		return "", &utcp.TransportError{Err: fmt.Errorf("webrtc: setting the offer: %w", err)}
	}
	if gather {
		select {
		case <-done:
		case <-ctx.Done():
			return "", timedOut()
		}
	}
	return p.pc.LocalDescription().SDP, nil
}

// signalHTTP gathers every candidate, POSTs the offer and applies the
// answer.
func (t *Transport) signalHTTP(ctx context.Context, p *peer, spec *Template, auth *utcp.Auth, u *url.URL, timedOut func() error) error {
	sdp, err := offer(ctx, p, true, timedOut)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(Signal{Type: SignalOffer, SDP: sdp, PeerID: spec.PeerID})
	req, err := http.NewRequestWithContext(httpclient.WithAllowInsecure(ctx, spec.AllowInsecure), http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: signaling_server: %w", err)
	}
	req.Close = true // one exchange per connection: keep no idle connection
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "utcpd")
	}
	if err := httpclient.ApplyAuth(ctx, req, auth, t.tokens); err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return timedOut()
		}
		var uerr *utcp.Error
		if errors.As(err, &uerr) {
			return err
		}
		return signalErr(p, "%v", unwrapURLError(err))
	}
	data, err := httpclient.ReadResponseBody(resp, maxSignalBytes)
	if err != nil {
		if ctx.Err() != nil {
			return timedOut()
		}
		return signalErr(p, "reading the answer: %v", err)
	}
	if resp.StatusCode/100 != 2 {
		e := signalErr(p, "HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), jsonx.Excerpt(data)).(*utcp.TransportError)
		e.Status = resp.StatusCode
		return e
	}
	ans, err := decodeAnswer(data)
	if err != nil {
		return signalErr(p, "%w", err)
	}
	if err := p.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: ans}); err != nil {
		return signalErr(p, "the answer's SDP cannot be used: %w", err)
	}
	return nil
}

// unwrapURLError drops the method and quoted URL net/http puts in front
// of an error (the URL may carry an api_key).
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// decodeAnswer reads an answer signal and returns its SDP.
func decodeAnswer(data []byte) (string, error) {
	var s Signal
	if err := json.Unmarshal(data, &s); err != nil {
		return "", fmt.Errorf("the answer is not a JSON signaling message: %s", excerpt(data))
	}
	switch s.Type {
	case SignalAnswer:
	case SignalError:
		return "", fmt.Errorf("the offer was refused: %s", signalError(s.Error))
	default:
		return "", fmt.Errorf("expected a message of type %q, got %q: %s", SignalAnswer, s.Type, excerpt(data))
	}
	if strings.TrimSpace(s.SDP) == "" {
		return "", errors.New(`the answer has no "sdp"`)
	}
	return s.SDP, nil
}

// signalError renders the error of an error signal.
func signalError(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "no reason given"
	}
	we := envelope.DecodeWireError(raw)
	if we.Message == "" {
		return "no reason given"
	}
	return we.Message
}

// wsSignal is the signaling WebSocket of one connection attempt.
type wsSignal struct {
	ws *websocket.Conn

	mu      sync.Mutex // guards the fields below and writes
	offered bool
	closed  bool
	queue   []webrtc.ICECandidateInit // local candidates gathered before the offer went out
}

// write sends one signal unless the WebSocket is closed.
func (w *wsSignal) writeLocked(s Signal) error {
	if w.closed {
		return nil
	}
	b, _ := json.Marshal(s)
	_ = w.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return w.ws.WriteMessage(websocket.TextMessage, b)
}

// candidate sends one local candidate (nil: the end of candidates), or
// queues it until the offer has gone out.
func (w *wsSignal) candidate(c *webrtc.ICECandidate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var init webrtc.ICECandidateInit // empty: end of candidates
	if c != nil {
		init = c.ToJSON()
	}
	if !w.offered {
		w.queue = append(w.queue, init)
		return
	}
	w.sendCandidateLocked(init)
}

func (w *wsSignal) sendCandidateLocked(init webrtc.ICECandidateInit) {
	s := Signal{Type: SignalCandidate}
	if init.Candidate != "" {
		s.Candidate = &init
	}
	_ = w.writeLocked(s)
}

// signalWebSocket opens the signaling WebSocket, sends the offer (and,
// trickling, each candidate as it is gathered), applies the answer and
// the peer's candidates, and waits for the data channel to open. It
// closes the WebSocket before it returns.
func (t *Transport) signalWebSocket(ctx context.Context, p *peer, spec *Template, auth *utcp.Auth, u *url.URL, wait func(<-chan error) error, timedOut func() error) error {
	// The handshake is an HTTP request: build one so that ApplyAuth can put
	// the credentials in a header, the query or a cookie.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: signaling_server: %w", err)
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "utcpd")
	}
	if err := httpclient.ApplyAuth(ctx, req, auth, t.tokens); err != nil {
		return err
	}
	d := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: spec.connectTimeout(), NetDialContext: netguard.DialContext(nil)}
	ws, resp, err := d.DialContext(ctx, req.URL.String(), req.Header)
	if err != nil {
		if ctx.Err() != nil {
			return timedOut()
		}
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			e := signalErr(p, "WebSocket handshake refused: HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), jsonx.Excerpt(body)).(*utcp.TransportError)
			e.Status = resp.StatusCode
			return e
		}
		return signalErr(p, "%v", err)
	}
	ws.SetReadLimit(maxSignalBytes)
	w := &wsSignal{ws: ws}
	trickle := spec.trickle()
	if trickle {
		p.pc.OnICECandidate(w.candidate)
	}
	failed := make(chan error, 1)
	var readers sync.WaitGroup
	defer func() {
		w.mu.Lock()
		if !w.closed {
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(controlTimeout))
		}
		w.closed = true
		w.mu.Unlock()
		ws.Close()
		readers.Wait()
	}()
	sdp, err := offer(ctx, p, !trickle, timedOut)
	if err != nil {
		return err
	}
	w.mu.Lock()
	err = w.writeLocked(Signal{Type: SignalOffer, SDP: sdp, PeerID: spec.PeerID})
	w.offered = true
	for _, c := range w.queue {
		w.sendCandidateLocked(c)
	}
	w.queue = nil
	w.mu.Unlock()
	if err != nil {
		return signalErr(p, "sending the offer: %v", err)
	}
	readers.Go(func() {
		answered := false
		var early []webrtc.ICECandidateInit // the peer's candidates before its answer
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				w.mu.Lock()
				closed := w.closed
				w.mu.Unlock()
				if !closed && !answered {
					failed <- signalErr(p, "the WebSocket closed before an answer came: %v", err)
				}
				return
			}
			var s Signal
			if err := json.Unmarshal(data, &s); err != nil {
				t.log.Warn("webrtc: signaling message ignored: not JSON", "peer_id", p.peerID, "url", p.url, "message", excerpt(data))
				continue
			}
			switch s.Type {
			case SignalAnswer:
				if answered {
					continue
				}
				if strings.TrimSpace(s.SDP) == "" {
					failed <- signalErr(p, `the answer has no "sdp"`)
					return
				}
				if err := p.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: s.SDP}); err != nil {
					failed <- signalErr(p, "the answer's SDP cannot be used: %w", err)
					return
				}
				answered = true
				for _, c := range early {
					if err := p.pc.AddICECandidate(c); err != nil {
						t.log.Warn("webrtc: remote candidate ignored", "peer_id", p.peerID, "candidate", c.Candidate, "err", err)
					}
				}
				early = nil
			case SignalCandidate:
				if s.Candidate == nil || s.Candidate.Candidate == "" {
					continue // the end of the peer's candidates
				}
				if !answered {
					if len(early) < 256 {
						early = append(early, *s.Candidate)
					}
					continue
				}
				if err := p.pc.AddICECandidate(*s.Candidate); err != nil {
					t.log.Warn("webrtc: remote candidate ignored", "peer_id", p.peerID, "candidate", s.Candidate.Candidate, "err", err)
				}
			case SignalError:
				failed <- signalErr(p, "the offer was refused: %s", signalError(s.Error))
				return
			default:
				t.log.Warn("webrtc: signaling message of unknown type ignored", "peer_id", p.peerID, "url", p.url, "type", s.Type)
			}
		}
	})
	return wait(failed)
}

// iceServers converts the template's ICE servers for pion.
func iceServers(in []ICEServer) []webrtc.ICEServer {
	out := make([]webrtc.ICEServer, 0, len(in))
	for _, s := range in {
		is := webrtc.ICEServer{URLs: s.URLs, Username: s.Username}
		if s.Credential != "" {
			is.Credential = s.Credential
		}
		out = append(out, is)
	}
	return out
}
