// Package httpcall is what the HTTP-based transports share to make a
// call: the UTCP mapping of a call's arguments onto a request (Mapping),
// sending it with auth and one oauth2 retry (SendMapped), the error of a
// non-2xx answer (StatusError), the lifetime of one streaming call (Call)
// and of a streaming transport's client (Base), and the discovery of a
// manual served over HTTP as is (FetchManual).
package httpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// This file holds the UTCP rules for mapping a call's arguments onto an
// HTTP request, shared by the HTTP-based transports (sse,
// streamable_http): header_fields arguments become headers, the body_field
// argument becomes the body, {name} URL placeholders take their arguments,
// and every other argument becomes a query parameter.

// URLPlaceholder matches a {name} placeholder of a call template URL; the
// first submatch is the name.
var URLPlaceholder = regexp.MustCompile(`\{([^{}/?#&=]+)\}`)

// Mapping is what an HTTP-based call template says about turning a
// call's arguments into a request.
type Mapping struct {
	// URL may hold {name} placeholders.
	URL string
	// Headers are static request headers.
	Headers map[string]string
	// HeaderFields names the arguments sent as headers.
	HeaderFields []string
	// BodyField names the argument sent as the body; "" means none.
	BodyField string
	// ContentType is the body's Content-Type when Headers set none; it
	// also selects the body encoding (see EncodeBody).
	ContentType string
	// AllowInsecure is the template's allow_insecure (see httpclient.CheckURL).
	AllowInsecure bool
}

// MappedRequest is the outcome of Mapping.Map.
type MappedRequest struct {
	// URL is the request URL, placeholders filled and the query appended.
	URL *url.URL
	// Header holds the static headers, the header_fields arguments and,
	// when a body is sent, the Content-Type.
	Header http.Header
	// Body is the encoded body argument, nil when none is sent.
	Body []byte
}

// Map applies the UTCP argument mapping to args (which it does not modify):
//
//  1. each argument named in HeaderFields is removed and sent as a header
//     (rendered with jsonx.ArgString; nil is left out, a value with CR, LF or NUL
//     is invalid_arguments);
//  2. the BodyField argument is removed and becomes the body, encoded with
//     EncodeBody for ContentType, which is then set as Content-Type unless
//     Headers set one;
//  3. each {name} of URL is replaced by the argument name rendered with
//     jsonx.ArgString, path-escaped before the query and query-escaped inside
//     it, and the argument is removed; a missing one is invalid_arguments
//     naming it;
//  4. every remaining non-nil argument becomes a query parameter (keys
//     sorted, values rendered with jsonx.ArgString), appended to any query the
//     URL already has.
//
// The final URL must pass httpclient.CheckURL (invalid_template otherwise).
func (m *Mapping) Map(args map[string]any) (*MappedRequest, error) {
	rest := make(map[string]any, len(args))
	for k, v := range args {
		rest[k] = v
	}
	header := http.Header{}
	for k, v := range m.Headers {
		header.Set(k, v)
	}
	for _, name := range m.HeaderFields {
		v, ok := rest[name]
		if !ok {
			continue
		}
		delete(rest, name)
		s, ok := jsonx.ArgString(v)
		if !ok {
			continue
		}
		if !httpclient.ValidHeaderValue(s) {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "argument %q: a header value must not contain line breaks or NUL", name).WithDetail("argument", name)
		}
		header.Set(name, s)
	}
	var body []byte
	if m.BodyField != "" {
		if v, ok := rest[m.BodyField]; ok {
			delete(rest, m.BodyField)
			b, err := EncodeBody(m.ContentType, v)
			if err != nil {
				return nil, utcp.Errorf(utcp.CodeInvalidArguments, "argument %q: cannot encode the body: %w", m.BodyField, err).WithDetail("argument", m.BodyField)
			}
			body = b
			if header.Get("Content-Type") == "" && m.ContentType != "" {
				header.Set("Content-Type", m.ContentType)
			}
		}
	}
	raw, err := fillURL(m.URL, rest)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "url: %w", err)
	}
	if err := httpclient.CheckURL(u, m.AllowInsecure); err != nil {
		return nil, err
	}
	if q := EncodeQuery(rest); q != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&" + q
		} else {
			u.RawQuery = q
		}
	}
	return &MappedRequest{URL: u, Header: header, Body: body}, nil
}

