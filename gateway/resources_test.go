package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// auditLog collects audit records.
type auditLog struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (a *auditLog) Append(r audit.Record) {
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
}

func (a *auditLog) last(t *testing.T) audit.Record {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.recs) == 0 {
		t.Fatal("nothing audited")
	}
	return a.recs[len(a.recs)-1]
}

// serveConf serves the conformance fixture (a go-sdk MCP server with
// resources, a template, prompts and completions) over Streamable HTTP.
func serveConf(t *testing.T) (*confserver.Server, string) {
	t.Helper()
	srv := confserver.New()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func mcpManual(name, url string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"name":%q,"call_template_type":"mcp","config":{"mcpServers":{"srv":{"url":%q}}}}`, name, url))
}

// TestMCPResources reads the resources and prompts of two MCP servers
// through the gateway: listed under names of their own, read and got
// from the right server, guarded (kind resource and prompt) and audited,
// completions forwarded, subscriptions counted and their updates
// reported; a deregistered manual's resources are gone.
func TestMCPResources(t *testing.T) {
	one, oneURL := serveConf(t)
	two, twoURL := serveConf(t)
	log := &auditLog{}
	var seen sync.Map // guard.Call kinds by name
	g := newGateway(t, gateway.Options{Audit: log, Guard: guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		seen.Store(c.Tool, *c)
		if c.Manual == "two" && c.Kind == guard.ActionPrompt {
			return guard.Verdict{Decision: guard.Deny, Reason: "not two's prompts", Guard: "t"}, nil
		}
		return guard.Verdict{Decision: guard.Allow, Guard: "t"}, nil
	})})
	register(t, g, mcpManual("one", oneURL))
	register(t, g, mcpManual("two", twoURL))

	cat := g.ListMCP(t.Context())
	var uris, tpls, prompts []string
	for _, it := range cat.Resources {
		uris = append(uris, it.Name)
	}
	for _, it := range cat.ResourceTemplates {
		tpls = append(tpls, it.Name)
	}
	for _, it := range cat.Prompts {
		prompts = append(prompts, it.Name)
	}
	for _, m := range []string{"one", "two"} {
		if !slices.Contains(uris, "utcpd://"+m+".srv/"+confserver.ResourceStaticText) ||
			!slices.Contains(tpls, "utcpd://"+m+".srv/"+confserver.ResourceTemplate) ||
			!slices.Contains(prompts, m+".srv."+confserver.PromptWithArguments) {
			t.Errorf("%s: resources %v templates %v prompts %v", m, uris, tpls, prompts)
		}
	}
	if len(uris) != 6 || len(prompts) != 8 {
		t.Errorf("%d resources, %d prompts; want 3 and 4 per server", len(uris), len(prompts))
	}
	if it := cat.Resources[0]; !strings.Contains(string(it.Renamed(it.Name)), `"uri":"utcpd://`) {
		t.Errorf("Renamed: %s", it.Renamed(it.Name))
	}

	opts := gateway.CallOptions{Principal: "p", Front: "test"}
	uri := "utcpd://two.srv/test://template/7/data"
	raw, err := g.ReadResource(t.Context(), uri, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res mcp.ReadResourceResult
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Contents) != 1 || res.Contents[0].URI != "test://template/7/data" || !strings.Contains(res.Contents[0].Text, "Data for ID: 7") {
		t.Errorf("read %s: %s (%v)", uri, raw, err)
	}
	c, _ := seen.Load(uri)
	if gc := c.(guard.Call); gc.Kind != guard.ActionResource || gc.Manual != "two" || gc.Protocol != "mcp" || gc.Qualified != uri || gc.Arguments["uri"] != "test://template/7/data" {
		t.Errorf("guard saw %+v", gc)
	}
	if r := log.last(t); r.Kind != "resource" || r.Tool != uri || r.Front != "test" || r.Principal != "p" || !r.Dispatched || r.Outcome != "ok" {
		t.Errorf("audit %+v", r)
	}

	// The server's own error: not_found, its JSON-RPC code kept.
	_, err = g.ReadResource(t.Context(), "utcpd://one.srv/test://nope", opts)
	if utcp.CodeOf(err) != utcp.CodeNotFound && utcp.CodeOf(err) != utcp.CodeInvalidArguments {
		t.Errorf("unknown resource at the server: %v (%s)", err, utcp.CodeOf(err))
	}
	if r := log.last(t); r.Outcome == "ok" || !r.Dispatched {
		t.Errorf("audit of the failed read %+v", r)
	}
	// URIs no server serves never reach one.
	for _, u := range []string{"utcpd://nosuch.srv/test://static-text", "utcpd://one.other/test://static-text", "test://static-text", "utcpd://one.srv/"} {
		if _, err := g.ReadResource(t.Context(), u, opts); utcp.CodeOf(err) != utcp.CodeNotFound {
			t.Errorf("read %q: %v, want not_found", u, err)
		}
		if r := log.last(t); r.Dispatched || r.Qualified != "" {
			t.Errorf("audit of %q: %+v", u, r)
		}
	}

	raw, err = g.GetPrompt(t.Context(), "one.srv."+confserver.PromptWithArguments, map[string]string{"arg1": "a", "arg2": "b"}, opts)
	if err != nil || !strings.Contains(string(raw), "arg1='a', arg2='b'") {
		t.Errorf("prompt: %s %v", raw, err)
	}
	if r := log.last(t); r.Kind != "prompt" || r.Qualified != "one.srv."+confserver.PromptWithArguments {
		t.Errorf("audit %+v", r)
	}
	_, err = g.GetPrompt(t.Context(), "two.srv."+confserver.PromptSimple, nil, opts)
	if utcp.CodeOf(err) != utcp.CodeGuardDenied || !strings.Contains(err.Error(), "not two's prompts") {
		t.Errorf("denied prompt: %v", err)
	}
	if r := log.last(t); r.Kind != "prompt" || r.Decision != "deny" || r.Dispatched || r.Outcome != "guard_denied" {
		t.Errorf("audit of the denied prompt %+v", r)
	}

	for _, ref := range []string{`{"type":"ref/prompt","name":"two.srv.test_prompt_with_arguments"}`, `{"type":"ref/resource","uri":"utcpd://two.srv/test://template/{id}/data"}`} {
		arg := `{"name":"arg1","value":"pa"}`
		if strings.Contains(ref, "template") {
			arg = `{"name":"id","value":"1"}`
		}
		raw, err = g.Complete(t.Context(), json.RawMessage(`{"ref":`+ref+`,"argument":`+arg+`}`), opts)
		var cr mcp.CompleteResult
		if err != nil || json.Unmarshal(raw, &cr) != nil || len(cr.Completion.Values) == 0 {
			t.Errorf("complete %s: %s %v", ref, raw, err)
		}
	}

	// Subscriptions: counted per URI; updates reported under utcpd's URI.
	notices := make(chan gateway.ResourceNotice, 16)
	cancel := g.WatchResources(func(n gateway.ResourceNotice) { notices <- n })
	defer cancel()
	watched := "utcpd://one.srv/" + confserver.ResourceWatched
	for range 2 {
		if err := g.SubscribeResource(t.Context(), watched); err != nil {
			t.Fatal(err)
		}
	}
	if got := one.Subscribed(); !slices.Equal(got, []string{confserver.ResourceWatched}) || len(two.Subscribed()) != 0 {
		t.Fatalf("subscribed at the servers: one %v, two %v", got, two.Subscribed())
	}
	if err := one.MCP().ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: confserver.ResourceWatched}); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-notices:
		if n.Kind != transports.ResourceUpdated || n.URI != watched || n.Native != confserver.ResourceWatched || n.Manual != "one" || n.Server != "srv" {
			t.Errorf("notice %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update reported")
	}
	if err := g.UnsubscribeResource(t.Context(), watched); err != nil {
		t.Fatal(err)
	}
	if got := one.Subscribed(); len(got) != 1 {
		t.Errorf("one unsubscribe of two ended the subscription: %v", got)
	}
	if err := g.UnsubscribeResource(t.Context(), watched); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the server's subscription to end", func() bool { return len(one.Subscribed()) == 0 })

	if err := g.DeregisterManual(t.Context(), "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.ReadResource(t.Context(), "utcpd://two.srv/"+confserver.ResourceStaticText, opts); utcp.CodeOf(err) != utcp.CodeNotFound {
		t.Errorf("read of a removed manual: %v", err)
	}
	if n := len(g.ListMCP(t.Context()).Resources); n != 3 {
		t.Errorf("%d resources after removing two, want 3", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
