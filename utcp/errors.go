package utcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Code is a stable, machine-readable error code. The set of codes is closed:
// every error utcpd reports to a user carries exactly one of the constants
// below, and clients may switch on them.
type Code string

// The closed list of error codes.
const (
	CodeInvalidRequest       Code = "invalid_request"        // malformed request body, wrong types
	CodeInvalidConfig        Code = "invalid_config"         // a configuration file cannot be used
	CodeInvalidManual        Code = "invalid_manual"         // a manual document cannot be used
	CodeInvalidTemplate      Code = "invalid_template"       // a call template cannot be used
	CodeManualExists         Code = "manual_exists"          // a manual with that name is registered
	CodeManualNotFound       Code = "manual_not_found"       // no manual with that name
	CodeManualReadOnly       Code = "manual_read_only"       // the manual comes from the config file or manuals dir
	CodeDiscoveryFailed      Code = "discovery_failed"       // the manual could not be fetched
	CodeVariableNotFound     Code = "variable_not_found"     // a ${VAR} did not resolve
	CodeToolNotFound         Code = "tool_not_found"         // no tool with that name
	CodeAmbiguousTool        Code = "ambiguous_tool"         // an unqualified name matches several tools
	CodeInvalidArguments     Code = "invalid_arguments"      // arguments fail the tool's input schema
	CodeProtocolNotAllowed   Code = "protocol_not_allowed"   // allowed_communication_protocols refuses it
	CodeGuardDenied          Code = "guard_denied"           // a guard denied the call
	CodeGuardError           Code = "guard_error"            // a guard could not decide (fail closed)
	CodeReviewPending        Code = "review_pending"         // a guard asked for review and none came
	CodeGuardReviewTimeout   Code = "guard_review_timeout"   // the review expired undecided; the call did not run
	CodeToolError            Code = "tool_error"             // the tool itself reported a failure
	CodeTransportError       Code = "transport_error"        // the call could not be carried
	CodeTimeout              Code = "timeout"                // the deadline passed
	CodeCanceled             Code = "canceled"               // the caller went away
	CodeUnsupported          Code = "unsupported"            // the transport cannot do this
	CodePayloadTooLarge      Code = "payload_too_large"      // a body or output is over its cap
	CodeUnsupportedMediaType Code = "unsupported_media_type" // a POST or PUT not sent as application/json
	CodeUnauthorized         Code = "unauthorized"           // missing or wrong credentials
	CodeForbidden            Code = "forbidden"              // the caller may not use this surface from where it is; or an outgoing connection the trust rules refuse (internal/netguard)
	CodeNotFound             Code = "not_found"              // no such route or object
	CodeMethodNotAllowed     Code = "method_not_allowed"     // wrong HTTP method
	CodeUnavailable          Code = "unavailable"            // the daemon is not ready
	CodeRateLimited          Code = "rate_limited"           // a rate limit or concurrency cap refused the call (gateway.rate_limits); details.retry_after_seconds
	CodeInternal             Code = "internal"               // a bug: please report it
)

// Codes returns every error code, in declaration order.
func Codes() []Code {
	return []Code{
		CodeInvalidRequest, CodeInvalidConfig, CodeInvalidManual, CodeInvalidTemplate,
		CodeManualExists, CodeManualNotFound, CodeManualReadOnly, CodeDiscoveryFailed, CodeVariableNotFound,
		CodeToolNotFound, CodeAmbiguousTool, CodeInvalidArguments, CodeProtocolNotAllowed,
		CodeGuardDenied, CodeGuardError, CodeReviewPending, CodeGuardReviewTimeout, CodeToolError, CodeTransportError,
		CodeTimeout, CodeCanceled, CodeUnsupported, CodePayloadTooLarge, CodeUnsupportedMediaType, CodeUnauthorized, CodeForbidden,
		CodeNotFound, CodeMethodNotAllowed, CodeUnavailable, CodeRateLimited, CodeInternal,
	}
}

