package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/front"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func TestFrontTools(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(b.manual("demo"), registry.SourceAPI)

	names := func(r reply) []string {
		t.Helper()
		var l front.ToolList
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
			t.Fatalf("tool list: %s", r)
		}
		var out []string
		for _, tl := range l.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	// Without q the listing is sorted by qualified name.
	sorted := slices.Sorted(slices.Values(demoTools))
	cases := []struct {
		query string
		want  []string
	}{
		{"", sorted},
		{"?limit=2", sorted[:2]},
		{"?limit=100000", sorted},
		{"?q=sum+of+two+numbers&limit=1", []string{"demo.add"}},
		{"?tags=math", []string{"demo.add"}},
		{"?tags=math,stream", []string{"demo.add", "demo.count"}},
		{"?tags=math&tags=stream", []string{"demo.add", "demo.count"}},
		{"?tags=nothing", nil},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, names(e.do(req{method: "GET", path: "/v1/tools" + c.query}))); diff != "" {
			t.Errorf("GET /v1/tools%s (-want +got):\n%s", c.query, diff)
		}
	}
	r := e.do(req{method: "GET", path: "/v1/tools?tags=math"})
	var l map[string][]map[string]any
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	tool := l["tools"][0]
	for _, k := range []string{"name", "description", "tags", "inputs", "outputs"} {
		if _, ok := tool[k]; !ok {
			t.Errorf("tool lacks %q: %v", k, tool)
		}
	}
	if _, ok := tool["auth"]; ok {
		t.Errorf("list shows auth: %v", tool)
	}
	for _, q := range []string{"?limit=0", "?limit=-1", "?limit=x"} {
		expectError(t, e.do(req{method: "GET", path: "/v1/tools" + q}), 400, utcp.CodeInvalidRequest)
	}

	// One tool, by qualified and unqualified name, with auth metadata.
	for _, name := range []string{"demo.add", "add"} {
		r := e.do(req{method: "GET", path: "/v1/tools/" + name})
		var got front.Tool
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
			t.Fatalf("GET /v1/tools/%s: %s", name, r)
		}
		if got.Name != "demo.add" || got.Auth == nil || len(got.Inputs) == 0 || got.Tags[1] != "math" {
			t.Errorf("GET /v1/tools/%s: %+v", name, got)
		}
	}
	r = e.do(req{method: "GET", path: "/v1/tools/demo.ad"})
	expectError(t, r, 404, utcp.CodeToolNotFound)
	if !strings.Contains(string(r.body), "did_you_mean") {
		t.Errorf("no suggestions: %s", r)
	}
	e.register(b.manual("demo2"), registry.SourceAPI)
	expectError(t, e.do(req{method: "GET", path: "/v1/tools/add"}), 409, utcp.CodeAmbiguousTool)
}

