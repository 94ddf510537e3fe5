// Package udpserver serves the fixture tools (echo, add, fail, sleep,
// count) over UDP with the utcpd envelope of transports/udp: one JSON
// frame per datagram. {"type":"call","id","tool","arguments"},
// {"type":"cancel","id"} and {"type":"utcp","id"} come in; result, event,
// end, error and manual datagrams go back to the sender.
//
// count streams 1..n as separate event datagrams and ends with an end
// datagram. A cancel datagram from the same sender and id cancels the
// call's context, so sleep and count stop early (UDP may lose it). A
// result too large for one datagram is answered with an error datagram.
package udpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/transports/udp"
	"github.com/utcpd/utcpd/utcp"
)

// Options configure a Server.
type Options struct {
	// AllowInsecure marks the served template allow_insecure, needed when
	// utcpd reaches the server through a host that is not loopback.
	AllowInsecure bool
}

// Server serves the fixture tools on one UDP socket. It is safe for
// concurrent use.
type Server struct {
	f    *fixture.Fixture
	opts Options

	mu      sync.Mutex
	closed  bool
	pcs     map[net.PacketConn]struct{}
	cancels map[string]context.CancelFunc // by sender address + "\x00" + id
	ctx     context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Server for f.
func New(f *fixture.Fixture, opts Options) *Server {
	ctx, stop := context.WithCancel(context.Background())
	return &Server{f: f, opts: opts, pcs: map[net.PacketConn]struct{}{}, cancels: map[string]context.CancelFunc{}, ctx: ctx, stop: stop}
}

// Template returns the manual call template fields that reach the server
// listening at addr (host:port), to be given a name.
func (s *Server) Template(addr string) map[string]any {
	host, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	m := map[string]any{"call_template_type": udp.Type, "host": host, "port": port, "envelope": true}
	if s.opts.AllowInsecure {
		m["allow_insecure"] = true
	}
	return m
}

// Serve answers datagrams on pc until Close. It returns nil after Close
// and the read error otherwise.
func (s *Server) Serve(pc net.PacketConn) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = pc.Close()
		return nil
	}
	s.pcs[pc] = struct{}{}
	s.mu.Unlock()
	buf := make([]byte, 65536)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		var req udp.Frame
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			s.send(pc, addr, udp.Frame{Type: udp.FrameError, Error: &udp.WireError{Code: "invalid_request", Message: "not a JSON envelope datagram"}})
			continue
		}
		key := addr.String() + "\x00" + req.ID
		switch req.Type {
		case udp.FrameDiscover:
			raw, _ := json.Marshal(fixture.Manual(nil))
			s.send(pc, addr, udp.Frame{Type: udp.FrameManual, ID: req.ID, Manual: raw})
		case udp.FrameCancel:
			s.mu.Lock()
			if c := s.cancels[key]; c != nil {
				c()
			}
			s.mu.Unlock()
		case udp.FrameCall:
			ctx, cancel := context.WithCancel(s.ctx)
			s.mu.Lock()
			s.cancels[key] = cancel
			s.wg.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.cancels, key)
					s.mu.Unlock()
					cancel()
				}()
				s.call(ctx, pc, addr, &req)
			}()
		default:
			s.send(pc, addr, udp.Frame{Type: udp.FrameError, ID: req.ID, Error: &udp.WireError{Code: "invalid_request", Message: "unknown frame type " + strconv.Quote(req.Type)}})
		}
	}
}

// Close stops every socket, cancels the calls in flight and waits for
// them. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for pc := range s.pcs {
		_ = pc.Close()
	}
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}

func (s *Server) call(ctx context.Context, pc net.PacketConn, addr net.Addr, req *udp.Frame) {
	var err error
	if req.Tool == fixture.Count {
		err = s.f.Stream(ctx, req.Tool, req.Arguments, func(v any) error {
			return s.send(pc, addr, udp.Frame{Type: udp.FrameEvent, ID: req.ID, Data: v})
		})
		if err == nil {
			_ = s.send(pc, addr, udp.Frame{Type: udp.FrameEnd, ID: req.ID})
			return
		}
	} else {
		var v any
		if v, err = s.f.Call(ctx, req.Tool, req.Arguments); err == nil {
			if v == nil {
				v = json.RawMessage("null")
			}
			if s.send(pc, addr, udp.Frame{Type: udp.FrameResult, ID: req.ID, Result: v}) != nil {
				_ = s.send(pc, addr, udp.Frame{Type: udp.FrameError, ID: req.ID, Error: &udp.WireError{Code: "invalid_request", Message: "the result does not fit one datagram"}})
			}
			return
		}
	}
	if ctx.Err() != nil {
		return // the caller went away
	}
	_ = s.send(pc, addr, udp.Frame{Type: udp.FrameError, ID: req.ID, Error: wireErrorOf(err)})
}

func wireErrorOf(err error) *udp.WireError {
	var fail *fixture.Failure
	switch {
	case errors.As(err, &fail):
		return &udp.WireError{Code: string(utcp.CodeToolError), Message: fail.Message}
	case errors.Is(err, fixture.ErrUnknownTool):
		return &udp.WireError{Code: string(utcp.CodeToolNotFound), Message: err.Error()}
	}
	return &udp.WireError{Code: string(utcp.CodeInvalidArguments), Message: err.Error()}
}

var errTooBig = errors.New("datagram too large")

func (s *Server) send(pc net.PacketConn, addr net.Addr, f udp.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if len(b) > udp.MaxDatagram {
		return errTooBig
	}
	_, err = pc.WriteTo(b, addr)
	return err
}
