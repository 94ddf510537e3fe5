package webrtc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pion/webrtc/v4"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/envelope"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/internal/session"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the webrtc transport to a transports.Registry.
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

// Limits and timings of the webrtc transport.
const (
	// frameBuffer is how many messages wait for a slow caller before the
	// data channel's reader blocks.
	frameBuffer = 64
	// maxSignalBytes caps one signaling message.
	maxSignalBytes = 1 << 20
	// controlTimeout bounds closing the signaling WebSocket.
	controlTimeout = time.Second
)

// Config is the webrtc section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// Network restricts the addresses and network types ICE uses (its
	// fields appear at the top level of the section: candidate_ips,
	// network_types, mdns).
	Network
	// MaxMessageBytes caps one incoming message, chunks reassembled; 0
	// means transports.DefaultMaxEventBytes (16 MiB). A larger message
	// fails its call with payload_too_large.
	MaxMessageBytes int64 `json:"max_message_bytes,omitempty"`
	// MaxResponseBytes caps what CallTool collects from tool_event
	// messages; 0 means transports.DefaultMaxResponseBytes (64 MiB).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxChunkBytes is the largest data-channel message utcpd sends;
	// larger messages travel as chunks. 0 means DefaultMaxChunkBytes
	// (16 KiB); at least 1024. The peer's advertised
	// a=max-message-size lowers it further.
	MaxChunkBytes int `json:"max_chunk_bytes,omitempty"`
}

// Transport is the webrtc transport. It keeps one peer connection with
// one data channel per manual and connection settings, shared by that
// manual's calls. It is safe for concurrent use.
type Transport struct {
	cfg    Config
	api    *webrtc.API
	client *http.Client // signaling requests
	tokens transports.TokenSource
	log    *slog.Logger
	pool   *session.Pool[*peer] // slots by connKey, peer connections not yet torn down, their goroutines
}

// New returns a webrtc Transport configured by opts.Config (a Config,
// may be empty). It uses opts.Tokens for oauth2 signaling auth, or a
// token cache of its own when that is nil. Unknown configuration fields
// are logged and ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "webrtc", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "webrtc transport configuration: %w", err)
	}
	if cfg.MaxMessageBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.MaxChunkBytes < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "webrtc transport configuration: limits must not be negative")
	}
	if cfg.MaxChunkBytes != 0 && cfg.MaxChunkBytes < minChunkBytes {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "webrtc transport configuration: max_chunk_bytes must be at least %d", minChunkBytes)
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = transports.DefaultMaxEventBytes
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = transports.DefaultMaxResponseBytes
	}
	if cfg.MaxChunkBytes == 0 {
		cfg.MaxChunkBytes = DefaultMaxChunkBytes
	}
	api, err := cfg.Network.API()
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "webrtc transport configuration: %w", err)
	}
	t := &Transport{
		cfg:    cfg,
		api:    api,
		client: httpclient.New(httpclient.Options{}),
		tokens: opts.Tokens,
		log:    log,
		pool:   session.NewPool[*peer](errClosed, errDeregistered),
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(nil)
	}
	return t, nil
}

var (
	// errClosed refuses calls after Close and fails the calls Close cuts.
	errClosed = utcp.NewError(utcp.CodeUnavailable, "webrtc: transport closed")
	// errStreamClosed ends a stream its caller closed.
	errStreamClosed = utcp.NewError(utcp.CodeCanceled, "webrtc: stream closed")
)

// RegisterManual connects to the manual template's peer (signaling, ICE,
// DTLS, the data channel) and asks it for its manual: it sends
// {"type":"utcp","id":...} and accepts {"type":"manual","id":...,
// "manual":{...}} (or a bare UTCP manual object), read with
// manuals.ParseManual. A signaling server that cannot be reached, refuses
// the offer or answers something unusable, a tool_error answer, or no
// answer within the template's timeout is discovery_failed; a connection
// that does not open within connect_timeout is timeout; a URL refused by
// httpclient.CheckURL is invalid_template. Success keeps the peer
// connection open for the manual's calls until Release.
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

