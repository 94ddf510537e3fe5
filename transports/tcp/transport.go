package tcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/envelope"
	"github.com/utcpd/utcpd/transports/internal/peek"
	"github.com/utcpd/utcpd/transports/internal/socket"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the tcp transport to a transports.Registry.
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

// The frame types of the utcpd envelope (see the package documentation).
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

// Frame is one message of the utcpd envelope, JSON in one frame of the
// template's framing. Clients send call, cancel and utcp frames; servers
// answer with result, event, end, error and manual frames carrying the id
// of the request.
type Frame = envelope.Frame

// WireError is the error object of an error frame.
type WireError = envelope.WireError

// Framing delimits frames on a byte stream, in both directions. The zero
// value is FramingStream.
type Framing struct {
	// Strategy is one of the Framing* constants; empty means stream.
	Strategy string
	// PrefixBytes is the length prefix size (1, 2, 4 or 8; 0 means 4).
	PrefixBytes int
	// LittleEndian selects a little-endian length prefix.
	LittleEndian bool
	// Delimiter ends each frame of FramingDelimiter; empty means "\n".
	Delimiter []byte
	// FixedLength is the size of each answer of FramingFixedLength.
	FixedLength int
}

// FramingOf returns the framing a template describes.
func FramingOf(t *Template) Framing {
	return Framing{Strategy: t.framing(), PrefixBytes: t.prefixBytes(), LittleEndian: t.LengthPrefixEndian == "little",
		Delimiter: []byte(t.delimiter()), FixedLength: t.FixedMessageLength}
}

// Append appends payload, framed, to dst. length_prefix writes the
// prefix first (a payload too long for it is an error); delimiter appends
// the delimiter; fixed_length and stream send payload as it is.
func (f Framing) Append(dst, payload []byte) ([]byte, error) {
	switch f.Strategy {
	case FramingLengthPrefix:
		n := f.PrefixBytes
		if n == 0 {
			n = 4
		}
		if n < 8 && uint64(len(payload)) >= 1<<(8*n) {
			return nil, fmt.Errorf("tcp: request of %d bytes does not fit a %d-byte length prefix", len(payload), n)
		}
		var p [8]byte
		if f.LittleEndian {
			binary.LittleEndian.PutUint64(p[:], uint64(len(payload)))
			dst = append(dst, p[:n]...)
		} else {
			binary.BigEndian.PutUint64(p[:], uint64(len(payload)))
			dst = append(dst, p[8-n:]...)
		}
		return append(dst, payload...), nil
	case FramingDelimiter:
		d := f.Delimiter
		if len(d) == 0 {
			d = []byte("\n")
		}
		if bytes.Contains(payload, d) {
			return nil, fmt.Errorf("tcp: request contains the message delimiter %q", d)
		}
		return append(append(dst, payload...), d...), nil
	}
	return append(dst, payload...), nil
}

// errPartial marks a frame cut short by the end of the connection.
var errPartial = errors.New("partial frame: the connection ended inside a frame")

