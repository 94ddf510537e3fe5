package sse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/utcpd/utcpd/internal/eventstream"
	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the sse transport to a transports.Registry.
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

// Defaults of the sse transport.
const (
	// DefaultDiscoveryTimeout bounds discovery when neither the template's
	// timeout nor the context sets a deadline.
	DefaultDiscoveryTimeout = 30 * time.Second
	// DefaultMaxReconnects is how many reconnection attempts in a row
	// (without an event in between) a stream makes before it fails.
	DefaultMaxReconnects = 5
	// maxBackoff caps the doubled reconnection delay (unless the base
	// delay itself is longer).
	maxBackoff = 2 * time.Minute
	// errorBodyBytes is how much of a non-2xx body is read for the error.
	errorBodyBytes = 64 << 10
)

// Config is the sse section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxEventBytes caps one event (its joined data lines) and one line;
	// 0 means transports.DefaultMaxEventBytes (16 MiB). A larger event
	// fails the call with payload_too_large.
	MaxEventBytes int64 `json:"max_event_bytes,omitempty"`
	// MaxResponseBytes caps what CallTool collects (the data of all
	// events together) and a body that is not an event stream; 0 means
	// transports.DefaultMaxResponseBytes (64 MiB). Streams have no total
	// cap.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxReconnects bounds consecutive reconnection attempts of a stream
	// whose template sets reconnect; 0 means DefaultMaxReconnects.
	MaxReconnects int `json:"max_reconnects,omitempty"`
	// MaxIdleConnsPerHost sizes the keep-alive pool per host (default
	// httpclient.DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
}

// Transport is the sse transport. It keeps no per-manual state. It is safe
// for concurrent use.
type Transport struct {
	base httpcall.Base // client, tokens; its context ends at Close, ending every open stream
	cfg  Config
	log  *slog.Logger
}

// New returns an sse Transport configured by opts.Config (a Config, may be
// empty). It uses opts.Tokens for oauth2, or a token cache of its own when
// that is nil. Unknown configuration fields are logged and ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "sse", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "sse transport configuration: %w", err)
	}
	if cfg.MaxEventBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.MaxReconnects < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "sse transport configuration: limits must not be negative")
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = transports.DefaultMaxEventBytes
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = transports.DefaultMaxResponseBytes
	}
	if cfg.MaxReconnects == 0 {
		cfg.MaxReconnects = DefaultMaxReconnects
	}
	t := &Transport{cfg: cfg, log: log}
	t.base.Init(cfg.MaxIdleConnsPerHost, opts.Tokens)
	return t, nil
}

var (
	// errClosed refuses calls after Close and ends the streams Close cuts.
	errClosed = utcp.NewError(utcp.CodeUnavailable, "sse: transport closed")
	// errStreamClosed ends a stream its caller closed.
	errStreamClosed = utcp.NewError(utcp.CodeCanceled, "sse: stream closed")
)

// RegisterManual GETs the manual template's URL (with its headers and
// auth) and returns the UTCP manual it serves, read with
// manuals.ParseManual (v1.1 or legacy; its warnings are logged). A
// non-2xx answer (its status in the details), a document that is not a
// manual, or a failure to connect is discovery_failed. A URL refused by
// httpclient.CheckURL is invalid_template, an oversized answer
// payload_too_large, and the end of ctx (or of the template's timeout,
// else DefaultDiscoveryTimeout when ctx has no deadline) returns the
// context's error.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if t.base.Closed() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	u, header, err := httpcall.ManualTarget("sse", spec.URL, spec.Headers, spec.AllowInsecure)
	if err != nil {
		return nil, err
	}
	var cancel context.CancelFunc
	if d := spec.timeout(); d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	} else if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, DefaultDiscoveryTimeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	ctx = httpclient.WithAllowInsecure(ctx, spec.AllowInsecure)
	return httpcall.FetchManual(ctx, t.base.Client, t.base.Tokens, t.log, httpcall.ManualFetch{
		Type: "sse", Manual: tmpl.Name, Method: http.MethodGet, URL: u, Header: header, Auth: auth, MaxBytes: t.cfg.MaxResponseBytes,
	})
}