// CallTool runs one tool call and waits for its whole result: it sends
// {"type":"tool_call","id","tool","inputs"} and returns the output of
// the tool_response, or, when the tool_response carries no output, the
// events of the tool_event messages before it as a list. A tool_error is
// a *utcp.ToolError (tool_not_found when its code says so). A peer
// connection that fails or a data channel that closes while the call
// runs is a *utcp.TransportError (the next call reconnects); a call after
// DeregisterManual is manual_not_found; the end of ctx or of the
// template's timeout returns the context's error, after sending
// {"type":"cancel","id"} to the peer.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, err := t.start(ctx, call)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	list := []any{}
	var total int64
	for {
		m, err := s.next()
		if err != nil {
			return nil, err
		}
		switch m.typ {
		case TypeToolResponse:
			s.finish(io.EOF)
			if m.hasOutput || len(list) == 0 {
				return &utcp.Result{Value: m.value}, nil
			}
			return &utcp.Result{Value: list}, nil
		case TypeToolEvent:
			total += int64(m.size)
			if total > t.cfg.MaxResponseBytes {
				return nil, transports.TooLarge(t.cfg.MaxResponseBytes)
			}
			list = append(list, m.value)
		}
	}
}

// CallToolStream starts one call and returns its events as they arrive:
// each tool_event is an event, a tool_response with an output is one
// last event, and the tool_response ends the stream (io.EOF); a
// tool_error ends it with a *utcp.ToolError. Closing the stream early
// sends {"type":"cancel","id"}. Errors are those of CallTool.
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

// Close closes every peer connection (calls in flight fail with code
// unavailable), waits until pion's goroutines of those connections have
// ended, and refuses later calls. It is idempotent.
func (t *Transport) Close() error {
	if t.pool.Close() {
		t.client.CloseIdleConnections()
	}
	return nil
}

func errDeregistered(manual string) error {
	return utcp.Errorf(utcp.CodeManualNotFound, "webrtc: manual %q was deregistered: %w", manual, transports.ErrNotRegistered).WithDetail("manual", manual)
}

func (t *Transport) discover(ctx context.Context, manual string, spec *Template, auth *utcp.Auth) (*utcp.Manual, error) {
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "webrtc discovery of manual %q from peer %q via %s: "+format,
			append([]any{manual, spec.PeerID, spec.redacted()}, args...)...)
	}
	wrap := func(err error) error {
		var uerr *utcp.Error
		if ctx.Err() != nil || errors.As(err, &uerr) && uerr.Code != utcp.CodeTransportError {
			return err
		}
		return fail("%w", err)
	}
	p, err := t.acquire(ctx, manual, spec, auth)
	if err != nil {
		return nil, wrap(err)
	}
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	defer cancel()
	pd, err := p.open(true)
	if err != nil {
		return nil, wrap(err)
	}
	defer p.forget(pd)
	req, _ := json.Marshal(Message{Type: TypeDiscover, ID: pd.id})
	if err := p.send(req, pd.id); err != nil {
		return nil, wrap(err)
	}
	m, err := p.await(ctx, pd)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fail("no manual within %v: %w", spec.timeout(), context.Cause(ctx))
		}
		return nil, wrap(err)
	}
	switch m.typ {
	case TypeManual:
		man, warnings, err := transports.ParseManual(ctx, m.manual)
		if transports.IsLimit(err) {
			return nil, err
		}
		if err != nil {
			return nil, fail("the peer's manual: %w", err)
		}
		for _, w := range warnings {
			t.log.Warn("manual served with problems", "manual", manual, "peer_id", spec.PeerID, "warning", w.String())
		}
		return man, nil
	case TypeToolError:
		return nil, fail("the peer offers no manual: %s", m.err.Message).WithDetail("peer_code", m.err.Code)
	case typeFailed:
		return nil, wrap(m.fail)
	}
	return nil, fail("the peer answered a %q message, not a manual", m.typ)
}

// start sends the tool_call of call and returns the stream of its
// answers.
func (t *Transport) start(ctx context.Context, call *utcp.Call) (*stream, error) {
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "webrtc: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	args := call.Arguments
	if args == nil {
		args = map[string]any{}
	}
	for attempt := 0; ; attempt++ {
		p, err := t.acquire(ctx, call.Manual, spec, auth)
		if err != nil {
			return nil, err
		}
		pd, err := p.open(false)
		if errors.Is(err, errPeerGone) && attempt == 0 {
			continue // the connection closed under us: take a fresh one
		}
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, spec.timeout())
		s := &stream{p: p, pd: pd, ctx: cctx, cancel: cancel}
		payload, err := jsonx.Marshal(toolCall{Type: TypeToolCall, ID: pd.id, Tool: call.Name, Inputs: args})
		if err != nil {
			s.Close()
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "webrtc: cannot encode the arguments: %w", err)
		}
		if err := p.send(payload, pd.id); err != nil {
			s.finish(err)
			s.Close()
			return nil, err
		}
		return s, nil
	}
}

