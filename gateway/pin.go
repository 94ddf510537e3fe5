package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// This file pins tool definitions: the defence against a backend that
// changes a tool's description or schema after the user approved it (a
// "rug pull"; docs/security.md, "Pinned tool definitions").
//
// The first registration of a manual pins its tools: each tool's
// canonical definition (pindiff.go) is hashed and stored with the manual
// in the PinStore, with the discovered manual itself. Every later
// registration under the same manual call template (a refresh, a
// backend's tools/list_changed, a folder change, a restart, a replica's
// rediscovery) compares what it discovered with the pin. When they
// differ, the manual's pin mode (its template's "pin", else
// Options.PinDefault, else hold for a manual fetched over the network and
// warn for the local types cli, text and file) decides:
//
//   - off: the new definitions serve, as if nothing were pinned;
//   - warn: they serve, are pinned, and the change is recorded (the
//     change list and the audit log, with its diff);
//   - hold: the pinned definitions keep serving — a changed tool as it was
//     pinned, a new tool withheld, a removed tool removed (the backend no
//     longer serves it, and removing it cannot widen what a tool does) —
//     and the change waits in the change list, pending, until an admin
//     approves it (the new definitions are pinned, and serve from the
//     refresh that follows) or rejects it (the pin stays; the same change
//     is not raised again). A change that only removes tools is accepted
//     as under warn. A newer change supersedes a pending one.
//
// A registration under another manual call template (the admin or the
// folder's writer changed it), or under the same template whose variables
// now resolve otherwise than in this process's last registration (a
// reload), is a new registration by the admin and re-pins, recorded as an
// accepted change. Variable values are never stored or hashed, so a
// variable changed while the daemon was stopped looks like a backend's
// change and is held like one. A registration from a stored copy (the store's
// record of what this or another replica served) is served as it is. A
// deregistration drops the pin. Every change, whatever became of it,
// goes to the audit log as a record of decision and kind "pin".

// variablesChanged reports whether the registered manual name was
// discovered with another resolved template than resolved: the admin
// changed a variable it uses (a reload, SetVariables). Only the
// registration in this process is compared, since variable values are
// never stored or hashed: after a restart a changed variable looks like
// a changed backend, and is held like one.
func (g *Gateway) variablesChanged(name string, resolved *utcp.CallTemplate) bool {
	m, ok := g.reg.Manual(name)
	if !ok {
		return false
	}
	st, ok := m.Ext.(*manualState)
	if !ok || st.placeholder || st.resolved == nil || resolved == nil {
		return false
	}
	return !sameJSON(st.resolved.Raw, resolved.Raw)
}

// pinMode is the pin mode of a manual registered with tmpl.
func (g *Gateway) pinMode(tmpl *utcp.CallTemplate) string {
	switch {
	case tmpl.Pin != "":
		return tmpl.Pin
	case g.opts.PinDefault != "":
		return g.opts.PinDefault
	case localManualTypes[tmpl.Type]:
		return registry.PinWarn
	}
	return registry.PinHold
}

// pinCheck compares the manual m that name's registration under tmpl
// brought (discovered from the backend, or a stored copy) with its pin,
// and returns the manual to serve and a warning ("" for none). A pin
// store that cannot be read fails a hold registration (the registered
// version keeps serving) and only warns otherwise.
func (g *Gateway) pinCheck(ctx context.Context, name string, tmpl *utcp.CallTemplate, m *utcp.Manual, discovered, varsChanged bool) (*utcp.Manual, string, error) {
	mode := g.pinMode(tmpl)
	if mode == registry.PinOff {
		return m, "", nil
	}
	ctx = context.WithoutCancel(ctx)
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	now := time.Now()
	cur, err := newPin(name, tmpl.Raw, m, now)
	if err != nil {
		return nil, "", err
	}
	old, err := g.pins.GetPin(ctx, name)
	switch {
	case errors.Is(err, registry.ErrPinNotFound):
		if err := g.pins.PutPin(ctx, cur); err != nil {
			return g.pinFailed(mode, name, m, err)
		}
		return m, "", nil
	case err != nil:
		return g.pinFailed(mode, name, m, err)
	}
	if old.Hash == cur.Hash || !discovered {
		return m, "", nil
	}
	diff := diffPins(old, cur)
	c := &registry.PinChange{ID: newChangeID(), Manual: name, Mode: mode, Status: registry.PinAccepted, From: old.Hash, To: cur.Hash,
		Diff: diff, Created: now, Decided: now}
	switch {
	case old.Template != cur.Template:
		c.Note = "the manual call template changed: its tools are pinned anew"
	case varsChanged:
		c.Note = "the manual call template's variables changed: its tools are pinned anew"
	case mode == registry.PinWarn:
	case onlyRemovals(diff):
		c.Note = "tools removed only: accepted"
	default:
		return g.hold(ctx, old, cur, c, m)
	}
	if err := g.pins.AddChange(ctx, c); err != nil {
		return g.pinFailed(mode, name, m, err)
	}
	if err := g.pins.PutPin(ctx, cur); err != nil {
		return g.pinFailed(mode, name, m, err)
	}
	g.auditPin(c, "", "")
	// The pin moved: a change still pending from it is moot.
	if list, err := g.pins.ListChanges(ctx, name, 0); err == nil {
		g.supersede(ctx, list, c.ID, now)
	}
	return m, fmt.Sprintf("manual %q: tool definitions changed since they were pinned (%s); accepted and pinned anew (pin %s, change %s)",
		name, diffSummary(diff), mode, c.ID), nil
}

