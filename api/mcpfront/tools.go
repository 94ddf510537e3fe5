package mcpfront

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/utcp"
)

// MaxNameLength is the longest tool name the MCP name rule allows.
const MaxNameLength = 128

// MetaQualifiedName is the _meta key of every listed tool that holds its
// qualified name (manual.tool).
const MetaQualifiedName = "utcpd/qualified_name"

// MetaTags is the _meta key that holds a tool's tags.
const MetaTags = "utcpd/tags"

// sync makes the SDK server's tool set the Backend's: new and changed
// tools are added, gone ones removed. The SDK sends list_changed.
func (s *Server) sync(ctx context.Context) error {
	tools, err := s.backend.Tools(ctx)
	if err != nil {
		return fmt.Errorf("listing the tools: %w", err)
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	names := s.naming().Names(tools)
	if len(s.opts.NativeNames) > 0 {
		if c := nativeCollisions(s.opts.NativeNames, tools, names); len(c) > 0 {
			s.log.Warn("MCP front: native names collide; the first tool keeps the name", "tools", strings.Join(c, "; "))
		}
	}
	next := make(map[string]published, len(tools))
	for i, t := range tools {
		name := names[i]
		if name == codemode.ToolName && s.opts.CodeMode != nil {
			s.log.Warn("MCP front: tool left out: its name is CodeMode's", "tool", t.Name)
			continue
		}
		mt := MCPTool(name, t)
		fp, err := json.Marshal(mt)
		if err != nil {
			s.log.Warn("MCP front: tool left out: its definition does not encode", "tool", t.Name, "err", err)
			continue
		}
		pub := published{qualified: t.Name, fingerprint: string(fp), def: t}
		if old, ok := s.tools[name]; ok && old.qualified == pub.qualified && old.fingerprint == pub.fingerprint {
			next[name] = old
			continue
		}
		if mt.OutputSchema != nil {
			check, err := newOutputCheck(mt.OutputSchema.(json.RawMessage))
			if err != nil {
				// A schema utcpd cannot check is not a promise it can keep.
				s.log.Warn("MCP front: output schema left out: it does not compile", "tool", t.Name, "err", err)
				mt.OutputSchema = nil
			}
			pub.check = check
		}
		if err := s.addTool(mt, t, pub.check); err != nil {
			s.log.Warn("MCP front: tool left out", "tool", t.Name, "err", err)
			continue
		}
		next[name] = pub
	}
	var gone []string
	for name := range s.tools {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		s.mcp.RemoveTools(gone...)
	}
	s.tools = next
	return nil
}

// naming is the front's Naming.
func (s *Server) naming() Naming {
	return Naming{Short: s.opts.ShortNames, Native: s.opts.NativeNames}
}

// addTool adds or replaces one tool, def as the backend lists it; the SDK
// panics on a definition it refuses, which becomes an error. A call from
// outside def's scope is answered as for a tool the SDK does not have.
func (s *Server) addTool(t *mcp.Tool, def *utcp.Tool, check *outputCheck) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the MCP SDK refused it: %v", v)
		}
	}()
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.serveTool(ctx, req, def, check)
	})
	return nil
}

// serveTool is the handler of the tool def as the backend lists it (the
// SDK's, and the lean path's, lean.go): a call from outside def's scope
// is answered as for a tool the SDK does not have.
func (s *Server) serveTool(ctx context.Context, req *mcp.CallToolRequest, def *utcp.Tool, check *outputCheck) (*mcp.CallToolResult, error) {
	if !s.allowed(ctx, def) {
		return nil, unknownTool(req.Params.Name)
	}
	return s.call(ctx, req, def.Name, check)
}

// ValidName reports whether name fits the MCP tool name rule: 1 to 128
// characters, each one of A-Z a-z 0-9 _ - and '.'.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !validNameByte(name[i]) {
			return false
		}
	}
	return true
}

func validNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// Names returns the MCP name of each tool, in order: its qualified name
// when it fits the MCP rule, else the name sanitised (each byte outside
// the rule becomes '_', cut to leave room) with '_' and 8 hex digits of
// the qualified name's SHA-256 appended. With short, a tool whose name
// without the manual prefix is held by no other tool (and is no other
// tool's qualified name) is listed under that shorter name. The names are
// distinct and depend only on the tool set.
func Names(tools []*utcp.Tool, short bool) []string {
	return Naming{Short: short}.Names(tools)
}

// Naming says how the front names tools (Options.ShortNames and
// Options.NativeNames).
type Naming struct {
	// Short is Options.ShortNames.
	Short bool
	// Native are "manual.server" prefixes whose tools are listed under
	// the rest of their qualified name: the name their MCP server gives
	// them (Options.NativeNames).
	Native []string
}

