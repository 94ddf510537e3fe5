package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/utcpd/utcpd/api/admin"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/utcp"
)

// ManualRow is one manual as the Manuals page lists it: its name, source
// and transport and its health (gateway.ManualHealth), as GET
// /admin/manuals shows them.
type ManualRow struct {
	// Name, Source ("config", "dir", "api") and Transport (the template's
	// call_template_type) describe the manual.
	Name, Source, Transport string
	// State is ready, discovering, failed or degraded.
	State gateway.ManualState
	// LastErrorCode, LastError and LastErrorAt describe the last failed
	// discovery ("" and zero once one succeeded); the message is
	// redacted.
	LastErrorCode utcp.Code
	LastError     string
	LastErrorAt   time.Time
	// Failures counts the consecutive failed attempts; NextRetry is when
	// the next background attempt is due (zero when none is).
	Failures  int
	NextRetry time.Time
	// ToolCount is the number of its registered tools.
	ToolCount int
	// Registered and Refreshed are when it was registered and last
	// discovered (zero when that has not happened).
	Registered, Refreshed time.Time
	// Writable reports that the console may replace and remove it
	// (source "api").
	Writable bool
}

// manualRows lists every manual the gateway knows for the Manuals page,
// sorted by name: registered ones, failed ones and those whose first
// discovery is under way (gateway.Statuses).
func (c *Console) manualRows() []ManualRow {
	ss := c.g.Statuses()
	out := make([]ManualRow, 0, len(ss))
	for _, s := range ss {
		out = append(out, rowOf(s))
	}
	return out
}

// manualRow returns one manual's row and its registry entry (nil while
// its first discovery is under way).
func (c *Console) manualRow(name string) (ManualRow, *registry.Manual, bool) {
	s, ok := c.g.Status(name)
	if !ok {
		return ManualRow{}, nil, false
	}
	return rowOf(s), s.Manual, true
}

func rowOf(s gateway.ManualStatus) ManualRow {
	h := s.Health
	row := ManualRow{Name: s.Name, Source: s.Source, Transport: s.Type, State: h.State, ToolCount: h.ToolCount,
		Failures: h.Failures, NextRetry: h.NextRetry, Writable: s.Source == registry.SourceAPI}
	if e := h.LastError; e != nil {
		row.LastErrorCode, row.LastError, row.LastErrorAt = e.Code, utcp.RedactText(e.Message), e.At
	}
	if m := s.Manual; m != nil {
		row.Registered, row.Refreshed = m.Registered, m.Refreshed
	}
	return row
}

// urlTypes are the call_template_types the "URL and type" form offers,
// each a template that reaches a manual (or server) at one URL.
var urlTypes = []string{"http", "sse", "streamable_http", "graphql", "websocket", "mcp"}

// addForm is the Manuals page's form, kept when a registration fails.
type addForm struct {
	Mode     string // "template" or "url"
	Template string
	URL      string
	Type     string
	Name     string
	Replace  bool
}

type manualsData struct {
	Manuals []ManualRow
	Form    addForm
	Types   []string
	Counts  map[string]int
	// Pending counts each manual's pending changes of pinned tool
	// definitions (pins.go).
	Pending map[string]int
}

func (c *Console) manualsPage(w http.ResponseWriter, r *http.Request) {
	c.showManuals(w, r, http.StatusOK, addForm{Mode: "template", Type: "http"}, nil)
}

func (c *Console) showManuals(w http.ResponseWriter, r *http.Request, status int, f addForm, err error) {
	rows := c.manualRows()
	counts := map[string]int{}
	for _, m := range rows {
		counts[string(m.State)]++
	}
	p := page{Title: "Manuals", Nav: "manuals", Data: manualsData{Manuals: rows, Form: f, Types: urlTypes, Counts: counts,
		Pending: c.pendingChanges(r.Context())}}
	if err != nil {
		p.Problem = problemOf(err)
		status = p.Problem.Status
	}
	c.render(w, r, status, "manuals", p)
}

// addManual registers the manual of the form: a pasted call template, or
// a URL with its type. Failures show the admin API's error on the page,
// the form kept.
func (c *Console) addManual(w http.ResponseWriter, r *http.Request) {
	f := addForm{Mode: r.PostForm.Get("mode"), Template: r.PostForm.Get("template"), URL: strings.TrimSpace(r.PostForm.Get("url")),
		Type: r.PostForm.Get("type"), Name: strings.TrimSpace(r.PostForm.Get("name")), Replace: r.PostForm.Get("replace") != ""}
	var raw json.RawMessage
	var err error
	if f.Mode == "url" {
		raw, err = urlTemplate(f.URL, f.Type, f.Name)
	} else {
		f.Mode = "template"
		raw, err = pastedTemplate(f.Template, f.Name)
	}
	if err != nil {
		c.showManuals(w, r, 0, f, err)
		return
	}
	name := utcp.SanitizeName(templateName(raw))
	_, existed := c.g.Manual(name)
	if f.Replace && name != "" {
		if err := admin.ReadOnly(c.g, name); err != nil {
			c.showManuals(w, r, 0, f, err)
			return
		}
	}
	ctx, cancel := c.discoveryContext(r.Context())
	defer cancel()
	res, err := c.g.RegisterManual(ctx, raw, gateway.RegisterOptions{Source: registry.SourceAPI, Replace: f.Replace})
	op := "register"
	if existed && f.Replace {
		op = "replace"
	}
	c.record(registry.SourceAPI, op, err)
	if err != nil {
		c.showManuals(w, r, 0, f, err)
		return
	}
	c.registered(r, "registered", res)
	seeOther(w, r, Path+"manual?name="+url.QueryEscape(res.Name))
}

