package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/registry"
)

// TestManualsPage lists every manual with its state, tool count, source
// and transport.
func TestManualsPage(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	a := b.get("/ui/manuals")
	row := between(a.body, `<tr data-manual="demo">`, `</tr>`)
	for _, want := range []string{`<a href="/ui/manual?name=demo">demo</a>`, `class="state ready">ready<`, `<td class="num">5</td>`, `<td>config</td>`, `<td>http</td>`} {
		if !strings.Contains(row, want) {
			t.Errorf("the row of demo has no %s:\n%s", want, row)
		}
	}
	if !strings.Contains(a.body, "1 ready") {
		t.Errorf("no state summary")
	}
}

// TestFailedManual: a manual that failed to register is listed as
// failed with its last error (redacted), failures and next retry; its
// page offers Refresh, which retries at once.
func TestFailedManual(t *testing.T) {
	d := startDaemon(t, daemonOptions{failedManual: true})
	b := d.loggedIn()
	a := b.get("/ui/manuals")
	row := between(a.body, `<tr data-manual="away">`, `</tr>`)
	for _, want := range []string{`class="state failed">failed<`, `<span class="code">discovery_failed</span>`, "1 failed attempt", ", retry in ",
		`<td class="num">0</td>`, `<td>config</td>`, `<td>http</td>`} {
		if !strings.Contains(row, want) {
			t.Errorf("the failed manual's row has no %s:\n%s", want, row)
		}
	}
	if strings.Contains(a.body, "0123456789abcdefghijkl") {
		t.Errorf("the page shows the URL's api_key")
	}
	if !strings.Contains(a.body, "1 failed") || !strings.Contains(a.body, "1 ready") {
		t.Errorf("the summary does not count the states: %s", between(a.body, `<p class="summary">`, `</p>`))
	}
	page := b.get("/ui/manual?name=away")
	for _, want := range []string{"discovery_failed", "Failed attempts", "Next retry", `action="/ui/manual/refresh"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the failed manual's page has no %s", want)
		}
	}
	h, _ := d.g.Health("away")
	if a := b.post("/ui/manual/refresh", url.Values{"name": {"away"}}, nil); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, "discovery_failed") {
		t.Errorf("refreshing the failed manual: %s", a)
	}
	if h2, _ := d.g.Health("away"); h2.Failures != h.Failures+1 {
		t.Errorf("refresh did not retry: %d failures, then %d", h.Failures, h2.Failures)
	}
}

// TestAddManual: the two forms register a manual (source api); a failure
// shows the admin API's code and message on the page, the form kept; a
// malformed pasted template names its line and column.
func TestAddManual(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()

	a := b.post("/ui/manuals", url.Values{"mode": {"url"}, "url": {d.backend + "/utcp"}, "type": {"http"}, "name": {"byurl"}}, nil)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/manual?name=byurl" {
		t.Fatalf("by URL: %s", a)
	}
	if m, ok := d.g.Manual("byurl"); !ok || m.Source != registry.SourceAPI || len(m.Tools) != 5 || m.Template.Type != "http" {
		t.Fatalf("by URL: registered %v %+v", ok, m)
	}
	page := b.get("/ui/manual?name=byurl")
	if !strings.Contains(page.body, "registered manual byurl with 5 tools") || !strings.Contains(page.body, `href="/ui/tool?name=byurl.add"`) {
		t.Errorf("the manual's page after registering: %s", page)
	}
	// The flash is shown once.
	if again := b.get("/ui/manual?name=byurl"); strings.Contains(again.body, "registered manual") {
		t.Errorf("the flash is shown twice")
	}

	a = b.post("/ui/manuals", url.Values{"mode": {"template"}, "template": {"  \n" + d.template("pasted")}}, nil)
	if a.status != http.StatusSeeOther {
		t.Fatalf("pasted: %s", a)
	}
	if _, ok := d.g.Manual("pasted"); !ok {
		t.Fatal("the pasted template is not registered")
	}

	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		want   []string
	}{
		{"malformed JSON", url.Values{"mode": {"template"}, "template": {"{\n  \"name\": \"x\",\n  \"url\": oops\n}"}}, 400,
			[]string{"invalid_request", "pasted template:3:10: malformed JSON", "<dt>line</dt><dd>3</dd>", "<dt>column</dt><dd>10</dd>"}},
		{"not an object", url.Values{"mode": {"template"}, "template": {`[1]`}}, 400, []string{"invalid_request", "one manual call template (a JSON object)"}},
		{"empty", url.Values{"mode": {"template"}, "template": {""}}, 400, []string{"invalid_request"}},
		{"no type", url.Values{"mode": {"template"}, "template": {`{"name": "x"}`}}, 400, []string{"invalid_template", "call_template_type"}},
		{"unknown type", url.Values{"mode": {"template"}, "template": {`{"name": "x", "call_template_type": "carrier_pigeon"}`}}, 400, []string{"invalid_template", "carrier_pigeon"}},
		{"taken name", url.Values{"mode": {"template"}, "template": {d.template("pasted")}}, 409, []string{"manual_exists", "already registered"}},
		{"replace a config manual", url.Values{"mode": {"template"}, "template": {d.template("demo")}, "replace": {"1"}}, 409,
			[]string{"manual_read_only", "the configuration file"}},
		{"unreachable", url.Values{"mode": {"url"}, "url": {"http://127.0.0.1:1/utcp"}, "type": {"http"}}, 422, []string{"discovery_failed"}},
		{"bad url", url.Values{"mode": {"url"}, "url": {"file:///etc/passwd"}, "type": {"http"}}, 400, []string{"invalid_request", "url:"}},
		{"bad type", url.Values{"mode": {"url"}, "url": {d.backend}, "type": {"cli"}}, 400, []string{"invalid_request", "use one of"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(d.g.Manuals())
			a := b.post("/ui/manuals", c.form, nil)
			if a.status != c.status {
				t.Fatalf("got %s, want %d", a, c.status)
			}
			prob := html.UnescapeString(between(a.body, `<div class="problem"`, `</div>`))
			for _, w := range c.want {
				if !strings.Contains(prob, html.UnescapeString(w)) && !strings.Contains(between(a.body, `<div class="problem"`, `</div>`), w) {
					t.Errorf("the problem shown has no %q:\n%s", w, prob)
				}
			}
			// The form keeps what was typed.
			if tpl := c.form.Get("template"); tpl != "" && !strings.Contains(a.body, html.EscapeString(tpl)) {
				t.Errorf("the pasted template is not kept in the form")
			}
			if len(d.g.Manuals()) != before {
				t.Errorf("a failed registration changed the manuals")
			}
		})
	}
}

// TestManualActions: refresh, replace and delete a manual registered
// through the console; a configuration manual can be refreshed but not
// replaced or deleted (manual_read_only).
func TestManualActions(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	if a := b.post("/ui/manuals", url.Values{"mode": {"template"}, "template": {d.template("mine")}}, nil); a.status != http.StatusSeeOther {
		t.Fatal(a)
	}
	page := b.get("/ui/manual?name=mine")
	for _, want := range []string{`action="/ui/manual/replace"`, `action="/ui/manual/delete"`, "&#34;call_template_type&#34;: &#34;http&#34;"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the manual page has no %s", want)
		}
	}
	before, _ := d.g.Manual("mine")
	if a := b.post("/ui/manual/refresh", url.Values{"name": {"mine"}}, nil); a.status != http.StatusSeeOther {
		t.Fatalf("refresh: %s", a)
	}
	after, _ := d.g.Manual("mine")
	if !after.Refreshed.After(before.Refreshed) {
		t.Errorf("refresh did not discover again")
	}
	// Replace with a template holding a redacted value: refused.
	if a := b.post("/ui/manual/replace", url.Values{"name": {"mine"}, "template": {`{"call_template_type": "http", "url": "` + d.backend + `/utcp", "headers": {"X-Api-Key": "[redacted]"}}`}}, nil); a.status != http.StatusBadRequest ||
		!strings.Contains(a.body, "type the secrets in again") {
		t.Fatalf("replace with a redacted value: %s", a)
	}
	// A name that does not match: the admin API's message.
	if a := b.post("/ui/manual/replace", url.Values{"name": {"mine"}, "template": {d.template("other")}}, nil); a.status != http.StatusBadRequest ||
		!strings.Contains(html.UnescapeString(a.body), `does not match the manual name "mine"`) {
		t.Fatalf("replace with another name: %s", a)
	}
	// Replace by the openapi document of the same server.
	if a := b.post("/ui/manual/replace", url.Values{"name": {"mine"}, "template": {`{"call_template_type": "http", "http_method": "GET", "url": "` + d.backend + `/openapi.json"}`}}, nil); a.status != http.StatusSeeOther {
		t.Fatalf("replace: %s", a)
	}
	if m, _ := d.g.Manual("mine"); !strings.Contains(string(m.Template.Raw), "openapi.json") {
		t.Errorf("not replaced: %s", m.Template.Raw)
	}
	if a := b.post("/ui/manual/delete", url.Values{"name": {"mine"}}, nil); a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/manuals" {
		t.Fatalf("delete: %s", a)
	}
	if _, ok := d.g.Manual("mine"); ok {
		t.Fatal("not deleted")
	}
	if a := b.post("/ui/manual/delete", url.Values{"name": {"mine"}}, nil); a.status != http.StatusNotFound || !strings.Contains(a.body, "manual_not_found") {
		t.Errorf("delete again: %s", a)
	}
	// The configuration manual.
	if a := b.get("/ui/manual?name=demo"); strings.Contains(a.body, `action="/ui/manual/delete"`) || !strings.Contains(a.body, "comes from the configuration file") {
		t.Errorf("a config manual offers deletion: %s", a)
	}
	for _, p := range []string{"/ui/manual/delete", "/ui/manual/replace"} {
		a := b.post(p, url.Values{"name": {"demo"}, "template": {d.template("demo")}}, nil)
		if a.status != http.StatusConflict || !strings.Contains(a.body, "manual_read_only") {
			t.Errorf("%s of a config manual: %s", p, a)
		}
	}
	if a := b.post("/ui/manual/refresh", url.Values{"name": {"demo"}}, nil); a.status != http.StatusSeeOther {
		t.Errorf("refresh of a config manual: %s", a)
	}
	if _, ok := d.g.Manual("demo"); !ok {
		t.Fatal("the config manual is gone")
	}
}

// TestManualTemplateRedacted: the manual page shows the template with
// its secrets redacted.
func TestManualTemplateRedacted(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	tpl := `{"name": "secret", "call_template_type": "http", "http_method": "GET", "url": "` + d.backend + `/utcp",
	  "auth": {"auth_type": "api_key", "api_key": "sk-live-0123456789abcdefghijklmnop", "var_name": "X-Key", "location": "header"}}`
	if a := b.post("/ui/manuals", url.Values{"mode": {"template"}, "template": {tpl}}, nil); a.status != http.StatusSeeOther {
		t.Fatal(a)
	}
	page := b.get("/ui/manual?name=secret")
	if strings.Contains(page.body, "0123456789abcdefghijklmnop") || !strings.Contains(page.body, "[redacted]") {
		t.Fatalf("the template is not redacted:\n%s", between(page.body, `<pre class="json">`, `</pre>`))
	}
	tool := b.get("/ui/tool?name=secret.add")
	if strings.Contains(tool.body, "0123456789abcdefghijklmnop") {
		t.Fatalf("the tool page shows the secret")
	}
}

// between returns the text of s from the first start to the next end
// after it ("" when absent).
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], end)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j+len(end)]
}