// toolCall is the tool_call message as utcpd sends it: inputs always
// present, {} when the call has no arguments.
type toolCall struct {
	Type   string         `json:"type"`
	ID     string         `json:"id"`
	Tool   string         `json:"tool"`
	Inputs map[string]any `json:"inputs"`
}

// acquire returns the manual's shared peer connection, connecting when
// there is none (waiting out the backoff after failed attempts).
func (t *Transport) acquire(ctx context.Context, manual string, spec *Template, auth *utcp.Auth) (*peer, error) {
	s, err := t.pool.Slot(connKey(manual, spec, auth), manual)
	if err != nil {
		return nil, err
	}
	return s.Get(ctx,
		func(ctx context.Context) (*peer, error) { return t.dial(ctx, spec, auth, s) },
		func(ctx context.Context) error { return ctxError(ctx, spec) },
		utcp.CodeInvalidTemplate, utcp.CodeUnavailable, utcp.CodeManualNotFound)
}

// ctxError is the error for a call whose context ended.
func ctxError(ctx context.Context, spec *Template) error {
	return fmt.Errorf("webrtc peer %q via %s: %w", spec.PeerID, spec.redacted(), context.Cause(ctx))
}

// peer is one peer connection, its data channel, and the calls on it.
type peer struct {
	t      *Transport
	slot   *session.Slot[*peer]
	url    string // the signaling server, redacted
	peerID string
	pc     *webrtc.PeerConnection
	dc     *webrtc.DataChannel
	reasm  *Reassembler // fed by the data channel's message callback only

	writeMu sync.Mutex // keeps the chunks of one message together

	mu          sync.Mutex
	chunk       int // largest message sent whole
	calls       map[string]*pending
	discoveries []*pending // oldest first: where a bare manual goes
	nextID      uint64
	err         error         // why the connection closed
	closing     chan struct{} // closed when the connection starts closing
	done        chan struct{} // closed when pion's goroutines have ended
}

// pending is one request in flight on a peer connection.
type pending struct {
	id       string
	msgs     chan *inMsg
	gone     chan struct{} // closed when the caller stopped listening
	goneOnce sync.Once
}

func (pd *pending) leave() { pd.goneOnce.Do(func() { close(pd.gone) }) }

// errPeerGone is returned by open when the connection is closing.
var errPeerGone = errors.New("webrtc: peer connection closing")

func (p *peer) isClosing() bool {
	select {
	case <-p.closing:
		return true
	default:
		return false
	}
}

// Closing, Shut and Done make a peer a session.Conn.
func (p *peer) Closing() bool { return p.isClosing() }

// Shut is fail.
func (p *peer) Shut(why error) { p.fail(why) }

// Done is closed when pion's goroutines of p have ended.
func (p *peer) Done() <-chan struct{} { return p.done }

// open registers a new request on p.
func (p *peer) open(discovery bool) (*pending, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isClosing() {
		return nil, errPeerGone
	}
	p.nextID++
	pd := &pending{id: strconv.FormatUint(p.nextID, 10), msgs: make(chan *inMsg, frameBuffer), gone: make(chan struct{})}
	p.calls[pd.id] = pd
	if discovery {
		p.discoveries = append(p.discoveries, pd)
	}
	return pd, nil
}

// forget removes a request from p.
func (p *peer) forget(pd *pending) {
	pd.leave()
	p.mu.Lock()
	delete(p.calls, pd.id)
	if i := slices.Index(p.discoveries, pd); i >= 0 {
		p.discoveries = slices.Delete(p.discoveries, i, i+1)
	}
	p.mu.Unlock()
}

// send writes one message, in chunks when it is larger than the chunk
// size. pion queues data-channel writes, so send does not block on the
// network.
func (p *peer) send(msg []byte, id string) error {
	p.mu.Lock()
	chunk := p.chunk
	p.mu.Unlock()
	if p.isClosing() {
		return p.failure()
	}
	parts := Split(msg, id, chunk)
	if len(parts) > 1 {
		// pion's writes are safe for concurrent use; only the chunks of
		// one message must stay together.
		p.writeMu.Lock()
		defer p.writeMu.Unlock()
	}
	for _, part := range parts {
		if err := p.dc.SendText(string(part)); err != nil {
			err = &utcp.TransportError{Err: fmt.Errorf("webrtc peer %q via %s: sending on the data channel: %w", p.peerID, p.url, err)}
			p.fail(err)
			return err
		}
	}
	return nil
}