// hold keeps old's definitions serving and records c (pending) unless the
// same change is already pending or was rejected; a pending change to
// other definitions is superseded.
func (g *Gateway) hold(ctx context.Context, old, cur *registry.Pin, c *registry.PinChange, m *utcp.Manual) (*utcp.Manual, string, error) {
	list, err := g.pins.ListChanges(ctx, old.Manual, 0)
	if err != nil {
		return g.pinFailed(registry.PinHold, old.Manual, m, err)
	}
	var known *registry.PinChange
	for _, p := range list {
		if p.From == old.Hash && p.To == cur.Hash && (p.Status == registry.PinPending || p.Status == registry.PinRejected) {
			known = p
			break
		}
	}
	keep := c.ID
	if known != nil {
		keep = known.ID
	}
	g.supersede(ctx, list, keep, c.Created)
	served := heldManual(old, cur, m)
	if known != nil {
		if known.Status == registry.PinRejected {
			return served, "", nil
		}
		return served, fmt.Sprintf("manual %q: tool definitions changed since they were pinned; the pinned ones keep serving until change %s is approved",
			old.Manual, known.ID), nil
	}
	c.Status, c.Decided, c.Proposed = registry.PinPending, time.Time{}, cur
	if err := g.pins.AddChange(ctx, c); err != nil {
		return g.pinFailed(registry.PinHold, old.Manual, m, err)
	}
	g.auditPin(c, "", "")
	g.log.Warn("tool definitions changed since they were pinned; the pinned ones keep serving until an admin approves the change",
		"manual", old.Manual, "change", c.ID, "diff", diffSummary(c.Diff))
	return served, fmt.Sprintf("manual %q: tool definitions changed since they were pinned (%s); the pinned ones keep serving until change %s is approved",
		old.Manual, diffSummary(c.Diff), c.ID), nil
}

// supersede marks every pending change of list but keep superseded (by
// keep), at now, and audits it.
func (g *Gateway) supersede(ctx context.Context, list []*registry.PinChange, keep string, now time.Time) {
	for _, p := range list {
		if p.Status != registry.PinPending || p.ID == keep {
			continue
		}
		sup := *p
		sup.Status, sup.Decided, sup.Note, sup.Proposed = registry.PinSuperseded, now, "superseded by change "+keep, nil
		if err := g.pins.UpdateChange(ctx, &sup, registry.PinPending, nil); err == nil {
			g.auditPin(&sup, "", "")
		}
	}
}

// heldManual is the manual a held change serves: m with the tools of the
// pin old, in their pinned definitions, that m still lists.
func heldManual(old, cur *registry.Pin, m *utcp.Manual) *utcp.Manual {
	listed := map[string]bool{}
	for _, t := range cur.Tools {
		listed[t.Name] = true
	}
	out := *m
	out.Tools = nil
	if old.Copy != nil {
		for _, t := range old.Copy.Tools {
			if listed[t.Name] {
				out.Tools = append(out.Tools, t)
			}
		}
		return &out
	}
	// No copy (should not happen): the unchanged tools only.
	same := map[string]bool{}
	for _, t := range old.Tools {
		same[t.Name+" "+t.Hash] = true
	}
	for _, t := range cur.Tools {
		if same[t.Name+" "+t.Hash] {
			for _, d := range m.Tools {
				if d.Name == t.Name {
					out.Tools = append(out.Tools, d)
					break
				}
			}
		}
	}
	return &out
}

func onlyRemovals(diff []registry.ToolDiff) bool {
	for _, d := range diff {
		if d.Change != "removed" {
			return false
		}
	}
	return len(diff) > 0
}

