package mcpconformance

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A bridge serves a stdio MCP server (a command) as a Streamable HTTP
// endpoint, so that the conformance suite, which only speaks HTTP, can
// test utcpd's stdio front. It relays JSON-RPC messages unchanged: every
// HTTP session gets its own process (an stdio server serves one client);
// a POSTed request is written to the process and answered with an SSE
// stream that carries what the process sends until the response with the
// request's id; notifications and responses a client POSTs are written
// and answered 202. A message the process sends that is not a response
// (a progress or log notification, a sampling or elicitation request) is
// put on the stream of the most recent request still waiting for its
// answer, else on the session's GET stream, else dropped: a stdio
// connection does not say which request a message belongs to, and the
// suite's calls are one at a time.
//
// Like any local HTTP server it refuses a Host header that is not a
// loopback name and an Origin that is not the server's own (403); that is
// the bridge's doing, not the stdio server's. It keeps no event store, so
// streams do not resume. A session whose streams have all been closed
// for idleAfter ends: its process is stopped (closing its standard input,
// then killing it).
type bridge struct {
	command func() *exec.Cmd
	URL     string

	mu       sync.Mutex
	sessions map[string]*bridgeSession
	closed   bool
	srv      *http.Server
	stop     chan struct{}
	reaped   sync.WaitGroup
}

// idleAfter is how long a session without an open stream lives on.
const idleAfter = 3 * time.Second

// maxMessage bounds one JSON-RPC message either way.
const maxMessage = 16 << 20

// startBridge serves command's stdio server at http://127.0.0.1:port/mcp
// until cleanup.
func startBridge(t testing.TB, command func() *exec.Cmd) *bridge {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &bridge{command: command, URL: "http://" + ln.Addr().String() + "/mcp",
		sessions: map[string]*bridgeSession{}, stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", b.serve)
	b.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	b.reaped.Add(1)
	go b.reap()
	t.Cleanup(b.close)
	return b
}

func (b *bridge) close() {
	b.mu.Lock()
	b.closed = true
	sessions := b.sessions
	b.sessions = map[string]*bridgeSession{}
	b.mu.Unlock()
	close(b.stop)
	b.reaped.Wait()
	_ = b.srv.Close()
	for _, s := range sessions {
		s.end()
	}
}

// reap ends sessions that have had no open stream for idleAfter.
func (b *bridge) reap() {
	defer b.reaped.Done()
	tick := time.NewTicker(idleAfter / 4)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.mu.Lock()
		var idle []*bridgeSession
		for id, s := range b.sessions {
			if s.idleSince(idleAfter) {
				idle = append(idle, s)
				delete(b.sessions, id)
			}
		}
		b.mu.Unlock()
		for _, s := range idle {
			s.end()
		}
	}
}

// loopbackHost reports whether host (a Host header) names a loopback
// address.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// rpcError answers a JSON-RPC error without an id.
func rpcError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32000, "message": msg}})
}

