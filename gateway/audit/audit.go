// Package audit is the gateway's audit log: one Record per tool call,
// whichever front it came through (REST, MCP, CLI), appended to a Store by
// a Writer that never slows the call path.
//
// A Record says who called what, through which front, what each guard of
// the chain decided and why, whether the call reached its tool, how it
// ended (its error code) and how long it took. It never holds the call's
// arguments or result: they can carry personal data and credentials, and
// an audit log is kept for months. A reviewed call names its review, which
// keeps the arguments (redacted when shown) while the review is live.
//
// The package imports only utcp, so that stores (store/sqlite) can
// implement Store without importing the gateway.
package audit

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

// Step is one decision of the guard chain on a call: a guard's verdict, or
// (Review) the answer to the review the step before asked for.
type Step struct {
	// Guard names the guard ("0:policy", "1:webhook").
	Guard string `json:"guard"`
	// Decision is allow, deny, review or error.
	Decision string `json:"decision"`
	// Reason is the verdict's reason.
	Reason string `json:"reason,omitempty"`
	// Review marks an approver's answer.
	Review bool `json:"review,omitempty"`
}

// Record is one audited call.
type Record struct {
	// ID is assigned by the Store: increasing in append order.
	ID int64 `json:"id"`
	// Time is when the call started.
	Time time.Time `json:"time"`
	// Front is where the call came in: "rest", "mcp", "cli" ("" when the
	// caller did not say).
	Front string `json:"front"`
	// Principal names the authenticated caller, "" if anonymous.
	Principal string `json:"principal"`
	// Tool is the name as requested; Qualified the resolved name ("" when
	// it did not resolve); Protocol the tool's call_template_type.
	Tool      string `json:"tool"`
	Qualified string `json:"qualified"`
	Protocol  string `json:"protocol,omitempty"`
	// Decision is the guard chain's final decision (allow, deny, review,
	// error), with the deciding guard and its reason.
	Decision string `json:"decision"`
	Guard    string `json:"guard,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Steps are every decision the chain took, in order.
	Steps []Step `json:"steps"`
	// Dispatched reports that the call reached its tool's transport.
	Dispatched bool `json:"dispatched"`
	// Outcome is "ok" or the error code the call ended with.
	Outcome string `json:"outcome"`
	// Duration is how long the call took, guard chain and review wait
	// included.
	Duration time.Duration `json:"duration_ns"`
	// ReviewID names the call's review, "" if none.
	ReviewID string `json:"review_id,omitempty"`
	// Stream reports a streaming call.
	Stream bool `json:"stream,omitempty"`
	// Kind is what the call did when it was not a tool call: "resource"
	// (an MCP resources/read; Tool is the URI) or "prompt" (an MCP
	// prompts/get). Empty for tool calls.
	Kind string `json:"kind,omitempty"`
	// Change and Diff are set on a record of kind "pin" (decision "pin"):
	// a change of a manual's tool definitions that a rediscovery brought
	// (Tool and Qualified name the manual, Outcome is the change's status:
	// pending, accepted, approved, rejected). Change is the change's id,
	// Diff its per-tool diff (registry.ToolDiff list), which holds tool
	// definitions, never arguments or secrets.
	Change string          `json:"change_id,omitempty"`
	Diff   json.RawMessage `json:"diff,omitempty"`
	// Toolset names the toolset the call came through ("" when none);
	// Tool and Qualified are then the real qualified name.
	Toolset string `json:"toolset,omitempty"`
}

// Clone returns a copy of r that shares no memory with it.
func (r *Record) Clone() Record {
	c := *r
	c.Steps = slices.Clone(r.Steps)
	c.Diff = slices.Clone(r.Diff)
	return c
}

// Query selects records. The zero value selects the newest DefaultLimit
// records.
type Query struct {
	// Tool, when set, keeps records whose requested or qualified name is
	// exactly Tool.
	Tool string
	// Decision, when set, keeps records whose final decision is Decision.
	Decision string
	// Outcome, when set, keeps records whose outcome is Outcome.
	Outcome string
	// Since, when set, keeps records of calls that started at or after
	// it.
	Since time.Time
	// Before, when positive, keeps records whose ID is below it: the
	// cursor of the next page (the last ID of the previous one).
	Before int64
	// Limit caps the number of records (DefaultLimit when 0, at most
	// MaxLimit).
	Limit int
}

// Limits of Query.Limit.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// EffectiveLimit returns the limit a Store applies for q.
func (q Query) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultLimit
	case q.Limit > MaxLimit:
		return MaxLimit
	}
	return q.Limit
}

// Match reports whether r passes q's filters (not Limit). Stores that
// filter in memory use it.
func (q Query) Match(r *Record) bool {
	switch {
	case q.Tool != "" && r.Tool != q.Tool && r.Qualified != q.Tool:
		return false
	case q.Decision != "" && r.Decision != q.Decision:
		return false
	case q.Outcome != "" && r.Outcome != q.Outcome:
		return false
	case !q.Since.IsZero() && r.Time.Before(q.Since):
		return false
	case q.Before > 0 && r.ID >= q.Before:
		return false
	}
	return true
}

// Store keeps audit records. Implementations are safe for concurrent use
// and pass the suite in gateway/audit/audittest.
type Store interface {
	// Append stores recs in order, assigning each an ID above every ID
	// assigned before (the records' own ID fields are ignored). All are
	// durable when it returns nil.
	Append(ctx context.Context, recs []Record) error
	// Query returns the records q selects, newest (highest ID) first.
	Query(ctx context.Context, q Query) ([]Record, error)
	// Prune deletes the records of calls that started before before and
	// returns how many.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// Trimmer is a Store that can also bound its size (the settings
// audit_max_rows and audit_max_bytes); the stores of store/sqlite,
// store/postgres and MemStore are.
type Trimmer interface {
	// Trim deletes the oldest records (the lowest IDs) until at most
	// maxRows remain and the kept records' encoded size (the bytes of
	// their JSON encoding, as the store keeps them) is at most maxBytes,
	// and returns how many it deleted. A limit ≤ 0 is no limit.
	Trim(ctx context.Context, maxRows, maxBytes int64) (int64, error)
}

// Check validates a record for Append: it must have a time.
func Check(r *Record) error {
	if r.Time.IsZero() {
		return utcp.NewError(utcp.CodeInvalidRequest, "audit: record of %q has no time", r.Tool)
	}
	return nil
}