// pinFailed handles a pin store failure: hold refuses the registration,
// warn and off serve m.
func (g *Gateway) pinFailed(mode, name string, m *utcp.Manual, err error) (*utcp.Manual, string, error) {
	if mode == registry.PinHold {
		return nil, "", utcp.Errorf(utcp.CodeUnavailable, "manual %q: checking its pinned tool definitions: %w", name, err).WithDetail("manual", name)
	}
	g.log.Warn("checking pinned tool definitions failed; the manual is registered unchecked", "manual", name, "err", err)
	return m, "", nil
}

func newChangeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "pc_" + hex.EncodeToString(b[:])
}

// auditPin appends the audit record of change c, decided by principal
// through front ("" for the gateway itself).
func (g *Gateway) auditPin(c *registry.PinChange, principal, front string) {
	if g.opts.Audit == nil {
		return
	}
	diff, _ := json.Marshal(c.Diff)
	reason := fmt.Sprintf("pin %s: %s", c.Mode, diffSummary(c.Diff))
	if c.Note != "" {
		reason += " — " + c.Note
	}
	t := c.Created
	if !c.Decided.IsZero() {
		t = c.Decided
	}
	g.opts.Audit.Append(audit.Record{Time: t, Front: front, Principal: principal, Tool: c.Manual, Qualified: c.Manual,
		Decision: "pin", Reason: reason, Outcome: string(c.Status), Kind: "pin", Change: c.ID, Diff: diff, Steps: []audit.Step{}})
}

// dropPin forgets the pin of a manual that was deregistered.
func (g *Gateway) dropPin(ctx context.Context, name string) {
	if err := g.pins.DeletePin(context.WithoutCancel(ctx), name); err != nil {
		g.log.Warn("dropping the pin of a removed manual", "manual", name, "err", err)
	}
}

// Pin returns the pinned definitions of manual name, or an error wrapping
// registry.ErrPinNotFound.
func (g *Gateway) Pin(ctx context.Context, name string) (*registry.Pin, error) {
	return g.pins.GetPin(ctx, name)
}

// PinChanges returns the changes of manual name's tool definitions
// ("" for every manual), newest first, at most limit (≤ 0: 100).
func (g *Gateway) PinChanges(ctx context.Context, name string, limit int) ([]*registry.PinChange, error) {
	return g.pins.ListChanges(ctx, name, limit)
}

// PinDecision is an admin's answer to a pending pin change.
type PinDecision struct {
	// Approve pins the change's definitions; false rejects it.
	Approve bool
	// By names who decided; Note is their note (optional).
	By, Note string
	// Front is where the decision came from ("admin", "console").
	Front string
}

// DecidePinChange approves or rejects the pending change id of manual
// name. Approving pins the change's definitions (with the decision, in
// one store transaction) and refreshes the manual, so that they serve;
// a refresh that fails leaves the manual degraded and retried, with the
// new pin in place. Rejecting keeps the pin: the pinned definitions keep
// serving and the same change is not raised again. Deciding again the
// same way returns the change as it is; a change in another status is
// invalid_request (registry.ErrChangeConflict), an unknown id not_found.
func (g *Gateway) DecidePinChange(ctx context.Context, name, id string, d PinDecision) (*registry.PinChange, error) {
	c, err := g.decidePin(ctx, name, id, d)
	if err != nil || c.Status == registry.PinRejected || !d.Approve {
		return c, err
	}
	if _, ok := g.reg.Manual(name); ok {
		if _, err := g.RefreshManual(ctx, name); err != nil {
			g.log.Warn("refreshing a manual after its pin change was approved", "manual", name, "change", id, "err", err)
		}
	}
	return c, nil
}

// decidePin is DecidePinChange up to the refresh, under pinMu.
func (g *Gateway) decidePin(ctx context.Context, name, id string, d PinDecision) (*registry.PinChange, error) {
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	c, err := g.pins.GetChange(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.Manual != name {
		return nil, registry.ChangeNotFound(id)
	}
	want := registry.PinRejected
	if d.Approve {
		want = registry.PinApproved
	}
	if c.Status == want {
		return c, nil
	}
	if c.Status != registry.PinPending {
		return nil, registry.ChangeConflict(id, registry.PinPending, c.Status)
	}
	c.Status, c.Decided, c.By, c.Note = want, time.Now(), d.By, d.Note
	var pin *registry.Pin
	if d.Approve {
		if c.Proposed == nil {
			return nil, utcp.NewError(utcp.CodeInternal, "pin change %s has no proposed definitions", id)
		}
		pin = c.Proposed
		pin.Pinned = c.Decided
	}
	// A decided change keeps its diff; the proposed copy (the whole
	// manual) is the pin now, or moot.
	c.Proposed = nil
	if err := g.pins.UpdateChange(context.WithoutCancel(ctx), c, registry.PinPending, pin); err != nil {
		return nil, err
	}
	g.auditPin(c, d.By, d.Front)
	return c, nil
}
