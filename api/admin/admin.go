// Package admin is utcpd's admin API: registering, replacing, listing,
// inspecting, refreshing and removing manuals over HTTP, under /admin/.
//
// Routes (every error is the httpx envelope):
//
//	POST   /admin/manuals                   register one manual call template → 201
//	GET    /admin/manuals                   list the manuals, each with its health
//	GET    /admin/manuals/{name}            one manual: health, redacted template, tools, source, times
//	PUT    /admin/manuals/{name}            create (201) or replace atomically (200)
//	DELETE /admin/manuals/{name}            deregister → 204
//	POST   /admin/manuals/{name}/refresh    discover again (a failed manual: retry now), replace atomically
//	GET    /admin/manuals/{name}/variables  required variables and whether each resolves
//	GET    /admin/manuals/{name}/changes    pinned tool definitions: the pin, pending and recent changes with diffs (changes.go)
//	POST   /admin/manuals/{name}/changes/{id}/approve  pin a held change's definitions; they serve at once
//	POST   /admin/manuals/{name}/changes/{id}/reject   keep the pin ({"note": "..."} optional)
//	GET    /admin/reviews                   calls awaiting review (?status=pending|...|all), arguments redacted
//	GET    /admin/reviews/{id}              one review
//	POST   /admin/reviews/{id}/approve      approve ({"note": "..."} optional); the call runs once
//	POST   /admin/reviews/{id}/deny         deny ({"note": "..."} optional); the call never runs
//	GET    /admin/audit                     the audit log, newest first (?tool= &decision= &outcome= &since= &before= &limit=)
//
// Every manual has a health (gateway.ManualHealth): its status (ready,
// discovering, failed, degraded), last error, last success, tool count,
// failures and next retry. Manuals from the configuration file, the
// manuals folder and the store that fail to register are listed as
// failed (with no tools) and retried in the background; a registration
// through this API that fails answers the error and leaves nothing
// behind.
//
// Manuals registered here have source "api" and are persisted by the
// gateway's store. Manuals from the configuration file (source "config")
// or the manuals directory (source "dir") can be read and refreshed but
// not replaced or removed: that is manual_read_only (409), naming where
// the manual comes from. Authentication is the caller's business (package
// api wraps these routes in the admin token check).
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// DefaultTimeout bounds a registration's discovery when Options.Timeout
// is zero.
const DefaultTimeout = time.Minute

// Recorder counts registrations for metrics. Op is "register", "replace",
// "refresh" or "deregister"; err is nil on success.
type Recorder interface {
	Registration(source, op string, err error)
}

// Options configure the admin handlers. Gateway is required.
type Options struct {
	// Gateway holds the manuals.
	Gateway *gateway.Gateway
	// MaxBodyBytes caps request bodies (default httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Timeout bounds discovery during register, replace and refresh
	// (default DefaultTimeout).
	Timeout time.Duration
	// Recorder, when set, counts registrations.
	Recorder Recorder
	// Reviews, when set, serves /admin/reviews; without it those routes
	// answer not_found.
	Reviews *review.Queue
	// Audit, when set, serves /admin/audit; without it that route
	// answers not_found.
	Audit audit.Store
	// Logger receives internal errors; nil discards them.
	Logger *slog.Logger
}

// Handler serves the admin API. Create it with New and mount it with
// Register.
type Handler struct {
	g        *gateway.Gateway
	maxBody  int64
	timeout  time.Duration
	recorder Recorder
	reviews  *review.Queue
	audit    audit.Store
	log      *slog.Logger
}