// registered flashes a registration's outcome and warnings.
func (c *Console) registered(r *http.Request, verb string, res *gateway.RegisterResult) {
	c.flash(r, verb+" manual "+res.Name+" with "+plural(len(res.Tools), "tool"))
	for i, w := range res.Warnings {
		if i == maxFlash-1 {
			c.flash(r, "warning: and "+strconv.Itoa(len(res.Warnings)-i)+" more warnings")
			break
		}
		c.flash(r, "warning: "+utcp.RedactText(w))
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// pastedTemplate checks a pasted call template as the admin API checks a
// request body; a malformed one names its line and column as the CLI
// does. name, when given, is set as the template's name.
func pastedTemplate(text, name string) (json.RawMessage, error) {
	raw, err := admin.CheckTemplate([]byte(text))
	if err != nil {
		return nil, located(text, err)
	}
	if name != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, located(text, httpx.DecodeStrict(raw, &obj))
		}
		obj["name"], _ = json.Marshal(name)
		raw, _ = json.Marshal(obj)
	}
	return raw, nil
}

// pasteName is where the console says a pasted template's errors are.
const pasteName = "pasted template"

// located prefixes a JSON error that has a byte offset with the pasted
// text's line and column ("pasted template:3:14: ..."), with line and
// column in its details.
func located(text string, err error) error {
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		return err
	}
	off, ok := offsetOf(ue.Details["offset"])
	if !ok && ue.Code == utcp.CodeInvalidRequest && strings.HasSuffix(ue.Message, "the body ends early") {
		// Truncated: the error is at the end.
		off, ok = len(strings.TrimSpace(text))+1, true
	}
	if !ok {
		return err
	}
	// The check trimmed leading space; count it back in.
	off += len(text) - len(strings.TrimLeft(text, " \t\r\n"))
	line, col := position(text, off)
	out := httpx.Errorf(ue.Code, "%s:%d:%d: %s", pasteName, line, col, ue.Message)
	for k, v := range ue.Details {
		out.WithDetail(k, v)
	}
	return out.WithDetail("file", pasteName).WithDetail("line", line).WithDetail("column", col)
}

