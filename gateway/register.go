package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// RegisterOptions tune one registration.
type RegisterOptions struct {
	// Source records where the manual came from: "config", "dir" or "api".
	Source string
	// Replace allows replacing a registered manual of the same name
	// atomically; without it a taken name is manual_exists.
	Replace bool
	// Manual, when set, is used instead of discovering the manual from
	// its backend (a stored copy served at start while the backend is
	// re-discovered in the background).
	Manual *utcp.Manual
	// Registered, when set, is kept as the manual's registration time.
	Registered time.Time
	// NoPersist skips writing the manual to the store (it came from it).
	NoPersist bool
	// KeepFailed keeps what a failed registration leaves (health.go): a
	// name not registered becomes a failed manual (no tools; listed,
	// retried in the background, removable like any other), and a
	// registered manual that this replaces keeps serving, degraded, while
	// the new template is retried. The error is returned all the same.
	KeepFailed bool

	// expect, set by RefreshManual, is the entry being refreshed: the
	// refresh applies only while that entry is still the registered one,
	// so a manual removed or replaced meanwhile is not brought back.
	expect *registry.Manual
	// stored, set when applying another process's change (follow.go), is
	// the store's record being applied: it applies only while the store
	// still holds that record and the name is not taken by a manual of
	// another source, and the entry keeps the record's times.
	stored *registry.Record
	// rediscover, set by Restore, marks tools from Manual (a stored copy)
	// whose rediscovery is pending: the manual is discovering until then.
	rediscover bool
	// gen, when checkGen is set (a background retry), is the health
	// record's generation the attempt was scheduled for: it applies only
	// while that is still current.
	gen      uint64
	checkGen bool
}

// RegisterResult reports one registration.
type RegisterResult struct {
	// Name is the sanitised manual name.
	Name string `json:"name"`
	// Tools are the qualified names of the registered tools.
	Tools []string `json:"tools"`
	// Warnings name what was dropped or ignored (unknown fields, tools
	// using a protocol the manual does not allow, invalid tool templates).
	Warnings []string `json:"warnings"`
	// Manual is the discovered manual, tool names unqualified.
	Manual *utcp.Manual `json:"-"`
	// Err is set by RegisterManuals for a registration that failed.
	Err error `json:"-"`
}

// manualState is the gateway's per-manual data (registry.Manual.Ext).
type manualState struct {
	tmpl     *utcp.CallTemplate // parsed, variables unresolved
	resolved *utcp.CallTemplate // variables resolved, as used for discovery
	// tr counts this entry as one registration of the manual: through
	// tr.RegisterManual, or tr.Hold for a stored copy served as it is;
	// retirement balances it with tr.DeregisterManual.
	tr transports.Counted
	// calls counts the calls in flight through this manual;
	// deregistration waits for them (inflight.go).
	calls inflight
	// placeholder marks a failed manual (health.go): no tools, no
	// transport registration (tr is nil).
	placeholder bool
}

// RegisterManual registers the manual that one manual call template (v1.1
// or legacy v0.1) points at: it parses and validates the template, resolves
// its variables, discovers the manual through the template's transport,
// drops the tools that allowed_communication_protocols refuses, and adds
// the rest to the registry as "manual.tool".
//
// The outcome is recorded in the manual's health (Health, Statuses): a
// success makes it ready; a failure with opts.KeepFailed keeps a failed
// manual, or the registered version degraded, and schedules a background
// retry (health.go).
func (g *Gateway) RegisterManual(ctx context.Context, raw json.RawMessage, opts RegisterOptions) (*RegisterResult, error) {
	name, typ := headOf(raw)
	st := g.begin(name, opts.Source, typ)
	res, err := g.register(ctx, raw, opts)
	g.settle(name, raw, opts, st, err)
	return res, err
}

