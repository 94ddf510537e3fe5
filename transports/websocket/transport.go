package websocket

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/envelope"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/internal/session"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the websocket transport to a transports.Registry.
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

// EnvelopeSubprotocol is the WebSocket subprotocol name of the utcpd
// envelope. utcpd does not require it; a server that speaks the envelope
// may select it when a template offers it.
const EnvelopeSubprotocol = "utcpd.v1"

// Frame is one message of the utcpd envelope, as JSON in a text frame.
// Clients send call, cancel and utcp frames; servers answer with result,
// event, end, error and manual frames carrying the id of the request.
type Frame = envelope.Frame

// WireError is the error object of an error frame.
type WireError = envelope.WireError

// Defaults of the websocket transport.
const (
	// DefaultPingInterval is how often a kept-alive connection is pinged;
	// one that stays silent (no frame, no pong) for two intervals is
	// dropped.
	DefaultPingInterval = 30 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection that carried no
	// call for this long.
	DefaultIdleTimeout = 5 * time.Minute
	// frameBuffer is how many frames wait for a slow caller before the
	// connection's reader blocks.
	frameBuffer = 64
	// controlTimeout bounds close and cancel frames.
	controlTimeout = time.Second
)

// Config is the websocket section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxMessageBytes caps one incoming message; 0 means
	// transports.DefaultMaxEventBytes (16 MiB). A larger message fails the
	// calls on its connection with payload_too_large and drops the
	// connection.
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`
	// MaxResponseBytes caps what CallTool collects from event frames; 0
	// means transports.DefaultMaxResponseBytes (64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// PingInterval, in milliseconds, is the heartbeat of kept-alive
	// connections; 0 means DefaultPingInterval.
	PingInterval float64 `json:"ping_interval,omitempty"`
	// IdleTimeout, in milliseconds, closes a kept-alive connection unused
	// for that long; 0 means DefaultIdleTimeout.
	IdleTimeout float64 `json:"idle_timeout,omitempty"`
}

// Transport is the websocket transport. It keeps one connection per
// manual and connection settings, shared by that manual's calls. It is safe
// for concurrent use.
type Transport struct {
	cfg       Config
	tokens    transports.TokenSource
	log       *slog.Logger
	pingEvery time.Duration
	idleAfter time.Duration
	pool      *session.Pool[*conn] // slots by connKey, open connections, their goroutines
}

// New returns a websocket Transport configured by opts.Config (a Config,
// may be empty). It uses opts.Tokens for oauth2, or a token cache of its
// own when that is nil. Unknown configuration fields are logged and
// ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "websocket", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "websocket transport configuration: %w", err)
	}
	if cfg.MaxMessageBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.PingInterval < 0 || cfg.IdleTimeout < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "websocket transport configuration: limits must not be negative")
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = transports.DefaultMaxEventBytes
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = transports.DefaultMaxResponseBytes
	}
	t := &Transport{
		cfg:       cfg,
		tokens:    opts.Tokens,
		log:       log,
		pingEvery: time.Duration(cfg.PingInterval * float64(time.Millisecond)),
		idleAfter: time.Duration(cfg.IdleTimeout * float64(time.Millisecond)),
		pool:      session.NewPool[*conn](errClosed, errDeregistered),
	}
	if t.pingEvery == 0 {
		t.pingEvery = DefaultPingInterval
	}
	if t.idleAfter == 0 {
		t.idleAfter = DefaultIdleTimeout
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(nil)
	}
	return t, nil
}

var (
	// errClosed refuses calls after Close and fails the calls Close cuts.
	errClosed = utcp.NewError(utcp.CodeUnavailable, "websocket: transport closed")
	// errStreamClosed ends a stream its caller closed.
	errStreamClosed = utcp.NewError(utcp.CodeCanceled, "websocket: stream closed")
	// errIdle closes a connection unused for IdleTimeout.
	errIdle = &utcp.TransportError{Err: errors.New("websocket: connection closed after being idle")}
	// errDone closes a per-call connection after its call.
	errDone = &utcp.TransportError{Err: errors.New("websocket: connection closed: no call needs it")}
	// errAbandoned closes a plain (not envelope) connection whose call
	// ended early: late answers could otherwise reach the next call.
	errAbandoned = &utcp.TransportError{Err: errors.New("websocket: connection closed: a call without the envelope ended early, and its late answers must not reach the next call")}
)

// RegisterManual asks the server at the manual template's URL for its
// manual over the manual's connection (opening it): it sends
// {"type":"utcp","id":...} and accepts {"type":"manual","id":...,
// "manual":{...}}, or a bare UTCP manual object (python-utcp servers
// answer {"type":"utcp"} that way), read with manuals.ParseManual. An
// error frame (a server without a manual to offer), any other answer, no
// answer before the template's timeout, or a connection failure is
// discovery_failed; a URL refused by httpclient.CheckURL is
// invalid_template. Success keeps the connection open for the manual's
// calls until Release.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	m, err := t.discover(ctx, tmpl.Name, spec, auth)
	if t.pool.Closed() {
		return nil, errClosed
	}
	return m, err
}

// CallTool runs one tool call and waits for its whole result. With the
// envelope it sends {"type":"call",...} and returns the result frame's
// value, or the data of the event frames as a list when the call ends with
// an end frame; an error frame is a *utcp.ToolError (tool_not_found when
// its code says so). Without the envelope (the default) it sends the
// rendered message, or the arguments as one JSON object, and returns the
// first answer frame, converted by response_format (an envelope result,
// event, end or error frame in answer is read as above). A
// connection that drops, or a frame that breaks the envelope, is a
// *utcp.TransportError; a call after DeregisterManual is
// manual_not_found; the end of ctx or of the template's timeout returns
// the context's error (and sends a cancel frame, or, without the
// envelope, closes the connection).
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	list := []any{}
	var total int64
	for {
		f, err := s.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if !s.envelope && len(list) == 0 {
					return nil, &utcp.TransportError{Err: fmt.Errorf("websocket %s: the server closed the connection without answering", s.c.url)}
				}
				return &utcp.Result{Value: list}, nil
			}
			return nil, err
		}
		switch f.typ {
		case FrameResult:
			s.finish(io.EOF)
			return &utcp.Result{Value: f.value}, nil
		case "":
			s.finish(io.EOF)
			v, _, err := plainValue(s.format, f)
			if err != nil {
				return nil, err
			}
			return &utcp.Result{Value: v}, nil
		case FrameEvent:
			total += int64(f.size)
			if total > t.cfg.MaxResponseBytes {
				return nil, transports.TooLarge(t.cfg.MaxResponseBytes)
			}
			list = append(list, f.value)
		}
	}
}

// CallToolStream starts one call and returns its events as they arrive:
// each event frame is an event (its event name in utcp.Event Type), a
// result frame is one last event, an end frame ends the stream (io.EOF)
// and an error frame ends it with a *utcp.ToolError. Without the
// envelope every answer frame is an event (converted by response_format)
// until an envelope end, result or error frame, or until the server
// closes the connection normally. Closing the stream early sends a cancel
// frame (envelope) or closes the connection (without it). Errors are
// those of CallTool.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	return t.start(ctx, call)
}

// Release closes the manual's connections, waiting for their goroutines
// (transports.Count calls it when the manual's last registration ends,
// and after a discovery that failed while the manual held none, so that
// no connection nobody registered stays open).
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl != nil {
		t.pool.Release(ctx, tmpl.Name)
	}
	return nil
}

// Close closes every connection (calls in flight fail with code
// unavailable), waits for their goroutines to end, and refuses later calls.
// It is idempotent.
func (t *Transport) Close() error {
	t.pool.Close()
	return nil
}

func errDeregistered(manual string) error {
	return utcp.Errorf(utcp.CodeManualNotFound, "websocket: manual %q was deregistered: %w", manual, transports.ErrNotRegistered).WithDetail("manual", manual)
}

func (t *Transport) discover(ctx context.Context, manual string, spec *Template, auth *utcp.Auth) (*utcp.Manual, error) {
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	defer cancel()
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "websocket discovery of manual %q from %s: "+format,
			append([]any{manual, redact(spec.URL)}, args...)...)
	}
	wrap := func(err error) error {
		var uerr *utcp.Error
		if ctx.Err() != nil || errors.As(err, &uerr) && uerr.Code != utcp.CodeTransportError {
			return err
		}
		return fail("%w", err)
	}
	c, release, err := t.acquire(ctx, manual, spec, auth, true)
	if err != nil {
		return nil, wrap(err)
	}
	defer release()
	p, err := c.open(true)
	if err != nil {
		return nil, wrap(err)
	}
	defer c.forget(p)
	req, _ := json.Marshal(Frame{Type: FrameDiscover, ID: p.id})
	if err := c.write(ctx, req); err != nil {
		return nil, wrap(err)
	}
	f, err := c.await(ctx, p)
	if err != nil {
		return nil, wrap(err)
	}
	switch f.typ {
	case FrameManual:
		m, warnings, err := transports.ParseManual(ctx, f.manual)
		if transports.IsLimit(err) {
			return nil, err
		}
		if err != nil {
			return nil, fail("the server's manual: %w", err)
		}
		for _, w := range warnings {
			t.log.Warn("manual served with problems", "manual", manual, "url", redact(spec.URL), "warning", w.String())
		}
		if f.id != "" { // an envelope manual frame: the server speaks the envelope
			if spec.envelope() {
				inheritEnvelope(m, spec.URL)
			}
			if n := plainTools(m, spec); n > 0 {
				t.log.Warn("websocket server speaks the utcpd envelope, but tools of its manual are called without it",
					"manual", manual, "url", redact(spec.URL), "tools", n, "hint", discoveryHint)
			}
		}
		return m, nil
	case FrameError:
		return nil, fail("the server offers no manual: %s", f.err.Message).WithDetail("server_code", f.err.Code)
	}
	return nil, fail("the server answered a %q frame, not a manual", f.typ)
}

// inheritEnvelope sets "envelope": true in the websocket tool templates
// of m that point at url, the manual template's, and set neither envelope
// nor message: the manual's template says the server at url speaks the
// envelope, and its answer to discovery showed it. This lets the admin
// fix, in the manual template, the tool templates of a server written
// when the envelope was the default.
func inheritEnvelope(m *utcp.Manual, url string) {
	for i := range m.Tools {
		tt := m.Tools[i].ToolCallTemplate
		if tt == nil || tt.Type != Type {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(tt.Raw, &fields) != nil {
			continue
		}
		var own string
		if json.Unmarshal(fields["url"], &own) != nil || own != url {
			continue
		}
		if _, ok := fields["envelope"]; ok {
			continue
		}
		if msg := bytes.TrimSpace(fields["message"]); len(msg) > 0 && !bytes.Equal(msg, []byte("null")) {
			continue
		}
		fields["envelope"] = json.RawMessage("true")
		raw, err := json.Marshal(fields)
		if err != nil {
			continue
		}
		tt.Raw = raw
		if sp, ok := tt.Spec.(*Template); ok {
			sp.Envelope = true
		}
	}
}

// plainTools counts the tools of m that a call reaches without the
// envelope: websocket tools whose own template, or, without one, the
// manual's template spec, does not set envelope.
func plainTools(m *utcp.Manual, spec *Template) int {
	n := 0
	for _, tool := range m.Tools {
		tt := tool.ToolCallTemplate
		switch {
		case tt == nil:
			if !spec.envelope() {
				n++
			}
		case tt.Type == Type:
			var own struct {
				Envelope bool `json:"envelope"`
			}
			if json.Unmarshal(tt.Raw, &own) != nil || !own.Envelope {
				n++
			}
		}
	}
	return n
}

// redact renders a template URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return utcp.RedactURL(u)
}

// start sends the request of call and returns the stream of its answers.
func (t *Transport) start(ctx context.Context, call *utcp.Call) (*stream, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "websocket: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	var payload []byte
	switch {
	case spec.envelope():
	case spec.hasMessage():
		if payload, err = RenderMessage(spec.Message, call.Arguments); err != nil {
			return nil, err
		}
	default: // python-utcp: the arguments as one JSON text frame
		args := call.Arguments
		if args == nil {
			args = map[string]any{}
		}
		if payload, err = jsonx.Marshal(args); err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "websocket: cannot encode the arguments: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	s := &stream{format: spec.ResponseFormat, envelope: spec.envelope(), ctx: ctx, cancel: cancel}
	for attempt := 0; ; attempt++ {
		c, release, err := t.acquire(ctx, call.Manual, spec, auth, spec.envelope())
		if err != nil {
			cancel()
			return nil, err
		}
		p, err := c.open(false)
		if errors.Is(err, errConnGone) && attempt == 0 {
			release()
			continue // the connection closed under us: take a fresh one
		}
		if err == nil && !s.envelope {
			err = c.takeTurn(ctx, p)
		}
		if err != nil {
			if p != nil {
				c.forget(p)
			}
			release()
			cancel()
			return nil, err
		}
		s.c, s.p, s.release = c, p, release
		break
	}
	if s.envelope {
		args := call.Arguments
		if args == nil {
			args = map[string]any{}
		}
		payload, err = jsonx.Marshal(Frame{Type: FrameCall, ID: s.p.id, Tool: call.Name, Arguments: args})
		if err != nil {
			s.Close()
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "websocket: cannot encode the arguments: %w", err)
		}
	}
	if err := s.c.write(ctx, payload); err != nil {
		s.finish(err)
		s.Close()
		return nil, err
	}
	return s, nil
}

// acquire returns a connection for a call of manual: the manual's shared
// one (dialled when there is none, waiting out the backoff after failed
// dials), or a new one that release closes with keep_alive false and for
// the discovery (envelope set) of a template without the envelope, whose
// calls could not share it.
func (t *Transport) acquire(ctx context.Context, manual string, spec *Template, auth *utcp.Auth, envelope bool) (*conn, func(), error) {
	if !spec.keepAlive() || envelope && !spec.envelope() {
		c, err := t.dial(ctx, spec, auth, envelope, nil)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.closeGracefully(errDone) }, nil
	}
	s, err := t.pool.Slot(connKey(manual, spec, auth), manual)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.Get(ctx,
		func(ctx context.Context) (*conn, error) { return t.dial(ctx, spec, auth, envelope, s) },
		func(ctx context.Context) error { return ctxError(ctx, spec.URL) },
		utcp.CodeInvalidTemplate)
	if err != nil {
		return nil, nil, err
	}
	return c, func() {}, nil
}

// ctxError is the error for a call whose context ended.
func ctxError(ctx context.Context, rawURL string) error {
	return fmt.Errorf("websocket %s: %w", redact(rawURL), context.Cause(ctx))
}

// dial opens a connection: the URL check, the handshake with headers,
// auth and subprotocols, and the reader (and, kept alive, heartbeat)
// goroutines. s is the connection's slot, nil for a per-call connection.
func (t *Transport) dial(ctx context.Context, spec *Template, auth *utcp.Auth, envelope bool, s *session.Slot[*conn]) (*conn, error) {
	u, err := url.Parse(spec.URL)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "websocket: url: %w", err)
	}
	if err := httpclient.CheckURL(u, spec.AllowInsecure); err != nil {
		return nil, err
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "ws" && scheme != "wss" {
		return nil, utcp.NewError(utcp.CodeInvalidTemplate, "websocket: url %q is not ws:// or wss://", utcp.RedactURL(u))
	}
	// The handshake is an HTTP request: build one so that ApplyAuth can put
	// the credentials in a header, the query or a cookie.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "websocket: url: %w", err)
	}
	for k, v := range spec.Headers {
		req.Header.Set(k, v)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "utcpd")
	}
	if err := httpclient.ApplyAuth(ctx, req, auth, t.tokens); err != nil {
		return nil, err
	}
	offered := spec.protocols()
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: spec.timeout(),
		Subprotocols:     offered,
		NetDialContext:   netguard.DialContext(&net.Dialer{KeepAlive: 30 * time.Second}),
	}
	ws, resp, err := d.DialContext(ctx, req.URL.String(), req.Header)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctxError(ctx, spec.URL)
		}
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			return nil, &utcp.TransportError{Status: resp.StatusCode,
				Err: fmt.Errorf("websocket handshake with %s refused: HTTP %d %s: %s", utcp.RedactURL(u), resp.StatusCode, http.StatusText(resp.StatusCode), jsonx.Excerpt(body))}
		}
		return nil, &utcp.TransportError{Err: fmt.Errorf("websocket %s: %w", utcp.RedactURL(u), err)}
	}
	if len(offered) > 0 {
		got := ws.Subprotocol()
		if got == "" || !slices.Contains(offered, got) {
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseProtocolError, "subprotocol refused"), time.Now().Add(controlTimeout))
			ws.Close()
			what := "selected none"
			if got != "" {
				what = fmt.Sprintf("selected %q, which was not offered", got)
			}
			return nil, &utcp.TransportError{Err: fmt.Errorf("websocket %s: the server refused subprotocol %s (it %s)", utcp.RedactURL(u), strings.Join(quoted(offered), ", "), what)}
		}
	}
	ws.SetReadLimit(t.cfg.MaxMessageBytes)
	c := &conn{
		t:        t,
		slot:     s,
		url:      utcp.RedactURL(u),
		ws:       ws,
		envelope: envelope,
		keep:     spec.keepAlive(),
		calls:    map[string]*pending{},
		turn:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		lastUsed: time.Now(),
	}
	serve := []func(){c.readLoop}
	if c.keep {
		serve = append(serve, c.heartbeat)
	}
	if err := t.pool.Adopt(c, s, serve...); err != nil {
		ws.Close()
		return nil, err
	}
	return c, nil
}

func quoted(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// conn is one WebSocket connection and the calls it carries.
type conn struct {
	t        *Transport
	slot     *session.Slot[*conn]
	url      string
	ws       *websocket.Conn
	envelope bool // calls are correlated by id; else one call at a time
	keep     bool

	writeMu sync.Mutex

	mu          sync.Mutex
	calls       map[string]*pending
	discoveries []*pending // oldest first: where a bare manual goes
	current     *pending   // plain mode: the call that owns the connection
	nextID      uint64
	lastUsed    time.Time
	err         error         // why the connection closed
	normalClose bool          // the server closed with 1000 or 1001
	closing     chan struct{} // closed when the connection starts closing
	done        chan struct{} // closed when the reader has ended

	turn chan struct{} // plain mode: held by the call in progress
}

// pending is one request in flight on a connection.
type pending struct {
	id        string
	discovery bool
	frames    chan *inFrame
	gone      chan struct{} // closed when the caller stopped listening
	goneOnce  sync.Once
}

func (p *pending) leave() { p.goneOnce.Do(func() { close(p.gone) }) }

// errConnGone is returned by open when the connection is closing.
var errConnGone = errors.New("websocket: connection closing")

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// Closing, Shut and Done make a conn a session.Conn.
func (c *conn) Closing() bool { return c.isClosing() }

// Shut is closeGracefully.
func (c *conn) Shut(why error) { c.closeGracefully(why) }

// Done is closed when c's reader has ended.
func (c *conn) Done() <-chan struct{} { return c.done }

// open registers a new request on c.
func (c *conn) open(discovery bool) (*pending, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isClosing() {
		return nil, errConnGone
	}
	c.nextID++
	p := &pending{id: strconv.FormatUint(c.nextID, 10), discovery: discovery, frames: make(chan *inFrame, frameBuffer), gone: make(chan struct{})}
	c.calls[p.id] = p
	if discovery {
		c.discoveries = append(c.discoveries, p)
	}
	c.lastUsed = time.Now()
	return p, nil
}

// forget removes a request from c.
func (c *conn) forget(p *pending) {
	p.leave()
	c.mu.Lock()
	delete(c.calls, p.id)
	if i := slices.Index(c.discoveries, p); i >= 0 {
		c.discoveries = slices.Delete(c.discoveries, i, i+1)
	}
	if c.current == p {
		c.current = nil
		<-c.turn
	}
	c.lastUsed = time.Now()
	c.mu.Unlock()
}

// takeTurn waits until p may use a plain (not envelope) connection.
func (c *conn) takeTurn(ctx context.Context, p *pending) error {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return ctxError(ctx, c.url)
	case <-c.closing:
		return c.failure()
	}
	c.mu.Lock()
	c.current = p
	c.mu.Unlock()
	return nil
}

// write sends one text frame, with the context's deadline.
func (c *conn) write(ctx context.Context, data []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.isClosing() {
		return c.failure()
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultTimeout)
	}
	_ = c.ws.SetWriteDeadline(dl)
	if err := c.ws.WriteMessage(websocket.TextMessage, data); err != nil {
		if ctx.Err() != nil {
			c.fail(ctxError(ctx, c.url))
			return ctxError(ctx, c.url)
		}
		err = &utcp.TransportError{Err: fmt.Errorf("websocket %s: sending: %w", c.url, err)}
		c.fail(err)
		return err
	}
	return nil
}

// await waits for the next frame of p.
func (c *conn) await(ctx context.Context, p *pending) (*inFrame, error) {
	select {
	case f := <-p.frames:
		return f, nil
	default:
	}
	select {
	case f := <-p.frames:
		return f, nil
	case <-c.done:
		select { // frames that arrived before the end still count
		case f := <-p.frames:
			return f, nil
		default:
		}
		return nil, c.failure()
	case <-ctx.Done():
		return nil, ctxError(ctx, c.url)
	}
}

// failure is the error that closed c.
func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return &utcp.TransportError{Err: fmt.Errorf("websocket %s: connection closed", c.url)}
	}
	return c.err
}

// fail starts closing c for err (the first reason wins): the calls on it
// fail with err, and its slot forgets it so the next call reconnects.
func (c *conn) fail(err error) {
	if c.markClosing(err) {
		c.ws.Close()
	}
}

// closeGracefully closes c for why, telling the server with a close frame
// first.
func (c *conn) closeGracefully(why error) {
	if c.markClosing(why) {
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(controlTimeout))
		c.ws.Close()
	}
}

// markClosing records why c closes and detaches it from its slot. It
// reports false when c was closing already.
func (c *conn) markClosing(err error) bool {
	c.mu.Lock()
	if c.isClosing() {
		c.mu.Unlock()
		return false
	}
	c.err = err
	close(c.closing)
	c.mu.Unlock()
	if s := c.slot; s != nil {
		s.Detach(c)
	}
	return true
}

// readLoop reads frames and hands each to the call it belongs to, until
// the connection ends.
func (c *conn) readLoop() {
	defer func() {
		c.t.pool.Forget(c)
		close(c.done)
	}()
	window := 2*c.t.pingEvery + 2*time.Second
	if c.keep {
		_ = c.ws.SetReadDeadline(time.Now().Add(window))
		c.ws.SetPongHandler(func(string) error { return c.ws.SetReadDeadline(time.Now().Add(window)) })
	}
	var buf bytes.Buffer // reused: envelope frames are decoded, not kept
	for {
		mt, r, err := c.ws.NextReader()
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			c.fail(c.readError(err))
			return
		}
		data := buf.Bytes()
		if buf.Cap() > 1<<20 {
			buf = bytes.Buffer{} // do not pin a large buffer
		}
		if c.keep {
			_ = c.ws.SetReadDeadline(time.Now().Add(window))
		}
		if c.envelope {
			if err := c.routeEnvelope(mt, data); err != nil {
				c.fail(err)
				return
			}
		} else {
			c.mu.Lock()
			p := c.current
			c.mu.Unlock()
			if p == nil {
				c.t.log.Debug("websocket: message with no call waiting dropped", "url", c.url, "bytes", len(data))
				continue
			}
			c.deliver(p, &inFrame{binary: mt == websocket.BinaryMessage, raw: bytes.Clone(data), size: len(data)})
		}
	}
}

// readError turns the reader's error into the error calls see.
func (c *conn) readError(err error) error {
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return utcp.Errorf(utcp.CodePayloadTooLarge, "websocket %s: a message is larger than %d bytes: %w", c.url, c.t.cfg.MaxMessageBytes, transports.ErrTooLarge).
			WithDetail("limit_bytes", c.t.cfg.MaxMessageBytes)
	case errors.As(err, &ce):
		c.mu.Lock()
		c.normalClose = ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway
		c.mu.Unlock()
		return &utcp.TransportError{Err: fmt.Errorf("websocket %s: the server closed the connection (%d %s)", c.url, ce.Code, ce.Text)}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &utcp.TransportError{Err: fmt.Errorf("websocket %s: no frame and no pong for %v: connection dropped", c.url, 2*c.t.pingEvery+2*time.Second)}
	}
	return &utcp.TransportError{Err: fmt.Errorf("websocket %s: the connection broke: %w", c.url, err)}
}

// deliver hands f to p, waiting while p's buffer is full (back-pressure)
// unless p's caller left or the connection closes.
func (c *conn) deliver(p *pending, f *inFrame) {
	select {
	case p.frames <- f:
	case <-p.gone:
	case <-c.closing:
	}
}

// routeEnvelope hands one envelope frame to its request. A frame that is
// not an envelope is returned as an error that closes the connection.
func (c *conn) routeEnvelope(mt int, data []byte) error {
	f, err := parseEnvelope(mt, data)
	if err != nil {
		return &utcp.TransportError{Err: fmt.Errorf("websocket %s: %w; the server does not speak the utcpd envelope (a call template without \"envelope\": true talks to it plainly): %s", c.url, err, excerpt(data, mt))}
	}
	c.mu.Lock()
	p := c.calls[f.id]
	if f.id == "" && f.typ == FrameManual && len(c.discoveries) > 0 {
		p = c.discoveries[0]
	}
	c.mu.Unlock()
	if p == nil {
		c.t.log.Debug("websocket: frame for no call in flight dropped", "url", c.url, "type", f.typ, "id", f.id)
		return nil
	}
	c.deliver(p, f)
	return nil
}

// heartbeat pings a kept-alive connection and closes it once idle.
func (c *conn) heartbeat() {
	tick := time.NewTicker(c.t.pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-c.closing:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		idle := len(c.calls) == 0 && time.Since(c.lastUsed) > c.t.idleAfter
		c.mu.Unlock()
		if idle {
			c.closeGracefully(errIdle)
			return
		}
		_ = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.t.pingEvery))
	}
}

// inFrame is one received frame, decoded.
type inFrame struct {
	typ    string // an envelope type; "" for a plain answer
	id     string
	value  any // result (result) or data (event)
	event  string
	err    *WireError
	manual []byte
	raw    []byte // plain mode: the frame as received
	binary bool
	size   int
}

// wireFrame is an envelope frame as decoded from JSON.
type wireFrame struct {
	Type   *string         `json:"type"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Event  string          `json:"event"`
	Data   json.RawMessage `json:"data"`
	Error  json.RawMessage `json:"error"`
	Manual json.RawMessage `json:"manual"`
	Tools  json.RawMessage `json:"tools"`
}

