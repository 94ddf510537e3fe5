package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// mcpKeys are the keys of the gateway section's mcp object.
var mcpKeys = []string{"codemode", "native_names"}

// applyMCPSetting reads the gateway section's mcp object (the /mcp
// front) into s:
//
//	"mcp": {"codemode": true, "native_names": ["everything.srv"]}
//
// codemode offers codemode.run on /mcp (off by default); native_names
// are MCP servers ("manual.server") whose tools /mcp lists exactly as
// the server names them (mcpfront.Options.NativeNames). It returns a
// problem message, "" when the value is good.
func applyMCPSetting(s *settings, v json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return `must be an object such as {"codemode": true, "native_names": ["manual.server"]}`
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := obj[k]
		switch k {
		case "codemode":
			if json.Unmarshal(v, &s.MCPCodeMode) != nil {
				return "mcp.codemode must be true or false"
			}
		case "native_names":
			var names []string
			if json.Unmarshal(v, &names) != nil {
				return `mcp.native_names must be an array of "manual.server" names`
			}
			for _, n := range names {
				if m, srv, ok := strings.Cut(n, "."); !ok || m == "" || srv == "" {
					return fmt.Sprintf("mcp.native_names: %q is not a \"manual.server\" name", n)
				}
			}
			s.MCPNativeNames = names
		default:
			return fmt.Sprintf("unknown field %q in mcp (known: %s)", k, strings.Join(mcpKeys, ", "))
		}
	}
	return ""
}
