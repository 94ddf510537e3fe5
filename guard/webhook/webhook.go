// Package webhook is the "webhook" guard kind: it asks an HTTP service
// to decide each call.
//
// For every call it POSTs a JSON body (Request):
//
//	{"tool": "delete", "qualified": "files.delete", "manual": "files", "protocol": "http",
//	 "arguments": {"path": "/tmp/x"}, "principal": "alice", "kind": "tool", "timestamp": 1764500000}
//
// with the headers
//
//	Content-Type: application/json
//	X-Utcpd-Timestamp: 1764500000
//	X-Utcpd-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" keyed with the secret>
//
// plus the configured headers. timestamp is Unix seconds, the same in the
// header and the body; unresolved fields are "", and arguments is {} when
// the call has none. kind is "tool" for a tool call, "resource" for an
// MCP resources/read (tool and qualified are the resource's utcpd URI,
// arguments {"uri": <the MCP server's URI>}) and "prompt" for an MCP
// prompts/get (tool and qualified are manual.server.prompt, arguments
// the prompt's). A receiver checks the signature over the exact bytes
// received (Verify does it) and should refuse stale timestamps.
//
// The service answers 2xx with a JSON object (Response):
//
//	{"decision": "allow" | "deny" | "review", "reason": "shown to the caller", "details": <optional JSON>}
//
// Anything else fails closed, as an error verdict (guard_error): a
// timeout, a connection failure, a redirect (never followed), a non-2xx
// status, a body over 1 MiB, a body that is not a JSON object, and a
// missing or invalid decision (including "error").
//
// Configuration (exact field names; an unknown field is an error):
//
//	{
//	  "kind": "webhook",
//	  "url": "https://guard.example.com/decide",
//	  "secret": "a long random string",
//	  "timeout": "2s",
//	  "headers": {"Authorization": "Bearer ..."},
//	  "allow_insecure": false
//	}
//
// url (required) must be https, or http to a loopback address (localhost,
// 127.0.0.0/8, ::1); allow_insecure permits http to any host (TLS
// certificates are always verified). secret (required) keys the
// signature. timeout bounds each request (default 2s; the call's own
// deadline can only shorten it). headers are sent with every request;
// the guard's own (Content-Type, Accept, the two X-Utcpd- headers) and
// Content-Length, Host, Connection and Transfer-Encoding cannot be set.
// "kind" and "name" are accepted and ignored.
//
// The secret and the header values are never logged, and never appear in
// verdicts; the URL is logged without its query or credentials.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/internal/kindcfg"
	"github.com/utcpd/utcpd/utcp"
)

// Kind is the guard kind this package registers in guard.Default.
const Kind = "webhook"

// The request headers the guard sets.
const (
	// SignatureHeader carries "sha256=<hex HMAC-SHA256>" of the timestamp,
	// a dot and the body.
	SignatureHeader = "X-Utcpd-Signature"
	// TimestampHeader carries the request's Unix time in seconds.
	TimestampHeader = "X-Utcpd-Timestamp"
)

// DefaultTimeout bounds one request when the configuration sets none.
const DefaultTimeout = 2 * time.Second

// Limits.
const (
	maxResponse  = 1 << 20 // bytes of response body
	maxReasonLen = 1000    // runes of the service's reason kept
)

func init() {
	guard.MustRegister(guard.Info{Kind: Kind, New: New})
}

// Request is the JSON body POSTed for each call.
type Request struct {
	// Tool is the name as the caller requested it.
	Tool string `json:"tool"`
	// Qualified is the resolved "manual.tool" name, "" if unresolved.
	Qualified string `json:"qualified"`
	// Manual is the resolved tool's manual, "" if unresolved.
	Manual string `json:"manual"`
	// Protocol is the resolved tool's call_template_type, "" if
	// unresolved.
	Protocol string `json:"protocol"`
	// Arguments are the call's arguments; {} when there are none.
	Arguments map[string]any `json:"arguments"`
	// Principal names the authenticated caller, "" if anonymous.
	Principal string `json:"principal"`
	// Kind is the kind of action: "tool", "resource" (an MCP
	// resources/read; tool is its URI) or "prompt" (an MCP prompts/get).
	Kind string `json:"kind"`
	// Timestamp is Unix seconds, equal to the X-Utcpd-Timestamp header.
	Timestamp int64 `json:"timestamp"`
}

