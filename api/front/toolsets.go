package front

import (
	"context"
	"net/http"
	"strconv"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// toolsetsPrefix is where the routes of a toolset start.
const toolsetsPrefix = "/v1/toolsets/"

// registerToolsets mounts the toolset routes (gateway.Toolset), the
// REST form of a virtual server:
//
//	GET  /v1/toolsets/{toolset}/tools               what the toolset lists (q: search its members; limit)
//	GET  /v1/toolsets/{toolset}/tools/{name}        one tool by its listed name
//	POST /v1/toolsets/{toolset}/tools/{name}/call   call it
//	POST /v1/toolsets/{toolset}/tools/{name}/stream call it as a stream
//
// Names are the toolset's listed names (renamed, hidden arguments out of
// the schema); a real name the toolset does not list is tool_not_found,
// an unknown toolset not_found. A search toolset lists its meta-tools
// (search_tools, describe_tool, call_tool), which are called here too.
func (h *Handler) registerToolsets(handle func(string, http.HandlerFunc)) {
	handle("GET /v1/toolsets/{toolset}/tools", h.toolsetList)
	handle("GET /v1/toolsets/{toolset}/tools/{name}", h.toolsetTool)
	handle("POST /v1/toolsets/{toolset}/tools/{name}/call", func(w http.ResponseWriter, r *http.Request) {
		ts, err := h.toolset(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.callWith(w, r, ts.CallTool)
	})
	handle("POST /v1/toolsets/{toolset}/tools/{name}/stream", func(w http.ResponseWriter, r *http.Request) {
		ts, err := h.toolset(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.streamWith(w, r, func(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error) {
			return ts.CallToolStreaming(ctx, name, args, opts)
		})
	})
}

func (h *Handler) toolset(r *http.Request) (*gateway.Toolset, error) {
	return h.g.ToolsetFor(r.Context(), r.PathValue("toolset"))
}

func (h *Handler) toolsetList(w http.ResponseWriter, r *http.Request) {
	ts, err := h.toolset(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	limit := MaxLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			h.fail(w, r, httpx.Errorf(utcp.CodeInvalidRequest, "limit must be a positive integer, got %q", s).WithDetail("parameter", "limit"))
			return
		}
		limit = min(n, MaxLimit)
	}
	var tools []*utcp.Tool
	if s := q.Get("q"); s != "" {
		tools = ts.SearchTools(r.Context(), s, limit)
	} else {
		tools = ts.Listed(r.Context())
		if len(tools) > limit {
			tools = tools[:limit]
		}
	}
	native, err := mcpParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ToolList{Tools: make([]Tool, 0, len(tools))}
	for _, t := range tools {
		tt := toTool(t)
		if native {
			tt.MCP = t.MCP
		}
		out.Tools = append(out.Tools, tt)
	}
	if native {
		w.Header().Set(HeaderMCP, "1")
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) toolsetTool(w http.ResponseWriter, r *http.Request) {
	ts, err := h.toolset(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if ts.Search() {
		for _, m := range ts.Listed(r.Context()) {
			if m.Name == name {
				httpx.WriteJSON(w, http.StatusOK, toTool(m))
				return
			}
		}
	}
	t, err := ts.Tool(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := toTool(t)
	auth, err := ts.AuthMetadata(r.Context(), name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out.Auth = &auth
	httpx.WriteJSON(w, http.StatusOK, out)
}