// register is RegisterManual without the health bookkeeping.
func (g *Gateway) register(ctx context.Context, raw json.RawMessage, opts RegisterOptions) (*RegisterResult, error) {
	raw, warns, err := manuals.NormalizeTemplate(raw)
	if err != nil {
		return nil, asCode(err, utcp.CodeInvalidTemplate)
	}
	res := &RegisterResult{}
	for _, w := range warns {
		res.Warnings = append(res.Warnings, w.String())
	}
	tmpl, err := g.types.ParseTemplate(raw)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, g.unknownFieldWarnings("", &tmpl)...)
	if tmpl.Name == "" {
		tmpl.Name = randomName()
		raw = setField(raw, "name", tmpl.Name)
		tmpl.Raw = raw
	}
	name := utcp.SanitizeName(tmpl.Name)
	if name != tmpl.Name {
		res.Warnings = append(res.Warnings, fmt.Sprintf("manual name %q sanitised to %q", tmpl.Name, name))
		tmpl.Name = name
	}
	res.Name = name
	if !opts.Replace {
		if _, ok := g.reg.Manual(name); ok {
			return nil, manualExists(name)
		}
	}
	// The checks config validate runs too (manuals.ResolveTemplate):
	// variables, then the transport's own before any network I/O.
	resolved, err := manuals.ResolveTemplate(g.types, &tmpl, name, g.vars.Load())
	if err != nil {
		return nil, err
	}
	pol, err := remotePolicy(name, resolved)
	if err != nil {
		return nil, err
	}
	tr, err := g.transport(tmpl.Type)
	if err != nil {
		return nil, err
	}
	m := opts.Manual
	discovered := m == nil
	if discovered {
		m, err = tr.RegisterManual(transports.WithDiscoveryLimits(ctx, g.limits()), resolved)
		if err != nil {
			return nil, discoveryFailed(name, err)
		}
	}
	if !discovered {
		tr.Hold(resolved)
	}
	state := &manualState{tmpl: &tmpl, resolved: resolved, tr: tr}
	if err := g.checkToolCount(m); err != nil {
		state.release(ctx)
		return nil, discoveryFailed(name, err)
	}
	// Compare with the pinned definitions (pin.go): m becomes what serves.
	served, pinWarn, err := g.pinCheck(ctx, name, &tmpl, m, discovered, g.variablesChanged(name, resolved))
	if err != nil {
		state.release(ctx)
		return nil, err
	}
	if pinWarn != "" {
		res.Warnings = append(res.Warnings, pinWarn)
	}
	m = served
	now := time.Now()
	entry := &registry.Manual{Name: name, Template: &tmpl, Source: opts.Source, Registered: now, Refreshed: now, Ext: state}
	seen := map[string]bool{}
	for i := range m.Tools {
		tool, warn := g.prepareTool(name, &tmpl, &m.Tools[i])
		if warn != "" {
			res.Warnings = append(res.Warnings, warn)
		}
		if tool == nil {
			continue
		}
		if warns, keep := g.confineRemote(pol, &tmpl, tool); len(warns) > 0 || !keep {
			res.Warnings = append(res.Warnings, warns...)
			if !keep {
				continue
			}
		}
		if seen[tool.Name] {
			res.Warnings = append(res.Warnings, fmt.Sprintf("tool %q listed twice; the first one is kept", tool.Name))
			continue
		}
		seen[tool.Name] = true
		entry.Tools = append(entry.Tools, tool)
		res.Tools = append(res.Tools, tool.Name)
	}
	if len(entry.Tools) == 0 {
		if len(m.Tools) == 0 {
			res.Warnings = append(res.Warnings, fmt.Sprintf("manual %q lists no tools: it is registered with none", name))
		} else {
			res.Warnings = append(res.Warnings, fmt.Sprintf("manual %q is registered with no tools: all %d of its tools were dropped", name, len(m.Tools)))
		}
	}
	res.Manual = m

	g.regLock.Lock()
	prev, exists := g.reg.Manual(name)
	if opts.expect != nil && prev != opts.expect {
		g.regLock.Unlock()
		state.release(ctx)
		e := utcp.NewError(utcp.CodeManualNotFound, "manual %q was removed or replaced while it was being refreshed", name).WithDetail("manual", name)
		e.Err = errOvertaken
		return nil, e
	}
	if opts.checkGen && g.healthGen(name) != opts.gen {
		g.regLock.Unlock()
		state.release(ctx)
		return nil, errOvertaken
	}
	if exists && !opts.Replace {
		g.regLock.Unlock()
		state.release(ctx)
		return nil, manualExists(name)
	}
	if opts.stored != nil {
		if err := g.checkStored(ctx, prev, opts.stored); err != nil {
			g.regLock.Unlock()
			state.release(ctx)
			return nil, err
		}
		entry.Refreshed = opts.stored.Refreshed
	}
	if exists {
		entry.Registered = prev.Registered
	}
	if !opts.Registered.IsZero() {
		entry.Registered = opts.Registered
	}
	if g.store != nil && opts.Source == registry.SourceAPI && !opts.NoPersist {
		rec := &registry.Record{Name: name, Template: tmpl.Raw, Manual: m, Source: opts.Source, Registered: entry.Registered, Refreshed: entry.Refreshed}
		if err := g.store.Put(context.WithoutCancel(ctx), rec); err != nil {
			g.regLock.Unlock()
			state.release(ctx)
			return nil, fmt.Errorf("persisting manual %q: %w", name, err)
		}
	}
	var old *registry.Manual
	if exists {
		old, err = g.reg.Replace(entry)
	} else {
		err = g.reg.Add(entry)
	}
	if err == nil {
		g.committed(entry, !discovered, opts.rediscover)
	}
	g.regLock.Unlock()
	if err != nil {
		state.release(ctx)
		return nil, err
	}
	for _, w := range res.Warnings {
		g.log.Warn("registering manual", "manual", name, "warning", w)
	}
	g.changed()
	if old != nil {
		g.retire(old)
	}
	if res.Tools == nil {
		res.Tools = []string{}
	}
	return res, nil
}

