package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/utcp"
)

// AuditPage is the answer to GET /admin/audit: records newest first, and
// the cursor of the next (older) page.
type AuditPage struct {
	// Records are the selected records, newest first.
	Records []audit.Record `json:"records"`
	// Next is the ?before= of the next page, "" on the last one.
	Next string `json:"next"`
}

// listAudit serves GET /admin/audit?tool=&decision=&outcome=&since=&before=&limit=.
// since is an RFC 3339 time or a Go duration back from now ("1h").
func (h *Handler) listAudit(w http.ResponseWriter, r *http.Request) {
	if h.audit == nil {
		h.fail(w, r, httpx.Errorf(utcp.CodeNotFound, "the audit log is not enabled on this daemon"))
		return
	}
	qv := r.URL.Query()
	q := audit.Query{Tool: qv.Get("tool"), Decision: qv.Get("decision"), Outcome: qv.Get("outcome")}
	bad := func(param, format string, args ...any) {
		h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, format, args...).WithDetail("parameter", param))
	}
	switch q.Decision {
	case "", "allow", "deny", "review", "error", "pin":
	default:
		bad("decision", "decision must be allow, deny, review, error or pin, got %q", q.Decision)
		return
	}
	if s := qv.Get("since"); s != "" {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			q.Since = t
		} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
			q.Since = time.Now().Add(-d)
		} else {
			bad("since", "since must be an RFC 3339 time or a positive duration such as 1h, got %q", s)
			return
		}
	}
	if s := qv.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			bad("before", "before must be a positive record id (the next cursor of the previous page), got %q", s)
			return
		}
		q.Before = n
	}
	if s := qv.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			bad("limit", "limit must be a positive integer, got %q", s)
			return
		}
		q.Limit = min(n, audit.MaxLimit)
	}
	recs, err := h.audit.Query(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := AuditPage{Records: recs}
	if out.Records == nil {
		out.Records = []audit.Record{}
	}
	for i := range out.Records {
		// A guard's reason (a webhook's, say) or a requested name may
		// quote a secret; the store keeps what happened, the answer
		// shows it redacted.
		RedactRecord(&out.Records[i])
	}
	if len(recs) == q.EffectiveLimit() && len(recs) > 0 {
		out.Next = strconv.FormatInt(recs[len(recs)-1].ID, 10)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