// CallTool sends the request for call and collects the data of every
// event into a list ([]any, empty when the stream has none), each decoded
// as JSON when it parses and kept as a string otherwise. A 2xx answer that
// is not an event stream is returned as one value (JSON or text), not as a
// list. Errors are those of CallToolStream and of Recv; the collected data
// over Config.MaxResponseBytes is payload_too_large.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, err := t.open(ctx, call)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if s.plain {
		return &utcp.Result{Value: s.single.Data}, nil
	}
	return s.Collect(s.Recv, t.cfg.MaxResponseBytes)
}

// CallToolStream sends the request for call and returns the event stream
// once the server has answered 2xx. Events are delivered as they arrive
// (see the package documentation for decoding, filtering, reconnection
// and the end of a stream). A 4xx answer is a *utcp.ToolError, another
// non-2xx answer or a failure to connect a *utcp.TransportError, a URL
// refused by httpclient.CheckURL invalid_template, missing path arguments
// invalid_arguments; the end of ctx returns the context's error.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	return t.open(ctx, call)
}

// Release does nothing: the sse transport keeps no per-manual state.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	return nil
}

// Close ends every open stream, closes the idle pooled connections and
// refuses later calls with code unavailable. It is idempotent.
func (t *Transport) Close() error {
	t.base.Shutdown(errClosed)
	return nil
}

func (t *Transport) open(ctx context.Context, call *utcp.Call) (*stream, error) {
	if t.base.Closed() {
		return nil, errClosed
	}
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "sse: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	mr, err := spec.mapping().Map(call.Arguments)
	if err != nil {
		return nil, err
	}
	mr.Header.Set("Accept", "text/event-stream")
	mr.Header.Set("Cache-Control", "no-cache")
	method := http.MethodGet
	if mr.Body != nil {
		method = http.MethodPost
	}
	s := &stream{t: t, spec: spec, auth: auth, method: method, req: mr}
	s.Start(ctx, t.base.Ctx, spec.timeout(), spec.AllowInsecure, errClosed, errStreamClosed)
	resp, err := httpcall.SendMapped(s.Ctx, t.base.Client, t.base.Tokens, method, mr, auth)
	if err == nil {
		if err = s.accept(resp, true); errors.Is(err, errCleanEnd) {
			err = nil // 204: an empty stream
		}
	}
	if err != nil {
		if s.Ctx.Err() != nil {
			err = s.ctxErr()
		}
		s.Mu.Lock()
		s.Finish(err)
		s.Mu.Unlock()
		return nil, err
	}
	return s, nil
}

// stream is the transports.Stream of one sse call.
type stream struct {
	t      *Transport
	spec   *Template
	auth   *utcp.Auth
	method string
	req    *httpcall.MappedRequest

	httpcall.Call // context, body, sticky error; Close

	rd       *eventstream.Reader
	plain    bool        // the answer was not an event stream
	single   *utcp.Event // the one event of a plain answer, until delivered
	attempts int         // reconnection attempts since the last event
}

// errCleanEnd is returned by reconnect when the server answered 204.
var errCleanEnd = errors.New("clean end")

// accept takes the server's answer to the first request or to a
// reconnection.
func (s *stream) accept(resp *http.Response, first bool) error {
	ctype := resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode == http.StatusNoContent:
		resp.Body.Close()
		return errCleanEnd
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
		resp.Body.Close()
		return httpcall.StatusError(s.method, s.req.URL, resp.StatusCode, ctype, body)
	case httpcall.MediaType(ctype) == "text/event-stream":
		s.Body = resp.Body
		if s.rd == nil {
			s.rd = eventstream.NewReader(resp.Body, s.t.cfg.MaxEventBytes)
		} else {
			s.rd.Reset(resp.Body)
		}
		return nil
	case !first:
		resp.Body.Close()
		return &utcp.TransportError{Status: resp.StatusCode,
			Err: fmt.Errorf("sse %s: the reconnection was answered with Content-Type %q, not an event stream", utcp.RedactURL(s.req.URL), ctype)}
	}
	body, err := httpclient.ReadResponseBody(resp, s.t.cfg.MaxResponseBytes)
	if err != nil {
		if errors.Is(err, transports.ErrTooLarge) {
			return err
		}
		return &utcp.TransportError{Status: resp.StatusCode, Err: fmt.Errorf("sse %s: reading the response: %w", utcp.RedactURL(s.req.URL), err)}
	}
	s.plain = true
	s.single = &utcp.Event{Data: httpcall.DecodeBody(ctype, body)}
	return nil
}