// New returns the admin handlers for opts.
func New(opts Options) *Handler {
	h := &Handler{g: opts.Gateway, maxBody: opts.MaxBodyBytes, timeout: opts.Timeout, recorder: opts.Recorder,
		reviews: opts.Reviews, audit: opts.Audit, log: opts.Logger}
	if h.maxBody <= 0 {
		h.maxBody = httpx.DefaultMaxBodyBytes
	}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Register mounts the admin routes on rt, each wrapped by wrap (the
// authentication middleware; nil for none).
func (h *Handler) Register(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	if wrap == nil {
		wrap = func(next http.Handler) http.Handler { return next }
	}
	handle := func(pattern string, f http.HandlerFunc) { rt.Handle(pattern, wrap(f)) }
	handle("POST /admin/manuals", h.create)
	handle("GET /admin/manuals", h.list)
	handle("GET /admin/manuals/{name}", h.get)
	handle("PUT /admin/manuals/{name}", h.put)
	handle("DELETE /admin/manuals/{name}", h.delete)
	handle("POST /admin/manuals/{name}/refresh", h.refresh)
	handle("GET /admin/manuals/{name}/variables", h.variables)
	handle("GET /admin/manuals/{name}/changes", h.listChanges)
	handle("POST /admin/manuals/{name}/changes/{id}/approve", h.approveChange)
	handle("POST /admin/manuals/{name}/changes/{id}/reject", h.rejectChange)
	handle("GET /admin/reviews", h.listReviews)
	handle("GET /admin/reviews/{id}", h.getReview)
	handle("POST /admin/reviews/{id}/approve", h.approveReview)
	handle("POST /admin/reviews/{id}/deny", h.denyReview)
	handle("GET /admin/audit", h.listAudit)
	h.registerToolsets(handle)
}

// RegisterResponse is the answer to a registration, replacement or
// refresh.
type RegisterResponse struct {
	// Name is the manual's (sanitised) name.
	Name string `json:"name"`
	// Tools are the qualified names of its tools.
	Tools []string `json:"tools"`
	// Warnings name what was ignored or dropped (unknown fields, tools a
	// protocol rule refused).
	Warnings []string `json:"warnings"`
}

// ManualSummary is one entry of GET /admin/manuals.
type ManualSummary struct {
	// Name is the manual's name.
	Name string `json:"name"`
	// Type is its template's call_template_type.
	Type string `json:"call_template_type"`
	// Source is where it came from: "config", "dir" or "api".
	Source string `json:"source"`
	// ToolCount is the number of its registered tools (0 for a failed
	// manual, or one whose first discovery is under way).
	ToolCount int `json:"tool_count"`
	// Registered is when it was first registered; Refreshed when its
	// tools were last discovered. Each is absent when it has not happened
	// (a first discovery under way; a failed manual was never refreshed).
	Registered time.Time `json:"registered,omitzero"`
	Refreshed  time.Time `json:"refreshed,omitzero"`
	Health
}

// Health is a manual's health, part of ManualSummary and ManualDetail.
type Health struct {
	// Status is ready, discovering, failed or degraded
	// (gateway.ManualState).
	Status gateway.ManualState `json:"status"`
	// LastError is the last failure; null once an attempt succeeded.
	LastError *LastError `json:"last_error"`
	// LastSuccess is when the tools were last discovered (a stored copy's
	// discovery time included); null if never.
	LastSuccess *time.Time `json:"last_success"`
	// NextRetry is when the next background attempt is due; null when
	// none is scheduled.
	NextRetry *time.Time `json:"next_retry"`
	// Failures counts the consecutive failed attempts.
	Failures int `json:"failures"`
}

// LastError is a manual's last failure.
type LastError struct {
	// Code is its stable error code (discovery_failed, ...).
	Code utcp.Code `json:"code"`
	// Message says what failed, in one line.
	Message string `json:"message"`
	// At is when it failed.
	At time.Time `json:"at"`
}

// HealthOf returns the API form of h.
func HealthOf(h gateway.ManualHealth) Health {
	out := Health{Status: h.State, Failures: h.Failures}
	if h.LastError != nil {
		out.LastError = &LastError{Code: h.LastError.Code, Message: h.LastError.Message, At: h.LastError.At}
	}
	if !h.LastSuccess.IsZero() {
		t := h.LastSuccess
		out.LastSuccess = &t
	}
	if !h.NextRetry.IsZero() {
		t := h.NextRetry
		out.NextRetry = &t
	}
	return out
}

// ManualList is the answer to GET /admin/manuals, sorted by name.
type ManualList struct {
	// Manuals are the registered manuals.
	Manuals []ManualSummary `json:"manuals"`
}

// ToolSummary names one tool of a manual.
type ToolSummary struct {
	// Name is the tool's qualified name.
	Name string `json:"name"`
	// Description is the tool's description.
	Description string `json:"description"`
}

// ManualDetail is the answer to GET /admin/manuals/{name}. Template is
// the manual call template as registered (before variable substitution)
// with secret-looking values replaced by utcp.Redacted ({} while a first
// discovery is under way).
type ManualDetail struct {
	// Name, Type and Source are as in ManualSummary.
	Name   string `json:"name"`
	Type   string `json:"call_template_type"`
	Source string `json:"source"`
	// Template is the redacted manual call template.
	Template json.RawMessage `json:"template"`
	// ToolCount is len(Tools).
	ToolCount int `json:"tool_count"`
	// Tools are the manual's tools in discovery order.
	Tools []ToolSummary `json:"tools"`
	// Registered and Refreshed are as in ManualSummary.
	Registered time.Time `json:"registered,omitzero"`
	Refreshed  time.Time `json:"refreshed,omitzero"`
	Health
}

// VariableList is the answer to GET /admin/manuals/{name}/variables. It
// never carries values.
type VariableList struct {
	Manual    string             `json:"manual"`
	Variables []gateway.Variable `json:"variables"`
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpx.Logged(h.log, w, r, err)
}

func (h *Handler) record(source, op string, err error) {
	if h.recorder != nil {
		h.recorder.Registration(source, op, err)
	}
}

// readTemplate reads a request body that must be one JSON object.
func (h *Handler) readTemplate(w http.ResponseWriter, r *http.Request) (json.RawMessage, error) {
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		return nil, err
	}
	return CheckTemplate(buf.Bytes())
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	raw, err := h.readTemplate(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.g.RegisterManual(ctx, raw, gateway.RegisterOptions{Source: registry.SourceAPI})
	h.record(registry.SourceAPI, "register", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/admin/manuals/"+res.Name)
	httpx.WriteJSON(w, http.StatusCreated, response(res))
}

func (h *Handler) put(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || utcp.SanitizeName(name) != name {
		h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "manual name %q in the path is not valid: use only letters, digits and _ (as %q)", name, utcp.SanitizeName(name)).
			WithDetail("manual", name))
		return
	}
	raw, err := h.readTemplate(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	raw, err = withName(raw, name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	_, existed := h.g.Manual(name)
	if err := h.writable(name); err != nil {
		h.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.g.RegisterManual(ctx, raw, gateway.RegisterOptions{Source: registry.SourceAPI, Replace: true})
	op := "register"
	if existed {
		op = "replace"
	}
	h.record(registry.SourceAPI, op, err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if !existed {
		status = http.StatusCreated
		w.Header().Set("Location", "/admin/manuals/"+res.Name)
	}
	httpx.WriteJSON(w, status, response(res))
}

// withName returns raw with its "name" set to name when absent; a present
// name must be name (or sanitise to it), else invalid_request.
func withName(raw json.RawMessage, name string) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, httpx.DecodeStrict(raw, &obj)
	}
	if v, ok := obj["name"]; ok && string(v) != "null" {
		var body string
		if err := json.Unmarshal(v, &body); err != nil {
			return nil, httpx.Errorf(utcp.CodeInvalidRequest, "field name: must be a string").WithDetail("field", "name")
		}
		if body != "" {
			if utcp.SanitizeName(body) != name {
				return nil, httpx.Errorf(utcp.CodeInvalidRequest, "the template's name %q does not match the manual name %q in the path; leave it out or make them equal", body, name).
					WithDetail("path_name", name).WithDetail("body_name", body)
			}
			return raw, nil
		}
	}
	obj["name"], _ = json.Marshal(name)
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// writable returns manual_read_only for a manual whose source is the
// configuration file or the manuals directory, nil otherwise (including
// when it is not registered).
func (h *Handler) writable(name string) error { return ReadOnly(h.g, name) }

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	ss := h.g.Statuses()
	out := ManualList{Manuals: make([]ManualSummary, 0, len(ss))}
	for _, s := range ss {
		sum := ManualSummary{Name: s.Name, Type: s.Type, Source: s.Source, ToolCount: s.Health.ToolCount, Health: HealthOf(s.Health)}
		if m := s.Manual; m != nil {
			sum.Registered, sum.Refreshed = m.Registered, m.Refreshed
		}
		out.Manuals = append(out.Manuals, sum)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s, ok := h.g.Status(name)
	if !ok {
		h.fail(w, r, notFound(name))
		return
	}
	out := ManualDetail{
		Name: s.Name, Type: s.Type, Source: s.Source,
		Template: json.RawMessage("{}"), Tools: []ToolSummary{}, ToolCount: s.Health.ToolCount,
		Health: HealthOf(s.Health),
	}
	m := s.Manual
	if m == nil {
		httpx.WriteJSON(w, http.StatusOK, out)
		return
	}
	out.Registered, out.Refreshed = m.Registered, m.Refreshed
	if m.Template != nil && len(m.Template.Raw) > 0 {
		out.Template = utcp.Redact(m.Template.Raw)
	}
	for _, t := range m.Tools {
		desc := ""
		if t.Def != nil {
			desc = t.Def.Description
		}
		out.Tools = append(out.Tools, ToolSummary{Name: t.Name, Description: desc})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	m, ok := h.g.Manual(name)
	if !ok {
		h.fail(w, r, notFound(name))
		return
	}
	if err := h.writable(name); err != nil {
		h.fail(w, r, err)
		return
	}
	err := h.g.DeregisterManual(r.Context(), name)
	h.record(m.Source, "deregister", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) refresh(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	m, ok := h.g.Manual(name)
	if !ok {
		h.fail(w, r, notFound(name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.g.RefreshManual(ctx, name)
	h.record(m.Source, "refresh", err)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, response(res))
}

func (h *Handler) variables(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	vars, err := h.g.RequiredVariables(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if vars == nil {
		vars = []gateway.Variable{}
	}
	httpx.WriteJSON(w, http.StatusOK, VariableList{Manual: name, Variables: vars})
}

func notFound(name string) error {
	return httpx.Errorf(utcp.CodeManualNotFound, "manual %q is not registered", name).WithDetail("manual", name)
}

func response(res *gateway.RegisterResult) RegisterResponse {
	out := RegisterResponse{Name: res.Name, Tools: res.Tools, Warnings: res.Warnings}
	if out.Tools == nil {
		out.Tools = []string{}
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	return out
}
