// Package webrtcserver is the demo WebRTC peer of the fixture tools: a
// pion peer that utcpd's webrtc transport reaches through either of its
// signaling endpoints, speaking the data-channel envelope documented in
// docs/transports.md (section webrtc) and package transports/webrtc. Its
// tests and benchmarks, and the command in examples/servers/webrtc,
// serve it. The signaling messages, the envelope and the chunks are the
// server's own code (wire.go), not the client's, so that the conformance
// suite tests one against the other.
//
// Routes:
//
//	POST /signal  HTTP signaling: {"type":"offer","sdp","peer_id"} in,
//	              {"type":"answer","sdp"} out, candidates gathered in full
//	GET  /ws      WebSocket signaling: the same offer and answer as text
//	              messages, and {"type":"candidate","candidate":{...}}
//	              trickled both ways
//	GET  /utcp    the fixture manual as plain JSON, for people and tools
//	              that do not speak WebRTC
//
// An offer for another peer_id than Options.PeerID is refused with
// {"type":"error","error":"..."} (HTTP 404 on /signal).
//
// On the data channel (any label) the server reads the envelope and
// answers each request by its id:
//
//	{"type":"utcp","id":I}                            → {"type":"manual","id":I,"manual":{...}}
//	{"type":"tool_call","id":I,"tool":T,"inputs":A}    → count: {"type":"tool_event","id":I,"event":n} per
//	                                                    number as it is produced, then {"type":"tool_response","id":I};
//	                                                    other tools: {"type":"tool_response","id":I,"output":R}
//	{"type":"cancel","id":I}                          → the call I is cancelled (no answer)
//
// Failures are {"type":"tool_error","id":I,"error":{"code":C,"message":M}}
// with code tool_error (the fail tool), tool_not_found (an unknown tool),
// invalid_arguments (a bad argument) or invalid_request (a message the
// server does not understand). Calls run concurrently. Messages larger
// than the chunk size travel as chunks both ways. A cancel message, the
// data channel closing or the peer connection ending cancels the call:
// the fixture counts it and count stops producing.
package webrtcserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	pion "github.com/pion/webrtc/v4"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// DefaultPeerID is the peer_id the server answers to when Options.PeerID
// is empty.
const DefaultPeerID = "fixture"

// Options tune New.
type Options struct {
	// PeerID is the peer_id offers must name; empty means DefaultPeerID.
	PeerID string
	// Name is the call template name given to the tool templates (default
	// "fixture_webrtc").
	Name string
	// Network restricts the server's ICE candidates; Loopback() for
	// tests, nil for pion's defaults (host candidates on every
	// interface but loopback).
	Network Network
	// MaxChunkBytes is the largest data-channel message the server
	// sends; 0 means 16 KiB, and less than 1024 means 1024.
	MaxChunkBytes int
	// AllowInsecure adds "allow_insecure": true to every tool template, so
	// that utcpd may signal over plain http:// or ws:// to a host that is
	// not loopback.
	AllowInsecure bool
	// Intercept, when set, sees every whole message a client sends on
	// the data channel before the server handles it; returning true means
	// it handled the message. send writes one raw data-channel message.
	// Tests use it to answer with faults.
	Intercept func(msg []byte, send func(raw []byte)) bool
	// Logger receives the server's diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is the demo peer. It is safe for concurrent use.
type Server struct {
	f        *fixture.Fixture
	opts     Options
	api      *pion.API
	up       websocket.Upgrader
	log      *slog.Logger
	accepted atomic.Int64

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}
	sockets  map[*websocket.Conn]struct{}
	wg       sync.WaitGroup // session closers
}

