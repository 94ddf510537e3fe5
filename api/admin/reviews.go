package admin

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// MaxNoteBytes caps the note of a review decision.
const MaxNoteBytes = 4096

// ReviewSummary is a review as the admin API shows it. Arguments are the
// call's arguments with secret-looking values replaced (utcp.Redact); the
// result is never shown here (the caller polls it).
type ReviewSummary struct {
	// ID identifies the review.
	ID string `json:"id"`
	// Tool is the tool as requested; Qualified the resolved name.
	Tool      string `json:"tool"`
	Qualified string `json:"qualified"`
	// Kind is what the reviewed call does: tool, resource (a resource
	// read, Tool the URI) or prompt (a prompt get).
	Kind string `json:"kind"`
	// Arguments are the call's arguments, redacted.
	Arguments json.RawMessage `json:"arguments"`
	// Guard names the guard that asked for review; Reasons say why.
	Guard   string   `json:"guard"`
	Reasons []string `json:"reasons"`
	// Principal is the caller; Front where the call came in.
	Principal string `json:"principal"`
	Front     string `json:"front"`
	// Status is the review's status.
	Status review.Status `json:"status"`
	// Created is when it was requested, AgeSeconds how long ago, Expires
	// when it expires if undecided.
	Created    time.Time `json:"created"`
	AgeSeconds float64   `json:"age_seconds"`
	Expires    time.Time `json:"expires"`
	// Decided, DecidedBy and Note record the decision.
	Decided   time.Time `json:"decided,omitzero"`
	DecidedBy string    `json:"decided_by,omitempty"`
	Note      string    `json:"note,omitempty"`
	// Dispatcher ("caller" or "daemon"), Dispatched, Outcome ("" or an
	// error code) and Message describe the dispatch.
	Dispatcher string    `json:"dispatcher,omitempty"`
	Dispatched bool      `json:"dispatched"`
	Outcome    utcp.Code `json:"outcome,omitempty"`
	Message    string    `json:"message,omitempty"`
	// Prior and Next link follow-up reviews.
	Prior string `json:"prior,omitempty"`
	Next  string `json:"next,omitempty"`
}

// ReviewList is the answer to GET /admin/reviews, oldest first.
type ReviewList struct {
	// Reviews are the selected reviews.
	Reviews []ReviewSummary `json:"reviews"`
}

// DecisionRequest is the optional body of approve and deny.
type DecisionRequest struct {
	// Note is shown to the caller and kept with the review.
	Note string `json:"note"`
}

func summary(r *review.Review, now time.Time) ReviewSummary {
	out := ReviewSummary{
		ID: r.ID, Tool: r.Tool, Qualified: r.Qualified, Kind: r.Action(), Arguments: json.RawMessage("{}"), Guard: r.Guard, Reasons: r.Reasons,
		Principal: r.Principal, Front: r.Front, Status: r.Status, Created: r.Created,
		AgeSeconds: now.Sub(r.Created).Round(time.Millisecond).Seconds(), Expires: r.Expires,
		Decided: r.Decided, DecidedBy: r.DecidedBy, Note: r.Note, Dispatcher: r.Dispatcher, Dispatched: r.Dispatched,
		Outcome: r.Outcome, Message: r.Message, Prior: r.Prior, Next: r.Next,
	}
	if len(r.Arguments) > 0 {
		out.Arguments = utcp.Redact(r.Arguments)
	}
	out.Reasons = redactTexts(out.Reasons)
	out.Tool, out.Note, out.Message = utcp.RedactText(out.Tool), utcp.RedactText(out.Note), utcp.RedactText(out.Message)
	if r.Outcome == utcp.CodeToolError || r.Outcome == utcp.CodeInvalidArguments {
		out.Message = "" // may quote the tool's output or the arguments
	}
	return out
}

// redactTexts returns ss redacted by value (utcp.RedactText), never nil;
// ss itself is not modified.
func redactTexts(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = utcp.RedactText(s)
	}
	return out
}

func (h *Handler) reviewsEnabled(w http.ResponseWriter, r *http.Request) bool {
	if h.reviews == nil {
		h.fail(w, r, httpx.Errorf(utcp.CodeNotFound, "human review is not enabled on this daemon"))
		return false
	}
	return true
}

// listReviews serves GET /admin/reviews?status=pending (default) |
// a comma-separated list | all.
func (h *Handler) listReviews(w http.ResponseWriter, r *http.Request) {
	if !h.reviewsEnabled(w, r) {
		return
	}
	statuses := []review.Status{review.StatusPending}
	if s := r.URL.Query().Get("status"); s == "all" {
		statuses = nil
	} else if s != "" {
		statuses = statuses[:0]
		for part := range strings.SplitSeq(s, ",") {
			st := review.Status(strings.TrimSpace(part))
			switch st {
			case review.StatusPending, review.StatusApproved, review.StatusDenied, review.StatusExpired,
				review.StatusDispatching, review.StatusDone, review.StatusInterrupted:
				statuses = append(statuses, st)
			default:
				h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest,
					"status %q: use pending, approved, denied, expired, dispatching, done, interrupted (comma-separated) or all", part).
					WithDetail("parameter", "status"))
				return
			}
		}
	}
	rs, err := h.reviews.List(r.Context(), statuses...)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now := time.Now()
	out := ReviewList{Reviews: make([]ReviewSummary, 0, len(rs))}
	for _, rv := range rs {
		out.Reviews = append(out.Reviews, summary(rv, now))
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) getReview(w http.ResponseWriter, r *http.Request) {
	if !h.reviewsEnabled(w, r) {
		return
	}
	rv, err := h.reviews.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, reviewError(err, r.PathValue("id")))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, summary(rv, time.Now()))
}

func (h *Handler) approveReview(w http.ResponseWriter, r *http.Request) { h.decide(w, r, true) }
func (h *Handler) denyReview(w http.ResponseWriter, r *http.Request)    { h.decide(w, r, false) }

// readDecision reads the optional body of a decision (a review's or a pin
// change's: {"note": "..."}, unknown fields refused), answering the error
// itself when it reports false.
func (h *Handler) readDecision(w http.ResponseWriter, r *http.Request) (DecisionRequest, bool) {
	var req DecisionRequest
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		h.fail(w, r, err)
		return req, false
	}
	if buf.Len() > 0 {
		if err := httpx.DecodeStrict(buf.Bytes(), &req); err != nil {
			h.fail(w, r, err)
			return req, false
		}
	}
	return req, true
}

// decide approves or denies a review. Deciding again the same way is
// idempotent (200 with the review); the opposite decision is
// invalid_request.
func (h *Handler) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	if !h.reviewsEnabled(w, r) {
		return
	}
	id := r.PathValue("id")
	req, ok := h.readDecision(w, r)
	if !ok {
		return
	}
	if len(req.Note) > MaxNoteBytes {
		h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "note is longer than %d bytes", MaxNoteBytes).WithDetail("field", "note"))
		return
	}
	by := httpx.Principal(r.Context())
	if by == "" {
		by = "admin"
	}
	rv, err := h.reviews.Decide(r.Context(), id, review.Decision{Approve: approve, By: by, Note: req.Note})
	if err != nil {
		h.fail(w, r, reviewError(err, id))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, summary(rv, time.Now()))
}

func reviewError(err error, id string) error { return ReviewError(err, id) }
