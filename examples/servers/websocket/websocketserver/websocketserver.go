// Package websocketserver is the demo WebSocket server of the fixture
// tools for utcpd's websocket transport (documented in package
// transports/websocket and docs/transports.md), in both of its modes: the
// utcpd envelope ("envelope": true) and python-utcp's plain frames (the
// default). Its tests and benchmarks, and the command in
// examples/servers/websocket, serve it.
//
// Routes:
//
//	GET /ws            the utcpd envelope endpoint
//	GET /plain         plain discovery: {"type":"utcp"} → the manual
//	GET /plain/{tool}  plain calls of one tool
//	GET /utcp          the envelope manual as plain JSON, for people and
//	                   tools that do not speak WebSocket
//
// On /ws the server reads JSON text frames and answers each by its id:
//
//	{"type":"utcp","id":I}                       → {"type":"manual","id":I,"manual":{...}}
//	{"type":"call","id":I,"tool":T,"arguments":A} → count: {"type":"event","id":I,"data":n} per
//	                                                number as it is produced, then {"type":"end","id":I};
//	                                                other tools: {"type":"result","id":I,"result":R}
//	{"type":"cancel","id":I}                     → the call I is cancelled (no answer)
//
// Failures are {"type":"error","id":I,"error":{"code":C,"message":M}} with
// code tool_error (the fail tool), tool_not_found (an unknown tool),
// invalid_arguments (a bad argument) or invalid_request (a frame the
// server does not understand). Calls run concurrently, so many may be in
// flight on one connection. A cancel frame or the connection closing
// cancels the call: the fixture counts it and count stops producing.
//
// The manual's tool templates point at the /ws URL the client used, with
// "envelope": true and the subprotocol the connection negotiated, if any.
// The server selects the first subprotocol the client offers among
// Options.Subprotocols (default "utcpd.v1") and accepts clients that offer
// none.
//
// The plain endpoints speak as python-utcp's websocket protocol expects:
// /plain answers any frame of type "utcp" with the bare manual (no
// envelope around it), whose tool templates point at /plain/{tool}
// without the envelope. On /plain/{tool} every text frame is the tool's
// arguments as a JSON object, and the answer is one text frame, the
// tool's result as JSON; count answers each number as a frame of its own
// and then closes the connection normally (the end of a plain stream).
// Failures are envelope error frames without an id, {"type":"error",
// "error":{"code":C,"message":M}}, which utcpd reads as the call's error.
// Closing the connection cancels the call in progress.
package websocketserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// DefaultSubprotocols are the subprotocols the server accepts when
// Options.Subprotocols is nil.
var DefaultSubprotocols = []string{"utcpd.v1"}

// Options tune New.
type Options struct {
	// AllowInsecure adds "allow_insecure": true to every tool template, so
	// that utcpd may use plain ws:// through a host that is not loopback.
	AllowInsecure bool
	// Name is the call template name given to the tool templates (default
	// "fixture_websocket").
	Name string
	// Subprotocols the server may select; nil means DefaultSubprotocols,
	// an empty non-nil list selects none.
	Subprotocols []string
}

