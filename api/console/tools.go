package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// toolsPageSize is the number of tools a Tools page lists.
const toolsPageSize = 50

type toolsData struct {
	Q, Tags  string
	Tools    []toolRow
	Page     int
	Next     bool
	Total    int // tools registered
	Searched bool
}

// toolsPage lists the tools sorted by name, or searches them as GET
// /v1/tools?q= does (gateway.SearchTools: tags and description words,
// best first); tags filter either way.
func (c *Console) toolsPage(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	d := toolsData{Q: strings.TrimSpace(qv.Get("q")), Tags: strings.TrimSpace(qv.Get("tags"))}
	if n, err := strconv.Atoi(qv.Get("page")); err == nil && n > 0 && n < 1<<20 {
		d.Page = n
	}
	var tags []string
	for t := range strings.SplitSeq(d.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	all := c.g.ListTools(r.Context())
	d.Total = len(all)
	var found []*utcp.Tool
	off := d.Page * toolsPageSize
	if d.Q != "" {
		d.Searched = true
		found = c.g.SearchTools(r.Context(), d.Q, off+toolsPageSize+1, tags)
	} else {
		slices.SortFunc(all, func(a, b *utcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		for _, t := range all {
			if len(tags) == 0 || hasAnyTag(t, tags) {
				found = append(found, t)
			}
		}
	}
	if off < len(found) {
		page := found[off:min(len(found), off+toolsPageSize)]
		for _, t := range page {
			d.Tools = append(d.Tools, toolRow{Name: t.Name, Description: t.Description, Tags: t.Tags})
		}
	}
	d.Next = len(found) > off+toolsPageSize
	c.render(w, r, http.StatusOK, "tools", page{Title: "Tools", Nav: "tools", Data: d})
}

func hasAnyTag(t *utcp.Tool, tags []string) bool {
	for _, have := range t.Tags {
		for _, want := range tags {
			if strings.EqualFold(have, want) {
				return true
			}
		}
	}
	return false
}

type toolData struct {
	Name, Description string
	Tags              []string
	Manual            string
	Inputs, Outputs   string
	Template          string
	Auth              string
	Form              *field
}

// toolPage shows one tool and a form generated from its input schema.
func (c *Console) toolPage(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	t, err := c.g.Tool(r.Context(), name)
	if err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	d := toolData{Name: t.Name, Description: t.Description, Tags: t.Tags, Inputs: "{}", Outputs: "{}", Form: buildForm(t.Inputs)}
	if m, _, ok := strings.Cut(t.Name, "."); ok {
		d.Manual = m
	}
	if len(t.Inputs) > 0 {
		d.Inputs = prettyJSON(t.Inputs)
	}
	if len(t.Outputs) > 0 {
		d.Outputs = prettyJSON(t.Outputs)
	}
	if t.ToolCallTemplate != nil && len(t.ToolCallTemplate.Raw) > 0 {
		d.Template = prettyJSON(utcp.Redact(t.ToolCallTemplate.Raw))
	} else if t.ToolCallTemplate != nil {
		if b, err := json.Marshal(t.ToolCallTemplate); err == nil {
			d.Template = prettyJSON(utcp.Redact(b))
		}
	}
	if am, err := c.g.AuthMetadata(r.Context(), t.Name); err == nil {
		if b, err := json.Marshal(am); err == nil && string(b) != "{}" {
			d.Auth = prettyJSON(b)
		}
	}
	c.render(w, r, http.StatusOK, "tool", page{Title: t.Name, Nav: "tools", Data: d})
}

// callRequest is the body of the script's call and stream requests.
type callRequest struct {
	Arguments map[string]any `json:"arguments"`
}

// readCall reads the arguments of a call request (JSON, bounded).
func (c *Console) readCall(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return nil, httpx.Errorf(utcp.CodeUnsupportedMediaType, "a call is sent as application/json, got %q", ct)
	}
	buf := httpx.GetBuffer()
	defer httpx.PutBuffer(buf)
	if err := httpx.ReadBody(w, r, c.opts.MaxBodyBytes, buf); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(buf.Bytes())) == 0 {
		return nil, nil
	}
	var req callRequest
	if err := httpx.DecodeStrict(buf.Bytes(), &req); err != nil {
		return nil, err
	}
	return req.Arguments, nil
}

func (c *Console) callOptions() gateway.CallOptions {
	return gateway.CallOptions{Principal: c.opts.Principal, Front: FrontName, Timeout: c.opts.CallTimeout}
}

// callResponse is the answer to a completed call. IsError marks a
// failure the tool itself reported; Error then carries its envelope
// (code tool_error, the tool's message) and Result its value.
type callResponse struct {
	Result  any              `json:"result"`
	IsError bool             `json:"is_error"`
	Error   *httpx.ErrorBody `json:"error,omitempty"`
}

// call runs one tool call for the tool page's form: the guard chain,
// lookup, validation and audit as on every front (it waits for a human
// review when a guard asks for one).
func (c *Console) call(w http.ResponseWriter, r *http.Request) {
	args, err := c.readCall(w, r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	res, err := c.g.CallTool(r.Context(), r.URL.Query().Get("name"), args, c.callOptions())
	if err != nil {
		var te *utcp.ToolError
		if utcp.CodeOf(err) == utcp.CodeToolError && errors.As(err, &te) {
			_, env := httpx.Problem(err)
			v := te.Value
			if v == nil {
				v = env.Error.Message
			}
			writeJSON(w, http.StatusOK, callResponse{Result: v, IsError: true, Error: &env.Error})
			return
		}
		if utcp.CodeOf(err) == utcp.CodeInternal {
			c.log.Error("console: internal error", "path", r.URL.Path, "err", err)
		}
		httpx.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, callResponse{Result: res.Value})
}

// writeJSON writes v as JSON (numbers and raw values as they are).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpx.WriteError(w, httpx.Errorf(utcp.CodeInternal, "encoding the answer: %w", err))
		return
	}
	httpx.WriteRaw(w, status, "application/json", append(b, '\n'))
}

// streamLine is one line of a stream answer: an event, the end, or an
// error (the envelope's body).
type streamLine struct {
	Event *utcp.Event      `json:"event,omitempty"`
	End   bool             `json:"end,omitempty"`
	Error *httpx.ErrorBody `json:"error,omitempty"`
}

// stream runs one call as a stream (gateway.CallToolStreaming; a tool
// whose transport cannot stream yields one event) and answers one JSON
// object a line (application/x-ndjson), flushed event by event. A
// failure before the stream started is an error envelope with its
// status.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	args, err := c.readCall(w, r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	st, err := c.g.CallToolStreaming(r.Context(), r.URL.Query().Get("name"), args, c.callOptions())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	defer st.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	write := func(l streamLine) bool {
		if err := enc.Encode(l); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	_ = rc.Flush()
	for {
		ev, err := st.Recv()
		if errors.Is(err, io.EOF) {
			write(streamLine{End: true})
			return
		}
		if err != nil {
			_, env := httpx.Problem(err)
			write(streamLine{Error: &env.Error})
			return
		}
		if !write(streamLine{Event: ev}) {
			return // the page went away; Close cancels the call
		}
	}
}