// fillURL replaces the placeholders of raw and removes the arguments used
// from args.
func fillURL(raw string, args map[string]any) (string, error) {
	query := strings.IndexByte(raw, '?')
	var b strings.Builder
	var missing []string
	used := map[string]bool{}
	last := 0
	for _, loc := range URLPlaceholder.FindAllStringSubmatchIndex(raw, -1) {
		name := raw[loc[2]:loc[3]]
		s, ok := jsonx.ArgString(args[name])
		if !ok {
			missing = append(missing, name)
			continue
		}
		b.WriteString(raw[last:loc[0]])
		if query >= 0 && loc[0] > query {
			b.WriteString(url.QueryEscape(s))
		} else {
			if err := CheckPathValue(name, s); err != nil {
				return "", err
			}
			b.WriteString(url.PathEscape(s))
		}
		last = loc[1]
		used[name] = true
	}
	if len(missing) > 0 {
		quoted := make([]string, len(missing))
		for i, n := range missing {
			quoted[i] = strconv.Quote(n)
		}
		return "", utcp.NewError(utcp.CodeInvalidArguments, "missing required path parameter %s", strings.Join(quoted, ", ")).
			WithDetail("missing", missing)
	}
	b.WriteString(raw[last:])
	for name := range used {
		delete(args, name)
	}
	return b.String(), nil
}

// CheckPathValue refuses (invalid_arguments) the value s of URL path
// placeholder name when it could name another resource than the one the
// template means: a value that is, or holds a segment that is, "." or
// "..", once percent-decoded (repeatedly, as some servers and proxies
// decode more than once) and split at "/" and "\". The value is still
// path-escaped, so "/" in it never adds a segment for a server that
// decodes once; a plain "a/b" is accepted.
func CheckPathValue(name, s string) error {
	d := s
	for range 4 {
		u, err := url.PathUnescape(d)
		if err != nil || u == d {
			break
		}
		d = u
	}
	for seg := range strings.FieldsFuncSeq(d, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == "." || seg == ".." {
			return utcp.NewError(utcp.CodeInvalidArguments,
				"argument %q: a URL path parameter must not be, or contain a segment that is, \".\" or \"..\" (even percent-encoded): the request would reach another path", name).
				WithDetail("argument", name)
		}
	}
	return nil
}

