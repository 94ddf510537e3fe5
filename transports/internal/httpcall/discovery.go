package httpcall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// ManualFetch is one HTTP manual discovery of a transport whose manual
// URL serves a UTCP manual as is (sse, streamable_http).
type ManualFetch struct {
	// Type names the transport in errors, e.g. "sse".
	Type string
	// Manual is the manual's name.
	Manual string
	// Method, URL, Header and Auth make the request (no body).
	Method string
	URL    *url.URL
	Header http.Header
	Auth   *utcp.Auth
	// MaxBytes caps the response body (see httpclient.ReadResponseBody); the
	// context's DiscoveryLimits.MaxBytes applies when smaller.
	MaxBytes int64
}

// FetchManual sends f's request with SendMapped and returns the UTCP
// manual of the answer, read with manuals.ParseManual, logging its
// warnings to log. ctx carries the discovery's deadline (and
// httpclient.WithAllowInsecure). A failure to connect or to read the answer, a
// non-2xx answer (its status in the details) or a body that is not a
// manual is discovery_failed; context, template, auth and size errors are
// returned as they are.
func FetchManual(ctx context.Context, client *http.Client, tokens transports.TokenSource, log *slog.Logger, f ManualFetch) (*utcp.Manual, error) {
	fail := func(format string, args ...any) *utcp.Error {
		return utcp.Errorf(utcp.CodeDiscoveryFailed, "%s discovery of manual %q from %s: "+format,
			append([]any{f.Type, f.Manual, utcp.RedactURL(f.URL)}, args...)...)
	}
	resp, err := SendMapped(ctx, client, tokens, f.Method, &MappedRequest{URL: f.URL, Header: f.Header}, f.Auth)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		var uerr *utcp.Error
		if errors.As(err, &uerr) && uerr.Code != utcp.CodeTransportError {
			return nil, err
		}
		return nil, fail("%w", err)
	}
	body, err := transports.ReadManualResponse(ctx, resp, f.MaxBytes)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s discovery from %s: %w", f.Type, utcp.RedactURL(f.URL), ctx.Err())
		}
		if errors.Is(err, transports.ErrTooLarge) {
			return nil, err
		}
		return nil, fail("reading the response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fail("HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), jsonx.Excerpt(body)).WithDetail("status", resp.StatusCode)
	}
	m, warnings, err := transports.ParseManual(ctx, body)
	if err != nil {
		if transports.IsLimit(err) {
			return nil, err
		}
		return nil, fail("the response is not a UTCP manual: %w", err)
	}
	for _, w := range warnings {
		log.Warn("manual served with problems", "manual", f.Manual, "url", utcp.RedactURL(f.URL), "warning", w.String())
	}
	return m, nil
}
