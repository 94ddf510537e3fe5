package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "http"

// Defaults of the http call template.
const (
	DefaultMethod      = "GET"
	DefaultContentType = "application/json"
	DefaultBodyField   = "body"
)

// Template holds the http-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
//
// After ParseTemplate, HTTPMethod is upper case and HTTPMethod, ContentType
// and BodyField carry their defaults when the template left them out.
type Template struct {
	// URL is the request URL. It may contain {name} placeholders, each
	// replaced at call time by the escaped argument of that name. Required.
	URL string `json:"url" jsonschema:"required"`
	// HTTPMethod is GET (the default), POST, PUT, DELETE or PATCH. Lower
	// case is accepted.
	HTTPMethod string `json:"http_method,omitempty"`
	// ContentType is the request Content-Type when a body is sent and the
	// headers do not set one (default application/json). A JSON type
	// (application/json, */*+json) sends the body argument as JSON;
	// application/x-www-form-urlencoded sends an object argument as a
	// form; anything else sends a string argument as it is and other
	// values as JSON text.
	ContentType string `json:"content_type,omitempty"`
	// Headers are static request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// BodyField names the argument that becomes the request body (default
	// "body"). Without that argument no body is sent.
	BodyField string `json:"body_field,omitempty"`
	// HeaderFields names the arguments sent as request headers.
	HeaderFields []string `json:"header_fields,omitempty"`
	// CookieFields names the arguments sent as cookies, name=value in
	// one Cookie header in this order (after the template's own Cookie
	// header, if any). A value must be cookie octets (RFC 6265: no
	// spaces, quotes, commas, semicolons or backslashes). A utcpd
	// extension: the OpenAPI converter puts cookie parameters here.
	CookieFields []string `json:"cookie_fields,omitempty"`
	// AuthTools, on a manual template whose URL serves an OpenAPI
	// document, is the auth given to the generated tools whose security
	// scheme it is compatible with (see manuals.ConvertOpenAPI).
	AuthTools *utcp.Auth `json:"auth_tools,omitempty"`
	// Timeout, in milliseconds, bounds the whole request, body included.
	// Zero means the caller's context deadline alone (and 30 s for
	// discovery when the context has none).
	Timeout float64 `json:"timeout,omitempty"`
	// AllowInsecure permits plain http to hosts that are not loopback, for
	// this template's requests and their redirects. A utcpd extension.
	AllowInsecure bool `json:"allow_insecure,omitempty"`

	// plan is what every call of this template shares, computed by
	// ParseTemplate (nil for a Template built otherwise: calls then
	// compute it each time).
	plan *plan
}

var validMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH"}

// placeholder matches a {name} URL placeholder.
var placeholder = regexp.MustCompile(`\{([^{}/?#&=]+)\}`)

// Validate checks the template as written (before variable substitution,
// so a URL holding a variable is only checked for presence). Errors name
// the field.
func (t *Template) Validate() error {
	if strings.TrimSpace(t.URL) == "" {
		return errors.New("field url is required")
	}
	if !strings.Contains(t.URL, "$") {
		u, err := url.Parse(placeholder.ReplaceAllString(t.URL, "x"))
		if err != nil {
			return fmt.Errorf("field url: %w", err)
		}
		if s := strings.ToLower(u.Scheme); (s != "http" && s != "https") || u.Host == "" {
			return fmt.Errorf("field url: %q is not an absolute http(s) URL", t.URL)
		}
	}
	if t.HTTPMethod != "" {
		m := strings.ToUpper(t.HTTPMethod)
		ok := false
		for _, v := range validMethods {
			ok = ok || v == m
		}
		if !ok {
			return fmt.Errorf("field http_method: %q is not one of %s", t.HTTPMethod, strings.Join(validMethods, ", "))
		}
	}
	if !httpclient.ValidHeaderValue(t.ContentType) {
		return errors.New("field content_type contains a line break")
	}
	for k, v := range t.Headers {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field headers: %q is not a valid header name", k)
		}
		if !httpclient.ValidHeaderValue(v) {
			return fmt.Errorf("field headers: the value of %q contains a line break", k)
		}
	}
	for _, k := range t.HeaderFields {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field header_fields: %q is not a valid header name", k)
		}
	}
	for _, k := range t.CookieFields {
		if !httpclient.ValidHeaderName(k) { // a cookie name is a token, as a header name is
			return fmt.Errorf("field cookie_fields: %q is not a valid cookie name", k)
		}
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	if err := transports.ValidateAuth(t.AuthTools); err != nil {
		return fmt.Errorf("field auth_tools: %w", err)
	}
	return nil
}

func (t *Template) applyDefaults() {
	t.HTTPMethod = strings.ToUpper(t.HTTPMethod)
	if t.HTTPMethod == "" {
		t.HTTPMethod = DefaultMethod
	}
	if t.ContentType == "" {
		t.ContentType = DefaultContentType
	}
	if t.BodyField == "" {
		t.BodyField = DefaultBodyField
	}
}

func (t *Template) timeout() time.Duration {
	return time.Duration(t.Timeout * float64(time.Millisecond))
}

// ParseTemplate decodes and validates an http call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template
// whose defaults are filled in. A template of another call_template_type
// is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, spec, err := transports.DecodeTemplateOf[Template](raw, Type)
	if err != nil {
		return tmpl, err
	}
	spec.applyDefaults()
	spec.plan = newPlan(spec)
	return tmpl, nil
}
