package streamablehttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/utcpd/utcpd/internal/eventstream"
	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the streamable_http transport to a transports.Registry.
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

// errorBodyBytes is how much of a non-2xx body is read for the error.
const errorBodyBytes = 64 << 10

// acceptHeader is sent unless the template's headers set Accept.
const acceptHeader = "application/x-ndjson, text/event-stream;q=0.9, application/json;q=0.8, */*;q=0.5"

// Config is the streamable_http section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxEventBytes caps one NDJSON line and one server-sent event; 0
	// means transports.DefaultMaxEventBytes (16 MiB).
	MaxEventBytes int64 `json:"max_event_bytes,omitempty"`
	// MaxResponseBytes caps a JSON body and what CallTool collects; 0
	// means transports.DefaultMaxResponseBytes (64 MiB). Streams have no
	// total cap.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxIdleConnsPerHost sizes the keep-alive pool per host (default
	// httpclient.DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
}

// Transport is the streamable_http transport. It keeps no per-manual
// state. It is safe for concurrent use.
type Transport struct {
	base httpcall.Base // client, tokens; its context ends at Close, ending every open stream
	cfg  Config
	log  *slog.Logger
}

// New returns a streamable_http Transport configured by opts.Config (a
// Config, may be empty). It uses opts.Tokens for oauth2, or a token cache
// of its own when that is nil. Unknown configuration fields are logged and
// ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "streamable_http", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "streamable_http transport configuration: %w", err)
	}
	if cfg.MaxEventBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "streamable_http transport configuration: limits must not be negative")
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = transports.DefaultMaxEventBytes
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = transports.DefaultMaxResponseBytes
	}
	t := &Transport{cfg: cfg, log: log}
	t.base.Init(cfg.MaxIdleConnsPerHost, opts.Tokens)
	return t, nil
}

var (
	// errClosed refuses calls after Close and ends the streams Close cuts.
	errClosed = utcp.NewError(utcp.CodeUnavailable, "streamable_http: transport closed")
	// errStreamClosed ends a stream its caller closed.
	errStreamClosed = utcp.NewError(utcp.CodeCanceled, "streamable_http: stream closed")
)

// RegisterManual sends the manual template's http_method to its URL (with
// headers and auth, no body) and returns the UTCP manual it serves, read
// with manuals.ParseManual (warnings are logged). A non-2xx answer (its
// status in the details), a document that is not a manual, or a failure
// to connect is discovery_failed. A URL refused by httpclient.CheckURL is
// invalid_template, an oversized answer payload_too_large, and the end of
// ctx or of the template's timeout returns the context's error.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if t.base.Closed() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	u, header, err := httpcall.ManualTarget("streamable_http", spec.URL, spec.Headers, spec.AllowInsecure)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, spec.timeout())
	defer cancel()
	ctx = httpclient.WithAllowInsecure(ctx, spec.AllowInsecure)
	return httpcall.FetchManual(ctx, t.base.Client, t.base.Tokens, t.log, httpcall.ManualFetch{
		Type: "streamable_http", Manual: tmpl.Name, Method: spec.HTTPMethod, URL: u, Header: header, Auth: auth, MaxBytes: t.cfg.MaxResponseBytes,
	})
}

// CallTool sends the request for call and collects the answer: the value
// of a JSON body, a list of the values of an NDJSON or event stream, or
// the concatenated bytes of any other body (a string when they are valid
// UTF-8, else {"content_type", "encoding": "base64", "data"}). See the
// package documentation for the splitting rules and caps; errors are those
// of CallToolStream and Recv.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, err := t.open(ctx, call)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	switch s.kind {
	case kindJSON:
		return &utcp.Result{Value: s.single.Data}, nil
	case kindEmpty:
		return &utcp.Result{Value: nil}, nil
	case kindRaw:
		b, err := s.readAll(t.cfg.MaxResponseBytes)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return &utcp.Result{Value: nil}, nil
		}
		if utf8.Valid(b) {
			return &utcp.Result{Value: string(b)}, nil
		}
		return &utcp.Result{Value: map[string]any{
			"content_type": s.ctype,
			"encoding":     "base64",
			"data":         base64.StdEncoding.EncodeToString(b),
		}}, nil
	}
	return s.Collect(s.Recv, t.cfg.MaxResponseBytes)
}