// parseEnvelope decodes a server frame of the utcpd envelope. A bare UTCP
// manual (an object with tools and no type) counts as a manual frame
// without an id.
func parseEnvelope(mt int, data []byte) (*inFrame, error) {
	if mt != websocket.TextMessage {
		return nil, errors.New("a binary frame arrived")
	}
	var w wireFrame
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, errors.New("a frame is not a JSON object")
	}
	f := &inFrame{size: len(data)}
	if w.Type == nil {
		if len(w.Tools) == 0 {
			return nil, errors.New(`a frame has no "type"`)
		}
		f.typ, f.manual = FrameManual, bytes.Clone(data)
		return f, nil
	}
	f.typ = *w.Type
	f.id = envelope.FrameID(w.ID)
	switch f.typ {
	case FrameResult:
		f.value = jsonx.DecodeOptional(w.Result)
	case FrameEvent:
		f.value, f.event = jsonx.DecodeOptional(w.Data), w.Event
	case FrameError:
		f.err = envelope.DecodeWireError(w.Error)
	case FrameManual:
		f.manual = w.Manual
		if len(f.manual) == 0 || bytes.Equal(bytes.TrimSpace(f.manual), []byte("null")) {
			return nil, errors.New(`a manual frame has no "manual"`)
		}
	case FrameEnd:
	default:
		return nil, fmt.Errorf("a frame has the unknown type %q", f.typ)
	}
	return f, nil
}

