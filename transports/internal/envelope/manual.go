package envelope

import (
	"encoding/json"
	"log/slog"

	"github.com/utcpd/utcpd/internal/jsonx"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/utcp"
)

// EncodeCall is the payload of a call frame of the utcpd envelope: a
// FrameCall frame with id, tool and args (an empty object when nil). JSON
// that args cannot be encoded as is an invalid_arguments error prefixed
// by prefix.
func EncodeCall(prefix, id, tool string, args map[string]any) ([]byte, error) {
	if args == nil {
		args = map[string]any{}
	}
	payload, err := jsonx.Marshal(Frame{Type: FrameCall, ID: id, Tool: tool, Arguments: args})
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidArguments, "%s: arguments are not JSON: %w", prefix, err)
	}
	return payload, nil
}

// ReadManual reads the answer to a socket transport's discovery
// request: an envelope manual frame or a bare UTCP manual, parsed with
// manuals.ParseManual; its warnings are logged on log with the manual's
// name and addr. An answer that is not JSON, an error frame, a frame of
// another type or a document that is not a manual is the error fail
// makes (fail adds the transport, manual and address).
func ReadManual(data []byte, fail func(format string, args ...any) *utcp.Error, log *slog.Logger, manual, addr string) (*utcp.Manual, error) {
	var head struct {
		Type   string          `json:"type"`
		Manual json.RawMessage `json:"manual"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &head) != nil {
		return nil, fail("the answer is not JSON: %s", jsonx.Excerpt(data))
	}
	raw := json.RawMessage(data)
	switch head.Type {
	case FrameManual:
		raw = head.Manual
	case FrameError:
		return nil, fail("the server offers no manual: %s", DecodeWireError(head.Error).Message)
	case "":
	default:
		return nil, fail("the server answered a %q frame, not a manual", head.Type)
	}
	m, warnings, err := manuals.ParseManual(raw)
	if err != nil {
		return nil, fail("the server's manual: %w", err)
	}
	for _, w := range warnings {
		log.Warn("manual served with problems", "manual", manual, "addr", addr, "warning", w.String())
	}
	return m, nil
}
