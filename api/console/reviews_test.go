package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard/review"
)

// waitPending waits until n reviews are pending and returns them.
func (d *daemon) waitPending(n int) []*review.Review {
	d.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := d.q.List(d.t.Context(), review.StatusPending)
		if err != nil {
			d.t.Fatal(err)
		}
		if len(rs) == n {
			return rs
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%d reviews pending, want %d", len(rs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReviews: a call the policy sends to review waits; the Reviews page
// shows it with its arguments redacted and the guard's reason; approving
// with a note runs it once (the waiting call completes), denying refuses
// it; both land in the history with the note and the console's
// principal.
func TestReviews(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	type result struct {
		a answer
	}
	results := make(chan result, 2)
	go func() {
		results <- result{b.postJSON("/ui/call?name=demo.echo", `{"arguments": {"x": "first", "api_key": "sk-live-0123456789abcdefghij"}}`, nil)}
	}()
	rs := d.waitPending(1)
	page := b.get("/ui/reviews")
	card := between(page.body, `<article class="review" data-review="`+rs[0].ID+`"`, `</article>`)
	for _, want := range []string{"demo.echo", "echoes need a look", "utcpd-admin via console", "&#34;x&#34;: &#34;first&#34;", "[redacted]",
		`name="decision" value="approve"`, `name="csrf" value="` + b.csrf + `"`} {
		if !strings.Contains(card, want) {
			t.Errorf("the review card has no %s:\n%s", want, card)
		}
	}
	if strings.Contains(page.body, "0123456789abcdefghij") {
		t.Fatal("the Reviews page shows the secret argument")
	}
	if !strings.Contains(page.body, `<span class="badge" title="pending reviews">1</span>`) {
		t.Errorf("the menu does not count the pending review")
	}
	calls := d.f.Calls()
	if a := b.post("/ui/reviews/decide", url.Values{"id": {rs[0].ID}, "decision": {"approve"}, "note": {"fine by me"}}, nil); a.status != http.StatusSeeOther {
		t.Fatalf("approve: %s", a)
	}
	r := <-results
	if r.a.status != http.StatusOK || !strings.Contains(r.a.body, `"x":"first"`) {
		t.Fatalf("the approved call: %s", r.a)
	}
	if d.f.Calls() != calls+1 {
		t.Errorf("the approved call ran %d times", d.f.Calls()-calls)
	}

	go func() {
		results <- result{b.postJSON("/ui/call?name=demo.echo", `{"arguments": {"x": "second"}}`, nil)}
	}()
	rs = d.waitPending(1)
	if a := b.post("/ui/reviews/decide", url.Values{"id": {rs[0].ID}, "decision": {"deny"}, "note": {"not today"}}, nil); a.status != http.StatusSeeOther {
		t.Fatalf("deny: %s", a)
	}
	r = <-results
	if code, _ := envelope(t, r.a); r.a.status != http.StatusForbidden || code != "guard_denied" || !strings.Contains(r.a.body, "not today") {
		t.Fatalf("the denied call: %s", r.a)
	}
	if d.f.Calls() != calls+1 {
		t.Errorf("the denied call ran")
	}

	page = b.get("/ui/reviews")
	hist := between(page.body, `<table class="history">`, `</table>`)
	for _, want := range []string{"fine by me", "not today", `class="status denied">denied`, "utcpd-admin"} {
		if !strings.Contains(hist, want) {
			t.Errorf("the history has no %s:\n%s", want, hist)
		}
	}
	if strings.Index(hist, "not today") > strings.Index(hist, "fine by me") {
		t.Errorf("the history is not newest first")
	}
	if !strings.Contains(page.body, "No call is waiting for review") {
		t.Errorf("the queue is not empty")
	}

	// Deciding again the other way, a bad decision, an unknown review,
	// a note too long.
	for _, c := range []struct {
		form   url.Values
		status int
		code   string
	}{
		{url.Values{"id": {rs[0].ID}, "decision": {"approve"}}, 400, "invalid_request"},
		{url.Values{"id": {rs[0].ID}, "decision": {"maybe"}}, 400, "invalid_request"},
		{url.Values{"id": {"rv_nope"}, "decision": {"approve"}}, 404, "not_found"},
		{url.Values{"id": {rs[0].ID}, "decision": {"deny"}, "note": {strings.Repeat("n", 5000)}}, 400, "invalid_request"},
	} {
		a := b.post("/ui/reviews/decide", c.form, nil)
		if a.status != c.status || !strings.Contains(a.body, `class="code">`+c.code+`<`) {
			t.Errorf("%v: got %s, want %d %s", c.form, a, c.status, c.code)
		}
	}
	d.flushAudit()
	recs, _ := d.audit.Query(t.Context(), audit.Query{Tool: "demo.echo"})
	if len(recs) != 2 || recs[0].ReviewID == "" || recs[0].Front != "console" {
		t.Errorf("audit of the reviewed calls: %+v", recs)
	}
}

// TestAudit: the Audit page filters by tool, manual, outcome, decision,
// principal and time, and pages through older records.
func TestAudit(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	for i := 0; i < 60; i++ {
		b.postJSON("/ui/call?name=demo.add", fmt.Sprintf(`{"arguments": {"a": %d, "b": 1}}`, i), nil)
	}
	b.postJSON("/ui/call?name=demo.fail", `{"arguments": {"message": "x"}}`, nil)
	b.postJSON("/ui/call?name=demo.sleep", `{"arguments": {"ms": 1}}`, nil)
	// A call through the REST front: another front, no principal.
	resp, err := http.Post(d.srv.URL+"/v1/tools/demo.add/call", "application/json", strings.NewReader(`{"arguments": {"a": 1, "b": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d.flushAudit()

	rows := func(q string) []string {
		t.Helper()
		a := b.get("/ui/audit" + q)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %s", q, a)
		}
		var out []string
		for _, part := range strings.Split(a.body, `<tr data-tool="`)[1:] {
			tool := part[:strings.Index(part, `"`)]
			oc := between(part, `data-outcome="`, `">`)
			out = append(out, tool+" "+strings.TrimSuffix(strings.TrimPrefix(oc, `data-outcome="`), `">`))
		}
		return out
	}
	if got := rows(""); len(got) != 50 || got[0] != "demo.add ok" {
		t.Errorf("first page: %d rows, first %v", len(got), got[:min(1, len(got))])
	}
	first := b.get("/ui/audit")
	m := regexp.MustCompile(`<a href="/ui/audit(\?before=\d+)" class="older">`).FindStringSubmatch(first.body)
	if m == nil {
		t.Fatalf("no link to older records")
	}
	if older := rows(m[1]); len(older) != 13 {
		t.Errorf("the second page (%s) has %d rows, want 13", m[1], len(older))
	}
	if got := rows("?tool=demo.fail"); len(got) != 1 || got[0] != "demo.fail tool_error" {
		t.Errorf("tool filter: %v", got)
	}
	if got := rows("?outcome=guard_denied"); len(got) != 1 || got[0] != "demo.sleep guard_denied" {
		t.Errorf("outcome filter: %v", got)
	}
	if got := rows("?decision=deny"); len(got) != 1 {
		t.Errorf("decision filter: %v", got)
	}
	if got := rows("?manual=demo&principal=utcpd-admin"); len(got) != 50 {
		t.Errorf("manual and principal filter: %d rows", len(got))
	}
	if got := rows("?manual=other"); len(got) != 0 {
		t.Errorf("another manual: %v", got)
	}
	if got := rows("?principal=&tool=demo.add"); len(got) != 50 {
		t.Errorf("tool filter: %d", len(got))
	}
	// The REST call has no principal: the principal filter leaves it out.
	all := b.get("/ui/audit?tool=demo.add&outcome=ok&principal=utcpd-admin")
	if strings.Contains(all.body, "via rest") {
		t.Errorf("the principal filter kept the REST call")
	}
	if got := rows("?since=1h"); len(got) != 50 {
		t.Errorf("since 1h: %d", len(got))
	}
	if got := rows("?until=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))); len(got) != 0 {
		t.Errorf("until an hour ago: %v", got)
	}
	if got := rows("?since=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02 15:04"))); len(got) != 0 {
		t.Errorf("since in an hour: %v", got)
	}
	for _, q := range []string{"?since=yesterday", "?decision=maybe", "?before=-1", "?until=soon"} {
		a := b.get("/ui/audit" + q)
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, "invalid_request") {
			t.Errorf("%s: %s", q, a)
		}
	}
}