// TestFrontToolsPaging lists through next_cursor: every tool once, in
// name order, while manuals come and go between pages; a search pages
// by rank; a malformed or foreign cursor is invalid_request.
func TestFrontToolsPaging(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	for i := range 10 {
		e.register(b.manual(fmt.Sprintf("m%02d", i)), registry.SourceAPI)
	}
	page := func(query string) front.ToolList {
		t.Helper()
		r := e.do(req{method: "GET", path: "/v1/tools" + query})
		var l front.ToolList
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
			t.Fatalf("GET /v1/tools%s: %s", query, r)
		}
		return l
	}
	walk := func(query string, between func(int)) (names []string, pages int) {
		t.Helper()
		cursor := ""
		for {
			q := query
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			l := page(q)
			pages++
			for _, tl := range l.Tools {
				names = append(names, tl.Name)
			}
			if l.NextCursor == "" {
				return names, pages
			}
			if between != nil {
				between(pages)
			}
			cursor = l.NextCursor
			if pages > 100 {
				t.Fatalf("no end after 100 pages")
			}
		}
	}
	var all []string
	for i := range 10 {
		for _, n := range demoTools {
			all = append(all, fmt.Sprintf("m%02d.%s", i, n[len("demo."):]))
		}
	}
	slices.Sort(all)
	got, pages := walk("?limit=7", nil)
	if diff := cmp.Diff(all, got); diff != "" {
		t.Errorf("paged listing (-want +got):\n%s", diff)
	}
	if pages != 8 { // 50 tools, 7 a page
		t.Errorf("%d pages, want 8", pages)
	}
	if l := page("?limit=50"); l.NextCursor != "" || len(l.Tools) != 50 {
		t.Errorf("one full page: %d tools, next_cursor %q", len(l.Tools), l.NextCursor)
	}

	// Tools added and removed between pages: the cursor stays valid, no
	// name is repeated, and every name after the cursor that existed
	// throughout is seen.
	got, _ = walk("?limit=9", func(n int) {
		switch n {
		case 1:
			e.register(b.manual("a00"), registry.SourceAPI) // sorts before every page: not seen
			e.register(b.manual("z99"), registry.SourceAPI) // sorts after: seen
		case 2:
			if err := e.g.DeregisterManual(t.Context(), "m09"); err != nil {
				t.Fatal(err)
			}
		}
	})
	want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return strings.HasPrefix(n, "m09.") })
	for _, n := range demoTools {
		want = append(want, "z99."+n[len("demo."):])
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing while tools change (-want +got):\n%s", diff)
	}

	// Tags filter the listing, still in name order and paged (a00 was
	// registered during the walk above: it is listed now).
	got, _ = walk("?tags=math,stream&limit=3", nil)
	var wantTagged []string
	for _, n := range append([]string{"a00.add", "a00.count"}, want...) {
		if strings.HasSuffix(n, ".add") || strings.HasSuffix(n, ".count") {
			wantTagged = append(wantTagged, n)
		}
	}
	if diff := cmp.Diff(wantTagged, got); diff != "" {
		t.Errorf("tagged listing (-want +got):\n%s", diff)
	}

	// A search pages by rank: the pages together are the unpaged answer.
	whole := page("?q=sum+of+two+numbers&limit=1000")
	var wantSearch []string
	for _, tl := range whole.Tools {
		wantSearch = append(wantSearch, tl.Name)
	}
	got, _ = walk("?q=sum+of+two+numbers&limit=4", nil)
	if diff := cmp.Diff(wantSearch, got); diff != "" {
		t.Errorf("paged search (-want +got):\n%s", diff)
	}
	if len(got) < 5 || !strings.HasSuffix(got[0], ".add") {
		t.Errorf("search: %v, want the add tools first", got)
	}

	// Malformed and foreign cursors.
	listCursor := page("?limit=2").NextCursor
	searchCursor := page("?q=sum&limit=2").NextCursor
	if listCursor == "" || searchCursor == "" {
		t.Fatalf("no cursors: %q %q", listCursor, searchCursor)
	}
	for _, q := range []string{
		"?cursor=%25%25%25",                        // not base64
		"?cursor=eA",                               // one byte
		"?cursor=" + strings.Repeat("A", 5000),     // too long
		"?cursor=" + url.QueryEscape(searchCursor), // a search cursor on a listing
		"?q=sum&cursor=" + url.QueryEscape(listCursor),
		"?q=other&cursor=" + url.QueryEscape(searchCursor),
		"?q=sum&tags=math&cursor=" + url.QueryEscape(searchCursor),
	} {
		r := e.do(req{method: "GET", path: "/v1/tools" + q})
		expectError(t, r, 400, utcp.CodeInvalidRequest)
		if !strings.Contains(string(r.body), `"parameter":"cursor"`) {
			t.Errorf("GET /v1/tools%s: %s, want details.parameter cursor", q, r)
		}
	}
	e.alive()
}

func TestFrontToolAuthMetadata(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(`{"name":"demo","call_template_type":"http","url":"`+b.base+`/utcp","auth":{"auth_type":"api_key","api_key":"k-s3cr3t","var_name":"X-Key","location":"header"}}`, registry.SourceAPI)
	r := e.do(req{method: "GET", path: "/v1/tools/demo.add"})
	var got front.Tool
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	// The demo manual's tools carry their own templates (no auth): the
	// effective auth is theirs.
	if got.Auth == nil {
		t.Fatalf("no auth metadata: %s", r)
	}
	if strings.Contains(string(r.body), "s3cr3t") {
		t.Errorf("tool answer leaks a secret: %s", r)
	}
}