// New returns a Server of f's tools. It fails only when opts.Network
// cannot build its API.
func New(f *fixture.Fixture, opts Options) (*Server, error) {
	if opts.PeerID == "" {
		opts.PeerID = DefaultPeerID
	}
	if opts.Name == "" {
		opts.Name = "fixture_webrtc"
	}
	if opts.MaxChunkBytes == 0 {
		opts.MaxChunkBytes = defaultMaxChunkBytes
	}
	opts.MaxChunkBytes = max(opts.MaxChunkBytes, minChunkBytes)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	api := pion.NewAPI()
	if opts.Network != nil {
		var err error
		if api, err = opts.Network.API(); err != nil {
			return nil, err
		}
	}
	return &Server{
		f:    f,
		opts: opts,
		api:  api,
		log:  log,
		// Tools are called by daemons, not browsers: no origin to check.
		up:       websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }},
		sessions: map[*session]struct{}{},
		sockets:  map[*websocket.Conn]struct{}{},
	}, nil
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /signal", s.serveOffer)
	mux.HandleFunc("GET /ws", s.serveWS)
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(s.Manual("http://" + r.Host + "/signal"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return mux
}

// NewHTTPServer returns an *http.Server for addr serving s.
func (s *Server) NewHTTPServer(addr string) *http.Server {
	return &http.Server{Addr: addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
}

// Peers returns how many peer connections the server accepted.
func (s *Server) Peers() int64 { return s.accepted.Load() }

// Close ends every peer connection and signaling WebSocket, and waits
// until their goroutines have ended. Later offers are refused. It is
// idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	sessions := make([]*session, 0, len(s.sessions))
	for sess := range s.sessions {
		sessions = append(sessions, sess)
	}
	for ws := range s.sockets {
		ws.Close()
	}
	s.mu.Unlock()
	for _, sess := range sessions {
		sess.close()
	}
	s.wg.Wait()
	return nil
}

// CloseChannels closes the data channel of every peer connection, as a
// peer that hangs up does, and returns how many it closed.
func (s *Server) CloseChannels() int {
	s.mu.Lock()
	var dcs []*pion.DataChannel
	for sess := range s.sessions {
		if dc := sess.channel(); dc != nil {
			dcs = append(dcs, dc)
		}
	}
	s.mu.Unlock()
	for _, dc := range dcs {
		_ = dc.Close()
	}
	return len(dcs)
}

// Manual returns the fixture manual whose tool templates reach this
// server through signalingURL.
func (s *Server) Manual(signalingURL string) *utcp.Manual {
	return fixture.Manual(func(tool string) *utcp.CallTemplate {
		fields := map[string]any{
			"name":               s.opts.Name,
			"call_template_type": "webrtc",
			"signaling_server":   signalingURL,
			"peer_id":            s.opts.PeerID,
		}
		if s.opts.AllowInsecure {
			fields["allow_insecure"] = true
		}
		raw, _ := json.Marshal(fields)
		return &utcp.CallTemplate{Name: s.opts.Name, Type: "webrtc", Raw: raw}
	})
}

// session is one peer connection.
type session struct {
	s      *Server
	pc     *pion.PeerConnection
	base   string // the signaling URL the client used
	ctx    context.Context
	cancel context.CancelFunc
	chunks *reassembler // fed by the message callback only

	writeMu sync.Mutex

	mu    sync.Mutex
	dc    *pion.DataChannel
	calls map[string]context.CancelFunc
	wg    sync.WaitGroup // calls
}

// newSession creates a peer connection for an offer that arrived through
// base.
func (s *Server) newSession(base string) (*session, error) {
	pc, err := s.api.NewPeerConnection(pion.Configuration{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sess := &session{s: s, pc: pc, base: base, ctx: ctx, cancel: cancel,
		chunks: newReassembler(64 << 20), calls: map[string]context.CancelFunc{}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		_ = pc.GracefulClose()
		return nil, errors.New("the server is closed")
	}
	s.sessions[sess] = struct{}{}
	s.accepted.Add(1)
	s.wg.Go(sess.closer)
	s.mu.Unlock()
	pc.OnDataChannel(func(dc *pion.DataChannel) {
		sess.mu.Lock()
		sess.dc = dc
		sess.mu.Unlock()
		dc.OnMessage(sess.onMessage)
		dc.OnClose(sess.close)
	})
	pc.OnConnectionStateChange(func(st pion.PeerConnectionState) {
		switch st {
		case pion.PeerConnectionStateFailed, pion.PeerConnectionStateDisconnected, pion.PeerConnectionStateClosed:
			sess.close()
		}
	})
	return sess, nil
}

func (sess *session) channel() *pion.DataChannel {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.dc
}

// close starts ending the session; its closer does the work. It never
// blocks, so pion's callbacks may call it.
func (sess *session) close() { sess.cancel() }

// closer waits for the session to end, then for its calls, then closes
// the peer connection and waits for pion's goroutines.
func (sess *session) closer() {
	<-sess.ctx.Done()
	// A tool_call that saw the session open adds to wg under mu; taking
	// mu once after the cancel orders every such Add before the Wait
	// (the race detector flagged Add beside Wait otherwise).
	sess.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the point
	sess.mu.Unlock()
	sess.wg.Wait()
	_ = sess.pc.GracefulClose()
	sess.s.mu.Lock()
	delete(sess.s.sessions, sess)
	sess.s.mu.Unlock()
}

// answer applies an offer and returns the answer's SDP; with gather it
// waits until every candidate is in it.
func (sess *session) answer(ctx context.Context, sdp string, gather bool) (string, error) {
	if err := sess.pc.SetRemoteDescription(pion.SessionDescription{Type: pion.SDPTypeOffer, SDP: sdp}); err != nil {
		return "", err
	}
	ans, err := sess.pc.CreateAnswer(nil)
	if err != nil {
		return "", err
	}
	done := pion.GatheringCompletePromise(sess.pc)
	if err := sess.pc.SetLocalDescription(ans); err != nil {
		return "", err
	}
	if gather {
		select {
		case <-done:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return sess.pc.LocalDescription().SDP, nil
}

func writeSignal(w http.ResponseWriter, status int, sig signal) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(sig)
}

func errorSignal(msg string) signal { return signal{Type: signalError, Error: msg} }

// checkOffer validates an offer signal and returns a refusal, if any.
func (s *Server) checkOffer(sig *signal) (int, string) {
	switch {
	case sig.Type != signalOffer:
		return http.StatusBadRequest, `expected a message of type "offer"`
	case strings.TrimSpace(sig.SDP) == "":
		return http.StatusBadRequest, `the offer has no "sdp"`
	case sig.PeerID != s.opts.PeerID:
		return http.StatusNotFound, "unknown peer_id " + sig.PeerID
	}
	return 0, ""
}

// serveOffer is HTTP signaling: one offer in, one complete answer out.
func (s *Server) serveOffer(w http.ResponseWriter, r *http.Request) {
	var sig signal
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || json.Unmarshal(body, &sig) != nil {
		writeSignal(w, http.StatusBadRequest, errorSignal("the body is not a JSON signaling message"))
		return
	}
	if status, msg := s.checkOffer(&sig); status != 0 {
		writeSignal(w, status, errorSignal(msg))
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	sess, err := s.newSession(scheme + "://" + r.Host + r.URL.Path)
	if err != nil {
		writeSignal(w, http.StatusServiceUnavailable, errorSignal(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	sdp, err := sess.answer(ctx, sig.SDP, true)
	if err != nil {
		sess.close()
		writeSignal(w, http.StatusBadRequest, errorSignal("the offer cannot be used: "+err.Error()))
		return
	}
	writeSignal(w, http.StatusOK, signal{Type: signalAnswer, SDP: sdp})
}

// wsPeer is the server side of one signaling WebSocket.
type wsPeer struct {
	ws       *websocket.Conn
	mu       sync.Mutex
	answered bool
	queue    []pion.ICECandidateInit
	closed   bool
}

func (p *wsPeer) sendLocked(sig signal) {
	if p.closed {
		return
	}
	b, _ := json.Marshal(sig)
	_ = p.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = p.ws.WriteMessage(websocket.TextMessage, b)
}

func (p *wsPeer) candidate(c *pion.ICECandidate) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var init pion.ICECandidateInit
	if c != nil {
		init = c.ToJSON()
	}
	if !p.answered {
		p.queue = append(p.queue, init)
		return
	}
	p.sendCandidateLocked(init)
}

func (p *wsPeer) sendCandidateLocked(init pion.ICECandidateInit) {
	sig := signal{Type: signalCandidate}
	if init.Candidate != "" {
		sig.Candidate = &init
	}
	p.sendLocked(sig)
}

// serveWS is WebSocket signaling with trickled candidates both ways.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.sockets[ws] = struct{}{}
	s.mu.Unlock()
	p := &wsPeer{ws: ws}
	defer func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		ws.Close()
		s.mu.Lock()
		delete(s.sockets, ws)
		s.mu.Unlock()
	}()
	ws.SetReadLimit(1 << 20)
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		return
	}
	var sig signal
	if json.Unmarshal(data, &sig) != nil {
		p.sendLocked(errorSignal("the message is not a JSON signaling message"))
		return
	}
	if status, msg := s.checkOffer(&sig); status != 0 {
		p.sendLocked(errorSignal(msg))
		return
	}
	scheme := "ws"
	if r.TLS != nil {
		scheme = "wss"
	}
	sess, err := s.newSession(scheme + "://" + r.Host + r.URL.Path)
	if err != nil {
		p.sendLocked(errorSignal(err.Error()))
		return
	}
	sess.pc.OnICECandidate(p.candidate)
	sdp, err := sess.answer(r.Context(), sig.SDP, false)
	if err != nil {
		sess.close()
		p.mu.Lock()
		p.sendLocked(errorSignal("the offer cannot be used: " + err.Error()))
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.sendLocked(signal{Type: signalAnswer, SDP: sdp})
	p.answered = true
	for _, c := range p.queue {
		p.sendCandidateLocked(c)
	}
	p.queue = nil
	p.mu.Unlock()
	_ = ws.SetReadDeadline(time.Time{})
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return // the client closes the WebSocket once connected
		}
		var c signal
		if json.Unmarshal(data, &c) != nil || c.Type != signalCandidate || c.Candidate == nil || c.Candidate.Candidate == "" {
			continue
		}
		if err := sess.pc.AddICECandidate(*c.Candidate); err != nil {
			s.log.Debug("webrtcserver: candidate ignored", "err", err)
		}
	}
}

// onMessage is the data channel's message callback.
func (sess *session) onMessage(dm pion.DataChannelMessage) {
	data, complete, err := sess.chunks.add(dm.Data)
	if err != nil {
		sess.s.log.Warn("webrtcserver: chunk dropped", "err", err)
		return
	}
	if !complete {
		return
	}
	if icpt := sess.s.opts.Intercept; icpt != nil && icpt(data, sess.sendRaw) {
		return
	}
	var m inbound
	if err := json.Unmarshal(data, &m); err != nil || m.Type == "" {
		sess.send(message{Type: typeToolError, Error: &wireError{"invalid_request", "expected a JSON message of the envelope"}})
		return
	}
	id := idString(m.ID)
	switch m.Type {
	case typeDiscover:
		man, _ := json.Marshal(sess.s.Manual(sess.base))
		sess.send(message{Type: typeManual, ID: id, Manual: man})
	case typeCancel:
		sess.mu.Lock()
		if stop := sess.calls[id]; stop != nil {
			stop()
		}
		sess.mu.Unlock()
	case typeToolCall:
		sess.mu.Lock()
		if sess.ctx.Err() != nil {
			sess.mu.Unlock()
			return
		}
		cctx, stop := context.WithCancel(sess.ctx)
		sess.calls[id] = stop
		sess.wg.Add(1)
		sess.mu.Unlock()
		go func() {
			defer sess.wg.Done()
			defer func() {
				stop()
				sess.mu.Lock()
				delete(sess.calls, id)
				sess.mu.Unlock()
			}()
			sess.run(cctx, id, m.Tool, m.Inputs)
		}()
	default:
		sess.send(message{Type: typeToolError, ID: id, Error: &wireError{"invalid_request", "unknown message type " + m.Type}})
	}
}

// run carries out one tool_call.
func (sess *session) run(ctx context.Context, id, tool string, inputs map[string]any) {
	if inputs == nil {
		inputs = map[string]any{}
	}
	var err error
	if tool == fixture.Count {
		err = sess.s.f.Stream(ctx, tool, inputs, func(v any) error {
			ev, _ := json.Marshal(v)
			return sess.send(message{Type: typeToolEvent, ID: id, Event: ev})
		})
		if err == nil {
			err = sess.send(message{Type: typeToolResponse, ID: id})
		}
	} else {
		var v any
		if v, err = sess.s.f.Call(ctx, tool, inputs); err == nil {
			out, merr := json.Marshal(v)
			if merr != nil {
				err = &fixture.Failure{Message: "cannot encode the result: " + merr.Error()}
			} else {
				err = sess.send(message{Type: typeToolResponse, ID: id, Output: out})
			}
		}
	}
	var failure *fixture.Failure
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Cancelled, or the connection is gone: nobody waits for an answer.
	case errors.As(err, &failure):
		_ = sess.send(message{Type: typeToolError, ID: id, Error: &wireError{"tool_error", failure.Message}})
	case errors.Is(err, fixture.ErrUnknownTool):
		_ = sess.send(message{Type: typeToolError, ID: id, Error: &wireError{"tool_not_found", err.Error()}})
	default:
		_ = sess.send(message{Type: typeToolError, ID: id, Error: &wireError{"invalid_arguments", err.Error()}})
	}
}

// idString renders an id given as a JSON string or number.
func idString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	return string(raw)
}

// send writes one message, in chunks when it is larger than the chunk
// size.
func (sess *session) send(m message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	dc := sess.channel()
	if dc == nil {
		return errors.New("no data channel")
	}
	parts := split(b, m.ID, sess.s.opts.MaxChunkBytes)
	if len(parts) > 1 {
		// Only the chunks of one message must stay together.
		sess.writeMu.Lock()
		defer sess.writeMu.Unlock()
	}
	for _, part := range parts {
		if err := dc.SendText(string(part)); err != nil {
			return err
		}
	}
	return nil
}

// sendRaw writes one data-channel message as it is.
func (sess *session) sendRaw(raw []byte) {
	if dc := sess.channel(); dc != nil {
		sess.writeMu.Lock()
		_ = dc.SendText(string(raw))
		sess.writeMu.Unlock()
	}
}
