// Package tcpserver serves the fixture tools (echo, add, fail, sleep,
// count) over TCP with the utcpd envelope of transports/tcp: JSON frames
// {"type":"call","id","tool","arguments"}, {"type":"cancel","id"} and
// {"type":"utcp","id"} in, result, event, end, error and manual frames
// out, delimited by the configured framing (newline-delimited by default).
//
// Calls on one connection run concurrently and are answered by id. count
// streams 1..n as separate event frames and ends with an end frame. When
// a connection closes, or a cancel frame names a call, the call's context
// is cancelled, so sleep and count stop early.
package tcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/utcpd/utcpd/transports/tcp"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// MaxFrame caps one request frame: 64 MiB.
const MaxFrame = 64 << 20

// Options configure a Server.
type Options struct {
	// Framing delimits frames; the zero value means newline-delimited.
	Framing tcp.Framing
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

// New returns a Server for f.
func New(f *fixture.Fixture, opts Options) *Server {
	if opts.Framing.Strategy == "" {
		opts.Framing = tcp.Framing{Strategy: tcp.FramingDelimiter, Delimiter: []byte("\n")}
	}
	return &Server{f: f, opts: opts, lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// Template returns the manual call template fields that reach the server
// listening at addr (host:port), to be given a name.
func (s *Server) Template(addr string) map[string]any {
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	m := map[string]any{"call_template_type": tcp.Type, "host": host, "port": port, "envelope": true,
		"framing_strategy": s.opts.Framing.Strategy, "max_response_size": 64 << 20}
	switch s.opts.Framing.Strategy {
	case tcp.FramingLengthPrefix:
		n := s.opts.Framing.PrefixBytes
		if n == 0 {
			n = 4
		}
		m["length_prefix_bytes"] = n
		if s.opts.Framing.LittleEndian {
			m["length_prefix_endian"] = "little"
		}
	case tcp.FramingDelimiter:
		m["message_delimiter"] = string(s.opts.Framing.Delimiter)
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
		data, err := s.opts.Framing.Read(br, MaxFrame)
		if err != nil {
			return
		}
		var req tcp.Frame
		if err := json.Unmarshal(data, &req); err != nil {
			ss.send(tcp.Frame{Type: tcp.FrameError, Error: &tcp.WireError{Code: "invalid_request", Message: "not a JSON envelope frame"}})
			continue
		}
		switch req.Type {
		case tcp.FrameDiscover:
			raw, _ := json.Marshal(fixture.Manual(nil))
			ss.send(tcp.Frame{Type: tcp.FrameManual, ID: req.ID, Manual: raw})
		case tcp.FrameCancel:
			ss.cmu.Lock()
			if c := ss.cancels[req.ID]; c != nil {
				c()
			}
			ss.cmu.Unlock()
		case tcp.FrameCall:
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
				ss.call(cctx, &req)
			})
		default:
			ss.send(tcp.Frame{Type: tcp.FrameError, ID: req.ID, Error: &tcp.WireError{Code: "invalid_request", Message: "unknown frame type " + strconv.Quote(req.Type)}})
		}
	}
}

func (ss *session) call(ctx context.Context, req *tcp.Frame) {
	var err error
	if req.Tool == fixture.Count {
		err = ss.s.f.Stream(ctx, req.Tool, req.Arguments, func(v any) error {
			return ss.send(tcp.Frame{Type: tcp.FrameEvent, ID: req.ID, Data: v})
		})
		if err == nil {
			ss.send(tcp.Frame{Type: tcp.FrameEnd, ID: req.ID})
			return
		}
	} else {
		var v any
		if v, err = ss.s.f.Call(ctx, req.Tool, req.Arguments); err == nil {
			ss.send(tcp.Frame{Type: tcp.FrameResult, ID: req.ID, Result: resultValue(v)})
			return
		}
	}
	if ctx.Err() != nil {
		return // the caller went away
	}
	ss.send(tcp.Frame{Type: tcp.FrameError, ID: req.ID, Error: WireErrorOf(err)})
}

// resultValue keeps a nil result as JSON null rather than dropping it.
func resultValue(v any) any {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// WireErrorOf maps a fixture error to the envelope's error object.
func WireErrorOf(err error) *tcp.WireError {
	var fail *fixture.Failure
	switch {
	case errors.As(err, &fail):
		return &tcp.WireError{Code: string(utcp.CodeToolError), Message: fail.Message}
	case errors.Is(err, fixture.ErrUnknownTool):
		return &tcp.WireError{Code: string(utcp.CodeToolNotFound), Message: err.Error()}
	}
	return &tcp.WireError{Code: string(utcp.CodeInvalidArguments), Message: err.Error()}
}

func (ss *session) send(f tcp.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	out, err := ss.s.opts.Framing.Append(nil, b)
	if err != nil {
		return err
	}
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	_, err = ss.nc.Write(out)
	return err
}
