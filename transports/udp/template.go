package udp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/socket"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "udp"

// DefaultTimeout bounds a call (and discovery) whose template sets no
// timeout: python-utcp's 30000 ms.
const DefaultTimeout = 30 * time.Second

// MaxDatagram is the largest UDP payload over IPv4, and the default and
// upper bound of max_datagram_size.
const MaxDatagram = 65507

// DefaultMaxResponseSize caps what one call collects over all its
// datagrams when the template sets no max_response_size.
const DefaultMaxResponseSize = 16 << 20

// The request_data_format values.
const (
	RequestJSON = "json"
	RequestText = "text"
)

// The response_format values.
const (
	FormatJSON = "json"
	FormatText = "text"
	FormatRaw  = "raw"
)

// Template holds the udp-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
type Template struct {
	// Host is the server's host name or IP address. Required. Hosts that
	// are not literally loopback need AllowInsecure.
	Host string `json:"host" jsonschema:"required"`
	// Port is the server's UDP port, 1 to 65535. Required.
	Port int `json:"port" jsonschema:"required"`
	// Timeout bounds one call, from sending to its last datagram, and
	// discovery, in milliseconds. Zero means DefaultTimeout.
	Timeout float64 `json:"timeout,omitempty"`
	// RequestDataFormat is "json" (the default: the arguments as a JSON
	// object, or the utcpd envelope when Envelope is set) or "text" (the
	// rendered RequestDataTemplate).
	RequestDataFormat string `json:"request_data_format,omitempty"`
	// RequestDataTemplate is the text request of format "text", with
	// UTCP_ARG_<name>_UTCP_END (or UTCP_ARG_<name>_UTCP_ARG) placeholders.
	// Without it a text request is the argument values joined by spaces.
	RequestDataTemplate string `json:"request_data_template,omitempty"`
	// Envelope sends each call as a utcpd envelope datagram and reads the
	// answers as envelope datagrams until the call's result, error or end
	// (see the package documentation). A utcpd extension; it needs
	// request_data_format json.
	Envelope bool `json:"envelope,omitempty"`
	// NumberOfResponseDatagrams is how many datagrams answer a call
	// without the envelope: nil means 1, 0 means fire-and-forget (the call
	// returns null once the request is sent).
	NumberOfResponseDatagrams *int `json:"number_of_response_datagrams,omitempty"`
	// ResponseFormat converts an answer that is not an envelope: "json",
	// "text" or "raw" (base64); empty means JSON when it parses, text when
	// it is UTF-8, base64 otherwise.
	ResponseFormat string `json:"response_format,omitempty"`
	// ResponseByteFormat is python-utcp's field: "utf-8" (or absent) is
	// accepted; null is read as response_format raw.
	ResponseByteFormat *string `json:"response_byte_format,omitempty"`
	// MaxDatagramSize caps one incoming datagram, in bytes; a larger one
	// fails the call with payload_too_large. Zero means MaxDatagram.
	MaxDatagramSize int `json:"max_datagram_size,omitempty"`
	// MaxResponseSize caps the bytes one call collects over all its
	// datagrams. Zero means DefaultMaxResponseSize.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`
	// AllowInsecure permits hosts that are not loopback: UDP carries no
	// TLS, so requests and answers cross the network in clear text.
	AllowInsecure bool `json:"allow_insecure,omitempty"`

	rawBytes bool // response_byte_format was an explicit null
}

// Validate checks the template as written. Errors name the field.
func (t *Template) Validate() error {
	if err := socket.ValidateTemplate(t.Host, t.Port, t.Timeout, t.RequestDataFormat, t.Envelope, t.ResponseFormat, t.ResponseByteFormat); err != nil {
		return err
	}
	if n := t.NumberOfResponseDatagrams; n != nil && (*n < 0 || *n > 1024) {
		return fmt.Errorf("field number_of_response_datagrams must be 0..1024 (got %d)", *n)
	}
	if t.MaxDatagramSize < 0 || t.MaxDatagramSize > MaxDatagram {
		return fmt.Errorf("field max_datagram_size must be 1..%d", MaxDatagram)
	}
	if t.MaxResponseSize < 0 {
		return errors.New("field max_response_size must not be negative")
	}
	return nil
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Millisecond))
	}
	return DefaultTimeout
}

func (t *Template) maxDatagram() int {
	if t.MaxDatagramSize > 0 {
		return t.MaxDatagramSize
	}
	return MaxDatagram
}

func (t *Template) maxResponse() int64 {
	if t.MaxResponseSize > 0 {
		return t.MaxResponseSize
	}
	return DefaultMaxResponseSize
}

func (t *Template) datagrams() int {
	if t.NumberOfResponseDatagrams == nil {
		return 1
	}
	return *t.NumberOfResponseDatagrams
}

func (t *Template) responseFormat() string {
	if t.ResponseFormat == "" && t.rawBytes {
		return FormatRaw
	}
	return t.ResponseFormat
}

func (t *Template) addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// ParseTemplate decodes and validates a udp call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, spec, err := transports.DecodeTemplateOf[Template](raw, Type)
	if err != nil {
		return tmpl, err
	}
	spec.rawBytes = jsonx.ExplicitNull(raw, "response_byte_format")
	return tmpl, nil
}

// checkHost refuses hosts that are not loopback unless allow_insecure.
func checkHost(t *Template) error {
	return socket.CheckHost("udp", "UDP", t.Host, t.AllowInsecure)
}

// RenderRequest builds the request datagram of a call without the
// envelope, exactly as tcp.RenderRequest does: format json is the
// arguments as a compact JSON object; format text replaces each
// UTCP_ARG_<name>_UTCP_END (or _UTCP_ARG) placeholder of tmpl by the
// argument as text, or joins the argument values by spaces when tmpl is
// empty. A placeholder naming a missing argument is an invalid_arguments
// error naming it.
func RenderRequest(format, tmpl string, args map[string]any) ([]byte, error) {
	return socket.RenderRequest("udp", format, tmpl, args)
}
