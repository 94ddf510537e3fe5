package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
)

// TestToolsPage lists the tools by name, and searches them as GET
// /v1/tools?q= does.
func TestToolsPage(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	list := b.get("/ui/tools")
	var names []string
	for _, part := range strings.Split(list.body, `<tr data-tool="`)[1:] {
		names = append(names, part[:strings.Index(part, `"`)])
	}
	if strings.Join(names, " ") != "demo.add demo.count demo.echo demo.fail demo.sleep" {
		t.Errorf("listing: %v", names)
	}
	search := b.get("/ui/tools?q=sum+of+two+numbers")
	if first := between(search.body, `<tbody>`, `</tr>`); !strings.Contains(first, `data-tool="demo.add"`) {
		t.Errorf("the best match is not demo.add: %s", first)
	}
	// The same search through the REST front ranks the same first.
	resp, err := http.Get(d.srv.URL + "/v1/tools?q=sum+of+two+numbers&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rest struct{ Tools []struct{ Name string } }
	if err := json.NewDecoder(resp.Body).Decode(&rest); err != nil || len(rest.Tools) != 1 || rest.Tools[0].Name != "demo.add" {
		t.Errorf("/v1/tools ranks %v first (%v)", rest.Tools, err)
	}
	tagged := b.get("/ui/tools?tags=stream")
	if !strings.Contains(tagged.body, `data-tool="demo.count"`) || strings.Contains(tagged.body, `data-tool="demo.add"`) {
		t.Errorf("tag filter: %s", tagged)
	}
	if none := b.get("/ui/tools?tags=nosuchtag"); !strings.Contains(none.body, "No tool matches") {
		t.Errorf("no match: %s", none)
	}
}

// TestToolPage shows the tool's description, tags, schemas and a form
// with a field per input, required ones marked.
func TestToolPage(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	a := b.get("/ui/tool?name=demo.add")
	for _, want := range []string{"Add returns the sum of two numbers a and b.", `<span class="tag">math</span>`,
		`data-kind="number" data-name="a" data-required="true"`, `data-kind="number" data-name="b" data-required="true"`,
		`<span class="req" title="required">*</span>`, `id="call-form"`, `data-tool="demo.add"`, "Input schema", "Output schema",
		`&#34;sum&#34;`} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the tool page has no %s", want)
		}
	}
	a = b.get("/ui/tool?name=demo.sleep")
	if !strings.Contains(a.body, `data-kind="integer" data-name="ms" data-required="true"`) || !strings.Contains(a.body, `min="0"`) {
		t.Errorf("sleep's form: %s", between(a.body, `<form id="call-form"`, `</form>`))
	}
	if a := b.get("/ui/tool?name=nope.nothing"); a.status != http.StatusNotFound || !strings.Contains(a.body, "tool_not_found") {
		t.Errorf("an unknown tool: %s", a)
	}
}

type callAnswer struct {
	Result  json.RawMessage `json:"result"`
	IsError bool            `json:"is_error"`
	Error   *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestCall: the form's call goes through the gateway like every front's
// (guard, validation, audit with front "console" and the admin
// principal); a tool's own failure is a result with is_error and its
// code; other failures are envelopes with their status.
func TestCall(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	call := func(tool, body string) (answer, callAnswer) {
		t.Helper()
		a := b.postJSON("/ui/call?name="+tool, body, nil)
		var ca callAnswer
		if a.status == http.StatusOK {
			if err := json.Unmarshal([]byte(a.body), &ca); err != nil {
				t.Fatalf("%s: %v", a, err)
			}
		}
		return a, ca
	}
	a, ca := call("demo.add", `{"arguments": {"a": 2, "b": 3}}`)
	if a.status != http.StatusOK || ca.IsError || string(ca.Result) != `{"sum":5}` {
		t.Fatalf("add: %s", a)
	}
	a, ca = call("demo.fail", `{"arguments": {"message": "it broke"}}`)
	if a.status != http.StatusOK || !ca.IsError || ca.Error == nil || ca.Error.Code != "tool_error" || !strings.Contains(string(ca.Result), "it broke") {
		t.Fatalf("fail: %s", a)
	}
	for _, c := range []struct {
		tool, body string
		status     int
		code       string
	}{
		{"demo.add", `{"arguments": {"a": "two"}}`, 400, "invalid_arguments"},
		{"demo.sleep", `{"arguments": {"ms": 1}}`, 403, "guard_denied"},
		{"nope.nothing", `{}`, 404, "tool_not_found"},
		{"demo.add", `{"arguments": [1]}`, 400, "invalid_request"},
		{"demo.add", `{"args": {}}`, 400, "invalid_request"},
	} {
		a, _ := call(c.tool, c.body)
		if code, _ := envelope(t, a); a.status != c.status || code != c.code {
			t.Errorf("%s %s: got %s, want %d %s", c.tool, c.body, a, c.status, c.code)
		}
	}
	d.flushAudit()
	recs, err := d.audit.Query(t.Context(), audit.Query{Tool: "demo.add"})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit of demo.add: %v %v", recs, err)
	}
	for _, r := range recs {
		if r.Front != "console" || r.Principal != "utcpd-admin" {
			t.Errorf("audit record %+v: want front console, principal utcpd-admin", r)
		}
	}
	if recs, _ := d.audit.Query(t.Context(), audit.Query{Tool: "demo.sleep"}); len(recs) != 1 || recs[0].Decision != "deny" || recs[0].Dispatched {
		t.Errorf("the guard did not refuse sleep before dispatch: %+v", recs)
	}
}

// TestStream: a stream call answers one JSON line per event, then the
// end; a refusal before the stream is an envelope.
func TestStream(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	a := b.postJSON("/ui/stream?name=demo.count", `{"arguments": {"n": 3}}`, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("stream: %s", a)
	}
	lines := strings.Split(strings.TrimSpace(a.body), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"event":{"data":[1,2,3]}`) || lines[1] != `{"end":true}` {
		t.Fatalf("stream lines: %q", lines)
	}
	a = b.postJSON("/ui/stream?name=demo.sleep", `{"arguments": {"ms": 1}}`, nil)
	if code, _ := envelope(t, a); a.status != http.StatusForbidden || code != "guard_denied" {
		t.Fatalf("a refused stream: %s", a)
	}
	a = b.postJSON("/ui/stream?name=demo.fail", `{"arguments": {"message": "no"}}`, nil)
	if !strings.Contains(a.body, `"error":{"code":"tool_error"`) {
		t.Fatalf("a failing stream: %s", a)
	}
}

// TestCallCancelled: a page that goes away cancels its call.
func TestCallCancelled(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.srv.URL+"/ui/stream?name=demo.count", strings.NewReader(`{"arguments": {"n": 1000, "delay_ms": 50}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-CSRF-Token", b.csrf)
	req.AddCookie(&http.Cookie{Name: "utcpd_console", Value: b.cookies["utcpd_console"].Value})
	start := time.Now()
	if resp, err := b.c.Do(req); err == nil {
		_, _ = resp.Body.Read(make([]byte, 1<<16))
		resp.Body.Close()
	}
	d.flushAudit()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, _ := d.audit.Query(t.Context(), audit.Query{Tool: "demo.count"})
		if len(recs) == 1 {
			if recs[0].Outcome == "ok" {
				t.Fatalf("the abandoned stream ran to its end: %+v", recs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record of the abandoned call after %v", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
		d.flushAudit()
	}
}