// await waits for the next message of pd.
func (p *peer) await(ctx context.Context, pd *pending) (*inMsg, error) {
	select {
	case m := <-pd.msgs:
		return m, nil
	default:
	}
	select {
	case m := <-pd.msgs:
		return m, nil
	case <-p.closing:
		select { // messages that arrived before the end still count
		case m := <-pd.msgs:
			return m, nil
		default:
		}
		return nil, p.failure()
	case <-ctx.Done():
		return nil, fmt.Errorf("webrtc peer %q via %s: %w", p.peerID, p.url, context.Cause(ctx))
	}
}

// failure is the error that closed p.
func (p *peer) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return &utcp.TransportError{Err: fmt.Errorf("webrtc peer %q via %s: connection closed", p.peerID, p.url)}
	}
	return p.err
}

// fail starts closing p for err (the first reason wins): the calls on it
// fail with err, its slot forgets it so that the next call reconnects,
// and its closer goroutine tears the peer connection down. It never
// blocks, so pion's callbacks may call it.
func (p *peer) fail(err error) {
	p.mu.Lock()
	if p.isClosing() {
		p.mu.Unlock()
		return
	}
	p.err = err
	close(p.closing)
	p.mu.Unlock()
	if s := p.slot; s != nil {
		s.Detach(p)
	}
}

// closer waits until p starts closing, then closes the peer connection
// and waits for pion's goroutines of it to end.
func (p *peer) closer() {
	<-p.closing
	if err := p.pc.GracefulClose(); err != nil {
		p.t.log.Debug("webrtc: closing the peer connection", "peer_id", p.peerID, "err", err)
	}
	p.t.pool.Forget(p)
	close(p.done)
}

// typeFailed marks an inMsg that carries an error for its call rather
// than a message of the peer.
const typeFailed = "\x00failed"

// inMsg is one received message, decoded.
type inMsg struct {
	typ       string
	id        string
	value     any  // output (tool_response) or event (tool_event)
	hasOutput bool // a tool_response carried a non-null output
	err       *envelope.WireError
	manual    []byte
	fail      error // typeFailed
	size      int
}

// wireMsg is a peer's message as decoded from JSON.
type wireMsg struct {
	Type   *string         `json:"type"`
	ID     json.RawMessage `json:"id"`
	Output json.RawMessage `json:"output"`
	Event  json.RawMessage `json:"event"`
	Error  json.RawMessage `json:"error"`
	Manual json.RawMessage `json:"manual"`
	Tools  json.RawMessage `json:"tools"`
}

// onMessage is the data channel's message callback: it reassembles
// chunks and hands each whole message to the request it answers.
// Messages it cannot use are logged and dropped: the calls waiting for
// answers end with their deadlines.
func (p *peer) onMessage(dm webrtc.DataChannelMessage) {
	data, id, err := p.reasm.Add(dm.Data)
	if err != nil {
		p.t.log.Warn("webrtc: unusable chunk dropped", "peer_id", p.peerID, "id", id, "err", err)
		var fail error = &utcp.TransportError{Err: fmt.Errorf("webrtc peer %q: %w", p.peerID, err)}
		if errors.Is(err, ErrChunkTooLarge) {
			fail = utcp.Errorf(utcp.CodePayloadTooLarge, "webrtc peer %q: a message is larger than %d bytes: %w", p.peerID, p.t.cfg.MaxMessageBytes, transports.ErrTooLarge).
				WithDetail("limit_bytes", p.t.cfg.MaxMessageBytes)
		}
		p.mu.Lock()
		pd := p.calls[id]
		p.mu.Unlock()
		if pd != nil {
			p.deliver(pd, &inMsg{typ: typeFailed, id: id, fail: fail})
		}
		return
	}
	if data == nil {
		return
	}
	if int64(len(data)) > p.t.cfg.MaxMessageBytes {
		p.t.log.Warn("webrtc: message over max_message_bytes dropped", "peer_id", p.peerID, "bytes", len(data))
		return
	}
	m, err := parseMessage(data)
	if err != nil {
		p.t.log.Warn("webrtc: message ignored", "peer_id", p.peerID, "err", err, "message", excerpt(data))
		return
	}
	p.mu.Lock()
	pd := p.calls[m.id]
	if pd == nil && m.id == "" && m.typ == TypeManual && len(p.discoveries) > 0 {
		pd = p.discoveries[0]
	}
	p.mu.Unlock()
	if pd == nil {
		p.t.log.Debug("webrtc: message for no request in flight dropped", "peer_id", p.peerID, "type", m.typ, "id", m.id)
		return
	}
	p.deliver(pd, m)
}

