package tcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/socket"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "tcp"

// DefaultTimeout bounds a call (and discovery) whose template sets no
// timeout: python-utcp's 30000 ms.
const DefaultTimeout = 30 * time.Second

// DefaultMaxResponseSize caps one answer frame (and a stream read whole)
// when the template sets no max_response_size. python-utcp uses 65536;
// utcpd allows more so that megabyte-sized results work out of the box.
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

// The framing_strategy values.
const (
	FramingLengthPrefix = "length_prefix"
	FramingDelimiter    = "delimiter"
	FramingFixedLength  = "fixed_length"
	FramingStream       = "stream"
)

// Template holds the tcp-specific fields of a call template. The base
// fields (name, call_template_type, auth, allowed_communication_protocols)
// live in utcp.CallTemplate.
type Template struct {
	// Host is the server's host name or IP address. Required. Hosts that
	// are not literally loopback need AllowInsecure.
	Host string `json:"host" jsonschema:"required"`
	// Port is the server's TCP port, 1 to 65535. Required.
	Port int `json:"port" jsonschema:"required"`
	// Timeout bounds one call, from connecting to its last frame, and
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
	// Envelope sends each call as a utcpd envelope frame
	// {"type":"call","id":..,"tool":..,"arguments":{..}} and reads the
	// answers as envelope frames (see the package documentation). A utcpd
	// extension; it needs request_data_format json and a framing other
	// than fixed_length.
	Envelope bool `json:"envelope,omitempty"`
	// ResponseFormat converts an answer that is not an envelope: "json"
	// (it must parse), "text" (as a string), "raw" (base64); empty means
	// JSON when it parses, text when it is UTF-8, base64 otherwise.
	ResponseFormat string `json:"response_format,omitempty"`
	// ResponseByteFormat is python-utcp's field: "utf-8" (or absent) is
	// accepted; null is read as response_format raw.
	ResponseByteFormat *string `json:"response_byte_format,omitempty"`
	// FramingStrategy delimits frames in both directions: length_prefix,
	// delimiter, fixed_length or stream (the default, python-utcp's: the
	// request is sent as it is and the answer is read until the server
	// closes the connection).
	FramingStrategy string `json:"framing_strategy,omitempty"`
	// LengthPrefixBytes is the size of the length prefix: 1, 2, 4 (the
	// default) or 8.
	LengthPrefixBytes int `json:"length_prefix_bytes,omitempty"`
	// LengthPrefixEndian is "big" (the default) or "little".
	LengthPrefixEndian string `json:"length_prefix_endian,omitempty"`
	// MessageDelimiter ends each frame of framing delimiter; default "\n".
	MessageDelimiter string `json:"message_delimiter,omitempty"`
	// InterpretEscapeSequences reads MessageDelimiter as a Go/JSON-style
	// escaped string ("\\n" is a newline). Nil means true.
	InterpretEscapeSequences *bool `json:"interpret_escape_sequences,omitempty"`
	// FixedMessageLength is the size of every answer of framing
	// fixed_length. Required with it.
	FixedMessageLength int `json:"fixed_message_length,omitempty"`
	// MaxResponseSize caps one answer frame and a stream read whole, in
	// bytes. Zero means DefaultMaxResponseSize.
	MaxResponseSize int64 `json:"max_response_size,omitempty"`
	// KeepAlive pools connections of framings that delimit answers
	// (length_prefix, delimiter, fixed_length) for later calls of the
	// manual. Nil means true; stream framing never pools.
	KeepAlive *bool `json:"keep_alive,omitempty"`
	// AllowInsecure permits hosts that are not loopback: TCP carries no
	// TLS, so requests and answers cross the network in clear text.
	AllowInsecure bool `json:"allow_insecure,omitempty"`

	rawBytes bool // response_byte_format was an explicit null

	keyOnce sync.Once
	key     string // connection settings hash, see poolKey
}