// prepareTool turns one discovered tool into a registry entry, or returns
// nil and the reason it was dropped.
func (g *Gateway) prepareTool(manual string, mtmpl *utcp.CallTemplate, def *utcp.Tool) (*registry.Tool, string) {
	qualified, nameWarn := g.toolName(manual, mtmpl, def.Name)
	var tmpl *utcp.CallTemplate
	if def.ToolCallTemplate == nil {
		tmpl = mtmpl
	} else {
		raw, _, err := manuals.NormalizeTemplate(def.ToolCallTemplate.Raw)
		if err != nil {
			return nil, fmt.Sprintf("tool %q dropped: %v", qualified, err)
		}
		parsed, err := g.types.ParseTemplate(raw)
		if err != nil {
			return nil, fmt.Sprintf("tool %q dropped: %v", qualified, err)
		}
		tmpl = &parsed
		if err := manuals.CheckNamespace(tmpl.Raw, manual); err != nil {
			return nil, fmt.Sprintf("tool %q dropped: %v", qualified, err)
		}
	}
	if !mtmpl.Allows(tmpl.Type) {
		return nil, fmt.Sprintf("tool %q uses communication protocol %q which is not in allowed protocols %v for manual %q; tool not registered",
			qualified, tmpl.Type, mtmpl.AllowedProtocols(), manual)
	}
	d := *def
	d.Name = qualified
	d.ToolCallTemplate = tmpl
	post := manuals.PostProcessorsApply(g.post, qualified, manual)
	if post {
		// The listed output schema describes the post-processed result.
		d.Outputs = manuals.ProcessedSchema(g.post, qualified, manual, def.Outputs)
	}
	ts := &toolState{
		backendName: def.Name,
		tmpl:        tmpl,
		manualTmpl:  mtmpl,
		hasVars:     manuals.HasVariables(tmpl.Raw),
		post:        post,
		schema:      newSchema(def.Inputs),
	}
	return &registry.Tool{Name: qualified, Manual: manual, Def: &d, Ext: ts}, nameWarn
}

// RegisterManuals registers many manual call templates in parallel. One
// failure never stops the others; the results are in input order, each
// with its Err.
func (g *Gateway) RegisterManuals(ctx context.Context, raws []json.RawMessage, opts RegisterOptions) []*RegisterResult {
	out := make([]*RegisterResult, len(raws))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, raw := range raws {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := g.RegisterManual(ctx, raw, opts)
			if err != nil {
				res = &RegisterResult{Name: nameOf(raw), Err: err}
			}
			out[i] = res
		})
	}
	wg.Wait()
	return out
}

// DeregisterManual removes a manual and its tools. Calls in flight finish
// on it; its transport state is released once they have.
func (g *Gateway) DeregisterManual(ctx context.Context, name string) error {
	g.regLock.Lock()
	if m, ok := g.reg.Manual(name); ok && m.Source == registry.SourceAPI && g.store != nil {
		if err := g.store.Delete(context.WithoutCancel(ctx), name); err != nil && !errors.Is(err, registry.ErrNotFound) {
			g.regLock.Unlock()
			return fmt.Errorf("removing manual %q from the store: %w", name, err)
		}
	}
	old, err := g.reg.Remove(name)
	if err == nil {
		g.forget(name)
	}
	g.regLock.Unlock()
	if err != nil {
		return err
	}
	g.dropPin(ctx, name)
	g.changed()
	g.retire(old)
	return nil
}

// release undoes tr.RegisterManual (or tr.Hold) after a registration
// that failed late.
func (st *manualState) release(ctx context.Context) {
	_ = st.tr.DeregisterManual(context.WithoutCancel(ctx), st.resolved)
}

// retire releases an old manual's transport state once its calls in
// flight have finished, in a background goroutine that Close waits for.
// The deregistration runs on the gateway's lifetime, bounded by 30 s;
// once Close has begun it is abandoned (calls still in flight are not
// waited for) since closing the transport releases every manual's state.
func (g *Gateway) retire(old *registry.Manual) {
	st, ok := old.Ext.(*manualState)
	if !ok || st.placeholder {
		return
	}
	g.goBackground(func() {
		drained, release, ok := st.calls.retire()
		if !ok {
			return
		}
		defer release()
		select {
		case <-drained:
		case <-g.life.Done():
			return
		}
		ctx, cancel := context.WithTimeout(g.life, 30*time.Second)
		defer cancel()
		if err := st.tr.DeregisterManual(ctx, st.resolved); err != nil && g.life.Err() == nil {
			g.log.Warn("deregistering manual", "manual", old.Name, "err", err)
		}
	})
}

