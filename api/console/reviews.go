package console

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// Limits of the Reviews page.
const (
	maxPendingShown = 200
	maxHistoryShown = 100
)

type reviewView struct {
	admin.ReviewSummary
	// Args is the redacted arguments, indented.
	Args string
}

type reviewsData struct {
	Enabled       bool
	Pending       []reviewView
	PendingMore   int
	History       []reviewView
	HistoryMore   int
	NoteLimit     int
	ReviewTimeout time.Duration
}

// reviewsPage lists the pending reviews (oldest first, as the queue
// serves them) with their redacted arguments and the guard's reasons,
// and the decided ones (newest first).
func (c *Console) reviewsPage(w http.ResponseWriter, r *http.Request) {
	d := reviewsData{Enabled: c.opts.Reviews != nil, NoteLimit: admin.MaxNoteBytes}
	if q := c.opts.Reviews; q != nil {
		d.ReviewTimeout = q.Timeout()
		all, err := q.List(r.Context())
		if err != nil {
			c.renderError(w, r, nil, err)
			return
		}
		now := time.Now()
		var pending, history []*review.Review
		for _, rv := range all {
			if rv.Status == review.StatusPending && now.Before(rv.Expires) {
				pending = append(pending, rv)
			} else if rv.Status != review.StatusPending {
				history = append(history, rv)
			}
		}
		// History: newest decision (or creation) first.
		slices.SortStableFunc(history, func(a, b *review.Review) int { return lastChange(b).Compare(lastChange(a)) })
		if len(pending) > maxPendingShown {
			d.PendingMore, pending = len(pending)-maxPendingShown, pending[:maxPendingShown]
		}
		if len(history) > maxHistoryShown {
			d.HistoryMore, history = len(history)-maxHistoryShown, history[:maxHistoryShown]
		}
		for _, rv := range pending {
			s := admin.ReviewOf(rv, now)
			d.Pending = append(d.Pending, reviewView{ReviewSummary: s, Args: prettyJSON(s.Arguments)})
		}
		for _, rv := range history {
			s := admin.ReviewOf(rv, now)
			d.History = append(d.History, reviewView{ReviewSummary: s, Args: prettyJSON(s.Arguments)})
		}
	}
	c.render(w, r, http.StatusOK, "reviews", page{Title: "Reviews", Nav: "reviews", Data: d})
}

func lastChange(r *review.Review) time.Time {
	if !r.Decided.IsZero() {
		return r.Decided
	}
	return r.Created
}

// decide approves or denies a review with an optional note, as POST
// /admin/reviews/{id}/approve|deny does, in the console principal's name.
func (c *Console) decide(w http.ResponseWriter, r *http.Request) {
	q := c.opts.Reviews
	if q == nil {
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeNotFound, "human review is not enabled on this daemon"))
		return
	}
	id, note := r.PostForm.Get("id"), strings.TrimSpace(r.PostForm.Get("note"))
	var approve bool
	switch r.PostForm.Get("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeInvalidRequest, "decision must be approve or deny").WithDetail("field", "decision"))
		return
	}
	if len(note) > admin.MaxNoteBytes {
		c.renderError(w, r, nil, httpx.Errorf(utcp.CodeInvalidRequest, "note is longer than %d bytes", admin.MaxNoteBytes).WithDetail("field", "note"))
		return
	}
	rv, err := q.Decide(r.Context(), id, review.Decision{Approve: approve, By: c.opts.Principal, Note: note})
	if err != nil {
		c.renderError(w, r, nil, admin.ReviewError(err, id))
		return
	}
	verb := "denied"
	if approve {
		verb = "approved"
	}
	c.flash(r, verb+" review "+rv.ID+" ("+utcp.RedactText(rv.Tool)+")")
	seeOther(w, r, Path+"reviews")
}