// Read reads one frame of at most max bytes from r and returns its
// payload. It never holds more than max bytes plus a read buffer: a larger
// frame (announced by a length prefix, or a delimiter that does not come)
// is a payload_too_large error wrapping transports.ErrTooLarge. The end
// of the connection before a frame starts is io.EOF; inside a frame it is
// an error wrapping io.ErrUnexpectedEOF. Stream framing reads to the end
// of the connection.
func (f Framing) Read(r *bufio.Reader, maxSize int64) ([]byte, error) {
	switch f.Strategy {
	case FramingLengthPrefix:
		n := f.PrefixBytes
		if n == 0 {
			n = 4
		}
		var p [8]byte
		if f.LittleEndian {
			if _, err := io.ReadFull(r, p[:n]); err != nil {
				return nil, eofErr(err)
			}
		} else if _, err := io.ReadFull(r, p[8-n:]); err != nil {
			return nil, eofErr(err)
		}
		var size uint64
		if f.LittleEndian {
			size = binary.LittleEndian.Uint64(p[:])
		} else {
			size = binary.BigEndian.Uint64(p[:])
		}
		if size > uint64(maxSize) {
			return nil, transports.TooLarge(maxSize)
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, partial(err)
		}
		return buf, nil
	case FramingDelimiter:
		d := f.Delimiter
		if len(d) == 0 {
			d = []byte("\n")
		}
		var buf []byte
		for {
			if r.Buffered() == 0 {
				if _, err := r.Peek(1); err != nil {
					if len(buf) == 0 {
						return nil, err
					}
					return nil, partial(err)
				}
			}
			chunk, _ := r.Peek(r.Buffered())
			if len(buf) == 0 { // fast path: the whole frame is buffered
				if i := bytes.Index(chunk, d); i >= 0 {
					if int64(i) > maxSize {
						return nil, transports.TooLarge(maxSize)
					}
					out := bytes.Clone(chunk[:i])
					_, _ = r.Discard(i + len(d))
					return out, nil
				}
			}
			start := max(0, len(buf)-len(d)+1) // a delimiter may straddle chunks
			buf = append(buf, chunk...)
			if i := bytes.Index(buf[start:], d); i >= 0 {
				end := start + i
				_, _ = r.Discard(len(chunk) - (len(buf) - end - len(d)))
				if int64(end) > maxSize {
					return nil, transports.TooLarge(maxSize)
				}
				return buf[:end:end], nil
			}
			_, _ = r.Discard(len(chunk))
			if int64(len(buf)) > maxSize+int64(len(d)) {
				return nil, transports.TooLarge(maxSize)
			}
		}
	case FramingFixedLength:
		if int64(f.FixedLength) > maxSize {
			return nil, transports.TooLarge(maxSize)
		}
		buf := make([]byte, f.FixedLength)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, eofErr(err)
		}
		return buf, nil
	}
	return transports.ReadAllLimit(r, maxSize)
}

func eofErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return partial(err)
	}
	return err
}

func partial(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w (%w)", errPartial, io.ErrUnexpectedEOF)
	}
	return err
}

// Defaults of the tcp transport.
const (
	// DefaultMaxIdle is how many idle connections a manual keeps per
	// server and framing.
	DefaultMaxIdle = 64
	// DefaultIdleTimeout discards a pooled connection idle for this long.
	DefaultIdleTimeout = 90 * time.Second
)

// Config is the tcp section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxIdle caps the idle connections kept per manual, server and
	// framing; 0 means DefaultMaxIdle.
	MaxIdle int `json:"max_idle,omitempty"`
	// IdleTimeout, in milliseconds, discards pooled connections idle for
	// longer; 0 means DefaultIdleTimeout.
	IdleTimeout float64 `json:"idle_timeout,omitempty"`
}

// Transport is the tcp transport. It is safe for concurrent use. It
// starts no goroutines: each call reads its answers in the caller's
// goroutine (a stream in Recv's).
type Transport struct {
	log         *slog.Logger
	maxIdle     int
	idleTimeout time.Duration
	dialer      net.Dialer
	seq         atomic.Uint64

	mu     sync.Mutex
	closed bool
	idle   map[string][]*conn
	open   map[*conn]struct{}
}

// New returns a tcp Transport configured by opts.Config (a Config).
// Unknown configuration fields are logged and ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "tcp", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "tcp: config: %w", err)
	}
	t := &Transport{log: log, maxIdle: cfg.MaxIdle, idleTimeout: time.Duration(cfg.IdleTimeout * float64(time.Millisecond)),
		idle: map[string][]*conn{}, open: map[*conn]struct{}{}}
	if t.maxIdle <= 0 {
		t.maxIdle = DefaultMaxIdle
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = DefaultIdleTimeout
	}
	return t, nil
}