func (b *bridge) serve(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		rpcError(w, http.StatusForbidden, "Host "+r.Host+" is not a loopback name")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		rpcError(w, http.StatusForbidden, "cross-origin request from "+o)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	var s *bridgeSession
	if id != "" {
		b.mu.Lock()
		s = b.sessions[id]
		b.mu.Unlock()
		if s == nil {
			rpcError(w, http.StatusNotFound, "unknown session")
			return
		}
	}
	switch r.Method {
	case http.MethodPost:
		b.post(w, r, s)
	case http.MethodGet:
		if s == nil {
			rpcError(w, http.StatusBadRequest, "GET needs a session")
			return
		}
		s.get(w, r)
	case http.MethodDelete:
		if s == nil {
			rpcError(w, http.StatusBadRequest, "DELETE needs a session")
			return
		}
		b.mu.Lock()
		delete(b.sessions, id)
		b.mu.Unlock()
		s.end()
		w.WriteHeader(http.StatusOK)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		rpcError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// envelope is what the bridge reads of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// key is a message id in a comparable form (its compact JSON).
func key(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

func (b *bridge) post(w http.ResponseWriter, r *http.Request, s *bridgeSession) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil || len(body) > maxMessage {
		rpcError(w, http.StatusBadRequest, "unreadable or oversized body")
		return
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		rpcError(w, http.StatusBadRequest, "not one JSON-RPC message (batches are not relayed)")
		return
	}
	isRequest := env.Method != "" && len(env.ID) > 0 && string(env.ID) != "null"
	if s == nil {
		if env.Method != "initialize" || !isRequest {
			rpcError(w, http.StatusBadRequest, "missing Mcp-Session-Id")
			return
		}
		if s, err = b.open(); err != nil {
			rpcError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		rpcError(w, http.StatusBadRequest, "invalid JSON")
		return
	}
	if !isRequest {
		if err := s.write(compact.Bytes()); err != nil {
			rpcError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	st := s.openStream(key(env.ID))
	defer s.closeStream(st)
	if err := s.write(compact.Bytes()); err != nil {
		rpcError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Mcp-Session-Id", s.id)
	w.WriteHeader(http.StatusOK)
	flush(w)
	s.pump(w, r, st, func(msg []byte) bool {
		var m envelope
		return json.Unmarshal(msg, &m) == nil && m.Method == "" && key(m.ID) == st.id // the response ends the stream
	})
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// sendEvent writes msg as one SSE message event.
func sendEvent(w http.ResponseWriter, msg []byte) bool {
	if _, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg); err != nil {
		return false
	}
	flush(w)
	return true
}

// open starts a session's process.
func (b *bridge) open() (*bridgeSession, error) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	cmd := b.command()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &bridgeSession{id: hex.EncodeToString(raw), cmd: cmd, stdin: stdin, done: make(chan struct{}),
		exited: make(chan struct{}), stderr: &tailBuffer{max: 64 << 10}, lastOpen: time.Now()}
	cmd.Stderr = s.stderr
	cmd.WaitDelay = 5 * time.Second // a grandchild holding stderr open does not hold Wait
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the stdio server: %w", err)
	}
	go s.read(stdout)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		s.end()
		return nil, fmt.Errorf("the bridge is closing")
	}
	b.sessions[s.id] = s
	b.mu.Unlock()
	return s, nil
}

// bridgeSession is one HTTP session and its stdio process.
type bridgeSession struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{} // closed by end
	exited chan struct{} // closed when the process's output has ended
	once   sync.Once

	wmu sync.Mutex // serialises writes to stdin

	mu       sync.Mutex
	streams  []*stream // POST streams waiting for their response, oldest first
	getS     *stream   // the GET stream, if open
	lastOpen time.Time // when the last stream closed (or the session began)
}

// stream is one open SSE response.
type stream struct {
	id   string // the request's id; "" for the GET stream
	ch   chan []byte
	gone chan struct{} // closed when the response has ended
}

func newStream(id string) *stream {
	return &stream{id: id, ch: make(chan []byte, 256), gone: make(chan struct{})}
}

func (s *bridgeSession) openStream(id string) *stream {
	st := newStream(id)
	s.mu.Lock()
	s.streams = append(s.streams, st)
	s.mu.Unlock()
	return st
}

func (s *bridgeSession) closeStream(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(st.gone)
	for i, x := range s.streams {
		if x == st {
			s.streams = append(s.streams[:i], s.streams[i+1:]...)
			break
		}
	}
	if s.getS == st {
		s.getS = nil
	}
	s.lastOpen = time.Now()
}

// idleSince reports whether the session has had no open stream for d.
func (s *bridgeSession) idleSince(d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams) == 0 && s.getS == nil && time.Since(s.lastOpen) > d
}

func (s *bridgeSession) get(w http.ResponseWriter, r *http.Request) {
	st := newStream("")
	s.mu.Lock()
	if s.getS != nil {
		s.mu.Unlock()
		rpcError(w, http.StatusConflict, "the session has a GET stream already")
		return
	}
	s.getS = st
	s.mu.Unlock()
	defer s.closeStream(st)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush(w)
	s.pump(w, r, st, func([]byte) bool { return false })
}

// pump writes the messages of st as SSE events until last says a message
// was the last, the client goes away or the session ends. When the
// process has exited, what it sent before is still written.
func (s *bridgeSession) pump(w http.ResponseWriter, r *http.Request, st *stream, last func([]byte) bool) {
	send := func(msg []byte) bool { return sendEvent(w, msg) && !last(msg) }
	for {
		select {
		case msg := <-st.ch:
			if !send(msg) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-s.exited:
			for {
				select {
				case msg := <-st.ch:
					if !send(msg) {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// write sends one message to the process.
func (s *bridgeSession) write(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	select {
	case <-s.exited:
		return fmt.Errorf("the stdio server has exited; stderr:\n%s", s.stderr.String())
	default:
	}
	if _, err := s.stdin.Write(append(append([]byte{}, msg...), '\n')); err != nil {
		return fmt.Errorf("writing to the stdio server: %w", err)
	}
	return nil
}

// read routes the process's messages to the streams until its output
// ends.
func (s *bridgeSession) read(stdout io.Reader) {
	defer close(s.exited)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), maxMessage)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msg := append([]byte{}, line...)
		var env envelope
		if json.Unmarshal(msg, &env) != nil {
			continue // not JSON-RPC: a stdio server must not print it; skip
		}
		st := s.route(env)
		if st == nil {
			continue
		}
		select {
		case st.ch <- msg:
		case <-st.gone: // its response ended meanwhile: dropped
		case <-s.done:
			return
		}
	}
}

// route picks the stream a message goes on, or nil.
func (s *bridgeSession) route(env envelope) *stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	if env.Method == "" { // a response: its request's stream
		k := key(env.ID)
		for _, st := range s.streams {
			if st.id == k {
				return st
			}
		}
		return nil
	}
	if n := len(s.streams); n > 0 {
		return s.streams[n-1]
	}
	return s.getS
}

// end stops the process: standard input closed (a stdio server exits
// then), killed if it has not exited within 5 s.
func (s *bridgeSession) end() {
	s.once.Do(func() {
		close(s.done)
		s.wmu.Lock()
		_ = s.stdin.Close()
		s.wmu.Unlock()
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
		}
		_ = s.cmd.Wait()
	})
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte{}, t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
