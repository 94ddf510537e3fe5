package front

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// FrontName is the front name of calls made through the REST front, in
// the audit log and in reviews.
const FrontName = "rest"

// Parked is the 202 answer to a call made with ?wait=false that a guard
// sent to review.
type Parked struct {
	// ReviewID identifies the review; poll GET /v1/reviews/{id}.
	ReviewID string `json:"review_id"`
	// Status is "pending".
	Status review.Status `json:"status"`
	// Expires is when the review expires if nobody decides it.
	Expires time.Time `json:"expires"`
	// Poll is the path to poll.
	Poll string `json:"poll"`
}

// ReviewStatus is the answer to GET /v1/reviews/{id}: where a reviewed
// call stands and, once it ran, how it ended. Arguments are not echoed.
type ReviewStatus struct {
	// ID identifies the review.
	ID string `json:"id"`
	// Tool is the tool as requested (a resource read's URI, a prompt
	// get's prompt name).
	Tool string `json:"tool"`
	// Kind is what the call does: tool, resource or prompt; a result is
	// then the tool's value, the ReadResourceResult or the
	// GetPromptResult.
	Kind string `json:"kind"`
	// Status is pending, approved, denied, expired, dispatching, done or
	// interrupted.
	Status review.Status `json:"status"`
	// Reasons say why the call needs review.
	Reasons []string `json:"reasons"`
	// Created and Expires are when the review was requested and when it
	// expires if undecided; Decided when it was approved or denied.
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Decided time.Time `json:"decided,omitzero"`
	// Note is the decider's comment.
	Note string `json:"note,omitempty"`
	// Done reports that nothing more will happen to the call.
	Done bool `json:"done"`
	// Dispatched reports that the call reached its tool.
	Dispatched bool `json:"dispatched"`
	// Result is the call's result (status done, no Error), or the tool's
	// error value when IsError.
	Result any `json:"result,omitempty"`
	// IsError is true when the tool itself reported a failure.
	IsError bool `json:"is_error"`
	// Error is the failure of a call that did not complete (refused by a
	// guard after the approval, tool gone, transport error), as in an
	// error envelope.
	Error *httpx.ErrorBody `json:"error,omitempty"`
	// Next names a follow-up review another guard asked for when the
	// approved call was dispatched: poll it instead.
	Next string `json:"next,omitempty"`
}

// waitParam reads ?wait= (default true).
func waitParam(r *http.Request) (bool, error) {
	if r.URL.RawQuery == "" {
		return true, nil
	}
	s := r.URL.Query().Get("wait")
	if s == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, httpx.Errorf(utcp.CodeInvalidRequest, "wait must be true or false, got %q", s).WithDetail("parameter", "wait")
	}
	return b, nil
}

func writeParked(w http.ResponseWriter, p *review.ParkedError) {
	poll := "/v1/reviews/" + p.ID
	w.Header().Set("Location", poll)
	httpx.WriteJSON(w, http.StatusAccepted, Parked{ReviewID: p.ID, Status: review.StatusPending, Expires: p.Expires, Poll: poll})
}

// review serves GET /v1/reviews/{id}. A review of another principal's
// call is not_found, as is every review when reviews are not enabled.
func (h *Handler) review(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	notFound := httpx.Errorf(utcp.CodeNotFound, "review %s not found", id).WithDetail("review_id", id)
	if h.reviews == nil {
		h.fail(w, r, notFound)
		return
	}
	rv, err := h.reviews.Get(r.Context(), id)
	if errors.Is(err, review.ErrNotFound) {
		h.fail(w, r, notFound)
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if rv.Principal != httpx.Principal(r.Context()) {
		h.fail(w, r, notFound)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, reviewStatus(rv))
}

func reviewStatus(rv *review.Review) ReviewStatus {
	kind := rv.Action()
	out := ReviewStatus{
		ID: rv.ID, Tool: rv.Tool, Kind: kind, Status: rv.Status, Reasons: rv.Reasons, Created: rv.Created, Expires: rv.Expires,
		Decided: rv.Decided, Note: rv.Note, Done: rv.Status.Final(), Dispatched: rv.Dispatched, Next: rv.Next,
	}
	reasons := make([]string, len(out.Reasons))
	for i, s := range out.Reasons {
		reasons[i] = utcp.RedactText(s)
	}
	out.Reasons = reasons
	out.Tool, out.Note = utcp.RedactText(out.Tool), utcp.RedactText(out.Note)
	if rv.Status != review.StatusDone && rv.Status != review.StatusInterrupted {
		return out
	}
	if len(rv.Result) > 0 {
		out.Result = json.RawMessage(rv.Result)
	}
	switch rv.Outcome {
	case "":
	case utcp.CodeToolError:
		out.IsError = true
		if out.Result == nil {
			out.Result = rv.Message
		}
	default:
		_, env := httpx.Problem(&utcp.Error{Code: rv.Outcome, Message: rv.Message})
		out.Error = &env.Error
	}
	if rv.Status == review.StatusInterrupted {
		_, env := httpx.Problem(&utcp.Error{Code: utcp.CodeUnavailable, Message: rv.Message})
		out.Error = &env.Error
	}
	return out
}
