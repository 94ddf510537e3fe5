package udp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/envelope"
	"github.com/utcpd/utcpd/transports/internal/socket"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the udp transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           transports.Constructor(New),
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

// Interface guards.
var (
	_ transports.Transport = (*Transport)(nil)
	_ transports.Streamer  = (*Transport)(nil)
)

// The frame types of the utcpd envelope, one JSON object per datagram
// (see the package documentation). They are the tcp and websocket
// transports' frame types.
const (
	FrameCall     = envelope.FrameCall     // client → server: run a tool
	FrameCancel   = envelope.FrameCancel   // client → server: the caller gave up
	FrameDiscover = envelope.FrameDiscover // client → server: send your manual
	FrameResult   = envelope.FrameResult   // server → client: the whole result; ends the call
	FrameEvent    = envelope.FrameEvent    // server → client: one streamed item
	FrameEnd      = envelope.FrameEnd      // server → client: the stream is over
	FrameError    = envelope.FrameError    // server → client: the call failed; ends the call
	FrameManual   = envelope.FrameManual   // server → client: the manual asked for
)

// Frame is one datagram of the utcpd envelope.
type Frame = envelope.Frame

// WireError is the error object of an error frame.
type WireError = envelope.WireError

// Transport is the udp transport. It is safe for concurrent use. Each
// call uses a connected UDP socket of its own while it runs, so
// datagrams from other peers never reach it; envelope-mode sockets are
// reused by later calls of the manual (answers are matched by id). The
// transport starts no goroutines.
type Transport struct {
	log    *slog.Logger
	dialer net.Dialer
	seq    atomic.Uint64

	mu     sync.Mutex
	closed bool
	open   map[net.Conn]struct{}
	idle   map[string][]net.Conn // envelope sockets by manual + "\x00" + address
}

// maxIdle caps the idle envelope-mode sockets kept per manual and
// address.
const maxIdle = 64

// New returns a udp Transport. It takes no configuration.
func New(opts transports.Options) (*Transport, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Transport{log: log, open: map[net.Conn]struct{}{}, idle: map[string][]net.Conn{}}, nil
}

var errClosed = utcp.NewError(utcp.CodeUnavailable, "udp: transport closed")

// RegisterManual sends the discovery datagram {"type":"utcp"} (with an id
// in envelope mode) and reads one answer: an envelope manual frame or a
// bare UTCP manual. Anything else, or silence until the timeout, is
// discovery_failed (the timeout as the context's error).
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkHost(spec); err != nil {
		return nil, err
	}
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "udp discovery of manual %q from %s: "+format, append([]any{tmpl.Name, spec.addr()}, args...)...)
	}
	req := Frame{Type: FrameDiscover}
	if spec.Envelope {
		req.ID = strconv.FormatUint(t.seq.Add(1), 10)
	}
	payload, _ := jsonx.Marshal(req)
	x, err := t.begin(ctx, tmpl.Name, spec, payload, req.ID)
	if err != nil {
		return nil, err
	}
	data, err := x.read()
	x.finish(err == nil)
	if err != nil {
		if utcp.CodeOf(err) == utcp.CodeTransportError {
			return nil, fail("%w", err)
		}
		return nil, err
	}
	m, err := envelope.ReadManual(data, fail, t.log, tmpl.Name, spec.addr())
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosed
	}
	return m, nil
}

// CallTool sends one call datagram and waits for its answer. In envelope
// mode it returns the result datagram's value, or the event data as a
// list when the call ends with end; an error datagram is a
// *utcp.ToolError (tool_not_found when its code says so). Otherwise it
// reads number_of_response_datagrams datagrams, each converted by
// response_format: one is the result, several a list, zero means null
// right after sending. A datagram over max_datagram_size is
// payload_too_large, a garbled envelope a transport_error, and an answer
// that does not come ends with the context's error (timeout) when the
// template's timeout passes.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	x, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	if x.spec.Envelope {
		v, ended, err := envelope.Collect(x.next, "udp", x.spec.maxResponse())
		if !ended {
			x.sendCancel()
		}
		x.finish(ended)
		if err != nil {
			return nil, err
		}
		return &utcp.Result{Value: v}, nil
	}
	defer x.finish(false) // a socket without the envelope is never reused
	n := x.spec.datagrams()
	var vals []any
	var size int64
	for range n {
		data, err := x.read()
		if err != nil {
			return nil, err
		}
		if size += int64(len(data)); size > x.spec.maxResponse() {
			return nil, transports.TooLarge(x.spec.maxResponse())
		}
		v, err := socket.ConvertResponse("udp", x.spec.responseFormat(), data)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
	}
	switch n {
	case 0:
		return &utcp.Result{}, nil
	case 1:
		return &utcp.Result{Value: vals[0]}, nil
	}
	return &utcp.Result{Value: vals}, nil
}

// CallToolStream starts one call. In envelope mode each event datagram is
// an event, a result datagram one last event, and the end datagram
// io.EOF; Close before the end sends a cancel datagram (best effort: UDP
// may lose it). Without the envelope the whole answer is one event.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if !spec.Envelope {
		res, err := t.CallTool(ctx, call)
		if err != nil {
			return nil, err
		}
		return transports.SingleEvent(&utcp.Event{Data: res.Value}), nil
	}
	x, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	return envelope.NewStream("udp", x.next, x.finish, x.sendCancel), nil
}

// Release closes the manual's idle sockets (transports.Count calls it
// when the manual's last registration ends).
func (t *Transport) Release(_ context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := tmpl.Name + "\x00"
	for k, cs := range t.idle {
		if strings.HasPrefix(k, prefix) {
			for _, c := range cs {
				_ = c.Close()
				delete(t.open, c)
			}
			delete(t.idle, k)
		}
	}
	return nil
}

