package front

import (
	"bytes"

	"github.com/utcpd/utcpd/internal/jsonx"
)

// argsPrefix opens the usual call body, as clients write it compactly.
const argsPrefix = `{"arguments":`

// decodeArguments is a quick path for the usual call body,
// {"arguments": {...}} (or {}), holding plain JSON (see
// jsonx.DecodePlain). It returns the arguments exactly as
// httpx.DecodeStrict into a CallRequest would and true, or false when the
// body is anything else (another field, an escape, invalid JSON...),
// which DecodeStrict then decodes, or refuses with its own error.
func decodeArguments(data []byte) (map[string]any, bool) {
	// A compact {"arguments":...} is decoded without the map of its
	// wrapper: what lies between the prefix and the last '}' must be one
	// plain value, so a second member, a duplicate "arguments" or a
	// truncated body fails here and takes the general path below.
	if inner, ok := bytes.CutPrefix(bytes.TrimRight(data, " \t\r\n"), []byte(argsPrefix)); ok && len(inner) > 0 && inner[len(inner)-1] == '}' {
		if v, ok := jsonx.DecodePlain(inner[:len(inner)-1]); ok {
			switch args := v.(type) {
			case nil:
				return nil, true
			case map[string]any:
				return args, true
			}
		}
	}
	v, ok := jsonx.DecodePlain(data)
	top, isMap := v.(map[string]any)
	if !ok || !isMap || len(top) > 1 {
		return nil, false
	}
	if len(top) == 0 {
		return nil, true
	}
	a, present := top["arguments"]
	if !present {
		return nil, false
	}
	switch args := a.(type) {
	case nil:
		return nil, true
	case map[string]any:
		return args, true
	}
	return nil, false
}
