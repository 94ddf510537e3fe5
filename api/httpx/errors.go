// Package httpx is the plumbing every HTTP surface of utcpd shares: the
// error envelope and the single error-to-status mapping, JSON reading and
// writing with body limits, bearer-token and loopback authentication, and
// a router that answers unknown routes and wrong methods with the
// envelope.
//
// The admin API (api/admin), the REST front (api/front) and the daemon's
// operational endpoints (package api) all write their errors through
// WriteError, so a code maps to the same HTTP status whichever surface it
// comes from.
package httpx

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/utcpd/utcpd/utcp"
)

// StatusClientClosedRequest is the status recorded for a request whose
// client went away before the answer (code canceled). Nobody reads it; it
// shows in access logs, as nginx's 499 does.
const StatusClientClosedRequest = 499

// statusOf is the mapping Status implements. Every code of utcp.Codes has
// an entry; a test keeps it that way.
var statusOf = map[utcp.Code]int{
	utcp.CodeInvalidRequest:       http.StatusBadRequest,
	utcp.CodeInvalidConfig:        http.StatusInternalServerError,
	utcp.CodeInvalidManual:        http.StatusUnprocessableEntity,
	utcp.CodeInvalidTemplate:      http.StatusBadRequest,
	utcp.CodeManualExists:         http.StatusConflict,
	utcp.CodeManualNotFound:       http.StatusNotFound,
	utcp.CodeManualReadOnly:       http.StatusConflict,
	utcp.CodeDiscoveryFailed:      http.StatusUnprocessableEntity,
	utcp.CodeVariableNotFound:     http.StatusInternalServerError,
	utcp.CodeToolNotFound:         http.StatusNotFound,
	utcp.CodeAmbiguousTool:        http.StatusConflict,
	utcp.CodeInvalidArguments:     http.StatusBadRequest,
	utcp.CodeProtocolNotAllowed:   http.StatusForbidden,
	utcp.CodeGuardDenied:          http.StatusForbidden,
	utcp.CodeGuardError:           http.StatusForbidden,
	utcp.CodeReviewPending:        http.StatusForbidden,
	utcp.CodeGuardReviewTimeout:   http.StatusForbidden,
	utcp.CodeToolError:            http.StatusBadGateway,
	utcp.CodeTransportError:       http.StatusBadGateway,
	utcp.CodeTimeout:              http.StatusGatewayTimeout,
	utcp.CodeCanceled:             StatusClientClosedRequest,
	utcp.CodeUnsupported:          http.StatusNotImplemented,
	utcp.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	utcp.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	utcp.CodeUnauthorized:         http.StatusUnauthorized,
	utcp.CodeForbidden:            http.StatusForbidden,
	utcp.CodeNotFound:             http.StatusNotFound,
	utcp.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	utcp.CodeUnavailable:          http.StatusServiceUnavailable,
	utcp.CodeRateLimited:          http.StatusTooManyRequests,
	utcp.CodeInternal:             http.StatusInternalServerError,
}

