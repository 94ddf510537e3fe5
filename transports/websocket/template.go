package websocket

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Type is the call_template_type this package implements.
const Type = "websocket"

// DefaultTimeout bounds a call (and discovery) whose template sets no
// timeout: python-utcp's 30 seconds.
const DefaultTimeout = 30 * time.Second

// The response_format values.
const (
	FormatJSON = "json"
	FormatText = "text"
	FormatRaw  = "raw"
)

// Template holds the websocket-specific fields of a call template. The
// base fields (name, call_template_type, auth,
// allowed_communication_protocols) live in utcp.CallTemplate.
type Template struct {
	// URL is the WebSocket endpoint, ws:// or wss://. Required.
	URL string `json:"url" jsonschema:"required"`
	// Message, when set, is the request sent for a call: a string or a
	// JSON object or array whose UTCP_ARG_<name>_UTCP_END (or
	// python-utcp's UTCP_ARG_<name>_UTCP_ARG) placeholders take the call's
	// arguments. Null or absent (without Envelope) means the arguments as
	// one JSON object, as python-utcp sends them.
	Message json.RawMessage `json:"message,omitempty"`
	// Envelope sends each call as a utcpd envelope frame
	// {"type":"call","id":..,"tool":..,"arguments":{..}} and reads the
	// answers as envelope frames, correlated by id (see the package
	// documentation): many calls share a connection, streams end with an
	// end frame, and a caller that gives up sends a cancel frame. False
	// (the default, as python-utcp) sends the message, or the arguments as
	// JSON, and takes the first answer frame as the result. A utcpd
	// extension, as in the tcp and udp templates; it excludes Message.
	Envelope bool `json:"envelope,omitempty"`
	// Protocol is a subprotocol to ask for (python-utcp's field).
	Protocol string `json:"protocol,omitempty"`
	// Subprotocols are more subprotocols to offer, in order of preference,
	// after Protocol. A utcpd extension.
	Subprotocols []string `json:"subprotocols,omitempty"`
	// KeepAlive keeps one connection per manual open across calls, with
	// a ping heartbeat. Nil (absent) means true; false opens a connection
	// per call.
	KeepAlive *bool `json:"keep_alive,omitempty"`
	// ResponseFormat says how an answer frame becomes a value without
	// Envelope: "json" (the frame must be JSON), "text"
	// (the frame as a string), "raw" (text frames as strings, binary
	// frames as base64); empty means JSON when the frame parses and text
	// otherwise.
	ResponseFormat string `json:"response_format,omitempty"`
	// Timeout bounds one call, from connecting to its last message, and
	// discovery, in seconds as python-utcp's websocket template counts
	// them (fractions allowed). Zero means DefaultTimeout.
	Timeout float64 `json:"timeout,omitempty"`
	// Headers are sent with the opening handshake.
	Headers map[string]string `json:"headers,omitempty"`
	// HeaderFields must be empty: arguments cannot become headers of a
	// connection that several calls share. Present for compatibility with
	// python-utcp templates that write it as null or [].
	HeaderFields []string `json:"header_fields,omitempty"`
	// AllowInsecure permits plain ws:// to hosts that are not loopback. A
	// utcpd extension.
	AllowInsecure bool `json:"allow_insecure,omitempty"`
}

// handshakeHeaders are set by the WebSocket handshake itself; a template
// may not set them.
var handshakeHeaders = []string{"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol"}

// Validate checks the template as written (before variable substitution).
// Errors name the field.
func (t *Template) Validate() error {
	if err := httpcall.ValidateTemplateURL(t.URL, "ws", "wss"); err != nil {
		return err
	}
	if err := httpcall.ValidateHeaders("headers", t.Headers); err != nil {
		return err
	}
	for k := range t.Headers {
		if slices.Contains(handshakeHeaders, http.CanonicalHeaderKey(k)) {
			return fmt.Errorf("field headers: %q is set by the WebSocket handshake (use protocol or subprotocols for Sec-WebSocket-Protocol)", k)
		}
	}
	if len(t.HeaderFields) > 0 {
		return errors.New("field header_fields is not supported by websocket: a connection is shared by many calls, so arguments cannot become handshake headers; put the values in the message instead")
	}
	for _, p := range t.protocols() {
		if !httpclient.ValidHeaderName(p) {
			return fmt.Errorf("field protocol/subprotocols: %q is not a valid subprotocol name", p)
		}
	}
	switch t.ResponseFormat {
	case "", FormatJSON, FormatText, FormatRaw:
	default:
		return fmt.Errorf("field response_format: %q is not one of json, text, raw", t.ResponseFormat)
	}
	if t.Timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	if t.hasMessage() {
		switch bytes.TrimSpace(t.Message)[0] {
		case '"', '{', '[':
		default:
			return errors.New("field message must be a string, an object or an array")
		}
		if t.Envelope {
			return errors.New("field envelope excludes message: the envelope carries the arguments itself")
		}
	}
	return nil
}

