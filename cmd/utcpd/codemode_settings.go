package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/api/codemode"
)

// codeModeKeys are the keys of the gateway section's codemode object.
var codeModeKeys = []string{
	"enabled", "default_timeout", "max_timeout", "default_tool_calls", "max_tool_calls",
	"max_instructions", "memory_limit", "max_total_memory", "max_concurrent",
}

// applyCodeModeSetting reads the gateway section's codemode object into s:
//
//	"codemode": {"enabled": true, "default_timeout": "10s", "max_timeout": "60s",
//	             "default_tool_calls": 50, "max_tool_calls": 200,
//	             "max_instructions": 100000000, "memory_limit": 67108864,
//	             "max_total_memory": 268435456, "max_concurrent": 8}
//
// Every key is optional; an absent one keeps api/codemode's default. It
// returns a problem message, "" when the value is good.
func applyCodeModeSetting(s *settings, v json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil || obj == nil {
		return `must be an object such as {"enabled": true, "max_timeout": "60s"}`
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var o codemode.Options
	off := false
	for _, k := range keys {
		v := obj[k]
		switch k {
		case "enabled":
			var b bool
			if json.Unmarshal(v, &b) != nil {
				return "codemode.enabled must be true or false"
			}
			off = !b
		case "default_timeout", "max_timeout":
			d, err := jsonDuration(v)
			if err != nil {
				return fmt.Sprintf("codemode.%s %v", k, err)
			}
			if k == "default_timeout" {
				o.DefaultTimeout = d
			} else {
				o.MaxTimeout = d
			}
		case "default_tool_calls", "max_tool_calls", "max_concurrent":
			var n int
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				return fmt.Sprintf("codemode.%s must be a positive integer", k)
			}
			switch k {
			case "default_tool_calls":
				o.DefaultToolCalls = n
			case "max_tool_calls":
				o.MaxToolCalls = n
			default:
				o.MaxConcurrent = n
			}
		case "max_instructions", "memory_limit", "max_total_memory":
			var n int64
			if json.Unmarshal(v, &n) != nil || n <= 0 {
				return fmt.Sprintf("codemode.%s must be a positive integer", k)
			}
			switch k {
			case "max_instructions":
				o.MaxInstructions = n
			case "memory_limit":
				o.MemoryLimit = n
			default:
				o.MaxTotalMemory = n
			}
		default:
			msg := fmt.Sprintf("unknown field %q in codemode (known: %s)", k, strings.Join(codeModeKeys, ", "))
			return msg
		}
	}
	if o.DefaultTimeout > 0 && o.MaxTimeout > 0 && o.DefaultTimeout > o.MaxTimeout {
		return fmt.Sprintf("codemode.default_timeout %s is longer than codemode.max_timeout %s", o.DefaultTimeout, o.MaxTimeout)
	}
	if o.DefaultToolCalls > 0 && o.MaxToolCalls > 0 && o.DefaultToolCalls > o.MaxToolCalls {
		return fmt.Sprintf("codemode.default_tool_calls %d is more than codemode.max_tool_calls %d", o.DefaultToolCalls, o.MaxToolCalls)
	}
	if limit := cmp.Or(o.MemoryLimit, codemode.DefaultMemoryLimit); o.MaxTotalMemory > 0 && o.MaxTotalMemory < limit {
		return fmt.Sprintf("codemode.max_total_memory %d is less than codemode.memory_limit %d", o.MaxTotalMemory, limit)
	}
	s.CodeMode, s.CodeModeOff = o, off
	return ""
}
