package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/utcp"
)

// The resources and prompts of MCP servers behind utcpd, for clients
// that do not speak MCP (see docs/mcp.md):
//
//	GET  /v1/resources                 every resource and resource template
//	GET  /v1/resources/read?uri=URI    read one resource (a utcpd URI)
//	GET  /v1/prompts                   every prompt
//	POST /v1/prompts/{name}/get        get one prompt: {"arguments": {"k": "v"}}
//	POST /v1/completions               MCP completion/complete (CompleteParams, utcpd names)
//
// Names are utcpd's: a resource's URI is utcpd://<manual>.<server>/<the
// server's URI>, a prompt's name <manual>.<server>.<name>. Reads and
// prompts go through the guard chain (kinds "resource" and "prompt") and
// are audited (front "rest"); the answers are the MCP results as the
// server sent them.

// ResourceItem is a resource (URI set) or resource template
// (URITemplate set) of an MCP server, as GET /v1/resources lists it.
type ResourceItem struct {
	// URI is the resource's utcpd URI (resources).
	URI string `json:"uri,omitempty"`
	// URITemplate is the template's utcpd URI template (templates).
	URITemplate string `json:"uri_template,omitempty"`
	// Manual and Server name the MCP server.
	Manual string `json:"manual"`
	Server string `json:"server"`
	// MCP is the Resource or ResourceTemplate as the server listed it
	// (its own URI).
	MCP json.RawMessage `json:"mcp"`
}

// ResourceList is the answer to GET /v1/resources.
type ResourceList struct {
	Resources         []ResourceItem `json:"resources"`
	ResourceTemplates []ResourceItem `json:"resource_templates"`
}

// PromptItem is a prompt of an MCP server, as GET /v1/prompts lists it.
type PromptItem struct {
	// Name is the prompt's utcpd name (manual.server.prompt).
	Name string `json:"name"`
	// Manual and Server name the MCP server.
	Manual string `json:"manual"`
	Server string `json:"server"`
	// MCP is the Prompt as the server listed it (its own name).
	MCP json.RawMessage `json:"mcp"`
}

// PromptList is the answer to GET /v1/prompts.
type PromptList struct {
	Prompts []PromptItem `json:"prompts"`
}

// PromptRequest is the body of POST /v1/prompts/{name}/get. An empty
// body is no arguments.
type PromptRequest struct {
	// Arguments are the prompt's arguments, strings as MCP has them.
	Arguments map[string]string `json:"arguments"`
}

func (h *Handler) registerResources(handle func(string, http.HandlerFunc)) {
	handle("GET /v1/resources", h.resources)
	handle("GET /v1/resources/read", h.readResource)
	handle("GET /v1/prompts", h.prompts)
	handle("POST /v1/prompts/{name}/get", h.getPrompt)
	handle("POST /v1/completions", h.complete)
}

// complete forwards an MCP CompleteParams (its ref naming a prompt by its
// utcpd name or a resource template by its utcpd URI template) to the
// owning server and answers its CompleteResult.
func (h *Handler) complete(w http.ResponseWriter, r *http.Request) {
	opts, err := h.mcpOptions(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.g.Complete(r.Context(), body, opts)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeRaw(w, res)
}

// mcpOptions are the call options of a resource, prompt or completion
// request: its deadline (?timeout=), whether to wait for a review
// (?wait=, resource reads and prompt gets) and the caller.
func (h *Handler) mcpOptions(r *http.Request) (gateway.CallOptions, error) {
	d, err := h.timeout(r)
	if err != nil {
		return gateway.CallOptions{}, err
	}
	wait, err := waitParam(r)
	if err != nil {
		return gateway.CallOptions{}, err
	}
	return gateway.CallOptions{Principal: httpx.Principal(r.Context()), Front: FrontName, Timeout: d, NoWait: !wait}, nil
}

// failOrPark answers a parked read or get (?wait=false) with 202 and the
// review to poll, any other error as usual.
func (h *Handler) failOrPark(w http.ResponseWriter, r *http.Request, opts gateway.CallOptions, err error) {
	var parked *review.ParkedError
	if opts.NoWait && errors.As(err, &parked) {
		writeParked(w, parked)
		return
	}
	h.fail(w, r, err)
}

// readBody reads the request body within the front's size limit and
// returns a copy the caller may keep.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, h.maxBody, buf); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

func (h *Handler) resources(w http.ResponseWriter, r *http.Request) {
	cat := h.g.ListMCP(r.Context())
	out := ResourceList{Resources: make([]ResourceItem, 0, len(cat.Resources)), ResourceTemplates: make([]ResourceItem, 0, len(cat.ResourceTemplates))}
	for _, it := range cat.Resources {
		out.Resources = append(out.Resources, ResourceItem{URI: it.Name, Manual: it.Manual, Server: it.Server, MCP: it.Object})
	}
	for _, it := range cat.ResourceTemplates {
		out.ResourceTemplates = append(out.ResourceTemplates, ResourceItem{URITemplate: it.Name, Manual: it.Manual, Server: it.Server, MCP: it.Object})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) prompts(w http.ResponseWriter, r *http.Request) {
	cat := h.g.ListMCP(r.Context())
	out := PromptList{Prompts: make([]PromptItem, 0, len(cat.Prompts))}
	for _, it := range cat.Prompts {
		out.Prompts = append(out.Prompts, PromptItem{Name: it.Name, Manual: it.Manual, Server: it.Server, MCP: it.Object})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) readResource(w http.ResponseWriter, r *http.Request) {
	uri := r.URL.Query().Get("uri")
	if uri == "" {
		h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "the query parameter uri (a utcpd resource URI) is required").WithDetail("parameter", "uri"))
		return
	}
	opts, err := h.mcpOptions(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.g.ReadResource(r.Context(), uri, opts)
	if err != nil {
		h.failOrPark(w, r, opts, err)
		return
	}
	writeRaw(w, res)
}

func (h *Handler) getPrompt(w http.ResponseWriter, r *http.Request) {
	opts, err := h.mcpOptions(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.readBody(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var req PromptRequest
	if len(body) > 0 {
		if err := httpx.DecodeStrict(body, &req); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	res, err := h.g.GetPrompt(r.Context(), r.PathValue("name"), req.Arguments, opts)
	if err != nil {
		h.failOrPark(w, r, opts, err)
		return
	}
	writeRaw(w, res)
}

// writeRaw writes an MCP result the gateway returned as JSON.
func writeRaw(w http.ResponseWriter, raw json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(bytes.TrimSpace(raw))
	_, _ = w.Write([]byte("\n"))
}
