package http

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	nethttp "net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info registers the http transport.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           func(opts transports.Options) (transports.Transport, error) { return New(opts) },
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

var _ transports.Transport = (*Transport)(nil)

// DefaultDiscoveryTimeout bounds discovery when neither the template's
// timeout nor the context sets a deadline.
const DefaultDiscoveryTimeout = 30 * time.Second

// Config is the http section of the daemon configuration
// (transports.Options.Config). Every field is optional.
type Config struct {
	// MaxResponseBytes caps a response body (default
	// transports.DefaultMaxResponseBytes, 64 MiB). A larger response
	// fails with payload_too_large.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	// MaxIdleConnsPerHost sizes the keep-alive pool per host (default
	// httpclient.DefaultMaxIdleConnsPerHost).
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
}

// Transport is the http transport. It is safe for concurrent use.
type Transport struct {
	client      *nethttp.Client
	tokens      transports.TokenSource
	maxResponse int64
	log         *slog.Logger
	closed      atomic.Bool
}

// New returns an http Transport configured by opts.Config (a Config, may
// be empty). It uses opts.Tokens for oauth2, or a token cache of its own
// when that is nil. Unknown configuration fields are logged and ignored.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "http", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "http transport configuration: %w", err)
	}
	if cfg.MaxResponseBytes < 0 || cfg.MaxIdleConnsPerHost < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "http transport configuration: limits must not be negative")
	}
	client := httpclient.New(httpclient.Options{MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost})
	t := &Transport{client: client, tokens: opts.Tokens, maxResponse: cfg.MaxResponseBytes, log: log}
	if t.maxResponse == 0 {
		t.maxResponse = transports.DefaultMaxResponseBytes
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(client)
	}
	return t, nil
}

var errClosed = utcp.NewError(utcp.CodeUnavailable, "the http transport is closed")

// RegisterManual fetches the manual template's URL (with its method,
// headers and auth) and returns the manual it serves:
//
//   - a UTCP manual — an object with tools and utcp_version (or the legacy
//     version) — read with manuals.ParseManual (v1.1 or v0.1, JSON or
//     YAML; its warnings are logged);
//   - an OpenAPI 3 or Swagger 2 document (an openapi, swagger or paths
//     key) converted with manuals.ConvertOpenAPI, with the URL as the spec
//     URL and the template's auth_tools.
//
// JSON and YAML are both accepted, whatever the content type or URL
// extension says (YAML content types and .yaml/.yml URLs are therefore
// read as YAML, as UTCP requires). Any other document, a non-2xx answer
// (its status in the error's details) or a transport failure is a
// *utcp.Error with code discovery_failed. A URL refused by CheckURL is
// invalid_template, an oauth2 token refusal unauthorized, an oversized
// response payload_too_large; the end of ctx or of the template timeout
// returns the context's error. Without a template timeout or a context
// deadline, discovery gives up after DefaultDiscoveryTimeout.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	if t.closed.Load() {
		return nil, errClosed
	}
	spec, auth, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(spec.URL)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "http: url: %w", err)
	}
	if err := httpclient.CheckURL(u, spec.AllowInsecure); err != nil {
		return nil, err
	}
	header := nethttp.Header{}
	header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	for k, v := range spec.Headers {
		header.Set(k, v)
	}
	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", "utcpd")
	}
	r := &request{method: spec.HTTPMethod, rawURL: u.String(), url: u, header: header, auth: auth, max: transports.ManualReadCap(ctx, t.maxResponse)}
	ctx, cancel := withTimeout(ctx, spec, DefaultDiscoveryTimeout)
	defer cancel()
	ctx = httpclient.WithAllowInsecure(ctx, spec.AllowInsecure)
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "http discovery of manual %q from %s: "+format,
			append([]any{tmpl.Name, utcp.RedactURL(u)}, args...)...)
	}
	var buf bytes.Buffer // not pooled: the manual may keep slices of it
	status, ctype, err := t.do(ctx, r, &buf)
	body := buf.Bytes()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		var uerr *utcp.Error
		if errors.As(err, &uerr) && uerr.Code != utcp.CodeTransportError {
			return nil, transports.AsManualTooLarge(ctx, err, r.max) // invalid_template, unauthorized (token), payload_too_large
		}
		return nil, fail("%w", err)
	}
	if status < 200 || status > 299 {
		return nil, fail("HTTP %d %s: %s", status, nethttp.StatusText(status), jsonx.Excerpt(body)).WithDetail("status", status)
	}
	if err := transports.PrecheckManual(ctx, body); err != nil {
		return nil, err // over the discovery limits: refused before decoding
	}

	doc, err := manuals.DecodeDocument(body)
	if err != nil {
		return nil, fail("the response (Content-Type %q) is not a JSON or YAML object: %w", ctype, err)
	}
	switch {
	case isManualDoc(doc):
		m, warnings, err := transports.ParseManual(ctx, body)
		if err != nil {
			if transports.IsLimit(err) {
				return nil, err
			}
			return nil, fail("%w", err)
		}
		for _, w := range warnings {
			t.log.Warn("manual served with problems", "manual", tmpl.Name, "url", utcp.RedactURL(u), "warning", w.String())
		}
		return m, nil
	case manuals.IsOpenAPI(doc):
		m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{
			SpecURL:   u.String(),
			AuthTools: spec.AuthTools,
			Warn: func(msg string) {
				t.log.Debug("openapi conversion", "manual", tmpl.Name, "url", utcp.RedactURL(u), "warning", msg)
			},
		})
		if err != nil {
			return nil, fail("converting the OpenAPI document: %w", err)
		}
		if err := transports.CheckTools(ctx, len(m.Tools)); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fail("the response is neither a UTCP manual (utcp_version and tools) nor an OpenAPI document (openapi, swagger or paths)")
}

