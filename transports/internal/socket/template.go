// Package socket holds what the raw-socket transports (tcp, udp) share
// besides the envelope: the checks of their common template fields,
// rendering a request without the envelope, and reading an answer by
// response_format.
package socket

import (
	"errors"
	"fmt"

	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// ValidateTemplate checks the call template fields the tcp and udp
// transports share, as written: host and port (1..65535) are required,
// timeout must not be negative, request_data_format is json or text
// (envelope needs json), response_format is json, text or raw, and
// response_byte_format, when set, is utf-8. Errors name the field.
func ValidateTemplate(host string, port int, timeout float64, requestFormat string, envelope bool, responseFormat string, byteFormat *string) error {
	if host == "" {
		return errors.New("field host is required")
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("field port is required and must be 1..65535 (got %d)", port)
	}
	if timeout < 0 {
		return errors.New("field timeout must not be negative")
	}
	switch requestFormat {
	case "", "json":
	case "text":
		if envelope {
			return errors.New("field envelope needs request_data_format json")
		}
	default:
		return fmt.Errorf("field request_data_format: %q is not one of json, text", requestFormat)
	}
	switch responseFormat {
	case "", "json", "text", "raw":
	default:
		return fmt.Errorf("field response_format: %q is not one of json, text, raw", responseFormat)
	}
	if byteFormat != nil {
		switch *byteFormat {
		case "utf-8", "utf8", "UTF-8":
		default:
			return fmt.Errorf("field response_byte_format: %q is not supported (use utf-8 or null)", *byteFormat)
		}
	}
	return nil
}

// CheckHost refuses a host that is not loopback unless
// allowInsecure is set: proto (TCP, UDP) carries no TLS. The error is
// invalid_template, prefixed by typ, with the host in its details.
func CheckHost(typ, proto, host string, allowInsecure bool) error {
	if allowInsecure || httpclient.IsLoopbackHost(host) {
		return nil
	}
	return utcp.NewError(utcp.CodeInvalidTemplate, "%s: host %q is not loopback: %s carries no TLS, so utcpd reaches only localhost, 127.0.0.0/8 and ::1 unless the template sets \"allow_insecure\": true", typ, host, proto).WithDetail("host", host)
}
