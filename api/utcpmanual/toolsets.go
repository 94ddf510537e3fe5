package utcpmanual

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// The routes of a toolset (gateway.Toolset) as a UTCP manual of its own:
//
//	GET  /utcp/{toolset}                the manual of what the toolset lists
//	POST /utcp/{toolset}/call/{tool}    call one by its listed name
//
// The tools are the toolset's listed form (renamed, hidden arguments out
// of the schema, or the meta-tools of a search toolset); calls go through
// the toolset (real name to the guard and audit, hidden arguments added,
// a caller's hidden argument refused). An unknown toolset is not_found.
const (
	ToolsetManualPath = "/utcp/{toolset}"
	ToolsetCallPath   = "/utcp/{toolset}/call/{tool}"
)

func (h *Handler) registerToolsets(rt *httpx.Router, wrap func(http.Handler) http.Handler) {
	rt.Handle("GET "+ToolsetManualPath, wrap(http.HandlerFunc(h.serveToolsetManual)))
	rt.Handle("POST "+ToolsetCallPath, wrap(http.HandlerFunc(h.callToolset)))
}

func (h *Handler) serveToolsetManual(w http.ResponseWriter, r *http.Request) {
	ts, err := h.g.ToolsetFor(r.Context(), r.PathValue("toolset"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	base, err := h.baseURL(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	tools := ts.Listed(r.Context())
	list := make([]manualTool, 0, len(tools))
	for _, t := range tools {
		list = append(list, h.manualTool(t, base+"/utcp/"+escapeSegment(ts.Name())+"/call/"+escapeSegment(t.Name)))
	}
	body, err := json.Marshal(list)
	if err != nil {
		h.fail(w, r, httpx.Errorf(utcp.CodeInternal, "encoding the manual: %w", err))
		return
	}
	sum := sha256.Sum256(body)
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"utcp_version": utcp.Version, "manual_version": "1.0.0+" + hex.EncodeToString(sum[:6]), "tools": json.RawMessage(body),
	})
}

func (h *Handler) callToolset(w http.ResponseWriter, r *http.Request) {
	ts, err := h.g.ToolsetFor(r.Context(), r.PathValue("toolset"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name := r.PathValue("tool")
	ti := &toolInfo{bodyField: "body"}
	for _, t := range ts.Listed(r.Context()) {
		if t.Name == name {
			s := parseSchema(t.Inputs)
			ti = &toolInfo{schema: s, bodyField: s.bodyField()}
			break
		}
	}
	h.callWith(w, r, ti, func(args map[string]any, opts gateway.CallOptions) (*utcp.Result, error) {
		return ts.CallTool(r.Context(), name, args, opts)
	})
}
