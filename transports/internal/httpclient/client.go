// Package httpclient is the HTTP plumbing the HTTP-based transports
// (http, sse, streamable_http, websocket, graphql, mcp, webrtc signaling)
// and the oauth2 token cache share: the URL security check, a pooled
// client that re-checks every redirect and dials through netguard, auth
// application, header checks and a bounded body reader.
package httpclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// CheckURL reports whether utcpd may send a request (with credentials) to u.
//
// https and wss are always allowed. http and ws are allowed only to a
// literal loopback host — "localhost", an address in 127.0.0.0/8, or ::1
// (also as an IPv4-mapped address) — unless allowInsecure is true, which a
// template sets with "allow_insecure": true. Every other scheme, and a URL
// without a host, is refused. Host names are never resolved: a name that
// merely points at 127.0.0.1 is not loopback for this check.
//
// A refusal is a *utcp.Error with code invalid_template: the URL came from a
// call template (or manual) that utcpd will not use as written. Redirects
// refused by New's clients carry code transport_error instead,
// since there the backend, not the template, chose the URL.
func CheckURL(u *url.URL, allowInsecure bool) error {
	if err := checkURL(u, allowInsecure); err != nil {
		e := utcp.Errorf(utcp.CodeInvalidTemplate, "%w", err)
		if u != nil {
			e = e.WithDetail("url", utcp.RedactURL(u))
		}
		return e
	}
	return nil
}