// CallToolStream sends the request for call and returns its stream once
// the server has answered 2xx; events are delivered as the body arrives
// (see the package documentation). A 4xx answer is a *utcp.ToolError,
// another non-2xx answer or a failure to connect a *utcp.TransportError, a
// URL refused by httpclient.CheckURL invalid_template, a missing path
// argument invalid_arguments; the end of ctx or of the template's timeout
// returns the context's error.
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	return t.open(ctx, call)
}

// Release does nothing: the transport keeps no per-manual state.
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
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "streamable_http: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	mr, err := spec.mapping().Map(call.Arguments)
	if err != nil {
		return nil, err
	}
	if mr.Header.Get("Accept") == "" {
		mr.Header.Set("Accept", acceptHeader)
	}
	s := &stream{t: t, spec: spec, method: spec.HTTPMethod, url: mr.URL}
	s.Start(ctx, t.base.Ctx, spec.timeout(), spec.AllowInsecure, errClosed, errStreamClosed)
	resp, err := httpcall.SendMapped(s.Ctx, t.base.Client, t.base.Tokens, spec.HTTPMethod, mr, auth)
	if err == nil {
		err = s.accept(resp)
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

// kind is how a response body is split.
type kind int

const (
	kindJSON   kind = iota // the whole body, one value
	kindNDJSON             // one value per line
	kindSSE                // one value per server-sent event
	kindRaw                // chunks of chunk_size
	kindEmpty              // 204: nothing
)

// kindOf chooses the splitting for a response Content-Type.
func kindOf(contentType string) kind {
	switch httpcall.MediaType(contentType) {
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonl",
		"application/json-lines", "application/x-json-lines", "application/jsonlines", "application/x-jsonlines":
		return kindNDJSON
	case "text/event-stream":
		return kindSSE
	}
	if httpcall.IsJSONMediaType(contentType) {
		return kindJSON
	}
	return kindRaw
}

// stream is the transports.Stream of one streamable_http call.
type stream struct {
	t      *Transport
	spec   *Template
	method string
	url    *url.URL

	httpcall.Call // context, body, sticky error; Close

	kind   kind
	ctype  string
	lines  *bufio.Reader       // kindNDJSON
	line   []byte              // kindNDJSON
	sse    *eventstream.Reader // kindSSE
	single *utcp.Event         // kindJSON, until delivered
	chunk  []byte              // kindRaw: the chunk buffer
	held   int                 // kindRaw: bytes of a split character at the start of chunk
}

// accept takes the server's answer.
func (s *stream) accept(resp *http.Response) error {
	s.ctype = resp.Header.Get("Content-Type")
	switch {
	case resp.StatusCode == http.StatusNoContent:
		resp.Body.Close()
		s.kind = kindEmpty
		return nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
		resp.Body.Close()
		return httpcall.StatusError(s.method, s.url, resp.StatusCode, s.ctype, body)
	}
	s.kind = kindOf(s.ctype)
	switch s.kind {
	case kindJSON:
		body, err := httpclient.ReadResponseBody(resp, s.t.cfg.MaxResponseBytes)
		if err != nil {
			if errors.Is(err, transports.ErrTooLarge) {
				return err
			}
			return s.dropped(err)
		}
		if len(body) == 0 {
			s.kind = kindEmpty
			return nil
		}
		s.single = &utcp.Event{Data: httpcall.DecodeBody(s.ctype, body)}
		return nil
	case kindNDJSON:
		s.lines = bufio.NewReaderSize(resp.Body, 32<<10)
	case kindSSE:
		s.sse = eventstream.NewReader(resp.Body, s.t.cfg.MaxEventBytes)
	case kindRaw:
		s.chunk = make([]byte, max(s.spec.ChunkSize, 1))
	}
	s.Body = resp.Body
	return nil
}

// dropped is the error for a body that broke before its end.
func (s *stream) dropped(err error) error {
	return &utcp.TransportError{Err: fmt.Errorf("%s %s: the connection broke before the response ended: %w", s.method, utcp.RedactURL(s.url), err)}
}

// ctxErr is the error for a stream whose context ended: the stream's or
// the transport's closing, or the caller's context error.
func (s *stream) ctxErr() error {
	cause := context.Cause(s.Ctx)
	if errors.Is(cause, errStreamClosed) || errors.Is(cause, errClosed) {
		return cause
	}
	return fmt.Errorf("streamable_http %s: %w", utcp.RedactURL(s.url), cause)
}

// readErr classifies an error of the body: the end of the context, a cap,
// or a broken connection.
func (s *stream) readErr(err error) error {
	switch {
	case s.Ctx.Err() != nil:
		return s.ctxErr()
	case errors.Is(err, transports.ErrTooLarge):
		return err
	}
	return s.dropped(err)
}

// Recv returns the next event, io.EOF after the last one, or the error
// that ended the stream.
func (s *stream) Recv() (*utcp.Event, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.Err != nil {
		return nil, s.Err
	}
	var ev *utcp.Event
	var err error
	switch s.kind {
	case kindJSON:
		ev, s.single = s.single, nil
		if ev == nil {
			err = io.EOF
		}
	case kindNDJSON:
		ev, err = s.nextLine()
	case kindSSE:
		ev, err = s.nextEvent()
	case kindRaw:
		ev, err = s.nextChunk()
	default:
		err = io.EOF
	}
	if err != nil {
		return nil, s.Finish(err)
	}
	return ev, nil
}

// nextLine returns the next non-blank NDJSON line's value.
func (s *stream) nextLine() (*utcp.Event, error) {
	for {
		s.line = s.line[:0]
		var err error
		for {
			var frag []byte
			frag, err = s.lines.ReadSlice('\n')
			if int64(len(s.line)+len(frag)) > s.t.cfg.MaxEventBytes+1 {
				return nil, transports.TooLarge(s.t.cfg.MaxEventBytes)
			}
			s.line = append(s.line, frag...)
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, s.readErr(err)
		}
		text := bytes.TrimSpace(s.line)
		if len(text) > 0 {
			s.LastBytes = len(text)
			if v, ok := jsonx.DecodeValue(text); ok {
				return &utcp.Event{Data: v}, nil
			}
			return &utcp.Event{Data: string(text)}, nil
		}
		if err != nil {
			return nil, io.EOF
		}
	}
}

// nextEvent returns the next server-sent event.
func (s *stream) nextEvent() (*utcp.Event, error) {
	ev, err := s.sse.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, s.readErr(err)
	}
	s.LastBytes = len(ev.Data)
	var data any = ev.Data
	if v, ok := jsonx.DecodeValue([]byte(ev.Data)); ok {
		data = v
	}
	return &utcp.Event{Type: ev.Type, ID: ev.ID, Data: data}, nil
}