// Error is an error with a stable Code, a human message and optional
// structured details. Under errors.Is an *Error matches a bare code
// sentinel (&Error{Code: c}) of its code, and any other *Error only by
// identity, so a package's *Error constant is a sentinel of its own.
type Error struct {
	Code    Code
	Message string
	// Details carries structured context (candidates, schema path, status).
	// It must never contain secrets.
	Details map[string]any
	// Err is the underlying cause, if any.
	Err error
}

// NewError returns an *Error with the given code and formatted message
// (fmt.Sprintf) and no cause. To keep an underlying error in the chain
// (errors.Is, errors.As), use Errorf with %w.
func NewError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Errorf returns an *Error with the given code and the message
// fmt.Errorf(format, args...) formats; its cause (Err) is the operand of
// the %w verb, or every operand, joined, when format has several; nil
// without %w. The message does not depend on the verb: %w prints as %v.
func Errorf(code Code, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	e := &Error{Code: code, Message: err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		e.Err = u.Unwrap()
	case interface{ Unwrap() []error }:
		e.Err = errors.Join(u.Unwrap()...)
	}
	return e
}

// WithDetail returns e with key set in its details. It mutates and returns e.
func (e *Error) WithDetail(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a bare code sentinel, an *Error with only
// Code set (no Message, Details or Err), of e's code: errors.Is(err,
// &utcp.Error{Code: c}) asks "does err carry code c?". Any other *Error
// target matches by identity only (errors.Is compares pointers before it
// calls Is), so two package sentinels of one code stay distinct:
// registry.ErrNotFound is not transports.ErrNotRegistered. utcp.CodeOf
// reports the code of any error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.bare() && t.Code == e.Code
}

// bare reports whether e carries nothing but its code.
func (e *Error) bare() bool { return e.Message == "" && len(e.Details) == 0 && e.Err == nil }

// ToolError is a failure the tool itself reported: a CLI command exiting
// non-zero, an HTTP 4xx/5xx answer, an MCP isError result. The call was
// carried; its outcome is a failure. Value keeps what the tool returned.
type ToolError struct {
	Message string
	Value   any // the tool's own error payload (JSON-compatible), if any
	Status  int // a protocol status (HTTP status, exit code), 0 if none
	// MCP is the isError result as an MCP server sent it (see
	// Result.MCP), for the MCP front; empty for other protocols.
	MCP json.RawMessage
}

func (e *ToolError) Error() string {
	if e.Message == "" {
		return "tool reported an error"
	}
	return e.Message
}

// TransportError is a failure to carry a call: refused connection, 5xx from
// a proxy, broken stream. Status is the backend's status when it sent one.
type TransportError struct {
	Status int
	Err    error
}

func (e *TransportError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("transport error (status %d): %v", e.Status, e.Err)
	}
	return fmt.Sprintf("transport error: %v", e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// CodeOf returns the Code that best describes err: the code of the first
// *Error in its chain, tool_error for a *ToolError, transport_error for a
// *TransportError, timeout and canceled for the context errors, and
// internal otherwise. CodeOf(nil) is "".
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var ue *Error
	if errors.As(err, &ue) {
		return ue.Code
	}
	var te *ToolError
	if errors.As(err, &te) {
		return CodeToolError
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	var tr *TransportError
	if errors.As(err, &tr) {
		return CodeTransportError
	}
	return CodeInternal
}

// Closest returns up to max names from candidates closest to name by edit
// distance (ties broken by order), for "did you mean" hints. Candidates
// further than half the length of name (at least 2) are left out.
func Closest(name string, candidates []string, max int) []string {
	type scored struct {
		s string
		d int
	}
	limit := len(name) / 2
	if limit < 2 {
		limit = 2
	}
	var best []scored
	lname := strings.ToLower(name)
	for _, c := range candidates {
		d := editDistance(lname, strings.ToLower(c))
		if strings.Contains(strings.ToLower(c), lname) && lname != "" {
			d = min(d, 1)
		}
		if d > limit {
			continue
		}
		i := len(best)
		for i > 0 && best[i-1].d > d {
			i--
		}
		best = append(best, scored{})
		copy(best[i+1:], best[i:])
		best[i] = scored{c, d}
		if len(best) > max {
			best = best[:max]
		}
	}
	out := make([]string, len(best))
	for i, b := range best {
		out[i] = b.s
	}
	return out
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
