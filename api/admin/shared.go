package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// The functions of this file are the admin API's checks and views for
// other admin surfaces (the web console, api/console), so that both give
// the same answers and the same messages.

// CheckTemplate returns data, trimmed, when it is one JSON object (a
// manual call template to register); otherwise the invalid_request the
// admin API answers (empty, malformed JSON with its offset, not an
// object).
func CheckTemplate(data []byte) (json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, httpx.Errorf(utcp.CodeInvalidRequest, "the body must be one manual call template (a JSON object)")
	}
	if !json.Valid(data) {
		var v any
		return nil, httpx.DecodeStrict(data, &v)
	}
	if data[0] != '{' {
		return nil, httpx.Errorf(utcp.CodeInvalidRequest, "the body must be one manual call template (a JSON object)")
	}
	return json.RawMessage(bytes.Clone(data)), nil
}

// WithName returns raw with its "name" set to name when absent; a present
// name must be name (or sanitise to it), else invalid_request. It is what
// PUT /admin/manuals/{name} applies to its body.
func WithName(raw json.RawMessage, name string) (json.RawMessage, error) { return withName(raw, name) }

// ReadOnly returns manual_read_only for a manual of g whose source is the
// configuration file or the manuals directory (which the admin API does
// not replace or remove), nil otherwise, including when it is not
// registered.
func ReadOnly(g *gateway.Gateway, name string) error {
	m, ok := g.Manual(name)
	if !ok {
		return nil
	}
	var where string
	switch m.Source {
	case registry.SourceConfig:
		where = "the configuration file (source \"config\"); change it there and reload the daemon"
	case registry.SourceDir:
		where = "the manuals directory (source \"dir\"); edit or remove its file there"
	default:
		return nil
	}
	return httpx.Errorf(utcp.CodeManualReadOnly, "manual %q comes from %s", name, where).
		WithDetail("manual", name).WithDetail("source", m.Source)
}

// ManualNotFound is the manual_not_found error of a name that is not
// registered.
func ManualNotFound(name string) error { return notFound(name) }

// ReviewOf returns r as the admin API shows it at now: arguments,
// tool, reasons, note and message redacted.
func ReviewOf(r *review.Review, now time.Time) ReviewSummary { return summary(r, now) }

// ReviewError maps a review queue error for an id as the admin API does
// (review.ErrNotFound is not_found naming the review).
func ReviewError(err error, id string) error {
	if errors.Is(err, review.ErrNotFound) {
		return httpx.Errorf(utcp.CodeNotFound, "review %s not found", id).WithDetail("review_id", id)
	}
	return err
}

// RedactRecord redacts an audit record in place as GET /admin/audit
// shows it: the requested tool name, the reason and every step's reason
// by value (its Steps slice is replaced, not modified).
func RedactRecord(rec *audit.Record) {
	rec.Tool, rec.Reason = utcp.RedactText(rec.Tool), utcp.RedactText(rec.Reason)
	steps := make([]audit.Step, len(rec.Steps))
	for j, st := range rec.Steps {
		st.Reason = utcp.RedactText(st.Reason)
		steps[j] = st
	}
	rec.Steps = steps
}

// Response returns the answer to a registration, replacement or refresh
// (empty lists rather than null).
func Response(res *gateway.RegisterResult) RegisterResponse { return response(res) }