func offsetOf(v any) (int, bool) {
	switch n := v.(type) {
	case int64:
		return int(n), true
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}

// position returns the 1-based line and column of byte offset off of
// text (the offending byte: a JSON decoder's offset counts it).
func position(text string, off int) (int, int) {
	if off > 0 {
		off--
	}
	off = min(off, len(text))
	line, col := 1, 1
	for _, ch := range text[:off] {
		if ch == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return line, col
}

// urlTemplate builds the call template of the "URL and type" form: an
// http manual GETs its URL (a UTCP manual or an OpenAPI document), an
// mcp one names one server at the URL, the others take the URL as it is.
// Without a name the URL's host is used, as `utcpd manuals add URL` does.
func urlTemplate(raw, typ, name string) (json.RawMessage, error) {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
		return nil, httpx.Errorf(utcp.CodeInvalidRequest, "url: give an http://, https://, ws:// or wss:// URL").WithDetail("field", "url")
	}
	if !slices.Contains(urlTypes, typ) {
		return nil, httpx.Errorf(utcp.CodeInvalidRequest, "type %q: use one of %s", typ, strings.Join(urlTypes, ", ")).WithDetail("field", "call_template_type")
	}
	if name == "" {
		name = u.Hostname()
	}
	name = utcp.SanitizeName(name)
	t := map[string]any{"name": name, "call_template_type": typ, "url": raw}
	switch typ {
	case "http":
		t["http_method"] = "GET"
	case "mcp":
		delete(t, "url")
		t["config"] = map[string]any{"mcpServers": map[string]any{name: map[string]any{"url": raw}}}
	}
	out, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// templateName returns the "name" of a template object, "" if none.
func templateName(raw json.RawMessage) string {
	var t struct {
		Name any `json:"name"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return ""
	}
	s, _ := t.Name.(string)
	return s
}

// ---- one manual ----

type manualData struct {
	Row       ManualRow
	Template  string // redacted, indented
	Tools     []toolRow
	Variables []gateway.Variable
	VarsErr   string
	Replace   string // the replace form's text
	// Changes are the changes of its pinned tool definitions, pending
	// first (pins.go); ChangesErr says why they could not be read.
	Changes    []changeView
	ChangesErr string
}

type toolRow struct {
	Name, Description string
	Tags              []string
}

func (c *Console) manualPage(w http.ResponseWriter, r *http.Request) {
	c.showManual(w, r, http.StatusOK, r.URL.Query().Get("name"), "", nil)
}

func (c *Console) showManual(w http.ResponseWriter, r *http.Request, status int, name, replaceText string, perr error) {
	row, m, ok := c.manualRow(name)
	if !ok {
		c.renderError(w, r, nil, admin.ManualNotFound(name))
		return
	}
	d := manualData{Row: row, Template: "{}", Replace: replaceText}
	if m != nil && m.Template != nil && len(m.Template.Raw) > 0 {
		d.Template = prettyJSON(utcp.Redact(m.Template.Raw))
	}
	if d.Replace == "" {
		d.Replace = d.Template
	}
	if m != nil {
		for _, t := range m.Tools {
			tr := toolRow{Name: t.Name}
			if t.Def != nil {
				tr.Description, tr.Tags = t.Def.Description, t.Def.Tags
			}
			d.Tools = append(d.Tools, tr)
		}
	}
	if vars, err := c.g.RequiredVariables(name); err != nil {
		d.VarsErr = problemOf(err).Message
	} else {
		d.Variables = vars
	}
	if m != nil {
		d.Changes, d.ChangesErr = c.manualChanges(r.Context(), name)
	}
	p := page{Title: "Manual " + name, Nav: "manuals", Data: d}
	if perr != nil {
		p.Problem = problemOf(perr)
		status = p.Problem.Status
	}
	c.render(w, r, status, "manual", p)
}

// replaceManual replaces a manual registered through the API with the
// pasted template, as PUT /admin/manuals/{name} does.
func (c *Console) replaceManual(w http.ResponseWriter, r *http.Request) {
	name, text := r.PostForm.Get("name"), r.PostForm.Get("template")
	if _, ok := c.g.Manual(name); !ok {
		c.renderError(w, r, nil, admin.ManualNotFound(name))
		return
	}
	if err := admin.ReadOnly(c.g, name); err != nil {
		c.showManual(w, r, 0, name, text, err)
		return
	}
	raw, err := admin.CheckTemplate([]byte(text))
	if err == nil {
		raw, err = admin.WithName(raw, name)
	}
	if err != nil {
		c.showManual(w, r, 0, name, text, located(text, err))
		return
	}
	if strings.Contains(string(raw), utcp.Redacted) {
		c.showManual(w, r, 0, name, text, httpx.Errorf(utcp.CodeInvalidRequest,
			"the template still holds %s values: type the secrets in again (the console never shows them)", utcp.Redacted).WithDetail("field", "template"))
		return
	}
	ctx, cancel := c.discoveryContext(r.Context())
	defer cancel()
	res, err := c.g.RegisterManual(ctx, raw, gateway.RegisterOptions{Source: registry.SourceAPI, Replace: true})
	c.record(registry.SourceAPI, "replace", err)
	if err != nil {
		c.showManual(w, r, 0, name, text, err)
		return
	}
	c.registered(r, "replaced", res)
	seeOther(w, r, Path+"manual?name="+url.QueryEscape(res.Name))
}

// refreshManual discovers a manual again, as POST
// /admin/manuals/{name}/refresh does.
func (c *Console) refreshManual(w http.ResponseWriter, r *http.Request) {
	name := r.PostForm.Get("name")
	m, ok := c.g.Manual(name)
	if !ok {
		c.renderError(w, r, nil, admin.ManualNotFound(name))
		return
	}
	ctx, cancel := c.discoveryContext(r.Context())
	defer cancel()
	res, err := c.g.RefreshManual(ctx, name)
	c.record(m.Source, "refresh", err)
	if err != nil {
		c.showManual(w, r, 0, name, "", err)
		return
	}
	c.registered(r, "refreshed", res)
	seeOther(w, r, Path+"manual?name="+url.QueryEscape(res.Name))
}

// deleteManual deregisters a manual registered through the API, as
// DELETE /admin/manuals/{name} does.
func (c *Console) deleteManual(w http.ResponseWriter, r *http.Request) {
	name := r.PostForm.Get("name")
	m, ok := c.g.Manual(name)
	if !ok {
		c.renderError(w, r, nil, admin.ManualNotFound(name))
		return
	}
	if err := admin.ReadOnly(c.g, name); err != nil {
		c.showManual(w, r, 0, name, "", err)
		return
	}
	err := c.g.DeregisterManual(r.Context(), name)
	c.record(m.Source, "deregister", err)
	if err != nil {
		c.showManual(w, r, 0, name, "", err)
		return
	}
	c.flash(r, "removed manual "+name)
	seeOther(w, r, Path+"manuals")
}