// deliver hands m to pd, waiting while pd's buffer is full
// (back-pressure) unless pd's caller left or the connection closes.
func (p *peer) deliver(pd *pending, m *inMsg) {
	select {
	case pd.msgs <- m:
	case <-pd.gone:
	case <-p.closing:
	}
}

// parseMessage decodes a peer's message. A bare UTCP manual (an object
// with tools and no type) counts as a manual message without an id.
func parseMessage(data []byte) (*inMsg, error) {
	var w wireMsg
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, errors.New("not a JSON object")
	}
	m := &inMsg{size: len(data)}
	if w.Type == nil {
		if len(w.Tools) == 0 {
			return nil, errors.New(`no "type"`)
		}
		m.typ, m.manual = TypeManual, data
		return m, nil
	}
	m.typ = *w.Type
	m.id = rawID(w.ID)
	switch m.typ {
	case TypeToolResponse:
		out := bytes.TrimSpace(w.Output)
		m.hasOutput = len(out) > 0 && !bytes.Equal(out, []byte("null"))
		m.value = jsonx.DecodeOptional(w.Output)
	case TypeToolEvent:
		m.value = jsonx.DecodeOptional(w.Event)
	case TypeToolError:
		m.err = envelope.DecodeWireError(w.Error)
		if len(bytes.TrimSpace(w.Error)) == 0 {
			m.err = &envelope.WireError{}
		}
	case TypeManual:
		m.manual = w.Manual
		if len(m.manual) == 0 || bytes.Equal(bytes.TrimSpace(m.manual), []byte("null")) {
			return nil, errors.New(`a manual message has no "manual"`)
		}
	default:
		return nil, fmt.Errorf("unknown type %q", m.typ)
	}
	return m, nil
}

func excerpt(data []byte) string {
	if !utf8.Valid(data) {
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
	p      *peer
	pd     *pending
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	err       error // sticky: io.EOF or what ended the call
	last      bool  // a tool_response with an output was returned: next is io.EOF
	closeOnce sync.Once
}

// next returns the next message of the call; io.EOF or an error ends it.
func (s *stream) next() (*inMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	m, err := s.p.await(s.ctx, s.pd)
	if err != nil {
		return nil, s.finishLocked(err)
	}
	switch m.typ {
	case TypeToolError:
		return nil, s.finishLocked(m.err.CallError("webrtc"))
	case typeFailed:
		return nil, s.finishLocked(m.fail)
	}
	return m, nil
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
	for {
		s.mu.Lock()
		last := s.last
		s.mu.Unlock()
		if last {
			s.finish(io.EOF)
			s.Close()
			return nil, io.EOF
		}
		m, err := s.next()
		if err != nil {
			s.Close()
			return nil, err
		}
		switch m.typ {
		case TypeToolEvent:
			return &utcp.Event{Data: m.value}, nil
		case TypeToolResponse:
			if !m.hasOutput {
				s.finish(io.EOF)
				s.Close()
				return nil, io.EOF
			}
			s.mu.Lock()
			s.last = true
			s.mu.Unlock()
			return &utcp.Event{Data: m.value}, nil
		}
		// A manual is no answer to a call: skip it.
	}
}

// Close ends the call: when it had not finished, it sends
// {"type":"cancel","id"} so that the peer stops working on it. It is
// idempotent.
func (s *stream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel() // interrupts a Recv waiting for a message
		s.mu.Lock()
		if s.err == nil {
			s.err = errStreamClosed
		}
		finished := errors.Is(s.err, io.EOF) || s.last
		var te *utcp.ToolError
		finished = finished || errors.As(s.err, &te) || errors.Is(s.err, transports.ErrToolNotFound)
		s.mu.Unlock()
		if !finished && !s.p.isClosing() {
			b, _ := json.Marshal(Message{Type: TypeCancel, ID: s.pd.id})
			_ = s.p.send(b, s.pd.id)
		}
		s.p.forget(s.pd)
	})
	return nil
}
