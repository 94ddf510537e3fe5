package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/utcpd/utcpd/utcp"
)

// ToolsetSpec is one toolset as configured (gateway.toolsets.NAME in the
// config file, or the body of PUT /admin/toolsets/NAME): a virtual server
// that shows a chosen part of the registry, with its own names,
// descriptions, fixed arguments and annotations.
//
// Membership: a tool is in the toolset when its qualified name matches
// one Include glob or it carries one of Tags, and its qualified name
// matches no Exclude glob. Tools registered later join when they match. A
// glob's "*" matches any run of characters (dots and slashes included),
// "?" any one character; every other character is itself.
//
// Rename, Description and Hidden are keyed by the real qualified name of
// a member. Rename gives the name the toolset lists it under (the MCP
// name rule: [A-Za-z0-9_.-], 1 to 128 characters); Description replaces
// its description; Hidden fixes arguments: each is removed from the
// listed input schema (properties and required), always sent with the
// fixed value, and a caller that supplies one is refused with
// invalid_arguments. Annotations (an MCP ToolAnnotations object) are the
// defaults of every member: a hint a tool's MCP server set wins.
// Discovery "search" lists the three meta-tools search_tools,
// describe_tool and call_tool instead of the members.
type ToolsetSpec struct {
	Include     []string                  `json:"include,omitempty"`
	Exclude     []string                  `json:"exclude,omitempty"`
	Tags        []string                  `json:"tags,omitempty"`
	Rename      map[string]string         `json:"rename,omitempty"`
	Description map[string]string         `json:"description,omitempty"`
	Hidden      map[string]map[string]any `json:"hidden,omitempty"`
	Annotations map[string]any            `json:"annotations,omitempty"`
	Discovery   string                    `json:"discovery,omitempty"`
}

// DiscoverySearch is the ToolsetSpec.Discovery value that lists the
// meta-tools instead of the members (progressive discovery).
const DiscoverySearch = "search"

// The meta-tools of a toolset with Discovery "search".
const (
	MetaSearchTools  = "search_tools"
	MetaDescribeTool = "describe_tool"
	MetaCallTool     = "call_tool"
)

// Toolset sources (ToolsetInfo.Source).
const (
	ToolsetSourceConfig = "config" // the config file: read-only over the admin API
	ToolsetSourceAPI    = "api"    // the admin API, persisted in the store
)

var toolsetNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// listedNameRE is the MCP tool name rule.
var listedNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// knownAnnotations are the keys of an MCP ToolAnnotations object.
var knownAnnotations = map[string]string{
	"title": "string", "readOnlyHint": "bool", "destructiveHint": "bool", "idempotentHint": "bool", "openWorldHint": "bool",
}

// ValidToolsetName reports whether name can name a toolset: 1 to 64 of
// [A-Za-z0-9_-] (it is a path segment of /mcp/{toolset}).
func ValidToolsetName(name string) bool { return toolsetNameRE.MatchString(name) }

// ParseToolsetSpec decodes one toolset's JSON strictly (an unknown key is
// an error) and validates it (ValidateToolset).
func ParseToolsetSpec(name string, raw json.RawMessage) (ToolsetSpec, error) {
	var spec ToolsetSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&spec); err != nil {
		return spec, utcp.Errorf(utcp.CodeInvalidRequest, "toolset %q: %v", name, err).WithDetail("toolset", name)
	}
	if dec.More() {
		return spec, utcp.NewError(utcp.CodeInvalidRequest, "toolset %q: trailing data after the object", name).WithDetail("toolset", name)
	}
	return spec, ValidateToolset(name, spec)
}

