package streamablehttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "streamable_http"

// Defaults of the streamable_http call template (python-utcp's).
const (
	DefaultMethod      = "GET"
	DefaultContentType = "application/octet-stream"
	DefaultChunkSize   = 4096
	DefaultTimeout     = 60 * time.Second
)

// Template holds the streamable_http-specific fields of a call template.
// The base fields (name, call_template_type, auth,
// allowed_communication_protocols) live in utcp.CallTemplate.
//
// After ParseTemplate, HTTPMethod is upper case and HTTPMethod,
// ContentType and ChunkSize carry their defaults when the template left
// them out.
type Template struct {
	// URL is the request URL. It may contain {name} placeholders, each
	// replaced by the escaped argument of that name. Required.
	URL string `json:"url" jsonschema:"required"`
	// HTTPMethod is GET (the default) or POST. Lower case is accepted.
	HTTPMethod string `json:"http_method,omitempty"`
	// ContentType is the request body's Content-Type when the headers set
	// none (default application/octet-stream). A JSON type sends the body
	// argument as JSON; other types send a string as it is and other
	// values as JSON text.
	ContentType string `json:"content_type,omitempty"`
	// ChunkSize is the largest raw chunk delivered, in bytes (default
	// 4096). It applies only to responses that are neither JSON, NDJSON
	// nor an event stream.
	ChunkSize int `json:"chunk_size,omitempty"`
	// Timeout bounds a whole call, its stream included, in milliseconds
	// (default 60000).
	Timeout float64 `json:"timeout,omitempty"`
	// Headers are static request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// BodyField names the argument sent as the request body; empty means
	// none.
	BodyField string `json:"body_field,omitempty"`
	// HeaderFields names the arguments sent as request headers.
	HeaderFields []string `json:"header_fields,omitempty"`
	// AllowInsecure permits plain http to hosts that are not loopback. A
	// utcpd extension.
	AllowInsecure bool `json:"allow_insecure,omitempty"`
}

// Validate checks the template as written (before variable substitution).
// Errors name the field.
func (t *Template) Validate() error {
	if err := httpcall.ValidateTemplateURL(t.URL, "http", "https"); err != nil {
		return err
	}
	switch strings.ToUpper(t.HTTPMethod) {
	case "", "GET", "POST":
	default:
		return fmt.Errorf("field http_method: %q is not GET or POST", t.HTTPMethod)
	}
	if !httpclient.ValidHeaderValue(t.ContentType) {
		return errors.New("field content_type contains a line break")
	}
	if t.ChunkSize < 0 {
		return errors.New("field chunk_size must not be negative")
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	if err := httpcall.ValidateHeaders("headers", t.Headers); err != nil {
		return err
	}
	for _, k := range t.HeaderFields {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field header_fields: %q is not a valid header name", k)
		}
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
	if t.ChunkSize == 0 {
		t.ChunkSize = DefaultChunkSize
	}
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Millisecond))
	}
	return DefaultTimeout
}

func (t *Template) mapping() *httpcall.Mapping {
	return &httpcall.Mapping{
		URL:           t.URL,
		Headers:       t.Headers,
		HeaderFields:  t.HeaderFields,
		BodyField:     t.BodyField,
		ContentType:   t.ContentType,
		AllowInsecure: t.AllowInsecure,
	}
}

// ParseTemplate decodes and validates a streamable_http call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template
// whose defaults are filled in. A template of another call_template_type
// is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, spec, err := transports.DecodeTemplateOf[Template](raw, Type)
	if err != nil {
		return tmpl, err
	}
	spec.applyDefaults()
	return tmpl, nil
}