// EncodeQuery renders args as a query string with sorted keys; nil values
// are left out and the others are rendered with jsonx.ArgString.
func EncodeQuery(args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
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

// MediaType returns the lower-case media type of a Content-Type value,
// without parameters.
func MediaType(contentType string) string {
	// This is what mime.ParseMediaType returns as the media type when it
	// succeeds, without building the parameter map it also returns.
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// IsJSONMediaType reports whether contentType is application/json or a
// +json type.
func IsJSONMediaType(contentType string) bool {
	mt := MediaType(contentType)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// EncodeBody renders the body argument v for contentType: JSON for a JSON
// type (a json.RawMessage as it is); for other types a string or []byte as
// it is, an object as a form for application/x-www-form-urlencoded, and
// anything else rendered with jsonx.ArgString (nil as an empty body).
func EncodeBody(contentType string, v any) ([]byte, error) {
	if IsJSONMediaType(contentType) {
		if raw, ok := v.(json.RawMessage); ok {
			return raw, nil
		}
		return jsonx.Marshal(v)
	}
	switch x := v.(type) {
	case string:
		return []byte(x), nil
	case []byte:
		return x, nil
	case map[string]any:
		if MediaType(contentType) == "application/x-www-form-urlencoded" {
			return []byte(EncodeQuery(x)), nil
		}
	}
	if s, ok := jsonx.ArgString(v); ok {
		return []byte(s), nil
	}
	return []byte{}, nil
}

// DecodeBody turns a whole response body into a call result: nil for an
// empty body, the decoded JSON value (numbers as json.Number) when the
// content type is JSON and the body is one JSON value, and the body as a
// string otherwise.
func DecodeBody(contentType string, body []byte) any {
	if len(body) == 0 {
		return nil
	}
	if IsJSONMediaType(contentType) {
		if v, ok := jsonx.DecodeValue(body); ok {
			return v
		}
	}
	return string(body)
}

// ValidateTemplateURL checks the url field of an HTTP-based template as
// written: present, and, unless it holds a variable ($), an absolute URL
// of one of schemes once its {name} placeholders are filled. The error
// names the field.
func ValidateTemplateURL(raw string, schemes ...string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("field url is required")
	}
	if strings.Contains(raw, "$") {
		return nil
	}
	u, err := url.Parse(URLPlaceholder.ReplaceAllString(raw, "x"))
	if err != nil {
		return fmt.Errorf("field url: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	ok := false
	for _, s := range schemes {
		ok = ok || s == scheme
	}
	if !ok || u.Host == "" {
		return fmt.Errorf("field url: %q is not an absolute %s URL", raw, strings.Join(schemes, " or "))
	}
	return nil
}

// ValidateHeaders checks the header names and values of a template field.
func ValidateHeaders(field string, headers map[string]string) error {
	for k, v := range headers {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field %s: %q is not a valid header name", field, k)
		}
		if !httpclient.ValidHeaderValue(v) {
			return fmt.Errorf("field %s: the value of %q contains a line break or NUL", field, k)
		}
	}
	return nil
}

// SendMapped sends one request for mr with method (a nil Body sends none)
// through client: it sets User-Agent "utcpd" unless the headers set one,
// applies auth with httpclient.ApplyAuth, and, when an oauth2-protected backend
// answers 401, drops the token from tokens and retries once with a fresh
// one. The response is returned whatever its status; the caller reads and
// closes its body.
//
// The end of ctx returns an error wrapping context.Cause(ctx); a redirect
// refused by httpclient.New's policy, a refused connection or any other
// failure to send is a *utcp.TransportError naming the method and the URL
// (without its query). Errors of httpclient.ApplyAuth are returned as they are.
func SendMapped(ctx context.Context, client *http.Client, tokens transports.TokenSource, method string, mr *MappedRequest, auth *utcp.Auth) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		var body io.Reader
		if mr.Body != nil {
			body = bytes.NewReader(mr.Body)
		}
		req, err := http.NewRequestWithContext(ctx, method, mr.URL.String(), body)
		if err != nil {
			return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "cannot build the request: %w", err)
		}
		req.Header = mr.Header.Clone()
		if req.Header.Get("User-Agent") == "" {
			req.Header.Set("User-Agent", "utcpd")
		}
		if err := httpclient.ApplyAuth(ctx, req, auth, tokens); err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s %s: %w", method, utcp.RedactURL(mr.URL), context.Cause(ctx))
			}
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			var uerr *utcp.Error
			if errors.As(err, &uerr) { // a refused redirect
				return nil, &utcp.TransportError{Err: uerr}
			}
			return nil, &utcp.TransportError{Err: fmt.Errorf("%s %s: %w", method, utcp.RedactURL(mr.URL), err)}
		}
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 && auth != nil && auth.Type == utcp.AuthOAuth2 && tokens != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			tokens.Invalidate(auth)
			continue
		}
		return resp, nil
	}
}

// StatusError is the error for a response that is not 2xx, given the
// start of its body: a *utcp.ToolError for 4xx (the tool refused: Status,
// the decoded body as Value, an excerpt in the message) and a
// *utcp.TransportError for any other status.
func StatusError(method string, u *url.URL, status int, contentType string, body []byte) error {
	if status >= 400 && status <= 499 {
		return &utcp.ToolError{
			Status:  status,
			Value:   DecodeBody(contentType, body),
			Message: fmt.Sprintf("HTTP %d %s: %s", status, http.StatusText(status), jsonx.Excerpt(body)),
		}
	}
	return &utcp.TransportError{Status: status,
		Err: fmt.Errorf("%s %s answered HTTP %d %s: %s", method, utcp.RedactURL(u), status, http.StatusText(status), jsonx.Excerpt(body))}
}
