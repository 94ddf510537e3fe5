package gateway

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// ToolsetStore persists the toolsets created through the admin API
// (store/sqlite and store/postgres implement it). Specs are kept as the
// JSON given, validated before they are put.
type ToolsetStore interface {
	// ListToolsets returns every stored toolset, name → spec JSON.
	ListToolsets(ctx context.Context) (map[string]json.RawMessage, error)
	// PutToolset creates or replaces one; durable when it returns nil.
	PutToolset(ctx context.Context, name string, spec json.RawMessage) error
	// DeleteToolset removes one; a missing one is a not_found error.
	DeleteToolset(ctx context.Context, name string) error
	// WatchToolsets signals (coalesced) after another process sharing
	// the store may have changed the toolsets; the receiver lists them
	// again. Closed when ctx ends or the store closes. A single-process
	// store may never signal.
	WatchToolsets(ctx context.Context) <-chan struct{}
}

// ToolsetInfo describes one toolset for the admin API.
type ToolsetInfo struct {
	Name   string      `json:"name"`
	Source string      `json:"source"`
	Spec   ToolsetSpec `json:"spec"`
}

// toolsetTable is the gateway's toolsets: the config file's (read-only
// over the admin API, and winning over a stored one of the same name) and
// the admin API's (persisted in store when set).
type toolsetTable struct {
	// toolGen moves on every change of the tool set or of the toolsets;
	// a Toolset's cache is valid for one value.
	toolGen atomic.Uint64
	once    sync.Once

	mu     sync.Mutex
	config map[string]*Toolset
	api    map[string]*Toolset
	store  ToolsetStore
	follow sync.Once
}

// sets returns the table, following the tool set from the first use.
func (g *Gateway) toolsets() *toolsetTable {
	g.sets.once.Do(func() {
		g.Subscribe(func() { g.sets.toolGen.Add(1) })
	})
	return &g.sets
}

// SetToolsets installs the config file's toolsets (each validated; an
// invalid one fails the whole call and nothing changes) and the store of
// the admin API's (nil: they are kept in memory only). Call
// RestoreToolsets to load the stored ones.
func (g *Gateway) SetToolsets(config map[string]ToolsetSpec, store ToolsetStore) error {
	m := make(map[string]*Toolset, len(config))
	for _, name := range slices.Sorted(maps.Keys(config)) {
		if err := ValidateToolset(name, config[name]); err != nil {
			return err
		}
		m[name] = &Toolset{g: g, name: name, spec: config[name], source: ToolsetSourceConfig}
	}
	t := g.toolsets()
	t.mu.Lock()
	t.config, t.store = m, store
	t.mu.Unlock()
	g.changed()
	return nil
}

// RestoreToolsets loads the stored toolsets and from then on follows the
// changes other processes sharing the store make (WatchToolsets), until
// Close. A stored toolset that no longer validates, or that a config file
// toolset of the same name shadows, is skipped with a warning.
func (g *Gateway) RestoreToolsets(ctx context.Context) error {
	t := g.toolsets()
	t.mu.Lock()
	st := t.store
	t.mu.Unlock()
	if st == nil {
		return nil
	}
	var ch <-chan struct{}
	t.follow.Do(func() { ch = st.WatchToolsets(g.life) })
	if err := g.reloadToolsets(ctx, st); err != nil {
		return err
	}
	if ch != nil {
		g.goBackground(func() {
			for range ch {
				ctx, cancel := context.WithTimeout(g.life, time.Minute)
				if err := g.reloadToolsets(ctx, st); err != nil && g.life.Err() == nil {
					g.log.Warn("reloading the stored toolsets after another replica changed them", "err", err)
				}
				cancel()
			}
		})
	}
	return nil
}

func (g *Gateway) reloadToolsets(ctx context.Context, st ToolsetStore) error {
	raw, err := st.ListToolsets(ctx)
	if err != nil {
		return err
	}
	t := g.toolsets()
	m := make(map[string]*Toolset, len(raw))
	t.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if _, shadowed := t.config[name]; shadowed {
			g.log.Warn("a stored toolset is shadowed by the config file's toolset of the same name", "toolset", name)
			continue
		}
		spec, err := ParseToolsetSpec(name, raw[name])
		if err != nil {
			g.log.Warn("a stored toolset does not load; skipped", "toolset", name, "err", err)
			continue
		}
		m[name] = &Toolset{g: g, name: name, spec: spec, source: ToolsetSourceAPI}
	}
	t.api = m
	t.mu.Unlock()
	g.changed()
	return nil
}