func TestFrontCall(t *testing.T) {
	b := serveBackend(t)
	deny := guard.Func(func(ctx context.Context, c *guard.Call) (guard.Verdict, error) {
		if c.Qualified == "demo.echo" && c.Arguments["deny"] != nil {
			return guard.Verdict{Decision: guard.Deny, Reason: "no echoes today"}, nil
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	e := newEnv(t, envOptions{guard: deny, api: Options{MaxBodyBytes: 1024}})
	e.register(b.manual("demo"), registry.SourceAPI)

	call := func(name, body string) reply {
		return e.do(req{method: "POST", path: "/v1/tools/" + name + "/call", body: body})
	}
	// Success.
	r := call("demo.add", `{"arguments":{"a":1,"b":2.5}}`)
	if r.status != 200 || string(r.body) != `{"result":{"sum":3.5},"is_error":false}`+"\n" {
		t.Errorf("add: %s", r)
	}
	// Big integers survive (UseNumber), nested values too.
	r = call("echo", `{"arguments":{"n":12345678901234567890,"nested":{"a":[1,"x",null,true]},"u":"héllo ✓ <b>"}}`)
	want := `{"result":{"n":"12345678901234567890","nested":{"a":[1,"x",null,true]},"u":"héllo ✓ <b>"},"is_error":false}` + "\n"
	if r.status != 200 || string(r.body) != want {
		t.Errorf("echo:\n got %s\nwant %s", r.body, want)
	}
	// No body, or no arguments: a call without arguments.
	for _, body := range []string{"", `{}`, `{"arguments":null}`} {
		if r := call("demo.echo", body); r.status != 200 || !strings.Contains(string(r.body), `"is_error":false`) {
			t.Errorf("echo with body %q: %s", body, r)
		}
	}
	// The tool's own failure is a completed call.
	r = call("demo.fail", `{"arguments":{"message":"nope"}}`)
	if r.status != 200 || string(r.body) != `{"result":{"error":"nope"},"is_error":true}`+"\n" {
		t.Errorf("fail: %s", r)
	}

	cases := []struct {
		name   string
		r      req
		status int
		code   utcp.Code
	}{
		{"malformed JSON", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":`}, 400, utcp.CodeInvalidRequest},
		{"syntax", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{a:1}}`}, 400, utcp.CodeInvalidRequest},
		{"trailing data", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{}} x`}, 400, utcp.CodeInvalidRequest},
		{"unknown field", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"args":{"a":1,"b":2}}`}, 400, utcp.CodeInvalidRequest},
		{"arguments not an object", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":[1,2]}`}, 400, utcp.CodeInvalidRequest},
		{"body not an object", req{method: "POST", path: "/v1/tools/demo.add/call", body: `"x"`}, 400, utcp.CodeInvalidRequest},
		{"not JSON content", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{}}`, ctype: "text/plain"}, 415, utcp.CodeUnsupportedMediaType},
		{"oversized", req{method: "POST", path: "/v1/tools/demo.echo/call", body: `{"arguments":{"x":"` + strings.Repeat("a", 2048) + `"}}`}, 413, utcp.CodePayloadTooLarge},
		{"oversized chunked", req{method: "POST", path: "/v1/tools/demo.echo/call", rawBody: io.MultiReader(strings.NewReader(`{"arguments":{"x":"` + strings.Repeat("a", 2048) + `"}}`))}, 413, utcp.CodePayloadTooLarge},
		{"invalid arguments", req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":"one"}}`}, 400, utcp.CodeInvalidArguments},
		{"unknown tool", req{method: "POST", path: "/v1/tools/demo.nope/call", body: `{}`}, 404, utcp.CodeToolNotFound},
		{"guard denied", req{method: "POST", path: "/v1/tools/demo.echo/call", body: `{"arguments":{"deny":true}}`}, 403, utcp.CodeGuardDenied},
		{"bad timeout", req{method: "POST", path: "/v1/tools/demo.add/call?timeout=soon", body: `{}`}, 400, utcp.CodeInvalidRequest},
		{"negative timeout", req{method: "POST", path: "/v1/tools/demo.add/call?timeout=-1s", body: `{}`}, 400, utcp.CodeInvalidRequest},
		{"wrong method", req{method: "GET", path: "/v1/tools/demo.add/call"}, 405, utcp.CodeMethodNotAllowed},
		{"wrong method on list", req{method: "POST", path: "/v1/tools", body: `{}`}, 405, utcp.CodeMethodNotAllowed},
		{"wrong method on tool", req{method: "DELETE", path: "/v1/tools/demo.add"}, 405, utcp.CodeMethodNotAllowed},
		{"unknown route", req{method: "GET", path: "/v1/tool"}, 404, utcp.CodeNotFound},
		{"unknown sub-route", req{method: "POST", path: "/v1/tools/demo.add/invoke", body: `{}`}, 404, utcp.CodeNotFound},
		{"stream malformed", req{method: "POST", path: "/v1/tools/demo.count/stream", body: `{"arguments":`}, 400, utcp.CodeInvalidRequest},
		{"stream unknown field", req{method: "POST", path: "/v1/tools/demo.count/stream", body: `{"argument":{}}`}, 400, utcp.CodeInvalidRequest},
		{"stream oversized", req{method: "POST", path: "/v1/tools/demo.count/stream", body: `{"arguments":{"x":"` + strings.Repeat("a", 2048) + `"}}`}, 413, utcp.CodePayloadTooLarge},
		{"stream wrong method", req{method: "GET", path: "/v1/tools/demo.count/stream"}, 405, utcp.CodeMethodNotAllowed},
		{"stream unknown tool", req{method: "POST", path: "/v1/tools/nope/stream", body: `{}`}, 404, utcp.CodeToolNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.r)
			expectError(t, r, c.status, c.code)
			if c.status == 405 {
				if allow := r.header.Get("Allow"); allow == "" {
					t.Errorf("405 without Allow")
				}
			}
			e.alive()
		})
	}
	if r := e.do(req{method: "GET", path: "/v1/tools/demo.add/call"}); r.header.Get("Allow") != "POST" {
		t.Errorf("Allow = %q, want POST", r.header.Get("Allow"))
	}
	if r := e.do(req{method: "DELETE", path: "/v1/tools"}); r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("Allow = %q, want GET, HEAD", r.header.Get("Allow"))
	}
	// Arguments sent without their wrapper: a hint, on /call and /stream;
	// a body that has "arguments" and another field gets no hint.
	for _, path := range []string{"/v1/tools/demo.add/call", "/v1/tools/demo.add/stream"} {
		r := e.do(req{method: "POST", path: path, body: `{"b":2,"a":1}`})
		expectError(t, r, 400, utcp.CodeInvalidRequest)
		var env struct {
			Error struct {
				Message string         `json:"message"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(r.body, &env)
		if !strings.Contains(env.Error.Message, `wrap the arguments: {"arguments": {...}}`) || !strings.Contains(env.Error.Message, `"a", "b"`) ||
			env.Error.Details["hint"] != `wrap the arguments: {"arguments": {...}}` || env.Error.Details["field"] != "a" {
			t.Errorf("POST %s with bare arguments: %s", path, r)
		}
	}
	r = call("demo.add", `{"arguments":{"a":1,"b":2},"x":1}`)
	expectError(t, r, 400, utcp.CodeInvalidRequest)
	if strings.Contains(string(r.body), "wrap the arguments") {
		t.Errorf("hint on a wrapped body: %s", r)
	}
	// The body of a wrong-type error names the field.
	r = call("demo.add", `{"arguments":"x"}`)
	if !strings.Contains(string(r.body), `"field":"arguments"`) {
		t.Errorf("wrong type answer does not name the field: %s", r)
	}
}

func TestFrontTimeout(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{MaxTimeout: 200 * time.Millisecond}})
	e.register(b.manual("demo"), registry.SourceAPI)
	start := time.Now()
	r := e.do(req{method: "POST", path: "/v1/tools/demo.sleep/call?timeout=100ms", body: `{"arguments":{"ms":5000}}`})
	expectError(t, r, 504, utcp.CodeTimeout)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout answered after %v", d)
	}
	// ?timeout= above the maximum is capped to it.
	start = time.Now()
	r = e.do(req{method: "POST", path: "/v1/tools/demo.sleep/call?timeout=1h", body: `{"arguments":{"ms":5000}}`})
	expectError(t, r, 504, utcp.CodeTimeout)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("capped timeout answered after %v", d)
	}
	// The default deadline is the maximum here (200 ms).
	r = e.do(req{method: "POST", path: "/v1/tools/demo.sleep/call", body: `{"arguments":{"ms":5000}}`})
	expectError(t, r, 504, utcp.CodeTimeout)
	if r := e.do(req{method: "POST", path: "/v1/tools/demo.sleep/call?timeout=150ms", body: `{"arguments":{"ms":1}}`}); r.status != 200 {
		t.Errorf("short sleep: %s", r)
	}
}

func TestFrontDeadBackend(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(b.manual("demo"), registry.SourceAPI)
	_ = b.srv.Close()
	r := e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":2}}`})
	expectError(t, r, 502, utcp.CodeTransportError)
	e.alive()
}