// protocols returns the subprotocols to offer, without duplicates.
func (t *Template) protocols() []string {
	var out []string
	for _, p := range append([]string{t.Protocol}, t.Subprotocols...) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func (t *Template) keepAlive() bool { return t.KeepAlive == nil || *t.KeepAlive }

// envelope reports whether calls use the utcpd envelope.
func (t *Template) envelope() bool { return t.Envelope }

// hasMessage reports whether the template sets a message (not null).
func (t *Template) hasMessage() bool {
	m := bytes.TrimSpace(t.Message)
	return len(m) > 0 && !bytes.Equal(m, []byte("null"))
}

func (t *Template) timeout() time.Duration {
	if t.Timeout > 0 {
		return time.Duration(t.Timeout * float64(time.Second))
	}
	return DefaultTimeout
}

// connKey identifies a shareable connection: the manual and everything
// that shapes the connection (URL, subprotocols, handshake headers, auth,
// allow_insecure, envelope or not).
func connKey(manual string, spec *Template, auth *utcp.Auth) string {
	b, _ := json.Marshal(struct {
		URL       string
		Protocols []string
		Headers   map[string]string
		Auth      *utcp.Auth
		Insecure  bool
		Envelope  bool
	}{spec.URL, spec.protocols(), spec.Headers, auth, spec.AllowInsecure, spec.envelope()})
	sum := sha256.Sum256(b)
	return manual + "\x00" + hex.EncodeToString(sum[:])
}

// ParseTemplate decodes and validates a websocket call template (see
// transports.DecodeTemplate) and returns it with Spec set to a *Template.
// A template of another call_template_type is an invalid_template error.
func ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	tmpl, _, err := transports.DecodeTemplateOf[Template](raw, Type)
	return tmpl, err
}

// placeholderRE matches UTCP_ARG_<name>_UTCP_END and python-utcp's
// UTCP_ARG_<name>_UTCP_ARG.
var placeholderRE = regexp.MustCompile(`UTCP_ARG_([A-Za-z0-9_.\-]+?)_UTCP_(?:END|ARG)`)

// RenderMessage renders a message template for args:
//
//   - a JSON object or array (or a string holding one, which is how
//     python-utcp writes them) is rendered structurally: a string value
//     that is exactly one placeholder becomes the argument's JSON value
//     (number, object, ... as it is), placeholders inside longer strings
//     (and in object keys) are replaced by the argument as text (strings
//     as they are, other values as JSON); the result is sent as compact
//     JSON, so argument values are always escaped and can never change
//     the message's structure;
//   - any other string is rendered as text: each placeholder is replaced
//     by the argument as text.
//
// A placeholder naming a missing (or null) argument is an
// invalid_arguments error naming it.
func RenderMessage(message json.RawMessage, args map[string]any) ([]byte, error) {
	var tmpl any
	dec := json.NewDecoder(bytes.NewReader(message))
	dec.UseNumber()
	if err := dec.Decode(&tmpl); err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidTemplate, "websocket: field message is not valid JSON: %w", err)
	}
	if s, ok := tmpl.(string); ok {
		trimmed := strings.TrimSpace(s)
		if !strings.HasPrefix(trimmed, "{") && !strings.HasPrefix(trimmed, "[") {
			return renderText(s, args)
		}
		inner := json.NewDecoder(strings.NewReader(trimmed))
		inner.UseNumber()
		var v any
		if inner.Decode(&v) != nil || inner.More() {
			return renderText(s, args)
		}
		tmpl = v
	}
	out, err := renderValue(tmpl, args)
	if err != nil {
		return nil, err
	}
	return jsonx.Marshal(out)
}

func missingArg(name string) error {
	return utcp.NewError(utcp.CodeInvalidArguments, "websocket: the message needs argument %q, which the call does not have", name).WithDetail("missing", []string{name})
}

// argText renders an argument for text substitution.
func argText(args map[string]any, name string) (string, error) {
	s, ok := jsonx.ArgString(args[name])
	if !ok {
		return "", missingArg(name)
	}
	return s, nil
}

func renderText(s string, args map[string]any) ([]byte, error) {
	var firstErr error
	out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		v, err := argText(args, name)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return []byte(out), nil
}

func renderValue(v any, args map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := placeholderRE.FindStringSubmatchIndex(x); m != nil && m[0] == 0 && m[1] == len(x) {
			name := x[m[2]:m[3]]
			val, ok := args[name]
			if !ok || val == nil {
				return nil, missingArg(name)
			}
			return val, nil
		}
		b, err := renderText(x, args)
		return string(b), err
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			key, err := renderText(k, args)
			if err != nil {
				return nil, err
			}
			if out[string(key)], err = renderValue(e, args); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = renderValue(e, args); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}