// plainHint and discoveryHint follow the errors and warnings that
// suggest a utcpd-envelope server called without the envelope: templates
// written when the envelope was the default.
const (
	plainHint     = `if the server speaks the utcpd envelope, set "envelope": true in the call template: without it utcpd sends the arguments as plain JSON, as python-utcp does`
	discoveryHint = `set "envelope": true in the manual's call template (its tools at the same URL follow it) or in the tools' own templates: without it utcpd sends the arguments as plain JSON, as python-utcp does`
)

// envelopeTypes are the frames a plain-mode call reads as envelope
// frames rather than as answers.
var envelopeTypes = []string{FrameResult, FrameEvent, FrameEnd, FrameError}

// plainValue converts a plain-mode answer by response_format, and
// returns the event type for a stream ("binary" for base64 data).
func plainValue(format string, f *inFrame) (any, string, error) {
	switch format {
	case FormatJSON:
		v, ok := jsonx.DecodeValue(f.raw)
		if !ok {
			return nil, "", &utcp.TransportError{Err: fmt.Errorf("websocket: response_format is json but the answer is not JSON: %s", excerpt(f.raw, 0))}
		}
		return v, "", nil
	case FormatText:
		return strings.ToValidUTF8(string(f.raw), "\uFFFD"), "", nil
	case FormatRaw:
		if f.binary {
			return base64.StdEncoding.EncodeToString(f.raw), "binary", nil
		}
		return string(f.raw), "", nil
	}
	if f.binary && !utf8.Valid(f.raw) {
		return base64.StdEncoding.EncodeToString(f.raw), "binary", nil
	}
	if v, ok := jsonx.DecodeValue(f.raw); ok {
		return v, "", nil
	}
	return string(f.raw), "", nil
}

