package sse

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "sse"

// DefaultRetryTimeout is the reconnection delay used when the template sets
// no retry_timeout and the server sent no retry field (python-utcp's
// default).
const DefaultRetryTimeout = 30 * time.Second

// Template holds the sse-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
type Template struct {
	// URL is the event stream's URL. It may contain {name} placeholders,
	// each replaced by the escaped argument of that name. Required.
	URL string `json:"url" jsonschema:"required"`
	// EventType, when set, keeps only the events of that name; "message"
	// matches events without an event field.
	EventType string `json:"event_type,omitempty"`
	// Reconnect asks for reconnection after a dropped connection, with a
	// Last-Event-ID header. Nil (absent) means false in utcpd.
	Reconnect *bool `json:"reconnect,omitempty"`
	// RetryTimeout is the delay before reconnecting, in milliseconds, when
	// the server set no retry field. Zero means DefaultRetryTimeout.
	RetryTimeout float64 `json:"retry_timeout,omitempty"`
	// Headers are static request headers.
	Headers map[string]string `json:"headers,omitempty"`
	// BodyField names the argument sent as the JSON request body; with a
	// body the request is a POST, without one a GET. Empty means no body.
	BodyField string `json:"body_field,omitempty"`
	// HeaderFields names the arguments sent as request headers.
	HeaderFields []string `json:"header_fields,omitempty"`
	// Timeout, in milliseconds, bounds a whole call, its stream included.
	// Zero means the caller's context alone (and DefaultDiscoveryTimeout
	// for discovery without a deadline). A utcpd extension.
	Timeout float64 `json:"timeout,omitempty"`
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
	if err := httpcall.ValidateHeaders("headers", t.Headers); err != nil {
		return err
	}
	for _, k := range t.HeaderFields {
		if !httpclient.ValidHeaderName(k) {
			return fmt.Errorf("field header_fields: %q is not a valid header name", k)
		}
	}
	if t.RetryTimeout < 0 {
		return errors.New("field retry_timeout must not be negative")
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	return nil
}

func (t *Template) reconnect() bool { return t.Reconnect != nil && *t.Reconnect }

func (t *Template) retryDelay() time.Duration {
	if t.RetryTimeout > 0 {
		return time.Duration(t.RetryTimeout * float64(time.Millisecond))
	}
	return DefaultRetryTimeout
}

func (t *Template) timeout() time.Duration {
	return time.Duration(t.Timeout * float64(time.Millisecond))
}

func (t *Template) mapping() *httpcall.Mapping {
	return &httpcall.Mapping{
		URL:           t.URL,
		Headers:       t.Headers,
		HeaderFields:  t.HeaderFields,
		BodyField:     t.BodyField,
		ContentType:   "application/json",
		AllowInsecure: t.AllowInsecure,
	}
}

// ParseTemplate decodes and validates an sse call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := transports.DecodeTemplateOf[Template](raw, Type)
	return tmpl, err
}