// Close closes every socket; calls in flight fail with unavailable. It is
// idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.open {
		_ = c.Close()
	}
	clear(t.open)
	clear(t.idle)
	return nil
}

func (t *Transport) start(ctx context.Context, call *utcp.Call) (*exchange, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "udp: no call")
	}
	spec, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkHost(spec); err != nil {
		return nil, err
	}
	var payload []byte
	var id string
	if spec.Envelope {
		id = strconv.FormatUint(t.seq.Add(1), 10)
		if payload, err = envelope.EncodeCall("udp", id, call.Name, call.Arguments); err != nil {
			return nil, err
		}
	} else if payload, err = RenderRequest(spec.RequestDataFormat, spec.RequestDataTemplate, call.Arguments); err != nil {
		return nil, err
	}
	return t.begin(ctx, call.Manual, spec, payload, id)
}

// aLongTimeAgo is a deadline in the past: setting it unblocks reads at
// once.
var aLongTimeAgo = time.Unix(1, 0)

// begin opens a socket and sends the request datagram.
func (t *Transport) begin(ctx context.Context, manual string, spec *Template, payload []byte, id string) (*exchange, error) {
	if len(payload) > MaxDatagram {
		return nil, utcp.NewError(utcp.CodeInvalidArguments, "udp: the request is %d bytes, more than one datagram carries (%d)", len(payload), MaxDatagram)
	}
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	key := manual + "\x00" + spec.addr()
	nc, err := t.socket(ctx, key, spec)
	if err != nil {
		cancel()
		return nil, err
	}
	x := &exchange{t: t, nc: nc, key: key, spec: spec, id: id, ctx: ctx, cancel: cancel, buf: getBuf(spec.maxDatagram() + 1)}
	x.stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	if _, err := nc.Write(payload); err != nil {
		x.finish(false)
		return nil, x.wrap(err)
	}
	return x, nil
}

// socket returns an idle envelope-mode socket for key, or a new one.
func (t *Transport) socket(ctx context.Context, key string, spec *Template) (net.Conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	if cs := t.idle[key]; spec.Envelope && len(cs) > 0 {
		nc := cs[len(cs)-1]
		t.idle[key] = cs[:len(cs)-1]
		t.mu.Unlock()
		return nc, nil
	}
	t.mu.Unlock()
	nc, err := netguard.DialContext(&t.dialer)(ctx, "udp", spec.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("udp: %s: %w", spec.addr(), err)}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = nc.Close()
		return nil, errClosed
	}
	t.open[nc] = struct{}{}
	return nc, nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, MaxDatagram+1); return &b }}

// getBuf returns a read buffer of n bytes (at most MaxDatagram+1).
func getBuf(n int) []byte { return (*bufPool.Get().(*[]byte))[:n] }

func putBuf(b []byte) {
	b = b[:cap(b)]
	bufPool.Put(&b)
}

// exchange is one request on one socket and the reading of its answers.
type exchange struct {
	t      *Transport
	nc     net.Conn
	key    string
	spec   *Template
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	buf    []byte
	once   sync.Once
}

// finish releases the socket: an envelope-mode socket whose call ended
// cleanly (result, error or end received, no deadline hit) is kept for
// the manual's next call, since late datagrams carry other ids and are
// skipped; any other socket is closed.
func (x *exchange) finish(reusable bool) {
	x.once.Do(func() {
		stopped := x.stop()
		x.cancel()
		t := x.t
		t.mu.Lock()
		defer t.mu.Unlock()
		if reusable {
			putBuf(x.buf) // only the reading goroutine finishes cleanly
		}
		if reusable && stopped && x.spec.Envelope && !t.closed && len(t.idle[x.key]) < maxIdle {
			t.idle[x.key] = append(t.idle[x.key], x.nc)
			return
		}
		_ = x.nc.Close()
		delete(t.open, x.nc)
	})
}

// sendCancel tells an envelope server, best effort, that the call is
// abandoned.
func (x *exchange) sendCancel() {
	if x.id == "" {
		return
	}
	b, _ := json.Marshal(Frame{Type: FrameCancel, ID: x.id})
	_ = x.nc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = x.nc.Write(b)
}

// read reads one datagram of at most max_datagram_size bytes and returns
// a copy.
func (x *exchange) read() ([]byte, error) {
	b, err := x.readShared()
	return bytes.Clone(b), err
}

// readShared reads one datagram into the exchange's buffer, valid until
// the next read.
func (x *exchange) readShared() ([]byte, error) {
	n, err := x.nc.Read(x.buf)
	if err != nil {
		return nil, x.wrap(err)
	}
	if n > x.spec.maxDatagram() {
		return nil, utcp.Errorf(utcp.CodePayloadTooLarge, "udp: a datagram from %s is larger than max_datagram_size (%d bytes): %w", x.spec.addr(), x.spec.maxDatagram(), transports.ErrTooLarge).WithDetail("limit_bytes", x.spec.maxDatagram())
	}
	return x.buf[:n], nil
}

func (x *exchange) wrap(err error) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return cerr
	}
	x.t.mu.Lock()
	closed := x.t.closed
	x.t.mu.Unlock()
	if closed {
		return errClosed
	}
	return &utcp.TransportError{Err: fmt.Errorf("udp: %s: %w", x.spec.addr(), err)}
}

// next reads datagrams until one of this call's envelope frames comes
// (see envelope.NextAnswer).
func (x *exchange) next() (*envelope.Answer, error) {
	return envelope.NextAnswer(x.readShared, "udp", "datagram", x.spec.addr(), x.id) // json.RawMessage fields copy what they keep
}
