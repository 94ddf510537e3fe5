package front

import "github.com/utcpd/utcpd/internal/jsonx"

// decodeArguments is a quick path for the usual call body,
// {"arguments": {...}} (or {}), holding plain JSON (see
// jsonx.DecodePlain). It returns the arguments exactly as
// httpx.DecodeStrict into a CallRequest would and true, or false when the
// body is anything else (another field, an escape, invalid JSON...),
// which DecodeStrict then decodes, or refuses with its own error.
func decodeArguments(data []byte) (map[string]any, bool) {
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
