package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// The routes of this file show and decide the changes of a manual's
// pinned tool definitions (gateway/pin.go):
//
//	GET  /admin/manuals/{name}/changes                   the pin, pending and recent changes with their diffs
//	POST /admin/manuals/{name}/changes/{id}/approve      pin the change's definitions; they serve from the refresh that follows
//	POST /admin/manuals/{name}/changes/{id}/reject       keep the pin ({"note": "..."} optional for both)

// ChangeSummary is a pin change as the admin API shows it: everything
// but the proposed pin (its diff says what it is). The diff's tool
// templates have their secret values redacted.
type ChangeSummary struct {
	// ID identifies the change; Manual names its manual.
	ID     string `json:"id"`
	Manual string `json:"manual"`
	// Mode is the manual's pin mode when the change came (warn, hold).
	Mode string `json:"mode"`
	// Status is pending, approved, rejected, accepted or superseded.
	Status registry.PinStatus `json:"status"`
	// From and To are the hashes of the pinned and the discovered sets.
	From string `json:"from"`
	To   string `json:"to"`
	// Diff is the change per tool: fields changed, a line diff of the
	// description, the JSON differences of the rest.
	Diff []registry.ToolDiff `json:"diff"`
	// Created is when it was seen; Decided when it left pending.
	Created time.Time `json:"created"`
	Decided time.Time `json:"decided,omitzero"`
	// By names who decided it; Note is their note (redacted by value).
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// PinnedToolSummary is one pinned tool: its name and hash.
type PinnedToolSummary struct {
	Name string `json:"name"`
	Hash string `json:"hash"`
}

// PinSummary is a manual's pin as the admin API shows it.
type PinSummary struct {
	// Hash is the SHA-256 of the pinned set; Pinned when it was set.
	Hash   string              `json:"hash"`
	Pinned time.Time           `json:"pinned"`
	Tools  []PinnedToolSummary `json:"tools"`
}

// ChangeList is the answer to GET /admin/manuals/{name}/changes.
type ChangeList struct {
	// Manual is the manual's name; Mode its pin mode now.
	Manual string `json:"manual"`
	// Pin is the manual's pin, null when it has none (pin off).
	Pin *PinSummary `json:"pin"`
	// Pending counts the changes awaiting a decision.
	Pending int `json:"pending"`
	// Changes are the manual's changes, newest first.
	Changes []ChangeSummary `json:"changes"`
}

// ChangeOf returns c as the admin API shows it.
func ChangeOf(c *registry.PinChange) ChangeSummary {
	out := ChangeSummary{ID: c.ID, Manual: c.Manual, Mode: c.Mode, Status: c.Status, From: c.From, To: c.To, Diff: c.Diff,
		Created: c.Created, Decided: c.Decided, By: c.By, Note: utcp.RedactText(c.Note)}
	if out.Diff == nil {
		out.Diff = []registry.ToolDiff{}
	}
	return out
}

// Changes returns the change list of manual name (registered in g), at
// most limit changes (≤ 0: 100).
func Changes(ctx context.Context, g *gateway.Gateway, name string, limit int) (ChangeList, error) {
	if _, ok := g.Manual(name); !ok {
		return ChangeList{}, notFound(name)
	}
	out := ChangeList{Manual: name, Changes: []ChangeSummary{}}
	if p, err := g.Pin(ctx, name); err == nil {
		ps := &PinSummary{Hash: p.Hash, Pinned: p.Pinned, Tools: []PinnedToolSummary{}}
		for _, t := range p.Tools {
			ps.Tools = append(ps.Tools, PinnedToolSummary{Name: t.Name, Hash: t.Hash})
		}
		out.Pin = ps
	} else if utcp.CodeOf(err) != utcp.CodeNotFound {
		return ChangeList{}, err
	}
	cs, err := g.PinChanges(ctx, name, limit)
	if err != nil {
		return ChangeList{}, err
	}
	for _, c := range cs {
		if c.Status == registry.PinPending {
			out.Pending++
		}
		out.Changes = append(out.Changes, ChangeOf(c))
	}
	return out, nil
}

// DecideChange approves or rejects the change id of manual name for the
// admin surfaces; by names the decider and front where it came from.
func DecideChange(ctx context.Context, g *gateway.Gateway, name, id string, approve bool, by, note, front string) (ChangeSummary, error) {
	if _, ok := g.Manual(name); !ok {
		return ChangeSummary{}, notFound(name)
	}
	if len(note) > MaxNoteBytes {
		return ChangeSummary{}, httpx.Errorf(utcp.CodeInvalidRequest, "note is longer than %d bytes", MaxNoteBytes).WithDetail("field", "note")
	}
	c, err := g.DecidePinChange(ctx, name, id, gateway.PinDecision{Approve: approve, By: by, Note: note, Front: front})
	if err != nil {
		return ChangeSummary{}, err
	}
	return ChangeOf(c), nil
}

func (h *Handler) listChanges(w http.ResponseWriter, r *http.Request) {
	limit := 0
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "limit %q: use an integer from 1 to 1000", s).WithDetail("parameter", "limit"))
			return
		}
		limit = n
	}
	out, err := Changes(r.Context(), h.g, r.PathValue("name"), limit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) approveChange(w http.ResponseWriter, r *http.Request) { h.decideChange(w, r, true) }
func (h *Handler) rejectChange(w http.ResponseWriter, r *http.Request)  { h.decideChange(w, r, false) }

// decideChange approves or rejects a pin change. Deciding again the same
// way is idempotent (200 with the change); another decision of a decided
// change is invalid_request.
func (h *Handler) decideChange(w http.ResponseWriter, r *http.Request, approve bool) {
	req, ok := h.readDecision(w, r)
	if !ok {
		return
	}
	by := httpx.Principal(r.Context())
	if by == "" {
		by = "admin"
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	out, err := DecideChange(ctx, h.g, r.PathValue("name"), r.PathValue("id"), approve, by, req.Note, "admin")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
