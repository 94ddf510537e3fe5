package daemon

import (
	"context"
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

// reloadToolsets installs the toolsets of a reloaded configuration (s:
// the settings of its gateway section) and reads the stored ones again
// (a config file toolset added or removed changes which stored ones it
// shadows). Toolsets that fail to install keep the last good ones.
func (d *Daemon) reloadToolsets(ctx context.Context, s *Settings) {
	tstore, _ := d.store.(gateway.ToolsetStore)
	if err := d.g.SetToolsets(s.Toolsets, tstore); err != nil {
		d.log.Error("reloading the toolsets failed; the last good ones keep serving", "err", err)
		return
	}
	if err := d.g.RestoreToolsets(ctx); err != nil {
		d.log.Warn("reading the stored toolsets after a reload", "err", err)
	}
	d.log.Info("toolsets reloaded", "config_toolsets", len(s.Toolsets))
}