func checkURL(u *url.URL, allowInsecure bool) error {
	if u == nil {
		return errors.New("no URL")
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "https", "wss", "http", "ws":
	case "":
		return fmt.Errorf("URL %q is not absolute (it needs a scheme such as https://)", utcp.RedactURL(u))
	default:
		return fmt.Errorf("URL %q: scheme %q is not allowed (use https)", utcp.RedactURL(u), u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("URL %q has no host", utcp.RedactURL(u))
	}
	if scheme == "https" || scheme == "wss" || allowInsecure || IsLoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("URL %q: plain %s is allowed only to loopback hosts (localhost, 127.0.0.0/8, ::1); use %ss, or set \"allow_insecure\": true in the call template", utcp.RedactURL(u), scheme, scheme)
}

// IsLoopbackHost reports whether host (a URL's Hostname, without brackets
// or port) is literally a loopback host: "localhost" (any case, with or
// without a trailing dot), an IPv4 address in 127.0.0.0/8, or ::1, including
// IPv4-mapped forms. It never resolves names.
func IsLoopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" {
		return true
	}
	if i := strings.IndexByte(h, '%'); i >= 0 { // zone, as in fe80::1%eth0
		h = h[:i]
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Options tune New. The zero value gives the defaults.
type Options struct {
	// MaxIdleConnsPerHost bounds the pooled keep-alive connections per
	// host. Zero means 64.
	MaxIdleConnsPerHost int
	// MaxRedirects is the number of redirects followed before a request
	// fails. Zero means 10; a negative value refuses every redirect.
	MaxRedirects int
	// TLSClientConfig, when set, replaces the default TLS configuration
	// (for a private CA, say).
	TLSClientConfig *tls.Config
}

// DefaultMaxIdleConnsPerHost is the keep-alive pool size per host used when
// Options.MaxIdleConnsPerHost is zero.
const DefaultMaxIdleConnsPerHost = 64

// DefaultMaxRedirects is the redirect limit used when Options.MaxRedirects
// is zero.
const DefaultMaxRedirects = 10

type insecureKey struct{}

// WithAllowInsecure returns a context telling the clients of New
// whether redirects of a request made with it may go to plain http/ws
// hosts that are not loopback. Transports set it from the template's
// allow_insecure field; without it, redirects are checked with
// allowInsecure false.
func WithAllowInsecure(ctx context.Context, allow bool) context.Context {
	if allowInsecureFrom(ctx) == allow {
		return ctx // already says so: spare the call path an allocation
	}
	return context.WithValue(ctx, insecureKey{}, allow)
}

func allowInsecureFrom(ctx context.Context) bool {
	v, _ := ctx.Value(insecureKey{}).(bool)
	return v
}

// New returns an *http.Client for calling tool backends:
//
//   - a pooled keep-alive transport (MaxIdleConnsPerHost 64 by default,
//     HTTP/2 when the server offers it, the proxy from the environment);
//     plain-http requests that need no proxy are exchanged on the calling
//     goroutine over the client's own HTTP/1.1 connections (h1Pool), the
//     rest by net/http.Transport;
//   - no client-wide timeout: deadlines come from each request's context;
//   - every redirect hop re-validated with CheckURL (allow_insecure taken
//     from the request context, see WithAllowInsecure); a refused hop fails
//     the request with a *utcp.Error of code transport_error;
//   - once a redirect chain leaves the origin (scheme, host and port) of the
//     first request, every header except a short list of content-negotiation
//     headers (Accept, Accept-Language, Accept-Encoding, Content-Type,
//     Content-Language, Content-Encoding, User-Agent) is dropped for the rest
//     of the chain, so Authorization, Cookie, api-key headers under any
//     var_name, template headers that may carry secrets, and a Referer
//     holding a query-string key do not follow;
//   - at most 10 redirects;
//   - every connection dialled through netguard (netguard.DialContext): a
//     request whose context carries a netguard.Policy (a remote manual's
//     tool) cannot reach link-local, metadata or unspecified addresses,
//     loopback or private ranges outside its manual's origin and
//     allowed_hosts, or the daemon's own listeners; and every redirect
//     hop, whoever wrote the template, is marked netguard.WithRedirect and
//     checked before it is sent (netguard.CheckURL, its name resolved) and
//     when it dials, so that no redirect leads into the daemon's own
//     listeners or to link-local and metadata addresses. Such a refusal is
//     a *utcp.Error of code forbidden.
//
// The client is safe for concurrent use; CloseIdleConnections releases its
// pool.
func New(opts Options) *http.Client {
	perHost := opts.MaxIdleConnsPerHost
	if perHost <= 0 {
		perHost = DefaultMaxIdleConnsPerHost
	}
	maxRedirects := opts.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	dial := netguard.DialContext(&net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
	})
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * perHost,
		MaxIdleConnsPerHost:   perHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       opts.TLSClientConfig,
	}
	h1 := &h1Pool{dial: dial, proxy: tr.Proxy, perHost: perHost, maxIdle: tr.MaxIdleConns, idleTimeout: tr.IdleConnTimeout}
	return &http.Client{
		Transport: guardedTransport{base: tr, h1: h1},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if maxRedirects < 0 {
				return utcp.NewError(utcp.CodeTransportError, "redirect to %s refused: redirects are disabled", utcp.RedactURL(req.URL))
			}
			if len(via) >= maxRedirects {
				return utcp.NewError(utcp.CodeTransportError, "stopped after %d redirects", len(via))
			}
			if err := checkURL(req.URL, allowInsecureFrom(req.Context())); err != nil {
				return utcp.Errorf(utcp.CodeTransportError, "redirect refused: %w", err).
					WithDetail("url", utcp.RedactURL(req.URL))
			}
			first := origin(via[0].URL)
			crossed := origin(req.URL) != first
			for _, v := range via[1:] {
				crossed = crossed || origin(v.URL) != first
			}
			if crossed {
				for k := range req.Header {
					if !redirectSafeHeaders[http.CanonicalHeaderKey(k)] {
						delete(req.Header, k)
					}
				}
			}
			return nil
		},
	}
}

// guardedTransport marks redirect hops for netguard and checks every
// request netguard has a say in before it is sent (a pooled connection,
// or one through a proxy, dials nothing of the destination here).
type guardedTransport struct {
	base *http.Transport
	h1   *h1Pool // plain-http requests that need no proxy (h1Pool.eligible)
}

func (g guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if req.Response != nil { // the client made req to follow a redirect
		ctx = netguard.WithRedirect(ctx)
		req = req.WithContext(ctx)
	}
	if netguard.PolicyFrom(ctx) != nil || netguard.IsRedirect(ctx) {
		if err := netguard.CheckURL(ctx, req.URL, netguard.IsRedirect(ctx) || netguard.ProxyConfigured()); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	if tracing.HasContext(ctx) {
		// Pass the trace context on (W3C traceparent, tracestate) on a
		// copy: a RoundTripper does not change its caller's request.
		r := *req
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = http.Header{}
		}
		tracing.InjectHeader(ctx, r.Header)
		req = &r
	}
	if g.h1 != nil && g.h1.eligible(req) {
		return g.h1.roundTrip(req)
	}
	return g.base.RoundTrip(req)
}

// CloseIdleConnections closes the pooled idle connections.
func (g guardedTransport) CloseIdleConnections() {
	g.base.CloseIdleConnections()
	if g.h1 != nil {
		g.h1.closeIdle()
	}
}