// frame is one envelope message, as the server reads and writes it.
type frame struct {
	Type      string          `json:"type"`
	ID        json.RawMessage `json:"id,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Arguments map[string]any  `json:"arguments,omitempty"`
	Result    any             `json:"result,omitempty"`
	Data      any             `json:"data,omitempty"`
	Error     *wireError      `json:"error,omitempty"`
	Manual    *utcp.Manual    `json:"manual,omitempty"`
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Server is the demo server. It is safe for concurrent use.
type Server struct {
	f        *fixture.Fixture
	opts     Options
	up       websocket.Upgrader
	accepted atomic.Int64

	mu    sync.Mutex
	conns map[*websocket.Conn]struct{}
}

// New returns a Server of f's tools.
func New(f *fixture.Fixture, opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "fixture_websocket"
	}
	protos := opts.Subprotocols
	if protos == nil {
		protos = DefaultSubprotocols
	}
	return &Server{
		f:    f,
		opts: opts,
		up: websocket.Upgrader{
			Subprotocols: protos,
			// Tools are called by daemons, not browsers: no origin to check.
			CheckOrigin: func(*http.Request) bool { return true },
		},
		conns: map[*websocket.Conn]struct{}{},
	}
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	mux.HandleFunc("GET /plain", s.servePlainDiscovery)
	mux.HandleFunc("GET /plain/{tool}", s.servePlainTool)
	mux.HandleFunc("GET /utcp", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(s.manual(wsBase(r), ""))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	return mux
}

// NewServer returns an *http.Server for addr serving New(f, opts).
func NewServer(addr string, f *fixture.Fixture, opts Options) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           New(f, opts).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
}

// Connections returns how many WebSocket connections the server accepted.
func (s *Server) Connections() int64 { return s.accepted.Load() }

// DropConnections breaks every open connection at once, without a close
// frame, as a crashing server or a network failure would, and returns how
// many it broke.
func (s *Server) DropConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.NetConn().Close()
	}
	return len(s.conns)
}

// wsBase returns ws://host of the request as the client addressed it.
func wsBase(r *http.Request) string {
	if r.TLS != nil {
		return "wss://" + r.Host
	}
	return "ws://" + r.Host
}

// Manual returns the fixture manual whose tool templates point at
// wsBaseURL + "/ws" (wsBaseURL is ws://host or wss://host) with
// "envelope": true, asking for protocol when it is not empty.
func Manual(wsBaseURL, protocol string, opts Options) *utcp.Manual {
	return manual(opts, protocol, func(string) map[string]any {
		return map[string]any{"url": wsBaseURL + "/ws", "envelope": true}
	})
}

// PlainManual returns the fixture manual whose tool templates point at
// wsBaseURL + "/plain/" + the tool's name, without the envelope.
func PlainManual(wsBaseURL string, opts Options) *utcp.Manual {
	return manual(opts, "", func(tool string) map[string]any {
		return map[string]any{"url": wsBaseURL + "/plain/" + tool}
	})
}

// manual builds the fixture manual with the tool template fields of
// fields(tool) added to the common ones.
func manual(opts Options, protocol string, fields func(tool string) map[string]any) *utcp.Manual {
	if opts.Name == "" {
		opts.Name = "fixture_websocket"
	}
	return fixture.Manual(func(tool string) *utcp.CallTemplate {
		fields := fields(tool)
		fields["name"] = opts.Name
		fields["call_template_type"] = "websocket"
		if protocol != "" {
			fields["protocol"] = protocol
		}
		if opts.AllowInsecure {
			fields["allow_insecure"] = true
		}
		raw, _ := json.Marshal(fields)
		return &utcp.CallTemplate{Name: opts.Name, Type: "websocket", Raw: raw}
	})
}

func (s *Server) manual(base, protocol string) *utcp.Manual { return Manual(base, protocol, s.opts) }

// session is one connection.
type session struct {
	s       *Server
	ws      *websocket.Conn
	base    string
	writeMu sync.Mutex

	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

// accept upgrades r to a WebSocket connection and counts it; the caller
// ends it with s.forget. It returns nil when the upgrade failed (Upgrade
// has answered the client).
func (s *Server) accept(w http.ResponseWriter, r *http.Request) *websocket.Conn {
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return nil
	}
	s.accepted.Add(1)
	s.mu.Lock()
	s.conns[ws] = struct{}{}
	s.mu.Unlock()
	ws.SetReadLimit(64 << 20)
	return ws
}

// forget closes ws and removes it from the open connections.
func (s *Server) forget(ws *websocket.Conn) {
	ws.Close()
	s.mu.Lock()
	delete(s.conns, ws)
	s.mu.Unlock()
}

// onFrame handles one message of a connection. goCall starts a goroutine
// for a call: ctx ends when the connection does, and the connection
// closes once every such goroutine has returned.
type onFrame func(ctx context.Context, goCall func(func()), mt int, data []byte)

// serveConn upgrades r and hands each message to the handler start
// returns for the connection, until the connection ends.
func (s *Server) serveConn(w http.ResponseWriter, r *http.Request, start func(ws *websocket.Conn) onFrame) {
	ws := s.accept(w, r)
	if ws == nil {
		return
	}
	handle := start(ws)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel() // the connection is gone: cancel its calls
		wg.Wait()
		s.forget(ws)
	}()
	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		handle(ctx, wg.Go, mt, data)
	}
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	s.serveConn(w, r, func(ws *websocket.Conn) onFrame {
		sess := &session{s: s, ws: ws, base: wsBase(r), calls: map[string]context.CancelFunc{}}
		return sess.handle
	})
}

// handle answers one envelope frame.
func (sess *session) handle(ctx context.Context, goCall func(func()), mt int, data []byte) {
	var f frame
	if mt != websocket.TextMessage || json.Unmarshal(data, &f) != nil || f.Type == "" {
		sess.send(frame{Type: "error", Error: &wireError{Code: "invalid_request", Message: "expected a JSON text frame of the utcpd envelope"}})
		return
	}
	id := string(f.ID)
	switch f.Type {
	case "utcp":
		sess.send(frame{Type: "manual", ID: f.ID, Manual: sess.s.manual(sess.base, sess.ws.Subprotocol())})
	case "cancel":
		sess.mu.Lock()
		if stop := sess.calls[id]; stop != nil {
			stop()
		}
		sess.mu.Unlock()
	case "call":
		cctx, stop := context.WithCancel(ctx)
		sess.mu.Lock()
		sess.calls[id] = stop
		sess.mu.Unlock()
		goCall(func() {
			defer func() {
				stop()
				sess.mu.Lock()
				delete(sess.calls, id)
				sess.mu.Unlock()
			}()
			sess.run(cctx, f)
		})
	default:
		sess.send(frame{Type: "error", ID: f.ID, Error: &wireError{Code: "invalid_request", Message: "unknown frame type " + f.Type}})
	}
}

// run carries out one call frame.
func (sess *session) run(ctx context.Context, f frame) {
	f.Arguments = orEmpty(f.Arguments)
	var err error
	if f.Tool == fixture.Count {
		err = sess.s.f.Stream(ctx, f.Tool, f.Arguments, func(v any) error {
			return sess.send(frame{Type: "event", ID: f.ID, Data: v})
		})
		if err == nil {
			err = sess.send(frame{Type: "end", ID: f.ID})
		}
	} else {
		var v any
		if v, err = sess.s.f.Call(ctx, f.Tool, f.Arguments); err == nil {
			err = sess.send(frame{Type: "result", ID: f.ID, Result: v})
		}
	}
	var failure *fixture.Failure
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Cancelled, or the connection is gone: nobody waits for an answer.
	case errors.As(err, &failure):
		_ = sess.send(frame{Type: "error", ID: f.ID, Error: &wireError{Code: "tool_error", Message: failure.Message}})
	case errors.Is(err, fixture.ErrUnknownTool):
		_ = sess.send(frame{Type: "error", ID: f.ID, Error: &wireError{Code: "tool_not_found", Message: err.Error()}})
	default:
		_ = sess.send(frame{Type: "error", ID: f.ID, Error: &wireError{Code: "invalid_arguments", Message: err.Error()}})
	}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// send writes one frame.
func (sess *session) send(f frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		b, _ = json.Marshal(frame{Type: "error", ID: f.ID, Error: &wireError{Code: "tool_error", Message: "cannot encode the result: " + err.Error()}})
	}
	sess.writeMu.Lock()
	defer sess.writeMu.Unlock()
	_ = sess.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return sess.ws.WriteMessage(websocket.TextMessage, b)
}