// ctxErr is the error for a stream whose context ended: the stream's or
// the transport's closing, or the caller's context error.
func (s *stream) ctxErr() error {
	cause := context.Cause(s.Ctx)
	if errors.Is(cause, errStreamClosed) || errors.Is(cause, errClosed) {
		return cause
	}
	return fmt.Errorf("sse %s: %w", utcp.RedactURL(s.req.URL), cause)
}

// Recv returns the next event, io.EOF after the last one, or the error
// that ended the stream.
func (s *stream) Recv() (*utcp.Event, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Err != nil {
		return nil, s.Err
	}
	if s.single != nil {
		ev := s.single
		s.single = nil
		return ev, nil
	}
	if s.rd == nil { // a plain answer already delivered, or a 204
		return nil, s.Finish(io.EOF)
	}
	for {
		ev, err := s.rd.Next()
		if err == nil {
			if s.spec.EventType != "" && eventName(ev.Type) != s.spec.EventType {
				continue
			}
			s.attempts = 0
			s.LastBytes = len(ev.Data)
			return toEvent(ev), nil
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil, s.Finish(io.EOF)
		case s.Ctx.Err() != nil:
			return nil, s.Finish(s.ctxErr())
		case errors.Is(err, transports.ErrTooLarge):
			return nil, s.Finish(err)
		}
		drop := error(&utcp.TransportError{Err: fmt.Errorf("sse %s: the connection broke before the stream ended: %w", utcp.RedactURL(s.req.URL), err)})
		if !s.spec.reconnect() {
			return nil, s.Finish(drop)
		}
		if err := s.reconnect(drop); err != nil {
			if errors.Is(err, errCleanEnd) {
				return nil, s.Finish(io.EOF)
			}
			return nil, s.Finish(err)
		}
	}
}

// eventName is the name an event_type filter compares: "message" for an
// event without an event field.
func eventName(typ string) string {
	if typ == "" {
		return "message"
	}
	return typ
}

// toEvent decodes an event's data.
func toEvent(ev eventstream.Event) *utcp.Event {
	var data any = ev.Data
	if v, ok := jsonx.DecodeValue([]byte(ev.Data)); ok {
		data = v
	}
	return &utcp.Event{Type: ev.Type, ID: ev.ID, Data: data}
}

// reconnect sends the request again after a drop, with Last-Event-ID,
// until a new event stream is open, the attempts run out or the context
// ends. It returns errCleanEnd when the server answered 204.
func (s *stream) reconnect(drop error) error {
	s.Body.Close()
	s.Body = nil
	last := drop
	for {
		s.attempts++
		if s.attempts > s.t.cfg.MaxReconnects {
			return fmt.Errorf("%w (gave up after %d reconnection attempts)", last, s.t.cfg.MaxReconnects)
		}
		base := s.rd.Retry()
		if base <= 0 {
			base = s.spec.retryDelay()
		}
		delay := base
		for i := 1; i < s.attempts && delay < maxBackoff; i++ {
			delay *= 2
		}
		delay = min(delay, max(base, maxBackoff))
		if dl, ok := s.Ctx.Deadline(); ok && time.Until(dl) < delay {
			return fmt.Errorf("%w (no time left before the deadline to reconnect after %v)", last, delay)
		}
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-s.Ctx.Done():
			timer.Stop()
			return s.ctxErr()
		}
		req := *s.req
		req.Header = s.req.Header.Clone()
		if id := s.rd.LastEventID(); id != "" {
			req.Header.Set("Last-Event-ID", id)
		}
		s.t.log.Debug("sse: reconnecting", "url", utcp.RedactURL(s.req.URL), "attempt", s.attempts, "last_event_id", s.rd.LastEventID())
		resp, err := httpcall.SendMapped(s.Ctx, s.t.base.Client, s.t.base.Tokens, s.method, &req, s.auth)
		if err != nil {
			if s.Ctx.Err() != nil {
				return s.ctxErr()
			}
			last = err
			continue
		}
		err = s.accept(resp, false)
		var te *utcp.TransportError
		if err != nil && errors.As(err, &te) && te.Status >= 500 {
			last = err
			continue
		}
		return err
	}
}