var errClosed = utcp.NewError(utcp.CodeUnavailable, "tcp: transport closed")

// RegisterManual sends the discovery request {"type":"utcp"} (with an id
// in envelope mode) and reads one answer: an envelope manual frame, or a
// bare UTCP manual. Anything else is discovery_failed.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	if err := checkHost(spec); err != nil {
		return nil, err
	}
	m, err := t.discover(ctx, tmpl.Name, spec)
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

// CallTool runs one tool call and waits for its whole result. In
// envelope mode it returns the result frame's value, or the data of the
// event frames as a list when the call ends with an end frame; an error
// frame is a *utcp.ToolError (tool_not_found when its code says so).
// Otherwise it returns the first answer frame converted by
// response_format. A broken, garbled or oversized answer is a
// transport_error or payload_too_large; the end of ctx or of the
// template's timeout returns the context's error.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	x, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	if !x.spec.Envelope {
		data, err := x.read()
		x.finish(err == nil)
		if err != nil {
			return nil, err
		}
		v, err := socket.ConvertResponse("tcp", x.spec.responseFormat(), data)
		if err != nil {
			return nil, err
		}
		return &utcp.Result{Value: v}, nil
	}
	v, ended, err := envelope.Collect(x.next, "tcp", x.spec.maxResponse())
	x.finish(ended)
	if err != nil {
		return nil, err
	}
	return &utcp.Result{Value: v}, nil
}

// CallToolStream starts one call. In envelope mode each event frame is an
// event, a result frame one last event, and the end frame io.EOF; Close
// before the end closes the connection, which tells the server the caller
// went away. Without the envelope the whole answer is one event.
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
	return envelope.NewStream("tcp", x.next, x.finish, nil), nil
}

// Release closes the manual's pooled connections (transports.Count calls
// it when the manual's last registration ends).
func (t *Transport) Release(_ context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := tmpl.Name + "\x00"
	for k, cs := range t.idle {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			for _, c := range cs {
				_ = c.nc.Close()
				delete(t.open, c)
			}
			delete(t.idle, k)
		}
	}
	return nil
}

// Close closes every connection; calls in flight fail with unavailable.
// It is idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.open {
		_ = c.nc.Close()
	}
	clear(t.open)
	clear(t.idle)
	return nil
}

func (t *Transport) discover(ctx context.Context, manual string, spec *Template) (*utcp.Manual, error) {
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "tcp discovery of manual %q from %s: "+format, append([]any{manual, spec.addr()}, args...)...)
	}
	req := Frame{Type: FrameDiscover}
	if spec.Envelope {
		req.ID = strconv.FormatUint(t.seq.Add(1), 10)
	}
	payload, _ := jsonx.Marshal(req)
	x, err := t.begin(ctx, manual, spec, payload, req.ID)
	if err != nil {
		if ctx.Err() != nil || utcp.CodeOf(err) != utcp.CodeTransportError {
			return nil, err
		}
		return nil, fail("%w", err)
	}
	data, err := x.read()
	x.finish(err == nil)
	if err != nil {
		if ctx.Err() != nil || utcp.CodeOf(err) != utcp.CodeTransportError {
			return nil, err
		}
		return nil, fail("%w", err)
	}
	return envelope.ReadManual(data, fail, t.log, manual, spec.addr())
}

func (t *Transport) start(ctx context.Context, call *utcp.Call) (*exchange, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "tcp: no call")
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
		if payload, err = envelope.EncodeCall("tcp", id, call.Name, call.Arguments); err != nil {
			return nil, err
		}
	} else if payload, err = RenderRequest(spec.RequestDataFormat, spec.RequestDataTemplate, call.Arguments); err != nil {
		return nil, err
	}
	return t.begin(ctx, call.Manual, spec, payload, id)
}