// TestTraffic: the Traffic page draws the calls of the window as SVG
// (charts, one row per tool, guard decisions), and its event stream sends
// the panel at once and again as calls arrive.
func TestTraffic(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	for i := 0; i < 4; i++ {
		b.postJSON("/ui/call?name=demo.add", `{"arguments": {"a": 1, "b": 2}}`, nil)
	}
	b.postJSON("/ui/call?name=demo.fail", `{"arguments": {"message": "x"}}`, nil)
	b.postJSON("/ui/call?name=demo.sleep", `{"arguments": {"ms": 1}}`, nil)
	a := b.get("/ui/traffic?window=1m")
	for _, want := range []string{`<svg class="chart"`, `<polyline class="line s0"`, `<tr data-tool="demo.add"><td><a href="/ui/tool?name=demo.add">demo.add</a></td><td class="num">4</td>`,
		`<tr data-tool="demo.fail">`, `<li><strong>6</strong> calls</li>`, `<svg class="bars"`, `>deny</text>`, `aria-current="true">1m<`} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the traffic page has no %s", want)
		}
	}
	if strings.Contains(a.body, "style=") {
		t.Errorf("the page has inline styles (the CSP refuses them)")
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.srv.URL+"/ui/traffic/events?window=1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "utcpd_console", Value: b.cookies["utcpd_console"].Value})
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", resp.StatusCode, resp.Header)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	panels := 0
	for sc.Scan() && panels < 2 {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ HTML string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event data %q: %v", line, err)
		}
		panels++
		want := `<li><strong>6</strong> calls</li>`
		if panels == 2 {
			want = `<li><strong>7</strong> calls</li>`
		}
		if !strings.Contains(ev.HTML, want) {
			t.Fatalf("panel %d has no %s", panels, want)
		}
		if panels == 1 {
			b.postJSON("/ui/call?name=demo.add", `{"arguments": {"a": 1, "b": 2}}`, nil)
		}
	}
	if panels != 2 {
		t.Fatalf("%d panels streamed: %v", panels, sc.Err())
	}

	// Without a session the stream is refused.
	anon, err := http.Get(d.srv.URL + "/ui/traffic/events")
	if err != nil {
		t.Fatal(err)
	}
	anon.Body.Close()
	if anon.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without a session: %d", anon.StatusCode)
	}
}

// TestTrafficStreamShutdown: an open Traffic page does not hold up the
// server's graceful shutdown.
func TestTrafficStreamShutdown(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.srv.URL+"/ui/traffic/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "utcpd_console", Value: b.cookies["utcpd_console"].Value})
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := d.srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a Traffic page open: %v", err)
	}
	for sc.Scan() {
	}
}
