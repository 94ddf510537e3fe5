package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/utcp"
)

// Paging of the Audit page.
const (
	auditPageSize = 50
	// auditMaxScan caps the records one page reads from the store while
	// filtering by what the store cannot filter (manual, principal,
	// until); a page that hit it links on from where it stopped.
	auditMaxScan = 5000
)

type auditFilter struct {
	Tool, Manual, Outcome, Decision, Principal, Since, Until string
}

type auditRow struct {
	audit.Record
	Steps string
}

type auditData struct {
	Enabled bool
	Filter  auditFilter
	Records []auditRow
	// Next is the ?before= of the next (older) page, "" on the last one;
	// Scanned reports that the page stopped at auditMaxScan records.
	Next    string
	Before  string
	Scanned bool
}

// auditPage lists the audit log newest first, filtered and paged. The
// store filters by tool, decision, outcome and since (audit.Query); the
// page filters further by manual, principal and until as it reads.
func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	f := auditFilter{Tool: strings.TrimSpace(qv.Get("tool")), Manual: strings.TrimSpace(qv.Get("manual")), Outcome: strings.TrimSpace(qv.Get("outcome")),
		Decision: qv.Get("decision"), Principal: strings.TrimSpace(qv.Get("principal")), Since: strings.TrimSpace(qv.Get("since")), Until: strings.TrimSpace(qv.Get("until"))}
	d := auditData{Enabled: c.opts.Audit != nil, Filter: f, Before: qv.Get("before")}
	p := page{Title: "Audit", Nav: "audit", Data: &d}
	if c.opts.Audit == nil {
		c.render(w, r, http.StatusOK, "audit", p)
		return
	}
	q, until, err := auditQuery(f, d.Before)
	if err != nil {
		p.Problem = problemOf(err)
		c.render(w, r, p.Problem.Status, "audit", p)
		return
	}
	keep := func(rec *audit.Record) bool {
		if f.Manual != "" && !strings.HasPrefix(rec.Qualified, f.Manual+".") && !strings.HasPrefix(rec.Tool, f.Manual+".") {
			return false
		}
		if f.Principal != "" && rec.Principal != f.Principal {
			return false
		}
		return until.IsZero() || rec.Time.Before(until)
	}
	scanned := 0
	q.Limit = auditPageSize
	if f.Manual != "" || f.Principal != "" || !until.IsZero() {
		q.Limit = audit.MaxLimit
	}
	var lastID int64
	for len(d.Records) < auditPageSize && scanned < auditMaxScan {
		recs, err := c.opts.Audit.Query(r.Context(), q)
		if err != nil {
			c.renderError(w, r, nil, err)
			return
		}
		for i := range recs {
			rec := recs[i]
			scanned++
			lastID = rec.ID
			if keep(&rec) {
				admin.RedactRecord(&rec)
				d.Records = append(d.Records, auditRow{Record: rec, Steps: stepsText(rec.Steps)})
				if len(d.Records) == auditPageSize {
					break
				}
			}
		}
		if len(recs) < q.EffectiveLimit() && len(d.Records) < auditPageSize {
			lastID = 0 // the store has no more
			break
		}
		q.Before = lastID
	}
	if lastID > 0 {
		d.Next = strconv.FormatInt(lastID, 10)
		d.Scanned = len(d.Records) < auditPageSize
	}
	c.render(w, r, http.StatusOK, "audit", p)
}

// auditQuery turns the filter into the store's query, and the until
// bound the page applies itself.
func auditQuery(f auditFilter, before string) (audit.Query, time.Time, error) {
	q := audit.Query{Tool: f.Tool, Decision: f.Decision, Outcome: f.Outcome}
	bad := func(param, format string, args ...any) error {
		return httpx.Errorf(utcp.CodeInvalidRequest, format, args...).WithDetail("parameter", param)
	}
	switch q.Decision {
	case "", "allow", "deny", "review", "error", "pin":
	default:
		return q, time.Time{}, bad("decision", "decision must be allow, deny, review, error or pin, got %q", q.Decision)
	}
	var err error
	if q.Since, err = parseWhen(f.Since); err != nil {
		return q, time.Time{}, bad("since", "since: %v", err)
	}
	until, err := parseWhen(f.Until)
	if err != nil {
		return q, time.Time{}, bad("until", "until: %v", err)
	}
	if before != "" {
		n, err := strconv.ParseInt(before, 10, 64)
		if err != nil || n <= 0 {
			return q, time.Time{}, bad("before", "before must be a positive record id (the link to the next page), got %q", before)
		}
		q.Before = n
	}
	return q, until, nil
}

// parseWhen reads a time bound: RFC 3339, "2006-01-02 15:04[:05]" or
// "2006-01-02T15:04" (UTC, what a datetime-local input sends), or a
// duration back from now ("15m", "1h").
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errorString("use an RFC 3339 time, \"2006-01-02 15:04\" (UTC) or a duration back from now such as 1h, got " + strconv.Quote(s))
}

type errorString string

func (e errorString) Error() string { return string(e) }

// stepsText is the guard chain's decisions in one line.
func stepsText(steps []audit.Step) string {
	parts := make([]string, 0, len(steps))
	for _, st := range steps {
		p := st.Guard + ": " + st.Decision
		if st.Reason != "" {
			p += " (" + clip(st.Reason, 200) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