// ToolsetFor returns the toolset called name as Toolset does, for the
// caller in ctx: an API key with a toolsets list (APIKey.Toolsets) reaches
// only those, any other is not_found as a toolset that does not exist.
func (g *Gateway) ToolsetFor(ctx context.Context, name string) (*Toolset, error) {
	if k := APIKeyFrom(ctx); k != nil && len(k.Toolsets) > 0 && !slices.Contains(k.Toolsets, name) {
		return nil, utcp.NewError(utcp.CodeNotFound, "no toolset %q", name).WithDetail("toolset", name)
	}
	return g.Toolset(name)
}

// Toolset returns the toolset called name: not_found (details: toolset)
// when there is none. It applies no API key: fronts use ToolsetFor.
func (g *Gateway) Toolset(name string) (*Toolset, error) {
	t := g.toolsets()
	t.mu.Lock()
	ts, ok := t.config[name]
	if !ok {
		ts, ok = t.api[name]
	}
	t.mu.Unlock()
	if !ok {
		return nil, utcp.NewError(utcp.CodeNotFound, "no toolset %q", name).WithDetail("toolset", name)
	}
	return ts, nil
}

// Toolsets returns every toolset, sorted by name.
func (g *Gateway) Toolsets() []ToolsetInfo {
	t := g.toolsets()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]ToolsetInfo, 0, len(t.config)+len(t.api))
	for _, m := range []map[string]*Toolset{t.config, t.api} {
		for _, ts := range m {
			if _, shadowed := t.config[ts.name]; shadowed && ts.source == ToolsetSourceAPI {
				continue
			}
			out = append(out, ToolsetInfo{Name: ts.name, Source: ts.source, Spec: ts.spec})
		}
	}
	slices.SortFunc(out, func(a, b ToolsetInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}

// PutToolset creates or replaces the admin API's toolset called name
// (validated; persisted first when a store is set). A toolset of the
// config file is read-only: manual_read_only. With create, an existing
// toolset is manual_exists. It reports whether the toolset is new.
func (g *Gateway) PutToolset(ctx context.Context, name string, spec ToolsetSpec, create bool) (bool, error) {
	if err := ValidateToolset(name, spec); err != nil {
		return false, err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return false, utcp.Errorf(utcp.CodeInvalidRequest, "toolset %q: encoding: %w", name, err)
	}
	t := g.toolsets()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.config[name]; ok {
		return false, readOnlyToolset(name)
	}
	_, exists := t.api[name]
	if exists && create {
		return false, utcp.NewError(utcp.CodeManualExists, "toolset %q exists: PUT /admin/toolsets/%s replaces it", name, name).
			WithDetail("toolset", name)
	}
	if t.store != nil {
		if err := t.store.PutToolset(ctx, name, raw); err != nil {
			return false, err
		}
	}
	api := maps.Clone(t.api)
	if api == nil {
		api = map[string]*Toolset{}
	}
	api[name] = &Toolset{g: g, name: name, spec: spec, source: ToolsetSourceAPI}
	t.api = api
	defer g.changed()
	return !exists, nil
}

// DeleteToolset removes the admin API's toolset called name (from the
// store too): not_found when there is none, manual_read_only for one of
// the config file.
func (g *Gateway) DeleteToolset(ctx context.Context, name string) error {
	t := g.toolsets()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.config[name]; ok {
		return readOnlyToolset(name)
	}
	if _, ok := t.api[name]; !ok {
		return utcp.NewError(utcp.CodeNotFound, "no toolset %q", name).WithDetail("toolset", name)
	}
	if t.store != nil {
		if err := t.store.DeleteToolset(ctx, name); err != nil && utcp.CodeOf(err) != utcp.CodeNotFound {
			return err
		}
	}
	api := maps.Clone(t.api)
	delete(api, name)
	t.api = api
	defer g.changed()
	return nil
}

func readOnlyToolset(name string) error {
	return utcp.NewError(utcp.CodeManualReadOnly, "toolset %q comes from the config file: change it there", name).
		WithDetail("toolset", name).WithDetail("source", ToolsetSourceConfig)
}

// CallTool calls the tool listed as name through the toolset: the meta-
// tools of a search toolset, or a member, by its real qualified name with
// the hidden arguments added (a caller that gives one is refused with
// invalid_arguments) and opts.Toolset set, so the guard chain and the
// audit record see the real name and the toolset. A name the toolset does
// not list is tool_not_found.
func (ts *Toolset) CallTool(ctx context.Context, name string, args map[string]any, opts CallOptions) (*utcp.Result, error) {
	ctx = ts.enter(ctx)
	if ts.Search() {
		switch name {
		case MetaSearchTools, MetaDescribeTool:
			return ts.meta(ctx, name, args)
		case MetaCallTool:
			inner, innerArgs, err := callToolArgs(args)
			if err != nil {
				return nil, err
			}
			name, args = inner, innerArgs
		}
	}
	real, args, err := ts.prepare(ctx, name, args)
	if err != nil {
		return nil, err
	}
	opts.Toolset = ts.name
	return ts.g.CallTool(ctx, real, args, opts)
}

// CallToolStreaming is CallTool as a stream (the meta-tools search_tools
// and describe_tool answer one event).
func (ts *Toolset) CallToolStreaming(ctx context.Context, name string, args map[string]any, opts CallOptions) (transports.Stream, error) {
	ctx = ts.enter(ctx)
	if ts.Search() {
		switch name {
		case MetaSearchTools, MetaDescribeTool:
			res, err := ts.meta(ctx, name, args)
			if err != nil {
				return nil, err
			}
			return &oneEvent{ev: &utcp.Event{Type: "result", Data: res.Value}}, nil
		case MetaCallTool:
			inner, innerArgs, err := callToolArgs(args)
			if err != nil {
				return nil, err
			}
			name, args = inner, innerArgs
		}
	}
	real, args, err := ts.prepare(ctx, name, args)
	if err != nil {
		return nil, err
	}
	opts.Toolset = ts.name
	return ts.g.CallToolStreaming(ctx, real, args, opts)
}

func (ts *Toolset) prepare(ctx context.Context, name string, args map[string]any) (string, map[string]any, error) {
	real, err := ts.Resolve(ctx, name)
	if err != nil {
		return "", nil, err
	}
	args, err = ts.arguments(real, args)
	return real, args, err
}

// callToolArgs reads call_tool's arguments: name and an arguments object.
func callToolArgs(args map[string]any) (string, map[string]any, error) {
	name, _ := args["name"].(string)
	if name == "" {
		return "", nil, utcp.NewError(utcp.CodeInvalidArguments, "call_tool needs \"name\", the tool to call (from search_tools)").
			WithDetail("argument", "name")
	}
	var inner map[string]any
	switch a := args["arguments"].(type) {
	case nil:
	case map[string]any:
		inner = a
	default:
		return "", nil, utcp.NewError(utcp.CodeInvalidArguments, "call_tool's \"arguments\" must be an object").WithDetail("argument", "arguments")
	}
	for k := range args {
		if k != "name" && k != "arguments" {
			return "", nil, utcp.NewError(utcp.CodeInvalidArguments, "call_tool takes \"name\" and \"arguments\", not %q", k).WithDetail("argument", k)
		}
	}
	return name, inner, nil
}

// meta answers search_tools and describe_tool.
func (ts *Toolset) meta(ctx context.Context, name string, args map[string]any) (*utcp.Result, error) {
	switch name {
	case MetaSearchTools:
		q, _ := args["query"].(string)
		limit := 0
		switch v := args["limit"].(type) {
		case json.Number:
			n, _ := strconv.Atoi(v.String())
			limit = n
		case float64:
			limit = int(v)
		case int:
			limit = v
		}
		found := ts.SearchTools(ctx, q, min(max(limit, 0), 100))
		list := make([]any, 0, len(found))
		for _, t := range found {
			list = append(list, map[string]any{"name": t.Name, "description": t.Description, "tags": nonNil(t.Tags)})
		}
		return &utcp.Result{Value: map[string]any{"tools": list}}, nil
	default:
		n, _ := args["name"].(string)
		if n == "" {
			return nil, utcp.NewError(utcp.CodeInvalidArguments, "describe_tool needs \"name\", a tool search_tools found").WithDetail("argument", "name")
		}
		t, err := ts.Tool(ctx, n)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"name": t.Name, "description": t.Description, "tags": nonNil(t.Tags),
			"input_schema": rawOr(t.Inputs, `{"type":"object"}`)}
		if len(t.Outputs) > 0 {
			out["output_schema"] = json.RawMessage(t.Outputs)
		}
		var md struct {
			Annotations json.RawMessage `json:"annotations"`
		}
		if len(t.MCP) > 0 && json.Unmarshal(t.MCP, &md) == nil && len(md.Annotations) > 0 {
			out["annotations"] = md.Annotations
		}
		return &utcp.Result{Value: out}, nil
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func rawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

// metaTools are the tools a search toolset lists.
func metaTools() []*utcp.Tool {
	return []*utcp.Tool{
		{Name: MetaSearchTools, Tags: []string{"read_only"},
			Description: "Search the tools of this toolset: returns the names and descriptions of the tools matching the query (every word must occur in a tool's name, description or tags; an empty query lists them). Then describe_tool gives a tool's input schema and call_tool calls it.",
			Inputs:      json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"words to look for"},"limit":{"type":"integer","minimum":1,"maximum":100,"description":"most tools to return (default 20)"}}}`)},
		{Name: MetaDescribeTool, Tags: []string{"read_only"},
			Description: "Describe one tool of this toolset (a name from search_tools): its description, input schema and output schema.",
			Inputs:      json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the tool's name"}},"required":["name"]}`)},
		{Name: MetaCallTool,
			Description: "Call one tool of this toolset (a name from search_tools) with its arguments (see describe_tool for their schema); returns the tool's result.",
			Inputs:      json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"the tool's name"},"arguments":{"type":"object","description":"the tool's arguments"}},"required":["name"]}`)},
	}
}

// oneEvent is a stream of one event.
type oneEvent struct {
	ev   *utcp.Event
	done bool
}

func (s *oneEvent) Recv() (*utcp.Event, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	return s.ev, nil
}

func (s *oneEvent) Close() error { return nil }

type throughToolsetKey struct{}

// enter marks ctx as a call through the toolset: for an API key with a
// toolsets list (which sees nothing outside its toolsets, ScopeFrom) the
// key's own scope applies again. A key whose list does not name the
// toolset sees nothing through it either (ToolsetFor refuses it first).
func (ts *Toolset) enter(ctx context.Context) context.Context {
	if k := APIKeyFrom(ctx); k == nil || len(k.Toolsets) == 0 || !slices.Contains(k.Toolsets, ts.name) {
		return ctx
	}
	if v, _ := ctx.Value(throughToolsetKey{}).(string); v == ts.name {
		return ctx
	}
	return context.WithValue(ctx, throughToolsetKey{}, ts.name)
}

// noTools is the scope of an API key with a toolsets list outside its
// toolsets: nothing.
var noTools = func() *Scope {
	s, err := NewScope([]string{"!*"}, nil, nil)
	if err != nil {
		panic(err)
	}
	return s
}()

// toolsetOnly reports whether ctx's API key is usable only through its
// toolsets and ctx is not inside one of them.
func toolsetOnly(ctx context.Context) bool {
	k := APIKeyFrom(ctx)
	if k == nil || len(k.Toolsets) == 0 {
		return false
	}
	v, _ := ctx.Value(throughToolsetKey{}).(string)
	return v == "" || !slices.Contains(k.Toolsets, v)
}

// AuthMetadata returns the auth metadata (Gateway.AuthMetadata) of the
// member listed as name, as Tool finds it.
func (ts *Toolset) AuthMetadata(ctx context.Context, name string) (utcp.AuthMetadata, error) {
	ctx = ts.enter(ctx)
	real, err := ts.Resolve(ctx, name)
	if err != nil {
		return utcp.AuthMetadata{}, err
	}
	return ts.g.AuthMetadata(ctx, real)
}