// resolve substitutes the variables of tmpl (namespace = manual name) and
// parses the result again.
func (g *Gateway) resolve(tmpl *utcp.CallTemplate, namespace string) (*utcp.CallTemplate, error) {
	if !manuals.HasVariables(tmpl.Raw) {
		return tmpl, nil
	}
	raw, err := manuals.Substitute(tmpl.Raw, namespace, g.vars.Load())
	if err != nil {
		return nil, err
	}
	parsed, err := g.types.ParseTemplate(raw)
	if err != nil {
		return nil, err
	}
	parsed.Name = tmpl.Name
	return &parsed, nil
}

func (g *Gateway) unknownFieldWarnings(where string, tmpl *utcp.CallTemplate) []string {
	var out []string
	for _, f := range tmpl.Unknown {
		msg := fmt.Sprintf("%sunknown field %q in %s call template", where, f, tmpl.Type)
		if tmpl.Spec != nil {
			if near := utcp.Closest(f, transports.KnownFields(tmpl.Spec), 1); len(near) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", near[0])
			}
		}
		out = append(out, msg)
	}
	return out
}

// RequiredVariables returns the namespaced variables a registered manual's
// template and tool templates need, and whether each resolves now.
func (g *Gateway) RequiredVariables(name string) ([]Variable, error) {
	m, ok := g.reg.Manual(name)
	if !ok {
		return nil, utcp.NewError(utcp.CodeManualNotFound, "manual %q is not registered", name)
	}
	seen := map[string]bool{}
	var out []Variable
	add := func(raw json.RawMessage) {
		for _, v := range manuals.RequiredVariables(raw, name) {
			if seen[v] {
				continue
			}
			seen[v] = true
			_, found := g.vars.Load().Lookup(v)
			out = append(out, Variable{Name: v, Resolves: found})
		}
	}
	add(m.Template.Raw)
	for _, t := range m.Tools {
		add(t.Def.ToolCallTemplate.Raw)
	}
	return out, nil
}

// ToolVariables returns the namespaced variables one registered tool needs.
func (g *Gateway) ToolVariables(name string) ([]Variable, error) {
	t, err := g.reg.Resolve(name)
	if err != nil {
		return nil, err
	}
	var out []Variable
	for _, v := range manuals.RequiredVariables(t.Def.ToolCallTemplate.Raw, t.Manual) {
		_, found := g.vars.Load().Lookup(v)
		out = append(out, Variable{Name: v, Resolves: found})
	}
	return out, nil
}

// Variable is a variable a manual needs. Its value is never reported.
type Variable struct {
	Name     string `json:"name"`
	Resolves bool   `json:"resolves"`
}

func manualExists(name string) error {
	return utcp.NewError(utcp.CodeManualExists,
		"manual %q already registered; use a different name or deregister the existing manual", name).WithDetail("manual", name)
}

func discoveryFailed(name string, err error) error {
	switch utcp.CodeOf(err) {
	case utcp.CodeVariableNotFound, utcp.CodeInvalidTemplate:
		return err
	}
	e := utcp.Errorf(utcp.CodeDiscoveryFailed, "discovering manual %q: %w", name, err)
	var tr *utcp.TransportError
	if errors.As(err, &tr) && tr.Status != 0 {
		e.WithDetail("status", tr.Status)
	}
	var te *utcp.ToolError
	if errors.As(err, &te) && te.Status != 0 {
		e.WithDetail("status", te.Status)
	}
	return e
}

// asCode keeps err's code when it has one, and gives it code otherwise.
func asCode(err error, code utcp.Code) error {
	var ue *utcp.Error
	if errors.As(err, &ue) {
		return err
	}
	return &utcp.Error{Code: code, Message: err.Error(), Err: err}
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "manual_" + hex.EncodeToString(b[:])
}

func setField(raw json.RawMessage, key string, value any) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	v, _ := json.Marshal(value)
	m[key] = v
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

func nameOf(raw json.RawMessage) string {
	name, _ := headOf(raw)
	return name
}

// headOf returns the sanitised name and the call_template_type (or a
// legacy provider_type) of a raw template, "" for what it lacks.
func headOf(raw json.RawMessage) (name, typ string) {
	var head struct {
		Name       string `json:"name"`
		Type       string `json:"call_template_type"`
		LegacyType string `json:"provider_type"`
	}
	_ = json.Unmarshal(raw, &head)
	typ = head.Type
	if typ == "" {
		typ = head.LegacyType
	}
	if head.Name == "" {
		return "", typ
	}
	return utcp.SanitizeName(head.Name), typ
}