// ValidateToolset checks a toolset: its name (ValidToolsetName); that it
// selects something (an include glob or a tag); every glob; every listed
// name of Rename (the MCP name rule, and no two members under one name,
// nor a renamed member under another member's real name when that one is
// kept); that the keys of Rename, Description and Hidden are members by
// the include and exclude globs (when the toolset selects by globs only);
// hidden argument names; the annotations; discovery ("" or "search"). The
// error is an invalid_request *utcp.Error naming the toolset and field.
func ValidateToolset(name string, s ToolsetSpec) error {
	bad := func(field, format string, args ...any) error {
		return utcp.NewError(utcp.CodeInvalidRequest, "toolset %q: %s: %s", name, field, fmt.Sprintf(format, args...)).
			WithDetail("toolset", name).WithDetail("field", field)
	}
	if !ValidToolsetName(name) {
		return utcp.NewError(utcp.CodeInvalidRequest, "toolset name %q: must be 1 to 64 letters, digits, '_' or '-'", name).
			WithDetail("toolset", name).WithDetail("field", "name")
	}
	if len(s.Include) == 0 && len(s.Tags) == 0 {
		return bad("include", "the toolset selects no tools: give include globs (such as [\"demo.*\"]) or tags")
	}
	for field, globs := range map[string][]string{"include": s.Include, "exclude": s.Exclude} {
		for _, g := range globs {
			if err := checkToolsetGlob(g); err != nil {
				return bad(field, "glob %q: %v", g, err)
			}
		}
	}
	for _, t := range s.Tags {
		if strings.TrimSpace(t) == "" {
			return bad("tags", "a tag is empty")
		}
	}
	member := func(real string) bool {
		return matchAny(s.Include, real) && !matchAny(s.Exclude, real)
	}
	checkKeys := func(field string, keys []string) error {
		for _, k := range keys {
			if k == "" {
				return bad(field, "a tool name is empty")
			}
			if len(s.Tags) == 0 && !member(k) {
				return bad(field, "%q is not in the toolset (it matches no include glob, or an exclude glob): keys are real qualified names of members", k)
			}
		}
		return nil
	}
	if err := checkKeys("rename", slices.Sorted(maps.Keys(s.Rename))); err != nil {
		return err
	}
	if err := checkKeys("description", slices.Sorted(maps.Keys(s.Description))); err != nil {
		return err
	}
	if err := checkKeys("hidden", slices.Sorted(maps.Keys(s.Hidden))); err != nil {
		return err
	}
	listed := map[string]string{}
	for _, real := range slices.Sorted(maps.Keys(s.Rename)) {
		to := s.Rename[real]
		if !listedNameRE.MatchString(to) {
			return bad("rename", "%q → %q: a listed name is 1 to 128 of [A-Za-z0-9_.-]", real, to)
		}
		if other, ok := listed[to]; ok {
			return bad("rename", "%q and %q are both renamed to %q: names inside a toolset must be distinct", other, real, to)
		}
		listed[to] = real
	}
	for _, to := range slices.Sorted(maps.Keys(listed)) {
		// A member named exactly to, kept under its own name, would be
		// listed twice.
		if _, renamed := s.Rename[to]; !renamed && exactly(s.Include, to) && !matchAny(s.Exclude, to) {
			return bad("rename", "%q is renamed to %q, which is another member's name: names inside a toolset must be distinct", listed[to], to)
		}
	}
	for _, real := range slices.Sorted(maps.Keys(s.Hidden)) {
		for arg := range s.Hidden[real] {
			if strings.TrimSpace(arg) == "" {
				return bad("hidden", "%q: an argument name is empty", real)
			}
		}
	}
	for k, v := range s.Annotations {
		typ, ok := knownAnnotations[k]
		if !ok {
			return bad("annotations", "unknown annotation %q (known: destructiveHint, idempotentHint, openWorldHint, readOnlyHint, title)", k)
		}
		switch v.(type) {
		case bool:
			if typ != "bool" {
				return bad("annotations", "%s must be a string", k)
			}
		case string:
			if typ != "string" {
				return bad("annotations", "%s must be true or false", k)
			}
		default:
			return bad("annotations", "%s must be a %s", k, map[string]string{"bool": "true or false", "string": "string"}[typ])
		}
	}
	switch s.Discovery {
	case "", DiscoverySearch:
	default:
		return bad("discovery", "%q is not a discovery mode: use \"search\" (or leave it out to list the tools)", s.Discovery)
	}
	return nil
}

// exactly reports whether globs holds name as a glob without wildcards.
func exactly(globs []string, name string) bool {
	return slices.Contains(globs, name)
}

// checkToolsetGlob is checkGlob (the key scopes' rule: no white space,
// control or reserved characters, no "!": a toolset has exclude for that)
// and at most 256 bytes.
func checkToolsetGlob(g string) error {
	if len(g) > 256 {
		return fmt.Errorf("longer than 256 characters")
	}
	return checkGlob(g)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if matchGlob(g, name) {
			return true
		}
	}
	return false
}

