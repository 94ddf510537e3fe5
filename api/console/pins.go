package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// The Manuals page shows a badge on each manual with pending changes of
// its pinned tool definitions (gateway/pin.go), and the manual's page
// shows its changes with their diffs and, for a pending one, approve and
// reject buttons: POST forms with the console's CSRF token, which decide
// as POST /admin/manuals/{name}/changes/{id}/approve|reject does, in the
// console principal's name.

// maxChangesShown caps the changes the manual page lists.
const maxChangesShown = 20

// changeView is one change as the manual page shows it.
type changeView struct {
	admin.ChangeSummary
	// Pending reports that it awaits a decision.
	Pending bool
	// Tools are its per-tool diffs, as text.
	Tools []toolChangeView
}

// toolChangeView is one tool's diff on the manual page.
type toolChangeView struct {
	Tool, Change string
	Fields       string
	// Lines are the description diff's lines, each with its class
	// ("add", "del", "same").
	Lines []diffLine
	// Schema are the JSON differences, one line each.
	Schema []string
}

type diffLine struct{ Class, Text string }

// pendingChanges counts the pending changes per manual; a store that
// cannot be read counts none (the page still renders).
func (c *Console) pendingChanges(ctx context.Context) map[string]int {
	out := map[string]int{}
	cs, err := c.g.PinChanges(ctx, "", 1000)
	if err != nil {
		return out
	}
	for _, ch := range cs {
		if ch.Status == registry.PinPending {
			out[ch.Manual]++
		}
	}
	return out
}

// manualChanges returns the manual page's changes, pending first.
func (c *Console) manualChanges(ctx context.Context, name string) ([]changeView, string) {
	list, err := admin.Changes(ctx, c.g, name, maxChangesShown)
	if err != nil {
		return nil, problemOf(err).Message
	}
	var pending, rest []changeView
	for _, s := range list.Changes {
		v := changeView{ChangeSummary: s, Pending: s.Status == registry.PinPending}
		for _, d := range s.Diff {
			tv := toolChangeView{Tool: d.Tool, Change: d.Change, Fields: strings.Join(d.Fields, ", ")}
			if d.Description != "" {
				for _, l := range strings.Split(strings.TrimSuffix(d.Description, "\n"), "\n") {
					cl := "same"
					switch {
					case strings.HasPrefix(l, "+"):
						cl = "add"
					case strings.HasPrefix(l, "-"):
						cl = "del"
					}
					tv.Lines = append(tv.Lines, diffLine{Class: cl, Text: l})
				}
			}
			for _, j := range d.Schema {
				switch j.Op {
				case "add":
					tv.Schema = append(tv.Schema, j.Path+": added "+string(j.New))
				case "remove":
					tv.Schema = append(tv.Schema, j.Path+": removed "+string(j.Old))
				default:
					tv.Schema = append(tv.Schema, j.Path+": "+string(j.Old)+" → "+string(j.New))
				}
			}
			v.Tools = append(v.Tools, tv)
		}
		if v.Pending {
			pending = append(pending, v)
		} else {
			rest = append(rest, v)
		}
	}
	return append(pending, rest...), ""
}

// decideChange approves or rejects a change of a manual's pinned tool
// definitions.
func (c *Console) decideChange(w http.ResponseWriter, r *http.Request) {
	name, id, note := r.PostForm.Get("name"), r.PostForm.Get("id"), strings.TrimSpace(r.PostForm.Get("note"))
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "reject":
	default:
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeInvalidRequest, "decision must be approve or reject").WithDetail("field", "decision"))
		return
	}
	ctx, cancel := c.discoveryContext(r.Context())
	defer cancel()
	s, err := admin.DecideChange(ctx, c.g, name, id, approve, c.opts.Principal, note, "console")
	if err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	c.flash(r, string(s.Status)+" change "+s.ID+" of manual "+s.Manual)
	seeOther(w, r, Path+"manual?name="+url.QueryEscape(name)+"#changes")
}