// Validate checks the template as written. Errors name the field.
func (t *Template) Validate() error {
	if err := socket.ValidateTemplate(t.Host, t.Port, t.Timeout, t.RequestDataFormat, t.Envelope, t.ResponseFormat, t.ResponseByteFormat); err != nil {
		return err
	}
	switch t.FramingStrategy {
	case "", FramingStream:
		if t.Envelope {
			return errors.New("field envelope needs framing_strategy length_prefix or delimiter")
		}
	case FramingLengthPrefix:
		switch t.LengthPrefixBytes {
		case 0, 1, 2, 4, 8:
		default:
			return fmt.Errorf("field length_prefix_bytes: %d is not one of 1, 2, 4, 8", t.LengthPrefixBytes)
		}
		switch t.LengthPrefixEndian {
		case "", "big", "little":
		default:
			return fmt.Errorf("field length_prefix_endian: %q is not one of big, little", t.LengthPrefixEndian)
		}
	case FramingDelimiter:
		if t.MessageDelimiter != "" && t.delimiter() == "" {
			return errors.New("field message_delimiter must not be empty")
		}
	case FramingFixedLength:
		if t.FixedMessageLength <= 0 {
			return errors.New("field fixed_message_length is required (> 0) with framing_strategy fixed_length")
		}
		if t.Envelope {
			return errors.New("field envelope needs framing_strategy length_prefix or delimiter")
		}
	default:
		return fmt.Errorf("field framing_strategy: %q is not one of length_prefix, delimiter, fixed_length, stream", t.FramingStrategy)
	}
	if t.MaxResponseSize < 0 {
		return errors.New("field max_response_size must not be negative")
	}
	if t.FixedMessageLength > 0 && int64(t.FixedMessageLength) > t.maxResponse() {
		return errors.New("field fixed_message_length exceeds max_response_size")
	}
	return nil
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Millisecond))
	}
	return DefaultTimeout
}

func (t *Template) maxResponse() int64 {
	if t.MaxResponseSize > 0 {
		return t.MaxResponseSize
	}
	return DefaultMaxResponseSize
}

func (t *Template) framing() string {
	if t.FramingStrategy == "" {
		return FramingStream
	}
	return t.FramingStrategy
}

func (t *Template) prefixBytes() int {
	if t.LengthPrefixBytes == 0 {
		return 4
	}
	return t.LengthPrefixBytes
}

// delimiter returns the frame delimiter, escapes interpreted.
func (t *Template) delimiter() string {
	d := t.MessageDelimiter
	if d == "" {
		return "\n"
	}
	if t.InterpretEscapeSequences == nil || *t.InterpretEscapeSequences {
		if s, err := strconv.Unquote(`"` + d + `"`); err == nil {
			return s
		}
	}
	return d
}

func (t *Template) keepAlive() bool {
	return (t.KeepAlive == nil || *t.KeepAlive) && t.framing() != FramingStream
}

func (t *Template) responseFormat() string {
	if t.ResponseFormat == "" && t.rawBytes {
		return FormatRaw
	}
	return t.ResponseFormat
}

// addr returns host:port.
func (t *Template) addr() string {
	return joinHostPort(t.Host, t.Port)
}

// poolKey identifies connections that calls may share: the manual and
// everything that shapes the connection.
func poolKey(manual string, t *Template) string {
	t.keyOnce.Do(func() { t.key = connHash(t) })
	return manual + "\x00" + t.key
}

func connHash(t *Template) string {
	b, _ := json.Marshal(struct {
		A        string
		F        string
		P        int
		E        string
		D        string
		N        int
		Envelope bool
	}{t.addr(), t.framing(), t.prefixBytes(), t.LengthPrefixEndian, t.delimiter(), t.FixedMessageLength, t.Envelope})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseTemplate decodes and validates a tcp call template (see
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
	return socket.CheckHost("tcp", "TCP", t.Host, t.AllowInsecure)
}

func joinHostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// RenderRequest builds the request payload of a call without the
// envelope: format json is the arguments as a compact JSON object; format
// text replaces each UTCP_ARG_<name>_UTCP_END (or _UTCP_ARG) placeholder
// of tmpl by the argument as text (strings as they are, numbers in plain
// decimal, other values as JSON), or, when tmpl is empty, joins the
// argument values by spaces in the order of their names. A placeholder
// naming a missing argument is an invalid_arguments error naming it.
func RenderRequest(format, tmpl string, args map[string]any) ([]byte, error) {
	return socket.RenderRequest("tcp", format, tmpl, args)
}