// Names returns the MCP name of each tool, as the package function Names
// does, except that a tool under one of n.Native is listed under its
// name at its server while that name fits the MCP rule; such names are
// given first (in the order of n.Native, then of tools), so they win over
// every other tool's.
func (n Naming) Names(tools []*utcp.Tool) []string {
	out := make([]string, len(tools))
	taken := make(map[string]bool, len(tools))
	want := make([]string, len(tools))
	for i, t := range tools {
		want[i] = t.Name
	}
	if n.Short {
		qualified := make(map[string]bool, len(tools))
		count := map[string]int{}
		for _, t := range tools {
			qualified[t.Name] = true
			count[shortName(t.Name)]++
		}
		for i, t := range tools {
			sn := shortName(t.Name)
			if sn != t.Name && count[sn] == 1 && !qualified[sn] && ValidName(sn) {
				want[i] = sn
			}
		}
	}
	// Native names first, so that they are the backend's names whatever
	// else is listed.
	for _, prefix := range n.Native {
		for i, t := range tools {
			if rest, ok := strings.CutPrefix(t.Name, prefix+"."); ok && out[i] == "" && ValidName(rest) && !taken[rest] {
				out[i] = rest
				taken[rest] = true
			}
		}
	}
	// Valid names next, so that a mangled name never takes a valid
	// one's place.
	for i, w := range want {
		if out[i] == "" && ValidName(w) && !taken[w] {
			out[i] = w
			taken[w] = true
		}
	}
	// A short name a native one took falls back to the qualified name.
	for i, t := range tools {
		if out[i] == "" && want[i] != t.Name && ValidName(t.Name) && !taken[t.Name] {
			out[i] = t.Name
			taken[t.Name] = true
		}
	}
	for i, t := range tools {
		if out[i] != "" {
			continue
		}
		for n := 8; ; n += 8 {
			name := mangle(t.Name, n)
			if !taken[name] || n >= 64 {
				out[i] = name
				taken[name] = true
				break
			}
		}
	}
	return out
}

// nativeOf returns the native name prefix of tool (one of native), "" if
// none.
func nativeOf(native []string, tool string) string {
	for _, prefix := range native {
		if rest, ok := strings.CutPrefix(tool, prefix+"."); ok && rest != "" {
			return prefix
		}
	}
	return ""
}

// checkNative checks Options.NativeNames: each a "manual.server" prefix
// (a manual name, a dot, a server name), none twice, none inside
// another.
func checkNative(native []string) error {
	for i, p := range native {
		manual, server, ok := strings.Cut(p, ".")
		if !ok || manual == "" || server == "" || utcp.SanitizeName(manual) != manual {
			return fmt.Errorf("mcpfront: native name prefix %q is not <manual>.<server>", p)
		}
		for _, q := range native[:i] {
			if p == q || strings.HasPrefix(p, q+".") || strings.HasPrefix(q, p+".") {
				return fmt.Errorf("mcpfront: native name prefixes %q and %q overlap", q, p)
			}
		}
	}
	return nil
}

// nativeCollisions lists, for the tool set as named, every tool under a
// native prefix that did not get its server's name (another tool holds
// it), and every other tool whose valid qualified name a native name
// took: the collisions New refuses.
func nativeCollisions(native []string, tools []*utcp.Tool, names []string) []string {
	var out []string
	for i, t := range tools {
		prefix := nativeOf(native, t.Name)
		if prefix == "" {
			if ValidName(t.Name) && names[i] != t.Name && names[i] != shortName(t.Name) {
				out = append(out, fmt.Sprintf("%s (a native name took its name)", t.Name))
			}
			continue
		}
		if rest := strings.TrimPrefix(t.Name, prefix+"."); names[i] != rest {
			holder := ""
			for j, n := range names {
				if n == rest {
					holder = tools[j].Name
				}
			}
			if holder == "" {
				out = append(out, fmt.Sprintf("%s (its name %q does not fit the MCP name rule)", t.Name, rest))
			} else {
				out = append(out, fmt.Sprintf("%s (%q is also %s)", t.Name, rest, holder))
			}
		}
	}
	return out
}

// shortName is a qualified name without its manual (up to the first dot).
func shortName(qualified string) string {
	if _, rest, ok := strings.Cut(qualified, "."); ok && rest != "" {
		return rest
	}
	return qualified
}