func excerpt(data []byte, mt int) string {
	if mt == websocket.BinaryMessage || !utf8.Valid(data) {
		return fmt.Sprintf("(%d bytes of binary data)", len(data))
	}
	s := jsonx.Excerpt(data)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// stream is one call in flight: the transports.Stream of CallToolStream,
// and what CallTool reads.
type stream struct {
	c        *conn
	p        *pending
	release  func()
	ctx      context.Context
	cancel   context.CancelFunc
	format   string
	envelope bool

	mu        sync.Mutex
	err       error // sticky: io.EOF or what ended the call
	last      bool  // a result arrived: the next Recv is io.EOF
	closeOnce sync.Once
}

// next returns the next frame of the call, reading plain-mode frames as
// envelope frames when they are; io.EOF or an error ends the call.
func (s *stream) next() (*inFrame, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	f, err := s.c.await(s.ctx, s.p)
	if err != nil {
		if !s.envelope && s.c.closedNormally() && s.ctx.Err() == nil {
			err = io.EOF // a plain server ends a stream by closing
		}
		return nil, s.finishLocked(err)
	}
	if !s.envelope {
		if ef, err := parseEnvelope(websocket.TextMessage, f.raw); err == nil && !f.binary && slices.Contains(envelopeTypes, ef.typ) {
			f = ef
		}
	}
	switch f.typ {
	case FrameEnd:
		return nil, s.finishLocked(io.EOF)
	case FrameError:
		if !s.envelope && f.err.Code == "invalid_request" {
			return nil, s.finishLocked(&utcp.TransportError{Err: fmt.Errorf("websocket %s: the server refused the request: %s (%s)", s.c.url, f.err.Message, plainHint)})
		}
		return nil, s.finishLocked(f.err.CallError("websocket"))
	}
	return f, nil
}

func (c *conn) closedNormally() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.normalClose
}