// CallTool sends one request for call, mapping the arguments as the
// package documentation describes. A 2xx answer is the result: decoded
// JSON (numbers as json.Number) when the response content type is JSON,
// the body as a string otherwise, nil for an empty body. A 4xx answer is a
// *utcp.ToolError carrying the status, the decoded body and a message with
// a short excerpt of it; a 5xx (or any other non-2xx) answer is a
// *utcp.TransportError with the status. An oauth2-protected call answered
// 401 is retried once with a freshly fetched token. A refused connection
// or failed DNS lookup is a *utcp.TransportError; the end of ctx (or of
// the template's timeout) returns an error wrapping the context's error.
// Responses over the configured cap fail with payload_too_large. Missing
// path arguments are invalid_arguments; a URL that fails
// httpclient.CheckURL is invalid_template.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	if t.closed.Load() {
		return nil, errClosed
	}
	if call == nil {
		return nil, utcp.NewError(utcp.CodeInvalidRequest, "http: no call")
	}
	spec, auth, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	r, err := prepare(spec, auth, call.Arguments)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx, spec, 0)
	defer cancel()
	ctx = httpclient.WithAllowInsecure(ctx, spec.AllowInsecure)
	buf := getBody()
	defer putBody(buf)
	status, ctype, err := t.do(ctx, r, buf)
	if err != nil {
		return nil, err
	}
	body := buf.Bytes() // httpcall.DecodeBody and jsonx.Excerpt copy what they keep
	switch {
	case status >= 200 && status <= 299:
		return &utcp.Result{Value: httpcall.DecodeBody(ctype, body)}, nil
	case status >= 400 && status <= 499:
		return nil, &utcp.ToolError{
			Status:  status,
			Value:   httpcall.DecodeBody(ctype, body),
			Message: fmt.Sprintf("HTTP %d %s: %s", status, nethttp.StatusText(status), jsonx.Excerpt(body)),
		}
	default:
		return nil, &utcp.TransportError{Status: status,
			Err: fmt.Errorf("%s %s answered HTTP %d %s: %s", r.method, r.redacted(), status, nethttp.StatusText(status), jsonx.Excerpt(body))}
	}
}

// Release does nothing: the http transport keeps no per-manual state.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	return nil
}

// Close closes the idle pooled connections. Later calls fail with code
// unavailable. It is idempotent.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.client.CloseIdleConnections()
	return nil
}

// request is a prepared HTTP request, rebuilt for each attempt.
type request struct {
	method string
	// rawURL is the URL to send; url is it parsed, or nil until an error
	// message needs it (see redacted).
	rawURL string
	url    *url.URL
	header nethttp.Header // may be the plan's: never modified
	body   []byte         // nil: no body
	auth   *utcp.Auth
	max    int64 // body cap; 0: the transport's
}

// redacted is the request's URL for messages (see utcp.RedactURL).
func (r *request) redacted() string {
	if r.url == nil {
		u, err := url.Parse(r.rawURL)
		if err != nil {
			return "(unparsable URL)"
		}
		r.url = u
	}
	return utcp.RedactURL(r.url)
}