// mangle sanitises name and appends '_' and hexDigits hex digits of its
// SHA-256, within MaxNameLength.
func mangle(name string, hexDigits int) string {
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:])[:hexDigits]
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		if validNameByte(name[i]) {
			b = append(b, name[i])
		} else {
			b = append(b, '_')
		}
	}
	if len(b) > MaxNameLength-len(suffix) {
		b = b[:MaxNameLength-len(suffix)]
	}
	return string(b) + suffix
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// MCPTool returns the MCP definition of t listed as name: its description
// (or one naming it), its input schema as an object schema, its output
// schema when that is an object schema, and its qualified name and tags
// in _meta. A tool an MCP server listed (utcp.Tool.MCP set) keeps that
// server's title, annotations, icons and _meta (utcpd's two _meta keys
// added); any other tool gets annotations from its tags.
func MCPTool(name string, t *utcp.Tool) *mcp.Tool {
	desc := t.Description
	if strings.TrimSpace(desc) == "" {
		desc = fmt.Sprintf("The tool %s (its manual gives no description).", t.Name)
	}
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	mt := &mcp.Tool{
		Name:        name,
		Description: desc,
		InputSchema: inputSchema(t.Inputs),
		Meta:        mcp.Meta{},
	}
	if md, ok := backendMetadata(t.MCP); ok {
		mt.Title, mt.Annotations, mt.Icons = md.Title, md.Annotations, md.Icons
		maps.Copy(mt.Meta, md.Meta)
	} else {
		mt.Annotations = annotations(t.Tags, httpMethod(t.ToolCallTemplate))
	}
	mt.Meta[MetaQualifiedName] = t.Name
	mt.Meta[MetaTags] = tags
	if out := outputSchema(t.Outputs); out != nil {
		mt.OutputSchema = out
	}
	return mt
}

// metadata is the JSON object of utcp.Tool.MCP (see transports/mcp).
type metadata struct {
	Title       string               `json:"title,omitempty"`
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
	Icons       []mcp.Icon           `json:"icons,omitempty"`
	Meta        mcp.Meta             `json:"_meta,omitempty"`
}

// backendMetadata decodes utcp.Tool.MCP; false when it is empty or not
// such an object.
func backendMetadata(raw json.RawMessage) (metadata, bool) {
	var md metadata
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &md) != nil {
		return metadata{}, false
	}
	return md, true
}

// inputSchema returns raw as an object schema: unchanged when it is one,
// with "type": "object" added when it has no type, and {"type":"object"}
// when it is empty, not an object, or of another type.
func inputSchema(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return objectSchema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return objectSchema
	}
	typ, ok := m["type"]
	if !ok {
		m["type"] = json.RawMessage(`"object"`)
		b, err := json.Marshal(m)
		if err != nil {
			return objectSchema
		}
		return b
	}
	if !isObjectType(typ) {
		return objectSchema
	}
	return raw
}

// outputSchema returns raw when it is an object schema, else nil (MCP
// output schemas describe structuredContent, an object).
func outputSchema(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil
	}
	if typ, ok := m["type"]; !ok || !isObjectType(typ) {
		return nil
	}
	return raw
}

func isObjectType(typ json.RawMessage) bool {
	var s string
	return json.Unmarshal(typ, &s) == nil && s == "object"
}

// annotations turns the tags the MCP client transport derives from
// annotations back into them, and adds what an HTTP tool's method says
// (method "" for other tools): GET and HEAD are read-only, DELETE is
// destructive; nil when neither says anything.
func annotations(tags []string, method string) *mcp.ToolAnnotations {
	has := func(t string) bool { return slices.Contains(tags, t) }
	readOnly, destructive, idempotent, openWorld := has("read_only"), has("destructive"), has("idempotent"), has("open_world")
	switch method {
	case "GET", "HEAD":
		readOnly = readOnly || !destructive
	case "DELETE":
		destructive = destructive || !readOnly
	}
	if !readOnly && !destructive && !idempotent && !openWorld {
		return nil
	}
	// An absent tag says nothing (the hints' defaults apply): only what
	// a tag asserts is set.
	a := &mcp.ToolAnnotations{ReadOnlyHint: readOnly, IdempotentHint: idempotent}
	if destructive && !readOnly {
		a.DestructiveHint = &destructive
	}
	if openWorld {
		a.OpenWorldHint = &openWorld
	}
	return a
}

// httpMethod is the HTTP method of an http tool's call template (upper
// case, GET when it names none), "" for every other tool.
func httpMethod(tmpl *utcp.CallTemplate) string {
	if tmpl == nil || tmpl.Type != "http" {
		return ""
	}
	var t struct {
		Method string `json:"http_method"`
	}
	if len(tmpl.Raw) > 0 && json.Unmarshal(tmpl.Raw, &t) != nil {
		return ""
	}
	if t.Method == "" {
		return "GET"
	}
	return strings.ToUpper(t.Method)
}