// finish ends the call with err unless it has ended already.
func (s *stream) finish(err error) {
	s.mu.Lock()
	s.finishLocked(err)
	s.mu.Unlock()
}

func (s *stream) finishLocked(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// Recv returns the next event, io.EOF after the last one, or the error
// that ended the call.
func (s *stream) Recv() (*utcp.Event, error) {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last {
		s.finish(io.EOF)
		s.Close()
		return nil, io.EOF
	}
	f, err := s.next()
	if err != nil {
		s.Close()
		return nil, err
	}
	switch f.typ {
	case FrameResult:
		s.mu.Lock()
		s.last = true
		s.mu.Unlock()
		return &utcp.Event{Data: f.value}, nil
	case FrameEvent:
		return &utcp.Event{Type: f.event, Data: f.value}, nil
	case FrameManual:
		return s.Recv() // not an answer to a call: skip it
	}
	v, typ, err := plainValue(s.format, f)
	if err != nil {
		s.finish(err)
		s.Close()
		return nil, err
	}
	return &utcp.Event{Type: typ, Data: v}, nil
}

// Close ends the call: when it had not finished, it sends a cancel frame
// (envelope) or closes the connection (without the envelope, whose late
// answers could reach the next call). It is idempotent.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel() // interrupts a Recv waiting for a frame
		s.mu.Lock()
		if s.err == nil {
			s.err = errStreamClosed
		}
		finished := errors.Is(s.err, io.EOF)
		var te *utcp.ToolError
		finished = finished || errors.As(s.err, &te) || errors.Is(s.err, transports.ErrToolNotFound)
		s.mu.Unlock()
		if !finished && !s.c.isClosing() {
			if s.envelope {
				s.c.sendCancel(s.p.id)
			} else {
				s.c.fail(errAbandoned)
			}
		}
		s.c.forget(s.p)
		s.release()
	})
	return nil
}

// sendCancel tells the server, in the background, that the caller of id
// gave up.
func (c *conn) sendCancel(id string) {
	c.t.pool.Go(func() {
		b, _ := json.Marshal(Frame{Type: FrameCancel, ID: id})
		c.writeMu.Lock()
		defer c.writeMu.Unlock()
		if c.isClosing() {
			return
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(controlTimeout))
		if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
			c.fail(&utcp.TransportError{Err: fmt.Errorf("websocket %s: sending a cancel frame: %w", c.url, err)})
		}
	})
}