// matchGlob matches name against pattern: '*' is any run of bytes, '?'
// any one byte (names are compared byte for byte).
func matchGlob(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Toolset is the view of one toolset over the gateway: which tools it
// holds (by their real qualified names), how it lists them, and the map
// from a listed name back to the real one. Get one with Gateway.Toolset;
// it follows the registry (a tool registered later joins when it
// matches). Safe for concurrent use.
type Toolset struct {
	g      *Gateway
	name   string
	spec   ToolsetSpec
	source string

	mu    sync.Mutex
	gen   uint64 // the gateway's tool generation the cache was built at
	built bool
	cache *toolsetCache
}

// toolsetCache is a Toolset's listing at one tool generation.
type toolsetCache struct {
	listed []*utcp.Tool          // members in listed form, sorted by listed name
	byName map[string]*utcp.Tool // listed name → listed form
	real   map[string]string     // listed name → real qualified name
	defs   map[string]*utcp.Tool // listed name → the real tool (scopes decide by it)
}

// Name is the toolset's name.
func (ts *Toolset) Name() string { return ts.name }

// Spec returns the toolset's configuration (a copy of its maps is not
// made: do not modify it).
func (ts *Toolset) Spec() ToolsetSpec { return ts.spec }

// Source is ToolsetSourceConfig or ToolsetSourceAPI.
func (ts *Toolset) Source() string { return ts.source }

// Search reports whether the toolset lists the meta-tools (Discovery
// "search").
func (ts *Toolset) Search() bool { return ts.spec.Discovery == DiscoverySearch }

// Contains reports whether the tool t (its real qualified name and tags)
// is a member.
func (ts *Toolset) Contains(t *utcp.Tool) bool {
	if matchAny(ts.spec.Exclude, t.Name) {
		return false
	}
	if matchAny(ts.spec.Include, t.Name) {
		return true
	}
	for _, tag := range ts.spec.Tags {
		if slices.Contains(t.Tags, tag) {
			return true
		}
	}
	return false
}

// ListedName is the name the toolset lists the member real under.
func (ts *Toolset) ListedName(real string) string {
	if to, ok := ts.spec.Rename[real]; ok {
		return to
	}
	return real
}

// current returns the cache for the gateway's present tools.
func (ts *Toolset) current() *toolsetCache {
	gen := ts.g.sets.toolGen.Load()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.built && ts.gen == gen {
		return ts.cache
	}
	c := &toolsetCache{byName: map[string]*utcp.Tool{}, real: map[string]string{}, defs: map[string]*utcp.Tool{}}
	renamedTo := map[string]bool{}
	for _, to := range ts.spec.Rename {
		renamedTo[to] = true
	}
	// Every tool (no caller's scope): the callers' scopes filter the
	// cache (visible).
	for _, t := range ts.g.ListTools(context.Background()) {
		if !ts.Contains(t) {
			continue
		}
		listed := ts.ListedName(t.Name)
		if _, renamed := ts.spec.Rename[t.Name]; !renamed && renamedTo[listed] {
			// Another member is renamed to this one's name: the rename
			// wins, this one is not listed.
			ts.g.log.Warn("toolset: a member is not listed, another is renamed to its name", "toolset", ts.name, "tool", t.Name)
			continue
		}
		if _, dup := c.real[listed]; dup {
			continue
		}
		lt := ts.listedForm(t, listed)
		c.real[listed] = t.Name
		c.defs[listed] = t
		c.byName[listed] = lt
		c.listed = append(c.listed, lt)
	}
	sort.Slice(c.listed, func(i, j int) bool { return c.listed[i].Name < c.listed[j].Name })
	ts.cache, ts.gen, ts.built = c, gen, true
	return c
}

// listedForm returns a copy of t as the toolset lists it.
func (ts *Toolset) listedForm(t *utcp.Tool, listed string) *utcp.Tool {
	out := *t
	out.Name = listed
	if d, ok := ts.spec.Description[t.Name]; ok {
		out.Description = d
	}
	if hidden := ts.spec.Hidden[t.Name]; len(hidden) > 0 {
		out.Inputs = hideArguments(t.Inputs, hidden)
	}
	if len(ts.spec.Annotations) > 0 {
		out.MCP = withAnnotations(t.MCP, ts.spec.Annotations)
	}
	return &out
}

// hideArguments removes the hidden arguments from an input schema's
// properties and required.
func hideArguments(schema json.RawMessage, hidden map[string]any) json.RawMessage {
	var m map[string]json.RawMessage
	if len(schema) == 0 || json.Unmarshal(schema, &m) != nil || m == nil {
		return schema
	}
	if raw, ok := m["properties"]; ok {
		var props map[string]json.RawMessage
		if json.Unmarshal(raw, &props) == nil && props != nil {
			for k := range hidden {
				delete(props, k)
			}
			m["properties"], _ = json.Marshal(props)
		}
	}
	if raw, ok := m["required"]; ok {
		var req []string
		if json.Unmarshal(raw, &req) == nil {
			req = slices.DeleteFunc(req, func(k string) bool { _, h := hidden[k]; return h })
			if len(req) == 0 {
				delete(m, "required")
			} else {
				m["required"], _ = json.Marshal(req)
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return b
}

// withAnnotations returns the MCP metadata raw with defaults filling the
// annotations it does not set.
func withAnnotations(raw json.RawMessage, defaults map[string]any) json.RawMessage {
	md := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		_ = json.Unmarshal(raw, &md)
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	for k, v := range defaults {
		if _, set := ann[k]; !set {
			ann[k] = v
		}
	}
	md["annotations"] = ann
	b, err := json.Marshal(md)
	if err != nil {
		return raw
	}
	return b
}

// visible reports whether the caller's scope (ScopeFrom(ctx), entered
// through the toolset) allows the member listed as name.
func (c *toolsetCache) visible(ctx context.Context, name string) bool {
	def, ok := c.defs[name]
	return ok && ScopeFrom(ctx).Allows(def)
}

// Tools returns the members the caller's scope allows (the API key in
// ctx: its scope decides by the real name and tags) in their listed form
// (name, description, schema without hidden arguments, annotations),
// sorted by listed name. The tools are shared: do not modify them.
func (ts *Toolset) Tools(ctx context.Context) []*utcp.Tool {
	ctx = ts.enter(ctx)
	c := ts.current()
	out := make([]*utcp.Tool, 0, len(c.listed))
	for _, t := range c.listed {
		if c.visible(ctx, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// Member is one member of a toolset: the name it is listed under and its
// real qualified name.
type Member struct {
	Listed    string `json:"name"`
	Qualified string `json:"qualified"`
}

// Members returns every member now (no caller's scope applies: for the
// admin), sorted by listed name.
func (ts *Toolset) Members() []Member {
	c := ts.current()
	out := make([]Member, len(c.listed))
	for i, t := range c.listed {
		out[i] = Member{Listed: t.Name, Qualified: c.real[t.Name]}
	}
	return out
}

// Listed returns what a front lists for the toolset: the meta-tools for
// Discovery "search", else Tools.
func (ts *Toolset) Listed(ctx context.Context) []*utcp.Tool {
	if ts.Search() {
		return metaTools()
	}
	return ts.Tools(ctx)
}

// Tool returns the member listed as name, in listed form; a name that is
// not listed (a real name outside the toolset, or a renamed member's real
// name), or that the caller's scope does not allow, is tool_not_found.
func (ts *Toolset) Tool(ctx context.Context, name string) (*utcp.Tool, error) {
	ctx = ts.enter(ctx)
	c := ts.current()
	if t, ok := c.byName[name]; ok && c.visible(ctx, name) {
		return t, nil
	}
	return nil, ts.notFound(name)
}

// Resolve maps a listed name to the member's real qualified name, as Tool
// finds it.
func (ts *Toolset) Resolve(ctx context.Context, name string) (string, error) {
	ctx = ts.enter(ctx)
	c := ts.current()
	if real, ok := c.real[name]; ok && c.visible(ctx, name) {
		return real, nil
	}
	return "", ts.notFound(name)
}

func (ts *Toolset) notFound(name string) error {
	return utcp.NewError(utcp.CodeToolNotFound, "no tool %q in toolset %q", name, ts.name).
		WithDetail("tool", name).WithDetail("toolset", ts.name)
}

// arguments checks the caller's arguments for the member real and adds
// its hidden ones: a caller that supplies a hidden argument is refused
// with invalid_arguments.
func (ts *Toolset) arguments(real string, args map[string]any) (map[string]any, error) {
	hidden := ts.spec.Hidden[real]
	if len(hidden) == 0 {
		return args, nil
	}
	for _, k := range slices.Sorted(maps.Keys(hidden)) {
		if _, ok := args[k]; ok {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "argument %q is fixed by toolset %q and may not be given", k, ts.name).
				WithDetail("argument", k).WithDetail("toolset", ts.name)
		}
	}
	out := make(map[string]any, len(args)+len(hidden))
	maps.Copy(out, args)
	for k, v := range hidden {
		out[k] = v
	}
	return out, nil
}

// SearchTools ranks the members by query (the words of query found in
// the listed name, the description and the tags; all words must occur
// somewhere) and returns at most limit (0: 20), best first, in listed
// form. An empty query lists the members in name order.
func (ts *Toolset) SearchTools(ctx context.Context, query string, limit int) []*utcp.Tool {
	ctx = ts.enter(ctx)
	if limit <= 0 {
		limit = 20
	}
	words := strings.Fields(strings.ToLower(query))
	type hit struct {
		t     *utcp.Tool
		score int
	}
	var hits []hit
	c := ts.current()
	for _, t := range c.listed {
		if !c.visible(ctx, t.Name) {
			continue
		}
		name, desc := strings.ToLower(t.Name), strings.ToLower(t.Description)
		tags := strings.ToLower(strings.Join(t.Tags, " "))
		score := 0
		for _, w := range words {
			s := 0
			if strings.Contains(name, w) {
				s += 3
			}
			if strings.Contains(tags, w) {
				s += 2
			}
			if strings.Contains(desc, w) {
				s++
			}
			if s == 0 {
				score = -1
				break
			}
			score += s
		}
		if score >= 0 {
			hits = append(hits, hit{t, score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].score > hits[j].score })
	out := make([]*utcp.Tool, 0, min(limit, len(hits)))
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].t)
	}
	return out
}