// Status returns the HTTP status of an error with code c. It is the one
// mapping every surface uses:
//
//	400 invalid_request invalid_template invalid_arguments
//	401 unauthorized
//	403 forbidden protocol_not_allowed guard_denied guard_error review_pending guard_review_timeout
//	404 not_found manual_not_found tool_not_found
//	405 method_not_allowed
//	409 manual_exists manual_read_only ambiguous_tool
//	413 payload_too_large
//	415 unsupported_media_type
//	422 discovery_failed invalid_manual
//	429 rate_limited (with Retry-After: details.retry_after_seconds)
//	499 canceled
//	500 internal variable_not_found invalid_config
//	501 unsupported
//	502 transport_error tool_error
//	503 unavailable
//	504 timeout
//
// guard_error is 403, not 502: the call was refused (fail closed), and a
// retry is refused the same way until the guard recovers. review_pending
// is 403, not 202: the call was not dispatched in this request (its
// details name the review_id, which GET /v1/reviews/{id} reports on; a
// call parked with ?wait=false is the 202 answer, not this error).
// guard_review_timeout is 403, not 408 or 504: the review expired
// undecided, the call did not run and never will, and clients that retry
// 408 automatically would only queue the same review again. tool_error appears as an envelope only where a tool's
// failure cannot be reported as a result (REST calls answer it as 200
// with "is_error": true). An unknown code is 500.
func Status(c utcp.Code) int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope is the body of every error answer:
// {"error": {"code": "...", "message": "...", "details": {...}}}.
type Envelope struct {
	// Error describes the failure.
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of an Envelope. Details is always an object,
// empty when there is nothing to add; it never holds secrets.
type ErrorBody struct {
	// Code is the stable code, one of utcp.Codes.
	Code utcp.Code `json:"code"`
	// Message explains the failure to a person.
	Message string `json:"message"`
	// Details carries structured context.
	Details map[string]any `json:"details"`
}

// internalMessage replaces the message of internal errors, whose text is
// logged but not shown.
const internalMessage = "internal error; the daemon log has the details"

// Problem turns err into its status and envelope: the code from
// utcp.CodeOf (an oversized body is payload_too_large), the message of
// the error, and the details of the first *utcp.Error in its chain. For a
// *utcp.ToolError the details hold the tool's value and status. The
// message of an internal error is replaced by a generic one.
func Problem(err error) (int, Envelope) {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return http.StatusRequestEntityTooLarge, Envelope{ErrorBody{
			Code:    utcp.CodePayloadTooLarge,
			Message: "request body is larger than the limit",
			Details: map[string]any{"limit_bytes": mb.Limit},
		}}
	}
	code := utcp.CodeOf(err)
	if code == "" {
		code = utcp.CodeInternal
	}
	body := ErrorBody{Code: code, Message: err.Error(), Details: map[string]any{}}
	var ue *utcp.Error
	if errors.As(err, &ue) && ue.Code == code {
		for k, v := range ue.Details {
			body.Details[k] = v
		}
	}
	var te *utcp.ToolError
	if code == utcp.CodeToolError && errors.As(err, &te) {
		if te.Value != nil {
			body.Details["value"] = te.Value
		}
		if te.Status != 0 {
			body.Details["status"] = te.Status
		}
	}
	var tr *utcp.TransportError
	if code == utcp.CodeTransportError && errors.As(err, &tr) && tr.Status != 0 {
		body.Details["status"] = tr.Status
	}
	if code == utcp.CodeInternal {
		body.Message = internalMessage
		body.Details = map[string]any{}
	}
	// A message or detail may quote a URL with its api_key, a DSN or a
	// token (a tool's or transport's error, a parse error of a template):
	// every error answer's message and string details are redacted by
	// value.
	body.Message = utcp.RedactText(body.Message)
	for k, v := range body.Details {
		if s, ok := v.(string); ok && utcp.HasSecretText(s) {
			body.Details[k] = utcp.RedactText(s)
		}
	}
	return Status(code), Envelope{body}
}

// WriteError writes err as an error envelope with its mapped status. An
// unauthorized answer gets a WWW-Authenticate challenge when the handler
// set none; a rate_limited answer a Retry-After header, the whole seconds
// of its details' retry_after_seconds. The message of an internal error is not shown: log it first
// (Logged does both).
func WriteError(w http.ResponseWriter, err error) {
	status, env := Problem(err)
	if env.Error.Code == utcp.CodeUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="utcpd"`)
	}
	if env.Error.Code == utcp.CodeRateLimited {
		if s, ok := env.Error.Details["retry_after_seconds"].(int); ok && s > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s))
		}
	}
	WriteJSON(w, status, env)
}

// Logged writes err as WriteError does, and first logs it through log
// when its code is internal (its message is hidden from the client), with
// the request's method and path. log may be nil.
func Logged(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	if log != nil && utcp.CodeOf(err) == utcp.CodeInternal {
		var mb *http.MaxBytesError
		if !errors.As(err, &mb) {
			log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		}
	}
	WriteError(w, err)
}

// Errorf returns a *utcp.Error with code and a formatted message; a
// shorthand for the handlers. It is utcp.Errorf: a %w operand is the
// error's cause (kept in the chain), printed as %v would.
func Errorf(code utcp.Code, format string, args ...any) *utcp.Error {
	return utcp.Errorf(code, format, args...)
}