// redirectSafeHeaders survive a cross-origin redirect; all others are dropped.
var redirectSafeHeaders = map[string]bool{
	"Accept":           true,
	"Accept-Language":  true,
	"Accept-Encoding":  true,
	"Content-Type":     true,
	"Content-Language": true,
	"Content-Encoding": true,
	"User-Agent":       true,
}

// origin returns scheme://host:port of u with the default port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// ApplyAuth adds the credentials of auth to req:
//
//   - api_key: the key under var_name (default "X-Api-Key") as a header
//     (location "header", the default), a query parameter ("query"), or a
//     cookie ("cookie");
//   - basic: Authorization: Basic with username and password;
//   - oauth2: Authorization: Bearer with a token from tokens (client
//     credentials, cached by the transports.TokenSource);
//   - oauth2_user: the header var_name (default "Authorization") set to
//     prefix (default "Bearer ") + access_token.
//
// A nil auth does nothing. An empty credential (api_key, access_token) is a
// *utcp.Error with code unauthorized; an unknown auth_type, or oauth2 with a
// nil tokens, is invalid_template. Errors from tokens are returned as they
// are.
func ApplyAuth(ctx context.Context, req *http.Request, auth *utcp.Auth, tokens transports.TokenSource) error {
	if auth == nil {
		return nil
	}
	switch auth.Type {
	case utcp.AuthAPIKey:
		if auth.APIKey == "" {
			return utcp.NewError(utcp.CodeUnauthorized, "the api_key of the api_key auth is empty")
		}
		name := auth.VarName
		if name == "" {
			name = "X-Api-Key"
		}
		switch auth.Location {
		case "", "header":
			if err := checkHeaderName(name); err != nil {
				return err
			}
			req.Header.Set(name, auth.APIKey)
		case "query":
			q := req.URL.Query()
			q.Set(name, auth.APIKey)
			req.URL.RawQuery = q.Encode()
		case "cookie":
			req.AddCookie(&http.Cookie{Name: name, Value: auth.APIKey})
		default:
			return utcp.NewError(utcp.CodeInvalidTemplate, "api_key auth: location %q is not one of header, query, cookie", auth.Location)
		}
	case utcp.AuthBasic:
		req.SetBasicAuth(auth.Username, auth.Password)
	case utcp.AuthOAuth2:
		if tokens == nil {
			return utcp.NewError(utcp.CodeInvalidTemplate, "oauth2 auth: no token source configured")
		}
		tok, err := tokens.Token(ctx, auth)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	case utcp.AuthOAuth2User:
		if auth.AccessToken == "" {
			return utcp.NewError(utcp.CodeUnauthorized, "access_token for oauth2_user auth is empty: run the interactive login for this manual and provide the token as a variable")
		}
		name := auth.VarName
		if name == "" {
			name = "Authorization"
		}
		if err := checkHeaderName(name); err != nil {
			return err
		}
		prefix := "Bearer "
		if auth.Prefix != nil {
			prefix = *auth.Prefix
		}
		req.Header.Set(name, prefix+auth.AccessToken)
	default:
		return utcp.NewError(utcp.CodeInvalidTemplate, "unknown auth_type %q (valid: api_key, basic, oauth2, oauth2_user)", auth.Type)
	}
	return nil
}

// checkHeaderName refuses names that are not HTTP tokens (which would also
// let CR/LF through).
func checkHeaderName(name string) error {
	if !ValidHeaderName(name) {
		return utcp.NewError(utcp.CodeInvalidTemplate, "%q is not a valid HTTP header name", name)
	}
	return nil
}

// ValidHeaderName reports whether name is a non-empty RFC 9110 token, the
// syntax of an HTTP header field name.
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v may be sent as an HTTP header value:
// no CR, LF or NUL (which would split or truncate the header).
func ValidHeaderValue(v string) bool {
	return !strings.ContainsAny(v, "\r\n\x00")
}

// ReadResponseBody reads resp.Body under the cap of transports.ReadAllLimit and closes
// it. A Content-Length over max fails at once, without reading.
func ReadResponseBody(resp *http.Response, max int64) ([]byte, error) {
	defer resp.Body.Close()
	if max <= 0 {
		max = transports.DefaultMaxResponseBytes
	}
	if resp.ContentLength > max {
		return nil, transports.TooLarge(max)
	}
	return transports.ReadAllLimit(resp.Body, max)
}
