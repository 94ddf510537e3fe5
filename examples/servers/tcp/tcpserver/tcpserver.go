// Package tcpserver serves the fixture tools (echo, add, fail, sleep,
// count) over TCP with the utcpd envelope that transports/tcp speaks:
// JSON frames {"type":"call","id","tool","arguments"},
// {"type":"cancel","id"} and {"type":"utcp","id"} in, result, event,
// end, error and manual frames out, delimited by the configured framing
// (newline-delimited by default, or a length prefix).
//
// The framing and the envelope (examples/servers/internal/envelope) are
// the server's own, written from the protocol description in
// docs/transports.md rather than shared with the client, so that the
// conformance suite tests one against the other.
//
// Calls on one connection run concurrently and are answered by id. count
// streams 1..n as separate event frames and ends with an end frame. When
// a connection closes, or a cancel frame names a call, the call's context
// is cancelled, so sleep and count stop early. A request frame over
// MaxFrame, or cut short, ends the connection.
package tcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"

	"github.com/utcpd/utcpd/examples/servers/internal/envelope"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// MaxFrame caps one request frame: 64 MiB.
const MaxFrame = 64 << 20

// Options configure a Server.
type Options struct {
	// Framing delimits frames; the zero value means newline-delimited.
	Framing Framing
	// AllowInsecure marks the served template allow_insecure, needed when
	// utcpd reaches the server through a host that is not loopback.
	AllowInsecure bool
}

// Server serves the fixture tools. It is safe for concurrent use.
type Server struct {
	f    *fixture.Fixture
	opts Options

	mu     sync.Mutex
	closed bool
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// New returns a Server for f. It panics when opts.Framing.PrefixBytes is
// not 0, 1, 2, 4 or 8, a programming error.
func New(f *fixture.Fixture, opts Options) *Server {
	if err := opts.Framing.check(); err != nil {
		panic(err)
	}
	return &Server{f: f, opts: opts, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// Template returns the manual call template fields that reach the server
// listening at addr (host:port), to be given a name.
func (s *Server) Template(addr string) map[string]any {
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	m := map[string]any{"call_template_type": "tcp", "host": host, "port": port, "envelope": true,
		"max_response_size": MaxFrame}
	if fr := s.opts.Framing; fr.PrefixBytes != 0 {
		m["framing_strategy"] = "length_prefix"
		m["length_prefix_bytes"] = fr.PrefixBytes
		if fr.LittleEndian {
			m["length_prefix_endian"] = "little"
		}
	} else {
		m["framing_strategy"] = "delimiter"
		m["message_delimiter"] = string(fr.delimiter())
		m["interpret_escape_sequences"] = false
	}
	if s.opts.AllowInsecure {
		m["allow_insecure"] = true
	}
	return m
}

// Serve accepts connections on ln until Close. It returns nil after
// Close and the accept error otherwise.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return nil
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc)
	}
}

// Close stops every listener and connection, cancels the calls in
// flight and waits for their goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

type session struct {
	s       *Server
	nc      net.Conn
	wmu     sync.Mutex
	cmu     sync.Mutex
	cancels map[string]context.CancelFunc
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	ss := &session{s: s, nc: nc, cancels: map[string]context.CancelFunc{}}
	var calls sync.WaitGroup
	defer func() {
		cancel() // the connection is gone: every call of it is cancelled
		calls.Wait()
		_ = nc.Close()
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
	}()
	br := bufio.NewReaderSize(nc, 64<<10)
	for {
		data, err := s.opts.Framing.readFrame(br, MaxFrame)
		if err != nil {
			return // the connection ended, or sent a frame it cannot have meant
		}
		req, err := envelope.Decode(data)
		if err != nil {
			ss.send(envelope.ErrorFrame("", "invalid_request", "not a JSON envelope frame"))
			continue
		}
		switch req.Type {
		case envelope.Discover:
			ss.send(envelope.ManualFrame(req.ID))
		case envelope.Cancel:
			ss.cmu.Lock()
			if c := ss.cancels[req.ID]; c != nil {
				c()
			}
			ss.cmu.Unlock()
		case envelope.Call:
			cctx, ccancel := context.WithCancel(ctx)
			ss.cmu.Lock()
			ss.cancels[req.ID] = ccancel
			ss.cmu.Unlock()
			calls.Go(func() {
				defer func() {
					ss.cmu.Lock()
					delete(ss.cancels, req.ID)
					ss.cmu.Unlock()
					ccancel()
				}()
				envelope.Answer(cctx, s.f, req, ss.send)
			})
		default:
			ss.send(envelope.ErrorFrame(req.ID, "invalid_request", "unknown frame type "+strconv.Quote(req.Type)))
		}
	}
}

// send writes one frame; frames of concurrent calls never interleave.
func (ss *session) send(f envelope.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	out, err := ss.s.opts.Framing.appendFrame(nil, b)
	if err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	_, err = ss.nc.Write(out)
	return err
}