func (r *request) build(ctx context.Context, t *Transport) (*nethttp.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := nethttp.NewRequestWithContext(ctx, r.method, r.rawURL, body)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "http: cannot build the request: %w", err)
	}
	req.Header = r.header
	if r.auth != nil {
		// ApplyAuth writes to the headers, which may be the plan's;
		// a retry applies a fresh token to a fresh copy.
		req.Header = r.header.Clone()
	}
	if err := httpclient.ApplyAuth(ctx, req, r.auth, t.tokens); err != nil {
		return nil, err
	}
	return req, nil
}

// do sends r, retrying once with a fresh token when an oauth2-protected
// backend answers 401. It returns the status and the content type, and
// reads the body into buf under the cap.
func (t *Transport) do(ctx context.Context, r *request, buf *bytes.Buffer) (int, string, error) {
	for attempt := 0; ; attempt++ {
		req, err := r.build(ctx, t)
		if err != nil {
			return 0, "", err
		}
		resp, err := t.client.Do(req)
		if err != nil {
			return 0, "", t.sendError(ctx, r, err)
		}
		if resp.StatusCode == nethttp.StatusUnauthorized && attempt == 0 && r.auth != nil && r.auth.Type == utcp.AuthOAuth2 {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			t.tokens.Invalidate(r.auth)
			continue
		}
		max := t.maxResponse
		if r.max > 0 {
			max = r.max
		}
		if err := readBody(resp, max, buf); err != nil {
			if ctx.Err() != nil {
				return 0, "", fmt.Errorf("http %s %s: %w", r.method, r.redacted(), ctx.Err())
			}
			if errors.Is(err, transports.ErrTooLarge) {
				return 0, "", err
			}
			return 0, "", &utcp.TransportError{Status: resp.StatusCode, Err: fmt.Errorf("%s %s: reading the response: %w", r.method, r.redacted(), err)}
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), nil
	}
}

// readBody reads resp.Body into buf, as httpclient.ReadResponseBody does
// (the same cap and errors), and closes it.
func readBody(resp *nethttp.Response, max int64, buf *bytes.Buffer) error {
	defer resp.Body.Close()
	if max <= 0 {
		max = transports.DefaultMaxResponseBytes
	}
	if resp.ContentLength > max {
		return transports.TooLarge(max)
	}
	if max == math.MaxInt64 {
		max--
	}
	if resp.ContentLength > 0 && resp.ContentLength <= maxPooledBody {
		// Sized up front only when small: a large declared length is
		// read as it arrives, never allocated on the backend's word.
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, max+1)); err != nil {
		return err
	}
	if int64(buf.Len()) > max {
		return transports.TooLarge(max)
	}
	return nil
}

// sendError classifies an error of Client.Do: the context's own error
// (timeout, canceled), a refused redirect, or a transport failure. The
// URL is named without its query, which may hold a key.
func (t *Transport) sendError(ctx context.Context, r *request, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("http %s %s: %w", r.method, r.redacted(), ctx.Err())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var uerr *utcp.Error
	if errors.As(err, &uerr) { // a refused redirect
		return &utcp.TransportError{Err: uerr}
	}
	return &utcp.TransportError{Err: fmt.Errorf("%s %s: %w", r.method, r.redacted(), err)}
}

// withTimeout applies the template timeout, or def when the template has
// none and ctx has no deadline.
func withTimeout(ctx context.Context, spec *Template, def time.Duration) (context.Context, context.CancelFunc) {
	if d := spec.timeout(); d > 0 {
		return context.WithTimeout(ctx, d)
	}
	if _, ok := ctx.Deadline(); !ok && def > 0 {
		return context.WithTimeout(ctx, def)
	}
	return ctx, noCancel
}

func noCancel() {}