// nextChunk returns the next raw chunk: text when it is valid UTF-8 (a
// character split at its end is held back for the next chunk), else
// binary as base64.
func (s *stream) nextChunk() (*utcp.Event, error) {
	for {
		n, err := s.Body.Read(s.chunk[s.held:])
		n += s.held
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, s.readErr(err)
		}
		eof := err != nil
		if n == s.held && !eof {
			continue // nothing new yet
		}
		if n == 0 {
			return nil, io.EOF
		}
		cut, text := textPrefix(s.chunk[:n])
		switch {
		case text && cut > 0:
			ev := &utcp.Event{Type: "text", Data: string(s.chunk[:cut])}
			s.held = copy(s.chunk, s.chunk[cut:n])
			s.LastBytes = cut
			return ev, nil
		case text && cut == 0 && n < len(s.chunk) && !eof:
			s.held = n // only the start of a character: read on
			continue
		}
		ev := &utcp.Event{Type: "binary", Data: base64.StdEncoding.EncodeToString(s.chunk[:n])}
		s.held = 0
		s.LastBytes = n
		return ev, nil
	}
}

// textPrefix reports whether b is UTF-8 text, allowing an incomplete
// character at its end, and the length of its complete part.
func textPrefix(b []byte) (int, bool) {
	end := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				end = i
			}
			break
		}
	}
	return end, utf8.Valid(b[:end])
}

// readAll reads the rest of a raw body under max.
func (s *stream) readAll(max int64) ([]byte, error) {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	b, err := transports.ReadAllLimit(s.Body, max)
	if err != nil {
		return nil, s.Finish(s.readErr(err))
	}
	s.Finish(io.EOF)
	return b, nil
}
