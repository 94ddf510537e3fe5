package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/store/sqlite"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/utcp"
)

// reviewAPI is the HTTP surface over a gateway whose guard chain sends
// demo.add to review and denies demo.fail, with a review queue and an
// audit log.
type reviewAPI struct {
	t     *testing.T
	b     *backend
	g     *gateway.Gateway
	q     *review.Queue
	w     *audit.Writer
	srv   *httptest.Server
	keys  []string
	audit audit.Store
}

type reviewAPIOptions struct {
	reviews review.Store
	audit   audit.Store
	timeout time.Duration
	keys    []string
	b       *backend
}

func reviewGuard(_ context.Context, c *guard.Call) (guard.Verdict, error) {
	switch c.Qualified {
	case "demo.add":
		return guard.Verdict{Decision: guard.Review, Reason: "sums need a second pair of eyes"}, nil
	case "demo.fail":
		return guard.Verdict{Decision: guard.Deny, Reason: "failing is forbidden"}, nil
	case "demo.sleep":
		return guard.Verdict{Decision: guard.Error, Reason: "policy backend unreachable"}, nil
	}
	return guard.Verdict{Decision: guard.Allow, Reason: "fine"}, nil
}

func newReviewAPI(t *testing.T, o reviewAPIOptions) *reviewAPI {
	t.Helper()
	a := &reviewAPI{t: t, b: o.b, keys: o.keys}
	if a.b == nil {
		a.b = serveBackend(t)
	}
	if o.reviews == nil {
		o.reviews = review.NewMemStore()
	}
	if o.audit == nil {
		o.audit = audit.NewMemStore()
	}
	if o.timeout == 0 {
		o.timeout = time.Minute
	}
	a.audit = o.audit
	a.q = review.NewQueue(o.reviews, review.Options{Timeout: o.timeout, SweepInterval: 20 * time.Millisecond})
	a.w = audit.NewWriter(o.audit, audit.WriterOptions{})
	chain := guard.NewChain([]guard.Named{{Name: "0:test", Guard: guard.Func(reviewGuard)}},
		guard.WithApprover(a.q), guard.WithReviewTimeout(o.timeout+time.Minute), guard.WithGuardTimeout(5*time.Second))
	types := transports.NewRegistry()
	if err := types.Register(utcphttp.Info); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: types, Guard: chain, Reviews: a.q, Audit: a.w})
	if err != nil {
		t.Fatal(err)
	}
	a.g = g
	s, err := newServer(Options{Gateway: g, Reviews: a.q, Audit: o.audit, APIKeys: o.keys, AdminToken: testAdminToken, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewServer(s.handler)
	t.Cleanup(a.close)
	if _, err := g.RegisterManual(t.Context(), json.RawMessage(a.b.manual("demo")), gateway.RegisterOptions{Source: "api"}); err != nil {
		t.Fatal(err)
	}
	a.q.Start(g.DispatchApproved)
	return a
}

// close stops the daemon (idempotent enough for Cleanup after a manual
// close).
func (a *reviewAPI) close() {
	a.srv.Close()
	_ = a.q.Close(context.Background())
	_ = a.w.Close(context.Background())
	_ = a.g.Close()
}

// do sends r, with the first API key (the admin token for /admin/)
// unless r sets Authorization.
func (a *reviewAPI) do(r req) reply {
	a.t.Helper()
	return a.doCtx(a.t.Context(), r)
}

func (a *reviewAPI) doCtx(ctx context.Context, r req) reply {
	a.t.Helper()
	cred := ""
	switch {
	case len(a.keys) > 0 && strings.HasPrefix(r.path, "/v1/"):
		cred = "Bearer " + a.keys[0]
	case strings.HasPrefix(r.path, "/admin/"):
		cred = "Bearer " + testAdminToken
	}
	if cred != "" {
		if r.headers == nil {
			r.headers = map[string]string{}
		}
		if _, ok := r.headers["Authorization"]; !ok {
			r.headers["Authorization"] = cred
		}
	}
	return doCtx(a.t, ctx, a.srv.URL, r)
}

func (a *reviewAPI) pending(n int) []map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := a.do(req{method: "GET", path: "/admin/reviews"})
		if r.status != 200 {
			a.t.Fatalf("GET /admin/reviews: %s", r)
		}
		list, _ := r.json(a.t)["reviews"].([]any)
		if len(list) == n {
			out := make([]map[string]any, n)
			for i, v := range list {
				out[i] = v.(map[string]any)
			}
			return out
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%d reviews pending, want %d", len(list), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// poll polls GET /v1/reviews/{id} until done.
func (a *reviewAPI) poll(id string) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := a.do(req{method: "GET", path: "/v1/reviews/" + id})
		if r.status != 200 {
			a.t.Fatalf("poll: %s", r)
		}
		v := r.json(a.t)
		if v["done"] == true {
			return v
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("review %s not done: %s", id, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRESTGuardRefusals(t *testing.T) {
	a := newReviewAPI(t, reviewAPIOptions{timeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		tool string
		code utcp.Code
	}{
		{"demo.fail", utcp.CodeGuardDenied},
		{"demo.sleep", utcp.CodeGuardError},
		{"demo.add", utcp.CodeGuardReviewTimeout},
	} {
		r := a.do(req{method: "POST", path: "/v1/tools/" + tc.tool + "/call", body: `{"arguments":{"a":1,"b":2,"message":"x","ms":1}}`})
		expectError(t, r, http.StatusForbidden, tc.code)
		if tc.code == utcp.CodeGuardReviewTimeout {
			details, _ := r.json(t)["error"].(map[string]any)["details"].(map[string]any)
			if id, _ := details["review_id"].(string); !strings.HasPrefix(id, "rv_") {
				t.Errorf("guard_review_timeout without review_id: %s", r)
			}
		}
	}
	if n := a.b.f.Calls(); n != 0 {
		t.Errorf("the backend saw %d calls, want none", n)
	}
	if r := a.do(req{method: "POST", path: "/v1/tools/demo.echo/call", body: `{"arguments":{"message":"hi"}}`}); r.status != 200 {
		t.Errorf("an allowed call after the refusals: %s", r)
	}
}

// TestRESTReviewWaitApprove: the caller waits; the operator lists the
// review (arguments redacted) and approves; the caller gets the result.
func TestRESTReviewWaitApprove(t *testing.T) {
	a := newReviewAPI(t, reviewAPIOptions{})
	done := make(chan reply, 1)
	go func() {
		done <- a.do(req{method: "POST", path: "/v1/tools/demo.add/call?timeout=5s", body: `{"arguments":{"a":2,"b":40,"api_key":"s3cr3t"}}`})
	}()
	rv := a.pending(1)[0]
	args, _ := rv["arguments"].(map[string]any)
	if args["api_key"] != utcp.Redacted || fmt.Sprint(args["a"]) != "2" {
		t.Errorf("listed arguments %v: want the key redacted, the rest shown", args)
	}
	if rv["tool"] != "demo.add" || rv["front"] != "rest" || rv["status"] != "pending" || rv["guard"] != "0:test" {
		t.Errorf("listed review %v", rv)
	}
	if reasons, _ := rv["reasons"].([]any); len(reasons) != 1 || reasons[0] != "sums need a second pair of eyes" {
		t.Errorf("reasons %v", rv["reasons"])
	}
	if _, ok := rv["age_seconds"].(json.Number); !ok {
		t.Errorf("no age: %v", rv)
	}
	id := rv["id"].(string)
	r := a.do(req{method: "POST", path: "/admin/reviews/" + id + "/approve", body: `{"note":"looks right"}`})
	if r.status != 200 || r.json(t)["status"] != "approved" || r.json(t)["note"] != "looks right" {
		t.Fatalf("approve: %s", r)
	}
	var got reply
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not return")
	}
	if got.status != 200 || !strings.Contains(string(got.body), `"sum":42`) {
		t.Errorf("the waiting call: %s", got)
	}
	if n := a.b.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
	// Deciding again: approve is idempotent, deny is refused, unknown is 404.
	if r := a.do(req{method: "POST", path: "/admin/reviews/" + id + "/approve"}); r.status != 200 {
		t.Errorf("approve again: %s", r)
	}
	expectError(t, a.do(req{method: "POST", path: "/admin/reviews/" + id + "/deny"}), 400, utcp.CodeInvalidRequest)
	expectError(t, a.do(req{method: "POST", path: "/admin/reviews/rv_nope/approve"}), 404, utcp.CodeNotFound)
	expectError(t, a.do(req{method: "POST", path: "/admin/reviews/" + id + "/approve", body: `{"nope":1}`}), 400, utcp.CodeInvalidRequest)
	if r := a.do(req{method: "GET", path: "/admin/reviews/" + id}); r.status != 200 || r.json(t)["dispatcher"] != "caller" {
		t.Errorf("GET review: %s", r)
	}
	if r := a.do(req{method: "GET", path: "/admin/reviews?status=done"}); r.status != 200 || !strings.Contains(string(r.body), id) {
		t.Errorf("list done: %s", r)
	}
	expectError(t, a.do(req{method: "GET", path: "/admin/reviews?status=maybe"}), 400, utcp.CodeInvalidRequest)
}

// TestRESTNoWaitPoll: ?wait=false parks the call (202), the caller polls,
// another API key cannot see it, an approval runs it in the daemon.
func TestRESTNoWaitPoll(t *testing.T) {
	a := newReviewAPI(t, reviewAPIOptions{keys: []string{"key-one", "key-two"}})
	r := a.do(req{method: "POST", path: "/v1/tools/demo.add/call?wait=false&timeout=5s", body: `{"arguments":{"a":20,"b":22}}`})
	if r.status != http.StatusAccepted {
		t.Fatalf("wait=false: %s", r)
	}
	v := r.json(t)
	id, _ := v["review_id"].(string)
	if !strings.HasPrefix(id, "rv_") || v["status"] != "pending" || r.header.Get("Location") != "/v1/reviews/"+id || v["poll"] != "/v1/reviews/"+id {
		t.Fatalf("202 answer %s (Location %q)", r, r.header.Get("Location"))
	}
	p := a.do(req{method: "GET", path: "/v1/reviews/" + id})
	if p.status != 200 || p.json(t)["status"] != "pending" || p.json(t)["done"] != false {
		t.Errorf("poll while pending: %s", p)
	}
	other := a.do(req{method: "GET", path: "/v1/reviews/" + id, headers: map[string]string{"Authorization": "Bearer key-two"}})
	expectError(t, other, 404, utcp.CodeNotFound)
	expectError(t, a.do(req{method: "GET", path: "/v1/reviews/rv_missing"}), 404, utcp.CodeNotFound)
	expectError(t, a.do(req{method: "POST", path: "/v1/tools/demo.add/call?wait=maybe"}), 400, utcp.CodeInvalidRequest)
	if a.b.f.Calls() != 0 {
		t.Fatal("the parked call ran before the approval")
	}
	if r := a.do(req{method: "POST", path: "/admin/reviews/" + id + "/approve"}); r.status != 200 {
		t.Fatalf("approve: %s", r)
	}
	final := a.poll(id)
	if final["status"] != "done" || final["dispatched"] != true || final["is_error"] != false ||
		fmt.Sprint(final["result"]) != "map[sum:42]" || final["error"] != nil {
		t.Errorf("final poll %v", final)
	}
	if n := a.b.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
	// A denied parked call: done, not dispatched, never run.
	r = a.do(req{method: "POST", path: "/v1/tools/demo.add/call?wait=false", body: `{"arguments":{"a":1,"b":1}}`})
	id2, _ := r.json(t)["review_id"].(string)
	if r := a.do(req{method: "POST", path: "/admin/reviews/" + id2 + "/deny", body: `{"note":"no"}`}); r.status != 200 {
		t.Fatalf("deny: %s", r)
	}
	final = a.poll(id2)
	if final["status"] != "denied" || final["dispatched"] != false || final["note"] != "no" {
		t.Errorf("denied poll %v", final)
	}
	if n := a.b.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls after a denial, want 1", n)
	}
}

// TestRESTConcurrentApprovals: 32 concurrent POST approve on one parked
// call all succeed and the call runs once.
func TestRESTConcurrentApprovals(t *testing.T) {
	a := newReviewAPI(t, reviewAPIOptions{})
	r := a.do(req{method: "POST", path: "/v1/tools/demo.add/call?wait=false", body: `{"arguments":{"a":1,"b":2}}`})
	id, _ := r.json(t)["review_id"].(string)
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make(chan int, 32)
	for range 32 {
		wg.Go(func() {
			<-start
			codes <- a.doCtx(context.Background(), req{method: "POST", path: "/admin/reviews/" + id + "/approve"}).status
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("an approval answered %d", c)
		}
	}
	a.poll(id)
	time.Sleep(100 * time.Millisecond)
	if n := a.b.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want exactly 1", n)
	}
}

// TestRESTRestartKeepsReviews: a parked call survives a restart of the
// whole surface over the same SQLite file; approved after it, the new
// daemon runs it once and the caller polls the result.
func TestRESTRestartKeepsReviews(t *testing.T) {
	dir := t.TempDir()
	b := serveBackend(t)
	st1, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	a1 := newReviewAPI(t, reviewAPIOptions{reviews: st1.Reviews(), audit: st1.Audit(), b: b})
	r := a1.do(req{method: "POST", path: "/v1/tools/demo.add/call?wait=false", body: `{"arguments":{"a":5,"b":6}}`})
	id, _ := r.json(t)["review_id"].(string)
	if id == "" {
		t.Fatalf("park: %s", r)
	}
	a1.close()
	if err := st1.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	a2 := newReviewAPI(t, reviewAPIOptions{reviews: st2.Reviews(), audit: st2.Audit(), b: b})
	list := a2.pending(1)
	if list[0]["id"] != id {
		t.Fatalf("after the restart: %v", list)
	}
	if r := a2.do(req{method: "POST", path: "/admin/reviews/" + id + "/approve"}); r.status != 200 {
		t.Fatalf("approve after restart: %s", r)
	}
	final := a2.poll(id)
	if fmt.Sprint(final["result"]) != "map[sum:11]" {
		t.Errorf("result after restart: %v", final)
	}
	if n := b.f.Calls(); n != 1 {
		t.Errorf("backend saw %d calls, want 1", n)
	}
	// The audit log of both lives is in the file.
	if err := a2.w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	ar := a2.do(req{method: "GET", path: "/admin/audit?tool=demo.add"})
	recs, _ := ar.json(t)["records"].([]any)
	if len(recs) != 2 {
		t.Errorf("audit of demo.add across the restart: %s", ar)
	}
}

// TestAdminAudit pages and filters the audit log over HTTP.
func TestAdminAudit(t *testing.T) {
	a := newReviewAPI(t, reviewAPIOptions{})
	for i := range 5 {
		a.do(req{method: "POST", path: "/v1/tools/demo.echo/call", body: fmt.Sprintf(`{"arguments":{"message":"m%d"}}`, i)})
	}
	a.do(req{method: "POST", path: "/v1/tools/demo.fail/call", body: `{"arguments":{"message":"x"}}`})
	if err := a.w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	get := func(q string) (tools []string, next string) {
		t.Helper()
		r := a.do(req{method: "GET", path: "/admin/audit" + q})
		if r.status != 200 {
			t.Fatalf("GET /admin/audit%s: %s", q, r)
		}
		var page struct {
			Records []audit.Record `json:"records"`
			Next    string         `json:"next"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, rec := range page.Records {
			tools = append(tools, rec.Tool+":"+rec.Decision)
			if rec.Front != "rest" || rec.Outcome == "" || rec.Steps == nil {
				t.Errorf("record %+v", rec)
			}
		}
		return tools, page.Next
	}
	all, next := get("")
	if len(all) != 6 || all[0] != "demo.fail:deny" || next != "" {
		t.Errorf("all: %v next %q", all, next)
	}
	if got, _ := get("?decision=deny"); !cmp.Equal(got, []string{"demo.fail:deny"}) {
		t.Errorf("decision=deny: %v", got)
	}
	if got, _ := get("?tool=demo.echo&since=1h"); len(got) != 5 {
		t.Errorf("tool=demo.echo: %v", got)
	}
	if got, _ := get("?since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(got) != 0 {
		t.Errorf("since the future: %v", got)
	}
	var paged []string
	q := "?limit=4"
	for range 5 {
		page, next := get(q)
		paged = append(paged, page...)
		if next == "" {
			break
		}
		q = "?limit=4&before=" + next
	}
	if !cmp.Equal(paged, all) {
		t.Errorf("paged %v, want %v", paged, all)
	}
	for _, bad := range []string{"?decision=maybe", "?since=yesterday", "?before=-1", "?limit=0"} {
		expectError(t, a.do(req{method: "GET", path: "/admin/audit" + bad}), 400, utcp.CodeInvalidRequest)
	}
}

// TestReviewRoutesDisabled: without a queue and an audit store the routes
// answer not_found.
func TestReviewRoutesDisabled(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, r := range []req{
		{method: "GET", path: "/admin/reviews"},
		{method: "GET", path: "/admin/reviews/rv_x"},
		{method: "POST", path: "/admin/reviews/rv_x/approve"},
		{method: "POST", path: "/admin/reviews/rv_x/deny"},
		{method: "GET", path: "/admin/audit"},
		{method: "GET", path: "/v1/reviews/rv_x"},
	} {
		expectError(t, e.do(r), 404, utcp.CodeNotFound)
	}
}