// cookieHeader renders the cookie_fields arguments present in args as
// "name=value; name=value" in the order of names. A value that is not
// cookie octets (RFC 6265) is an invalid_arguments error naming it.
func cookieHeader(names []string, args map[string]any) (string, error) {
	var b strings.Builder
	for _, name := range names {
		v, ok := args[name]
		if !ok {
			continue
		}
		s, ok := jsonx.ArgString(v)
		if !ok {
			continue
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '\\' {
				return "", utcp.NewError(utcp.CodeInvalidArguments, "argument %q: a cookie value must not contain spaces, quotes, commas, semicolons, backslashes or control or non-ASCII characters (percent-encode it)", name).WithDetail("argument", name)
			}
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(s)
	}
	return b.String(), nil
}

// prepare maps args onto a request as UTCP prescribes: header_fields
// arguments become headers, cookie_fields arguments cookies, the
// body_field argument the body, {name}
// placeholders take their arguments, and the rest become query parameters.
// What depends on the template alone comes from its plan.
func prepare(spec *Template, auth *utcp.Auth, args map[string]any) (*request, error) {
	p := planOf(spec)
	header, owned := p.header, false
	own := func() {
		if !owned {
			header, owned = header.Clone(), true
		}
	}
	for _, name := range spec.HeaderFields {
		v, ok := args[name]
		if !ok {
			continue
		}
		s, ok := jsonx.ArgString(v)
		if !ok {
			continue
		}
		if !httpclient.ValidHeaderValue(s) {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "argument %q: a header value must not contain line breaks", name).WithDetail("argument", name)
		}
		own()
		header.Set(name, s)
	}
	if len(spec.CookieFields) > 0 {
		cookies, err := cookieHeader(spec.CookieFields, args)
		if err != nil {
			return nil, err
		}
		if cookies != "" {
			own()
			if prev := header.Get("Cookie"); prev != "" {
				cookies = prev + "; " + cookies
			}
			header.Set("Cookie", cookies)
		}
	}
	var body []byte
	if v, ok := args[spec.BodyField]; ok && !slices.Contains(spec.HeaderFields, spec.BodyField) && !slices.Contains(spec.CookieFields, spec.BodyField) {
		b, err := httpcall.EncodeBody(spec.ContentType, v)
		if err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidArguments, "argument %q: cannot encode the body: %w", spec.BodyField, err).WithDetail("argument", spec.BodyField)
		}
		body = b
		if header.Get("Content-Type") == "" {
			own()
			header.Set("Content-Type", spec.ContentType)
		}
	}
	if owned && header.Get("User-Agent") == "" {
		header.Set("User-Agent", "utcpd")
	}
	r := &request{method: spec.HTTPMethod, header: header, body: body, auth: auth}
	q := encodeQuery(p, args)
	if p.segments == nil {
		if p.staticErr != nil {
			return nil, p.staticErr
		}
		if q == "" {
			r.rawURL, r.url = p.staticString, p.staticURL
		} else {
			r.rawURL = p.prefix + q + p.suffix
		}
		return r, nil
	}
	raw, err := fillPlaceholders(p.segments, args)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "http: url: %w", err)
	}
	if err := httpclient.CheckURL(u, spec.AllowInsecure); err != nil {
		return nil, err
	}
	if q != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&" + q
		} else {
			u.RawQuery = q
		}
	}
	r.rawURL, r.url = u.String(), u
	return r, nil
}

// encodeQuery renders the arguments that are not consumed otherwise as a
// query string, as httpcall.EncodeQuery does (sorted keys, nil values
// left out).
func encodeQuery(p *plan, args map[string]any) string {
	var kb [8]string
	keys := kb[:0]
	for k, v := range args {
		if v != nil && !p.consumes(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		s, ok := jsonx.ArgString(args[k])
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(s))
	}
	return b.String()
}

// fillPlaceholders renders the URL of segments with each {name} replaced
// by the argument name, path-escaped before the query and query-escaped
// inside it. Every missing argument is named in the error.
func fillPlaceholders(segments []segment, args map[string]any) (string, error) {
	var missing []string
	var b strings.Builder
	for _, sg := range segments {
		b.WriteString(sg.literal)
		if sg.name == "" {
			continue
		}
		s, ok := "", false
		if !sg.shadowed {
			s, ok = jsonx.ArgString(args[sg.name])
		}
		if !ok {
			missing = append(missing, sg.name)
			continue
		}
		if sg.inQuery {
			b.WriteString(url.QueryEscape(s))
		} else {
			if err := httpcall.CheckPathValue(sg.name, s); err != nil {
				return "", err
			}
			b.WriteString(url.PathEscape(s))
		}
	}
	if len(missing) > 0 {
		e := utcp.NewError(utcp.CodeInvalidArguments, "missing required path parameter %s", strings.Join(quoteAll(missing), ", "))
		return "", e.WithDetail("missing", missing)
	}
	return b.String(), nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = strconv.Quote(v)
	}
	return out
}

// isManualDoc applies python-utcp's test: a tools array plus utcp_version
// (or the legacy version).
func isManualDoc(doc map[string]any) bool {
	if _, ok := doc["tools"].([]any); !ok {
		return false
	}
	_, v1 := doc["utcp_version"]
	_, v0 := doc["version"]
	return v1 || v0
}
