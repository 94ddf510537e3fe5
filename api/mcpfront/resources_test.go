package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
)

// resClient is a go-sdk client that records resources/updated.
type resClient struct {
	s       *mcp.ClientSession
	updated chan string
}

func openResClient(t *testing.T, tr mcp.Transport) *resClient {
	t.Helper()
	rc := &resClient{updated: make(chan string, 64)}
	cl := mcp.NewClient(&mcp.Implementation{Name: "utcpd-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case rc.updated <- r.Params.URI:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rc.s = s
	return rc
}

func (rc *resClient) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (rc *resClient) resources(t *testing.T) []*mcp.Resource {
	t.Helper()
	var out []*mcp.Resource
	for r, err := range rc.s.Resources(rc.ctx(t), nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func (rc *resClient) templates(t *testing.T) []*mcp.ResourceTemplate {
	t.Helper()
	var out []*mcp.ResourceTemplate
	for r, err := range rc.s.ResourceTemplates(rc.ctx(t), nil) {
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func (rc *resClient) prompts(t *testing.T) []*mcp.Prompt {
	t.Helper()
	var out []*mcp.Prompt
	for p, err := range rc.s.Prompts(rc.ctx(t), nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		out = append(out, p)
	}
	return out
}

func (rc *resClient) read(t *testing.T, uri string) *mcp.ReadResourceResult {
	t.Helper()
	res, err := rc.s.ReadResource(rc.ctx(t), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("resources/read %s: %v", uri, err)
	}
	return res
}

// listed is a list as generic JSON sorted by key: the front lists
// resources, templates and prompts in the go-sdk server's order (by URI
// or name), not the backend's.
func listed(t *testing.T, v any, key string) any {
	t.Helper()
	l, _ := comparable(t, v).([]any)
	sort.Slice(l, func(i, j int) bool {
		a, _ := l[i].(map[string]any)[key].(string)
		b, _ := l[j].(map[string]any)[key].(string)
		return a < b
	})
	return l
}

// readResult is a resources/read result as generic JSON without
// cacheScope, which the front's go-sdk server sets to the protocol's
// default ("public") when the backend sent none.
func readResult(t *testing.T, res *mcp.ReadResourceResult) any {
	t.Helper()
	m, _ := comparable(t, res).(map[string]any)
	delete(m, "cacheScope")
	return m
}

// promptArgs are argument values server-everything's prompts accept.
var promptArgs = map[string]string{"city": "Paris", "state": "Texas", "resourceType": "Text", "resourceId": "2",
	"department": "Engineering", "name": "Alice"}

func argsFor(p *mcp.Prompt) map[string]string {
	args := map[string]string{}
	for _, a := range p.Arguments {
		if v, ok := promptArgs[a.Name]; ok {
			args[a.Name] = v
		} else if a.Required {
			args[a.Name] = "x"
		}
	}
	return args
}

// everythingManual is server-everything over stdio as manual name.
func everythingManual(p everythingPeer, name string) string {
	b, _ := json.Marshal(map[string]any{"name": name, "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"command": p.node, "args": []string{p.script, "stdio"}}}}})
	return string(b)
}

// TestServerEverythingResourcesThroughFront lists and reads
// server-everything's resources, templates and prompts, gets every
// prompt and asks for a completion, directly and through utcpd (its
// names native), and compares; a subscribed resource's update reaches
// the subscribing client.
func TestServerEverythingResourcesThroughFront(t *testing.T) {
	p := everything(t)
	direct := openResClient(t, &mcp.CommandTransport{Command: exec.Command(p.node, p.script, "stdio")})
	e := newEnv(t, envOptions{manuals: map[string]string{"everything": everythingManual(p, "everything")},
		front: Options{NativeNames: []string{"everything.srv"}}})
	front := openResClient(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1})

	caps := front.s.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged || caps.Prompts == nil || caps.Completions == nil {
		t.Fatalf("capabilities %+v: want resources (subscribe, listChanged), prompts and completions", caps)
	}
	wantRes, gotRes := direct.resources(t), front.resources(t)
	if len(wantRes) == 0 {
		t.Fatal("server-everything lists no resources")
	}
	if diff := cmp.Diff(listed(t, wantRes, "uri"), listed(t, gotRes, "uri")); diff != "" {
		t.Errorf("resources/list (-direct +utcpd):\n%s", diff)
	}
	for _, r := range wantRes {
		if diff := cmp.Diff(readResult(t, direct.read(t, r.URI)), readResult(t, front.read(t, r.URI))); diff != "" {
			t.Errorf("resources/read %s (-direct +utcpd):\n%s", r.URI, diff)
		}
	}
	wantTpl, gotTpl := direct.templates(t), front.templates(t)
	if len(wantTpl) == 0 {
		t.Fatal("server-everything lists no resource templates")
	}
	if diff := cmp.Diff(listed(t, wantTpl, "uriTemplate"), listed(t, gotTpl, "uriTemplate")); diff != "" {
		t.Errorf("resources/templates/list (-direct +utcpd):\n%s", diff)
	}
	for _, tpl := range wantTpl {
		uri := strings.Replace(tpl.URITemplate, "{resourceId}", "3", 1)
		w, g := direct.read(t, uri), front.read(t, uri)
		if diff := cmp.Diff(readResult(t, w), readResult(t, g)); diff != "" {
			t.Errorf("resources/read %s (template) (-direct +utcpd):\n%s", uri, diff)
		}
	}
	wantP, gotP := direct.prompts(t), front.prompts(t)
	if len(wantP) < 3 {
		t.Fatalf("server-everything lists %d prompts", len(wantP))
	}
	if diff := cmp.Diff(listed(t, wantP, "name"), listed(t, gotP, "name")); diff != "" {
		t.Errorf("prompts/list (-direct +utcpd):\n%s", diff)
	}
	for _, pr := range wantP {
		params := &mcp.GetPromptParams{Name: pr.Name, Arguments: argsFor(pr)}
		w, err := direct.s.GetPrompt(direct.ctx(t), params)
		if err != nil {
			t.Fatalf("prompts/get %s directly: %v", pr.Name, err)
		}
		g, err := front.s.GetPrompt(front.ctx(t), params)
		if err != nil {
			t.Fatalf("prompts/get %s through utcpd: %v", pr.Name, err)
		}
		if diff := cmp.Diff(comparable(t, w), comparable(t, g)); diff != "" {
			t.Errorf("prompts/get %s (-direct +utcpd):\n%s", pr.Name, diff)
		}
	}
	cp := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "E"}}
	wc, err := direct.s.Complete(direct.ctx(t), cp)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := front.s.Complete(front.ctx(t), cp)
	if err != nil {
		t.Fatalf("completion/complete through utcpd: %v", err)
	}
	if diff := cmp.Diff(comparable(t, wc), comparable(t, gc)); diff != "" || len(gc.Completion.Values) == 0 {
		t.Errorf("completion/complete (-direct +utcpd):\n%s (values %v)", diff, gc.Completion.Values)
	}

	// A subscription: server-everything sends resources/updated for the
	// subscribed URIs of the session that calls toggle-subscriber-updates.
	sub := wantRes[0].URI
	if err := front.s.Subscribe(front.ctx(t), &mcp.SubscribeParams{URI: sub}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	other := openResClient(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1})
	if _, err := front.s.CallTool(front.ctx(t), &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-front.updated:
		if got != sub {
			t.Errorf("resources/updated for %q, subscribed to %q", got, sub)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no notifications/resources/updated reached the subscribed client")
	}
	if err := front.s.Unsubscribe(front.ctx(t), &mcp.UnsubscribeParams{URI: sub}); err != nil {
		t.Fatalf("resources/unsubscribe: %v", err)
	}
	select {
	case got := <-other.updated:
		t.Errorf("a client that did not subscribe got resources/updated for %q", got)
	default:
	}
}

// TestResourcesOfTwoBackends registers server-everything twice: each
// one's resources and prompts are listed under utcpd names of their
// own, read from their own backend, and a guard that denies resource
// reads of one refuses them (audited) while tool calls still run.
func TestResourcesOfTwoBackends(t *testing.T) {
	p := everything(t)
	deny := guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		if c.Kind == guard.ActionResource && c.Manual == "two" {
			return guard.Verdict{Decision: guard.Deny, Reason: "no reading two", Guard: "test"}, nil
		}
		return guard.Verdict{Decision: guard.Allow, Guard: "test"}, nil
	})
	e := newEnv(t, envOptions{guard: deny, manuals: map[string]string{"one": everythingManual(p, "one"), "two": everythingManual(p, "two")}})
	front := openResClient(t, &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1})

	byBackend := map[string]int{}
	uris := map[string]bool{}
	for _, r := range front.resources(t) {
		if uris[r.URI] {
			t.Errorf("resource %s listed twice", r.URI)
		}
		uris[r.URI] = true
		switch {
		case strings.HasPrefix(r.URI, "utcpd://one.srv/demo://"):
			byBackend["one"]++
		case strings.HasPrefix(r.URI, "utcpd://two.srv/demo://"):
			byBackend["two"]++
		default:
			t.Errorf("resource URI %s is not a utcpd URI of one backend", r.URI)
		}
	}
	if byBackend["one"] == 0 || byBackend["one"] != byBackend["two"] {
		t.Fatalf("resources by backend: %v", byBackend)
	}
	tpls := front.templates(t)
	var oneTpl string
	for _, tpl := range tpls {
		if strings.HasPrefix(tpl.URITemplate, "utcpd://one.srv/demo://resource/dynamic/text/") {
			oneTpl = tpl.URITemplate
		}
	}
	if oneTpl == "" {
		t.Fatalf("no text template of one: %v", comparable(t, tpls))
	}
	uri := strings.Replace(oneTpl, "{resourceId}", "5", 1)
	res := front.read(t, uri)
	if len(res.Contents) != 1 || res.Contents[0].URI != uri || !strings.Contains(res.Contents[0].Text, "5") {
		t.Errorf("read %s: %v", uri, comparable(t, res))
	}
	if rec := e.lastRecord(); rec.Kind != guard.ActionResource || rec.Qualified != uri || rec.Verdict.Decision != guard.Allow || !rec.Dispatched || rec.Code != "" {
		t.Errorf("record of the read: %+v", rec)
	}

	// Denied: two's resources.
	two := strings.Replace(uri, "utcpd://one.srv/", "utcpd://two.srv/", 1)
	_, err := front.s.ReadResource(front.ctx(t), &mcp.ReadResourceParams{URI: two})
	if err == nil {
		t.Fatalf("read %s: allowed, want a guard refusal", two)
	}
	if rpc, code := rpcCode(t, err); rpc != codeServerError || code != "guard_denied" || !strings.Contains(err.Error(), "no reading two") {
		t.Errorf("denied read: %v (rpc %d, code %s)", err, rpc, code)
	}
	rec := e.lastRecord()
	if rec.Kind != guard.ActionResource || rec.Tool != two || rec.Verdict.Decision != guard.Deny || rec.Dispatched || rec.Code != "guard_denied" {
		t.Errorf("record of the denied read: %+v", rec)
	}

	// Prompts of both, each from its own backend.
	names := map[string]bool{}
	for _, pr := range front.prompts(t) {
		names[pr.Name] = true
	}
	for _, n := range []string{"one.srv.simple-prompt", "two.srv.simple-prompt", "one.srv.args-prompt"} {
		if !names[n] {
			t.Errorf("prompt %s not listed: %v", n, names)
		}
	}
	g, err := front.s.GetPrompt(front.ctx(t), &mcp.GetPromptParams{Name: "two.srv.args-prompt", Arguments: map[string]string{"city": "Lyon"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(mustJSON(t, g), "Lyon") {
		t.Errorf("args-prompt: %s", mustJSON(t, g))
	}
	if rec := e.lastRecord(); rec.Kind != guard.ActionPrompt || rec.Qualified != "two.srv.args-prompt" {
		t.Errorf("record of the prompt: %+v", rec)
	}
	// Completion of a template argument of one, through utcpd's URI.
	cr, err := front.s.Complete(front.ctx(t), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: oneTpl},
		Argument: mcp.CompleteParamsArgument{Name: "resourceId", Value: "1"}})
	if err != nil {
		t.Fatalf("completion of a template argument: %v", err)
	}
	if len(cr.Completion.Values) == 0 {
		t.Errorf("no completion of resourceId: %+v", cr.Completion)
	}
	// Unknown URIs are not found.
	_, err = front.s.ReadResource(front.ctx(t), &mcp.ReadResourceParams{URI: "utcpd://nosuch.srv/demo://x"})
	if err == nil {
		t.Fatal("read of an unknown URI succeeded")
	}
	if rpc, _ := rpcCode(t, err); rpc != jsonrpc.CodeInvalidParams {
		t.Errorf("unknown URI: %v, want %d", err, jsonrpc.CodeInvalidParams)
	}
	if got := gateway.QualifyURI("one", "srv", "demo://x"); got != "utcpd://one.srv/demo://x" {
		t.Errorf("QualifyURI = %s", got)
	}
}

// TestResourceListChangedRelayed: an MCP server behind utcpd that adds a
// resource and a prompt sends list_changed; the front reads the lists
// again and its clients get list_changed for both, and see the new items
// under utcpd's names; a subscribed resource's update reaches the
// subscriber under the URI it subscribed to. No npm: the conformance
// fixture is a go-sdk server.
func TestResourceListChangedRelayed(t *testing.T) {
	conf := confserver.New()
	hs := httptest.NewServer(conf.Handler())
	t.Cleanup(hs.Close)
	tmpl := fmt.Sprintf(`{"name":"conf","call_template_type":"mcp","config":{"mcpServers":{"srv":{"url":%q}}}}`, hs.URL)
	e := newEnv(t, envOptions{manuals: map[string]string{"conf": tmpl}})
	resChanged, promptsChanged := make(chan struct{}, 8), make(chan struct{}, 8)
	updated := make(chan string, 8)
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resChanged <- struct{}{} },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	s, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rc := &resClient{s: s}
	if n := len(rc.resources(t)); n != 3 {
		t.Fatalf("%d resources, want the fixture's 3", n)
	}
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s reached the client", what)
		}
	}
	conf.MCP().AddResource(&mcp.Resource{URI: "test://added", Name: "added"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://added", Text: "new"}}}, nil
	})
	wait(resChanged, "notifications/resources/list_changed")
	waitFor(t, "the added resource", func() bool {
		for _, r := range rc.resources(t) {
			if r.URI == "utcpd://conf.srv/test://added" {
				return true
			}
		}
		return false
	})
	if res := rc.read(t, "utcpd://conf.srv/test://added"); len(res.Contents) != 1 || res.Contents[0].Text != "new" || res.Contents[0].URI != "utcpd://conf.srv/test://added" {
		t.Errorf("read of the added resource: %v", comparable(t, res))
	}
	conf.MCP().AddPrompt(&mcp.Prompt{Name: "added_prompt"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	wait(promptsChanged, "notifications/prompts/list_changed")
	waitFor(t, "the added prompt", func() bool {
		for _, p := range rc.prompts(t) {
			if p.Name == "conf.srv.added_prompt" {
				return true
			}
		}
		return false
	})

	watched := "utcpd://conf.srv/" + confserver.ResourceWatched
	if err := s.Subscribe(rc.ctx(t), &mcp.SubscribeParams{URI: watched}); err != nil {
		t.Fatal(err)
	}
	if got := conf.Subscribed(); len(got) != 1 || got[0] != confserver.ResourceWatched {
		t.Fatalf("the server's subscriptions: %v", got)
	}
	_ = conf.MCP().ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: confserver.ResourceWatched})
	select {
	case got := <-updated:
		if got != watched {
			t.Errorf("updated %q, want %q", got, watched)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/updated reached the subscriber")
	}
	// The session ending balances its subscription.
	_ = s.Close()
	waitFor(t, "the server's subscription to end with the session", func() bool { return len(conf.Subscribed()) == 0 })
}
