package codemode

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/utcpd/utcpd/utcp"
)

// Preamble is the head of the interfaces text: how a program uses the
// sandbox. It is meant for a model's prompt.
const Preamble = `-- utcpd CodeMode: write a Lua 5.1 program; its return value is the result.
-- call_tool("manual.tool", args) calls a tool (args: a table with string keys) and returns its result
--   as Lua values (JSON objects/arrays become tables, null becomes nil). A failure raises an error
--   value {code, message, tool, value}; catch it with pcall(call_tool, name, args).
-- search_tools(query, limit) returns a list of {name, description, tags, inputs, outputs};
-- list_tools() returns the list of tool names.
-- json.encode(value) / json.decode(text); json.null encodes a JSON null. A table with keys 1..n is a
--   JSON array, any other table an object ({} is an empty object).
-- print(...) lines are returned as logs. Available: string, table, math, pairs, ipairs, next, select,
--   type, tostring, tonumber, pcall, xpcall, error, assert, unpack, rawget, rawset, rawequal,
--   setmetatable, getmetatable. Not available: os, io, debug, coroutine, require, load, loadstring.
`

// ToolInterface is one tool's interface text.
type ToolInterface struct {
	// Name is the tool's qualified name.
	Name string `json:"name"`
	// Interface is the Lua-annotated signature and documentation.
	Interface string `json:"interface"`
}

// Interfaces is the answer of GET /v1/codemode/interfaces.
type Interfaces struct {
	// Text is Preamble followed by every tool's interface.
	Text string `json:"text"`
	// Tools are the tools' interfaces, in order.
	Tools []ToolInterface `json:"tools"`
}

// BuildInterfaces returns the interfaces of tools. Each tool reads:
//
//	-- manual.tool: description
//	-- tags: a, b
//	-- args: {city: string, days?: integer}
//	--   city: what the schema's description says
//	-- returns: {temperature: number}
//	call_tool("manual.tool", args)
//
// Types come from the JSON Schemas: string, number, integer, boolean,
// nil (null), T[] (array), {k: T, opt?: T} (object, to three levels),
// "a"|"b" (enum), A|B (anyOf/oneOf), any (no schema).
func BuildInterfaces(tools []*utcp.Tool) Interfaces {
	out := Interfaces{Tools: make([]ToolInterface, 0, len(tools))}
	var all strings.Builder
	all.WriteString(Preamble)
	for _, t := range tools {
		ti := ToolInterface{Name: t.Name, Interface: toolInterface(t)}
		out.Tools = append(out.Tools, ti)
		all.WriteString("\n")
		all.WriteString(ti.Interface)
	}
	out.Text = all.String()
	return out
}

func toolInterface(t *utcp.Tool) string {
	var b strings.Builder
	desc := strings.Join(strings.Fields(t.Description), " ")
	if desc == "" {
		desc = "(no description)"
	}
	fmt.Fprintf(&b, "-- %s: %s\n", t.Name, desc)
	if len(t.Tags) > 0 {
		fmt.Fprintf(&b, "-- tags: %s\n", strings.Join(t.Tags, ", "))
	}
	in := decodeSchema(t.Inputs)
	fmt.Fprintf(&b, "-- args: %s\n", luaType(in, 0))
	if props, ok := in["properties"].(map[string]any); ok {
		for _, k := range sortedKeys(props) {
			p, _ := props[k].(map[string]any)
			if d, _ := p["description"].(string); d != "" {
				fmt.Fprintf(&b, "--   %s: %s\n", k, strings.Join(strings.Fields(d), " "))
			}
		}
	}
	if out := decodeSchema(t.Outputs); len(out) > 0 {
		fmt.Fprintf(&b, "-- returns: %s\n", luaType(out, 0))
	}
	fmt.Fprintf(&b, "call_tool(%q, args)\n", t.Name)
	return b.String()
}

func decodeSchema(raw json.RawMessage) map[string]any {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// luaType renders a JSON Schema as a compact Lua-flavoured type.
func luaType(s map[string]any, depth int) string {
	if len(s) == 0 {
		return "any"
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		parts := make([]string, 0, len(enum))
		for _, e := range enum {
			j, _ := json.Marshal(e)
			parts = append(parts, string(j))
		}
		return strings.Join(parts, "|")
	}
	for _, key := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			parts := make([]string, 0, len(alts))
			for _, a := range alts {
				m, _ := a.(map[string]any)
				parts = append(parts, luaType(m, depth+1))
			}
			return strings.Join(parts, "|")
		}
	}
	switch typ := s["type"].(type) {
	case []any:
		parts := make([]string, 0, len(typ))
		for _, t := range typ {
			c := maps(s)
			c["type"] = t
			parts = append(parts, luaType(c, depth))
		}
		return strings.Join(parts, "|")
	case string:
		switch typ {
		case "null":
			return "nil"
		case "array":
			items, _ := s["items"].(map[string]any)
			it := luaType(items, depth+1)
			if strings.Contains(it, "|") {
				it = "(" + it + ")"
			}
			return it + "[]"
		case "object":
			return objectType(s, depth)
		default:
			return typ
		}
	}
	if _, ok := s["properties"]; ok {
		return objectType(s, depth)
	}
	return "any"
}

func maps(s map[string]any) map[string]any {
	c := make(map[string]any, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

func objectType(s map[string]any, depth int) string {
	props, _ := s["properties"].(map[string]any)
	if len(props) == 0 {
		return "table"
	}
	if depth >= 3 {
		return "table"
	}
	req := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, k := range r {
			if ks, ok := k.(string); ok {
				req[ks] = true
			}
		}
	}
	parts := make([]string, 0, len(props))
	for _, k := range sortedKeys(props) {
		p, _ := props[k].(map[string]any)
		opt := "?"
		if req[k] {
			opt = ""
		}
		parts = append(parts, fmt.Sprintf("%s%s: %s", k, opt, luaType(p, depth+1)))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
