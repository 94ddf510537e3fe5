package admin

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// registerToolsets mounts the toolset routes (gateway.Toolset):
//
//	GET    /admin/toolsets          every toolset, config file's and API's
//	POST   /admin/toolsets          create one: {"name": "mini", ...the toolset's keys}
//	GET    /admin/toolsets/{name}   one, with its members (listed and real names)
//	PUT    /admin/toolsets/{name}   create or replace one: the toolset's keys
//	DELETE /admin/toolsets/{name}   remove one
//
// The API's toolsets are persisted in the store (and reach the other
// replicas of a shared one); the config file's are read-only here
// (manual_read_only) and win over a stored one of the same name. A
// toolset that does not validate is invalid_request; creating an
// existing one is manual_exists; an unknown one is not_found.
func (h *Handler) registerToolsets(handle func(string, http.HandlerFunc)) {
	handle("GET /admin/toolsets", h.listToolsets)
	handle("POST /admin/toolsets", h.createToolset)
	handle("GET /admin/toolsets/{name}", h.getToolset)
	handle("PUT /admin/toolsets/{name}", h.putToolset)
	handle("DELETE /admin/toolsets/{name}", h.deleteToolset)
}

// ToolsetList is the answer to GET /admin/toolsets.
type ToolsetList struct {
	Toolsets []gateway.ToolsetInfo `json:"toolsets"`
}

// ToolsetDetail is the answer to GET, POST and PUT of one toolset: the
// toolset and its members now.
type ToolsetDetail struct {
	gateway.ToolsetInfo
	// Tools are the members: the name the toolset lists each under and
	// its real qualified name.
	Tools []ToolsetMember `json:"tools"`
}

// ToolsetMember is one member of a toolset.
type ToolsetMember struct {
	Name      string `json:"name"`
	Qualified string `json:"qualified"`
}

func (h *Handler) listToolsets(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, ToolsetList{Toolsets: h.g.Toolsets()})
}

func (h *Handler) toolsetDetail(name string) (ToolsetDetail, error) {
	ts, err := h.g.Toolset(name)
	if err != nil {
		return ToolsetDetail{}, err
	}
	out := ToolsetDetail{ToolsetInfo: gateway.ToolsetInfo{Name: ts.Name(), Source: ts.Source(), Spec: ts.Spec()}, Tools: []ToolsetMember{}}
	for _, m := range ts.Members() {
		out.Tools = append(out.Tools, ToolsetMember{Name: m.Listed, Qualified: m.Qualified})
	}
	return out, nil
}

func (h *Handler) getToolset(w http.ResponseWriter, r *http.Request) {
	out, err := h.toolsetDetail(r.PathValue("name"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// readToolset reads a toolset body; with named, its "name" key is taken
// out (and must be want when want is set).
func (h *Handler) readToolset(w http.ResponseWriter, r *http.Request, want string) (string, gateway.ToolsetSpec, error) {
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		return "", gateway.ToolsetSpec{}, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &obj); err != nil || obj == nil {
		return "", gateway.ToolsetSpec{}, httpx.Errorf(utcp.CodeInvalidRequest, "the body must be a JSON object: a toolset such as {\"include\": [\"demo.*\"]}")
	}
	name := want
	if raw, ok := obj["name"]; ok {
		var n string
		if json.Unmarshal(raw, &n) != nil {
			return "", gateway.ToolsetSpec{}, httpx.Errorf(utcp.CodeInvalidRequest, "name must be a string").WithDetail("field", "name")
		}
		if want != "" && n != want {
			return "", gateway.ToolsetSpec{}, httpx.Errorf(utcp.CodeInvalidRequest, "the body's name %q is not the path's %q", n, want).WithDetail("field", "name")
		}
		name = n
		delete(obj, "name")
	}
	if name == "" {
		return "", gateway.ToolsetSpec{}, httpx.Errorf(utcp.CodeInvalidRequest, "the toolset needs a name").WithDetail("field", "name")
	}
	rest, _ := json.Marshal(obj)
	spec, err := gateway.ParseToolsetSpec(name, bytes.TrimSpace(rest))
	return name, spec, err
}

func (h *Handler) createToolset(w http.ResponseWriter, r *http.Request) {
	name, spec, err := h.readToolset(w, r, "")
	if err == nil {
		_, err = h.g.PutToolset(r.Context(), name, spec, true)
	}
	h.writeToolset(w, r, name, http.StatusCreated, err)
}

func (h *Handler) putToolset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !gateway.ValidToolsetName(name) {
		h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "toolset name %q: must be 1 to 64 letters, digits, '_' or '-'", name).WithDetail("toolset", name))
		return
	}
	_, spec, err := h.readToolset(w, r, name)
	status := http.StatusOK
	if err == nil {
		var created bool
		if created, err = h.g.PutToolset(r.Context(), name, spec, false); created {
			status = http.StatusCreated
		}
	}
	h.writeToolset(w, r, name, status, err)
}

func (h *Handler) writeToolset(w http.ResponseWriter, r *http.Request, name string, status int, err error) {
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out, err := h.toolsetDetail(name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if status == http.StatusCreated {
		w.Header().Set("Location", "/admin/toolsets/"+name)
	}
	httpx.WriteJSON(w, status, out)
}

func (h *Handler) deleteToolset(w http.ResponseWriter, r *http.Request) {
	if err := h.g.DeleteToolset(r.Context(), r.PathValue("name")); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
