package daemon

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/manuals"
)

// Toolsets is the gateway section's toolsets object: name → toolset
// (gateway.ToolsetSpec), each a virtual server at /mcp/{name} and
// /v1/toolsets/{name}/...:
//
//	"toolsets": {"mini": {"include": ["demo.add"], "rename": {"demo.add": "plus"}}}
//
// The config file's toolsets are read-only over the admin API and win over
// a stored toolset of the same name.
type Toolsets map[string]gateway.ToolsetSpec

// readToolsets reads the toolsets object v. It returns the toolsets and a
// problem message, "" when v is good: the first toolset (in name order)
// that does not parse or validate (gateway.ParseToolsetSpec).
func readToolsets(v json.RawMessage) (Toolsets, string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return nil, `must be an object of toolsets such as {"mini": {"include": ["demo.*"]}}`
	}
	out := Toolsets{}
	for _, name := range slices.Sorted(maps.Keys(obj)) {
		spec, err := gateway.ParseToolsetSpec(name, obj[name])
		if err != nil {
			return nil, err.Error()
		}
		out[name] = spec
	}
	return out, ""
}

// ConfigToolsets returns the toolsets of cfg's gateway section (none when
// it has none), or the message of the first bad one.
func ConfigToolsets(cfg *manuals.Config) (Toolsets, string) {
	if cfg == nil || len(cfg.Gateway) == 0 {
		return nil, ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(cfg.Gateway, &obj) != nil {
		return nil, ""
	}
	v, ok := obj["toolsets"]
	if !ok || string(v) == "null" {
		return nil, ""
	}
	return readToolsets(v)
}