// aLongTimeAgo is a deadline in the past: setting it unblocks reads and
// writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// begin takes a connection and writes the framed request.
func (t *Transport) begin(ctx context.Context, manual string, spec *Template, payload []byte, id string) (*exchange, error) {
	fr := FramingOf(spec)
	framed, err := fr.Append(make([]byte, 0, len(payload)+16), payload)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidArguments, "%w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	key := poolKey(manual, spec)
	c, err := t.get(ctx, manual, key, spec)
	if err != nil {
		cancel()
		return nil, err
	}
	x := &exchange{t: t, c: c, spec: spec, fr: fr, id: id, ctx: ctx, cancel: cancel}
	x.stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	if _, err := c.nc.Write(framed); err != nil {
		x.finish(false)
		return nil, x.wrap(err, "sending the request")
	}
	return x, nil
}

// conn is one connection to a server.
type conn struct {
	nc   net.Conn
	br   *bufio.Reader
	key  string
	used time.Time
}

// get returns a pooled connection for key, or dials a new one.
func (t *Transport) get(ctx context.Context, manual, key string, spec *Template) (*conn, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	for spec.keepAlive() {
		cs := t.idle[key]
		if len(cs) == 0 {
			break
		}
		c := cs[len(cs)-1]
		t.idle[key] = cs[:len(cs)-1]
		if time.Since(c.used) > t.idleTimeout || !c.alive() {
			_ = c.nc.Close()
			delete(t.open, c)
			continue
		}
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	nc, err := netguard.DialContext(&t.dialer)(ctx, "tcp", spec.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("tcp: connecting to %s: %w", spec.addr(), err)}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), key: key}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = nc.Close()
		return nil, errClosed
	}
	t.open[c] = struct{}{}
	return c, nil
}

// alive reports whether an idle connection is still open and silent: a
// closed connection reads EOF at once, and a server that sent something
// unasked is not to be trusted with the next call.
func (c *conn) alive() bool {
	if c.br.Buffered() > 0 {
		return false
	}
	return peek.Alive(c.nc)
}

// put returns a connection to the pool, or closes it when the pool is
// full or the transport closed.
func (t *Transport) put(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.idle[c.key]) >= t.maxIdle {
		_ = c.nc.Close()
		delete(t.open, c)
		return
	}
	c.used = time.Now()
	t.idle[c.key] = append(t.idle[c.key], c)
}

func (t *Transport) drop(c *conn) {
	_ = c.nc.Close()
	t.mu.Lock()
	delete(t.open, c)
	t.mu.Unlock()
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// exchange is one request on one connection and the reading of its
// answers.
type exchange struct {
	t      *Transport
	c      *conn
	spec   *Template
	fr     Framing
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool
	once   sync.Once
}

// finish releases the connection: back to the pool when reusable and the
// template keeps connections alive, closed otherwise.
func (x *exchange) finish(reusable bool) {
	x.once.Do(func() {
		stopped := x.stop()
		x.cancel()
		if reusable && stopped && x.spec.keepAlive() {
			x.t.put(x.c) // stopped: no deadline was set
			return
		}
		x.t.drop(x.c)
	})
}

// read reads one frame.
func (x *exchange) read() ([]byte, error) {
	data, err := x.fr.Read(x.c.br, x.spec.maxResponse())
	if err != nil {
		return nil, x.wrap(err, "reading the answer")
	}
	return data, nil
}

// wrap turns a read or write error into the call's error.
func (x *exchange) wrap(err error, doing string) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return cerr
	}
	if x.t.isClosed() {
		return errClosed
	}
	if errors.Is(err, transports.ErrTooLarge) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed the connection without answering")
	}
	return &utcp.TransportError{Err: fmt.Errorf("tcp: %s from %s: %w", doing, x.spec.addr(), err)}
}

// next reads envelope frames until one belongs to this call (see
// envelope.NextAnswer).
func (x *exchange) next() (*envelope.Answer, error) {
	return envelope.NextAnswer(x.read, "tcp", "frame", x.spec.addr(), x.id)
}