func TestFrontCallerDisconnectCancelsBackend(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{})
	e.register(b.manual("demo"), registry.SourceAPI)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		hr, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/tools/demo.sleep/call", strings.NewReader(`{"arguments":{"ms":10000}}`))
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for b.f.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if b.f.InFlight() == 0 {
		t.Fatal("the backend call never started")
	}
	before := b.f.Canceled()
	cancel()
	<-errc
	start := time.Now()
	for b.f.Canceled() == before {
		if time.Since(start) > time.Second {
			t.Fatal("the backend call was not cancelled within 1 s of the caller leaving")
		}
		time.Sleep(2 * time.Millisecond)
	}
	select {
	case rec := <-e.records:
		if rec.Code != utcp.CodeCanceled {
			t.Errorf("call record code %q, want canceled", rec.Code)
		}
	case <-time.After(2 * time.Second):
		t.Error("no call record")
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	Event, ID, Data string
}

// readEvent reads the next event from r.
func readEvent(t *testing.T, r *bufio.Reader) (sseEvent, bool) {
	t.Helper()
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, false
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			return ev, true
		case strings.HasPrefix(line, "event: "):
			ev.Event = line[7:]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[6:]
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
}

func openStream(t *testing.T, e *env, path, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	hr, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+path, strings.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return resp, bufio.NewReader(resp.Body)
}