// Response is the JSON body the service answers with. Other fields are
// ignored.
type Response struct {
	// Decision is allow, deny or review; anything else fails closed.
	Decision guard.Decision `json:"decision"`
	// Reason is shown to the caller and recorded in the audit log.
	Reason string `json:"reason,omitempty"`
	// Details, any JSON value, becomes the verdict's Details.
	Details json.RawMessage `json:"details,omitempty"`
}

// Sign returns the X-Utcpd-Signature value for a request: "sha256="
// followed by the lower-case hex HMAC-SHA256, keyed with secret, of
// timestamp, ".", and body.
func Sign(secret []byte, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is the valid X-Utcpd-Signature of
// body sent at timestamp, comparing in constant time. It does not judge
// the timestamp's age; receivers should also refuse old timestamps.
func Verify(secret []byte, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}

type config struct {
	URL           string            `json:"url"`
	Secret        string            `json:"secret"`
	Timeout       kindcfg.Duration  `json:"timeout,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	AllowInsecure bool              `json:"allow_insecure,omitempty"`
}

// Guard is a webhook guard, a guard.Guard. It is safe for concurrent use.
type Guard struct {
	log       *slog.Logger
	url       string
	logURL    string // without credentials or query
	secret    []byte
	timeout   time.Duration
	headers   http.Header
	transport *http.Transport
	client    *http.Client
	now       func() time.Time // for tests
}

var _ guard.Guard = (*Guard)(nil)

// reserved are the headers the configuration cannot set.
var reserved = []string{"Content-Type", "Content-Length", "Accept", "Host", "Connection", "Transfer-Encoding", SignatureHeader, TimestampHeader}

// New builds a webhook guard from its configuration section, decoded
// strictly (see the package documentation). It is the guard.Info.New of
// the webhook kind.
func New(cfg json.RawMessage, log *slog.Logger) (guard.Guard, error) {
	var c config
	if err := kindcfg.Decode(cfg, Kind, &c); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	u, err := checkURL(c.URL, c.AllowInsecure)
	if err != nil {
		return nil, fmt.Errorf("field url: %w", err)
	}
	if c.Secret == "" {
		return nil, errors.New("field secret is required: it keys the request signature")
	}
	headers := http.Header{}
	for k, v := range c.Headers {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("field headers: %q is not a valid header name", k)
		}
		for _, r := range reserved {
			if strings.EqualFold(k, r) {
				return nil, fmt.Errorf("field headers: %s is set by the guard and cannot be configured", r)
			}
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("field headers: the value of %s contains a line break or NUL", k)
		}
		headers.Set(k, v)
	}
	g := &Guard{
		log:     log,
		url:     u.String(),
		logURL:  (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		secret:  []byte(c.Secret),
		timeout: time.Duration(c.Timeout),
		headers: headers,
		now:     time.Now,
	}
	if g.timeout == 0 {
		g.timeout = DefaultTimeout
	}
	g.transport = &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	g.client = &http.Client{
		Transport: g.transport,
		// A redirect is an answer the guard does not accept: following it
		// could leave https or the configured host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if len(c.Secret) < 16 {
		log.Warn("webhook secret is short; use at least 32 random bytes", "secret_bytes", len(c.Secret))
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	log.Debug("webhook guard configured", "url", g.logURL, "timeout", g.timeout, "headers", names)
	return g, nil
}

// checkURL parses raw and checks its scheme: https, or http to a
// loopback host, or http anywhere with allowInsecure.
func checkURL(raw string, allowInsecure bool) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("a URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %w", redactURLError(err))
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, errors.New("the URL must be absolute, with a host")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !allowInsecure && !loopback(u.Hostname()) {
			return nil, fmt.Errorf("http is allowed only to a loopback address (localhost, 127.0.0.0/8, ::1); use https, or set allow_insecure")
		}
	default:
		return nil, fmt.Errorf("scheme %q: want https (or http to a loopback address)", u.Scheme)
	}
	return u, nil
}

// loopback reports whether host names the local machine: "localhost" or
// a loopback IP address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redactURLError keeps a URL parse error's reason without the URL, which
// may carry credentials; what is left is redacted by value too (a reason
// can quote part of the URL).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if msg := err.Error(); utcp.HasSecretText(msg) {
		return errors.New(utcp.RedactText(msg))
	}
	return err
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// Close releases the guard's idle connections. The guard still works
// afterwards (it opens new ones); call it when a configuration reload
// replaces the guard.
func (g *Guard) Close() error {
	g.transport.CloseIdleConnections()
	return nil
}

// Evaluate asks the service to decide call. Failures are error verdicts,
// never a Go error, except for a nil call.
func (g *Guard) Evaluate(ctx context.Context, call *guard.Call) (guard.Verdict, error) {
	if call == nil {
		return guard.Verdict{}, errors.New("webhook: no call to evaluate")
	}
	fail := func(reason string, details json.RawMessage) (guard.Verdict, error) {
		return guard.Verdict{Decision: guard.Error, Reason: "webhook: " + reason, Details: details}, nil
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Sprintf("call abandoned before the request: %v", err), nil)
	}
	args := call.Arguments
	if args == nil {
		args = map[string]any{}
	}
	ts := g.now().Unix()
	body, err := encode(Request{Tool: call.Tool, Qualified: call.Qualified, Manual: call.Manual, Protocol: call.Protocol,
		Arguments: args, Principal: call.Principal, Kind: call.KindOf(), Timestamp: ts})
	if err != nil {
		return fail(fmt.Sprintf("cannot encode the call: %v", err), nil)
	}
	rctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, g.url, bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Sprintf("cannot build the request: %v", redactURLError(err)), nil)
	}
	req.Header = g.headers.Clone()
	tss := strconv.FormatInt(ts, 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set(TimestampHeader, tss)
	req.Header.Set(SignatureHeader, Sign(g.secret, tss, body))
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "utcpd-guard-webhook")
	}
	log := g.log.With("url", g.logURL, "tool", call.Tool)
	start := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return fail(fmt.Sprintf("call abandoned during the request: %v", ctx.Err()), nil)
		case rctx.Err() != nil:
			log.Warn("webhook timed out", "timeout", g.timeout)
			return fail(fmt.Sprintf("no answer within %v", g.timeout), nil)
		}
		err = redactURLError(err)
		log.Warn("webhook request failed", "err", err)
		return fail(fmt.Sprintf("request failed: %v", err), nil)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	took := time.Since(start)
	status, _ := json.Marshal(map[string]int{"status": resp.StatusCode})
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(fmt.Sprintf("call abandoned during the request: %v", ctx.Err()), nil)
	case err != nil && rctx.Err() != nil:
		log.Warn("webhook timed out", "timeout", g.timeout)
		return fail(fmt.Sprintf("no answer within %v", g.timeout), nil)
	case err != nil:
		log.Warn("webhook response unreadable", "status", resp.StatusCode, "err", err)
		return fail(fmt.Sprintf("reading the answer: %v", err), status)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		log.Warn("webhook answered an error status", "status", resp.StatusCode, "took", took)
		return fail(fmt.Sprintf("answered HTTP %d", resp.StatusCode), status)
	case len(b) > maxResponse:
		log.Warn("webhook answer too large", "limit", maxResponse)
		return fail(fmt.Sprintf("answer exceeds %d bytes", maxResponse), status)
	}
	r, err := decodeResponse(b)
	if err != nil {
		log.Warn("webhook answer invalid", "status", resp.StatusCode, "err", err)
		return fail(err.Error(), status)
	}
	v := guard.Verdict{Decision: r.Decision, Reason: truncate(utcp.RedactText(r.Reason), maxReasonLen)}
	if v.Reason == "" {
		v.Reason = "webhook decided " + string(r.Decision)
	}
	if len(r.Details) > 0 && string(r.Details) != "null" {
		var d bytes.Buffer
		if json.Compact(&d, r.Details) == nil {
			v.Details = d.Bytes()
		}
	}
	log.Debug("webhook decided", "decision", string(v.Decision), "took", took)
	return v, nil
}

// encode marshals v without HTML escaping or a trailing newline.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeResponse parses the answer: one JSON object whose decision is
// allow, deny or review.
func decodeResponse(b []byte) (Response, error) {
	var r Response
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return r, errors.New("the answer is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("the answer does not parse: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return r, errors.New("unexpected text after the answer's JSON object")
	}
	switch r.Decision {
	case guard.Allow, guard.Deny, guard.Review:
		return r, nil
	case "":
		return r, errors.New("the answer has no decision")
	}
	return r, fmt.Errorf("invalid decision %.64q: want allow, deny or review", r.Decision)
}

// truncate keeps the first n runes of s.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
