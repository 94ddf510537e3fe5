// Package udpserver serves the fixture tools (echo, add, fail, sleep,
// count) over UDP with the utcpd envelope that transports/udp speaks:
// one JSON frame per datagram. {"type":"call","id","tool","arguments"},
// {"type":"cancel","id"} and {"type":"utcp","id"} come in; result, event,
// end, error and manual datagrams go back to the sender.
//
// The envelope (examples/servers/internal/envelope) is the server's own,
// written from the protocol description in docs/transports.md rather
// than shared with the client, so that the conformance suite tests one
// against the other.
//
// count streams 1..n as separate event datagrams and ends with an end
// datagram. A cancel datagram from the same sender and id cancels the
// call's context, so sleep and count stop early (UDP may lose it). A
// result too large for one datagram (MaxDatagram) is answered with an
// error datagram.
package udpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"

	"github.com/utcpd/utcpd/examples/servers/internal/envelope"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// MaxDatagram is the largest datagram the server sends, and the most a
// UDP datagram over IPv4 can carry: 65535 less the IP and UDP headers.
const MaxDatagram = 65507

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
	m := map[string]any{"call_template_type": "udp", "host": host, "port": port, "envelope": true}
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
		req, err := envelope.Decode(buf[:n])
		if err != nil {
			_ = s.send(pc, addr, envelope.ErrorFrame("", "invalid_request", "not a JSON envelope datagram"))
			continue
		}
		key := addr.String() + "\x00" + req.ID
		switch req.Type {
		case envelope.Discover:
			_ = s.send(pc, addr, envelope.ManualFrame(req.ID))
		case envelope.Cancel:
			s.mu.Lock()
			if c := s.cancels[key]; c != nil {
				c()
			}
			s.mu.Unlock()
		case envelope.Call:
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
				envelope.Answer(ctx, s.f, req, func(f envelope.Frame) error { return s.send(pc, addr, f) })
			}()
		default:
			_ = s.send(pc, addr, envelope.ErrorFrame(req.ID, "invalid_request", "unknown frame type "+strconv.Quote(req.Type)))
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

var errTooBig = errors.New("datagram too large")

// send writes one frame as one datagram to addr. A result too large for
// a datagram is answered with an error datagram instead; any other frame
// too large is not sent, and send returns errTooBig.
func (s *Server) send(pc net.PacketConn, addr net.Addr, f envelope.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if len(b) > MaxDatagram {
		if f.Type != envelope.Result {
			return errTooBig
		}
		b, _ = json.Marshal(envelope.ErrorFrame(f.ID, "invalid_request", "the result does not fit one datagram"))
	}
	_, err = pc.WriteTo(b, addr)
	return err
}