func TestFrontStream(t *testing.T) {
	b := serveBackend(t)
	seq := &seqTransport{gate: make(chan struct{})}
	e := newEnv(t, envOptions{streamer: seq})
	e.register(b.manual("demo"), registry.SourceAPI)
	e.register(`{"name":"seq","call_template_type":"seq"}`, registry.SourceAPI)

	t.Run("events in order, each flushed", func(t *testing.T) {
		_, r := openStream(t, e, "/v1/tools/seq.count/stream", `{"arguments":{"n":3}}`)
		var got []sseEvent
		for i := 0; i < 4; i++ {
			ev, ok := readEvent(t, r)
			if !ok {
				t.Fatalf("stream ended after %v", got)
			}
			got = append(got, ev)
			// The transport produces the next event only after the
			// client has read this one: each must have been flushed.
			if ev.Event == "chunk" {
				select {
				case seq.gate <- struct{}{}:
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		want := []sseEvent{{"chunk", "1", "1"}, {"chunk", "2", "2"}, {"chunk", "3", "3"}, {"end", "", "{}"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("tool error mid-stream", func(t *testing.T) {
		_, r := openStream(t, e, "/v1/tools/seq.boom/stream", `{}`)
		ev1, _ := readEvent(t, r)
		ev2, _ := readEvent(t, r)
		if ev1.Event != "chunk" || ev2.Event != "error" {
			t.Fatalf("events %v %v", ev1, ev2)
		}
		var env struct {
			Error struct {
				Code    utcp.Code      `json:"code"`
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ev2.Data), &env); err != nil || env.Error.Code != utcp.CodeToolError {
			t.Errorf("error event data %q: %v", ev2.Data, err)
		}
	})
	t.Run("non-streaming transport yields one chunk", func(t *testing.T) {
		_, r := openStream(t, e, "/v1/tools/demo.add/stream", `{"arguments":{"a":2,"b":3}}`)
		ev1, _ := readEvent(t, r)
		ev2, _ := readEvent(t, r)
		if diff := cmp.Diff([]sseEvent{{"chunk", "", `{"sum":5}`}, {"end", "", "{}"}}, []sseEvent{ev1, ev2}); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	})
	t.Run("tool error before the first event", func(t *testing.T) {
		_, r := openStream(t, e, "/v1/tools/demo.fail/stream", `{"arguments":{"message":"bad"}}`)
		ev, _ := readEvent(t, r)
		if ev.Event != "error" || !strings.Contains(ev.Data, `"code":"tool_error"`) || !strings.Contains(ev.Data, "bad") {
			t.Errorf("event %+v", ev)
		}
	})
	t.Run("timeout mid-stream", func(t *testing.T) {
		_, r := openStream(t, e, "/v1/tools/seq.count/stream?timeout=100ms", `{"arguments":{"n":3}}`)
		ev1, _ := readEvent(t, r)
		ev2, _ := readEvent(t, r) // the gate is never opened
		if ev1.Event != "chunk" || ev2.Event != "error" || !strings.Contains(ev2.Data, `"code":"timeout"`) {
			t.Errorf("events %+v %+v", ev1, ev2)
		}
	})
}

func TestFrontAPIKeys(t *testing.T) {
	b := serveBackend(t)
	e := newEnv(t, envOptions{api: Options{APIKeys: []string{"key-one", "key-two"}}})
	e.register(b.manual("demo"), registry.SourceAPI)
	for _, auth := range []string{"", "Bearer nope", "Bearer key-on", "Basic key-one", "Bearer "} {
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		for _, rq := range []req{
			{method: "GET", path: "/v1/tools", headers: h},
			{method: "GET", path: "/v1/tools/demo.add", headers: h},
			{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":1}}`, headers: h},
			{method: "POST", path: "/v1/tools/demo.add/stream", body: `{}`, headers: h},
		} {
			r := e.do(rq)
			expectError(t, r, 401, utcp.CodeUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="utcpd"`) {
				t.Errorf("%q %s: WWW-Authenticate %q", auth, rq.path, r.header.Get("WWW-Authenticate"))
			}
		}
	}
	if b.f.Calls() != 0 {
		t.Errorf("unauthenticated requests reached the backend")
	}
	for _, key := range []string{"key-one", "key-two"} {
		r := e.do(req{method: "POST", path: "/v1/tools/demo.add/call", body: `{"arguments":{"a":1,"b":1}}`, headers: map[string]string{"Authorization": "Bearer " + key}})
		if r.status != 200 {
			t.Errorf("key %s: %s", key, r)
		}
		rec := <-e.records
		if !strings.HasPrefix(rec.Principal, "key:") || strings.Contains(rec.Principal, key) {
			t.Errorf("principal %q", rec.Principal)
		}
	}
	// The admin API is not opened by an API key.
	rq := req{method: "GET", path: "/admin/manuals", headers: map[string]string{"Authorization": "Bearer key-one"}}
	if r := e.do(rq); r.status != 401 {
		t.Errorf("admin with an API key: %s", r)
	}
}

func TestFrontOptions(t *testing.T) {
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, o := range []Options{
		{},
		{Gateway: g, APIKeys: []string{""}},
		{Gateway: g, DefaultTimeout: time.Minute, MaxTimeout: time.Second},
		{Gateway: g, MaxBodyBytes: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(Options{Gateway: g}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

func ExampleNew() {
	g, _ := gateway.New(gateway.Options{Transports: transports.Default})
	defer g.Close()
	h, err := New(Options{Gateway: g, AdminToken: "change-me", Version: "dev"})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Addr: "127.0.0.1:8787", Handler: h}
	_ = srv // srv.ListenAndServe()
	fmt.Println("ok")
	// Output: ok
}

// TestFrontSlashNames: tools whose names contain "/" (as OpenAPI
// operationIds such as GitHub's "repos/get" give) are described, called
// and streamed with plain slashes in the path, and still with %2F.
func TestFrontSlashNames(t *testing.T) {
	// One server: the manual at /utcp, the fixture tools under /tools/
	// (a remote manual's tools must stay on its origin).
	backend := httpserver.NewServer("", fixture.New(), httpserver.Options{}).Handler
	ms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/utcp" {
			backend.ServeHTTP(w, r)
			return
		}
		base := "http://" + r.Host
		tool := func(name, fixtureTool string) map[string]any {
			return map[string]any{"name": name, "description": "A tool named " + name, "inputs": map[string]any{"type": "object"},
				"tool_call_template": map[string]any{"call_template_type": "http", "url": base + "/tools/" + fixtureTool, "http_method": "GET"}}
		}
		manual, _ := json.Marshal(map[string]any{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": []any{
			tool("repos/get", "echo"), tool("a/b/c", "add"), tool("x/call", "echo"),
		}})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(manual)
	}))
	t.Cleanup(ms.Close)
	e := newEnv(t, envOptions{})
	e.register(`{"name":"gh","call_template_type":"http","url":"`+ms.URL+`/utcp"}`, registry.SourceAPI)

	described := func(path, want string) {
		t.Helper()
		r := e.do(req{method: "GET", path: path})
		var got front.Tool
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 || got.Name != want {
			t.Errorf("GET %s: %s, want tool %s", path, r, want)
		}
	}
	described("/v1/tools/gh.repos/get", "gh.repos/get")
	described("/v1/tools/gh.repos%2Fget", "gh.repos/get")
	described("/v1/tools/repos/get", "gh.repos/get") // unqualified, unambiguous
	described("/v1/tools/gh.a/b/c", "gh.a/b/c")
	described("/v1/tools/gh.x%2Fcall", "gh.x/call")

	called := func(path, body, want string) {
		t.Helper()
		r := e.do(req{method: "POST", path: path, body: body})
		if r.status != 200 || !strings.Contains(string(r.body), want) {
			t.Errorf("POST %s: %s, want 200 with %s", path, r, want)
		}
	}
	called("/v1/tools/gh.repos/get/call", `{"arguments":{"owner":"o"}}`, `"owner":"o"`)
	called("/v1/tools/gh.repos%2Fget/call", `{"arguments":{"owner":"p"}}`, `"owner":"p"`)
	called("/v1/tools/repos/get/call", `{"arguments":{"owner":"q"}}`, `"owner":"q"`)
	called("/v1/tools/gh.a/b/c/call", `{"arguments":{"a":2,"b":3}}`, `"sum":5`)
	called("/v1/tools/gh.a%2Fb/c/call", `{"arguments":{"a":2,"b":4}}`, `"sum":6`)
	called("/v1/tools/gh.x/call/call", `{"arguments":{"k":"one"}}`, `"k":"one"`)
	called("/v1/tools/gh.x%2Fcall/call", `{"arguments":{"k":"two"}}`, `"k":"two"`)

	r := e.do(req{method: "POST", path: "/v1/tools/gh.repos/get/stream", body: `{"arguments":{"owner":"s"}}`})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") ||
		!strings.Contains(string(r.body), "event: chunk") || !strings.Contains(string(r.body), `"owner":"s"`) || !strings.Contains(string(r.body), "event: end") {
		t.Errorf("stream gh.repos/get: %s %v", r, r.header)
	}

	// The wrong method on a slashed name answers as on a plain one.
	expectError(t, e.do(req{method: "GET", path: "/v1/tools/gh.repos/get/call"}), 405, utcp.CodeMethodNotAllowed)
	expectError(t, e.do(req{method: "POST", path: "/v1/tools/gh.repos/get", body: `{}`}), 404, utcp.CodeNotFound) // no such route
	expectError(t, e.do(req{method: "POST", path: "/v1/tools/gh.repos/nope/call", body: `{}`}), 404, utcp.CodeToolNotFound)
	expectError(t, e.do(req{method: "GET", path: "/v1/tools/gh.repos/nope"}), 404, utcp.CodeToolNotFound)
	// Other routes are not rewritten.
	expectError(t, e.do(req{method: "GET", path: "/v1/reviews/a/b"}), 404, utcp.CodeNotFound)
	e.alive()
}
