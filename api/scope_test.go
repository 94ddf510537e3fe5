package api

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
	"github.com/utcpd/utcpd/gateway"
)

// TestNamedKeyRESTResourcesAndPrompts: the REST resources and prompts
// routes list an MCP server's items to a key whose scope allows the
// server and to no other, and answer a read, a prompt or a completion
// outside the scope exactly as for a server that does not exist.
func TestNamedKeyRESTResourcesAndPrompts(t *testing.T) {
	conf := confserver.New()
	hs := httptest.NewServer(conf.Handler())
	t.Cleanup(hs.Close)
	key := func(name string, tools ...string) gateway.APIKey {
		sc, err := gateway.NewScope(tools, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return gateway.APIKey{Name: name, Key: name + "-key", Scope: sc}
	}
	e := newEnv(t, envOptions{api: Options{Keys: []gateway.APIKey{key("wide", "conf.*"), key("narrow", "demo.*")}}})
	e.register(fmt.Sprintf(`{"name":"conf","call_template_type":"mcp","config":{"mcpServers":{"srv":{"url":%q}}}}`, hs.URL), "config")
	as := func(k string, r req) reply {
		r.headers = map[string]string{"Authorization": "Bearer " + k + "-key"}
		return e.do(r)
	}
	for _, path := range []string{"/v1/resources", "/v1/prompts"} {
		w, n := as("wide", req{method: "GET", path: path}), as("narrow", req{method: "GET", path: path})
		if w.status != 200 || !strings.Contains(string(w.body), `"manual":"conf"`) {
			t.Errorf("wide %s: %s", path, w)
		}
		if n.status != 200 || strings.Contains(string(n.body), "conf") {
			t.Errorf("narrow %s: %s", path, n)
		}
	}
	uri, ghostURI := "utcpd://conf.srv/"+confserver.ResourceStaticText, "utcpd://cong.srv/"+confserver.ResourceStaticText
	prompt, ghostPrompt := "conf.srv."+confserver.PromptSimple, "cong.srv."+confserver.PromptSimple
	if r := as("wide", req{method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape(uri)}); r.status != 200 {
		t.Errorf("wide reads %s: %s", uri, r)
	}
	if r := as("wide", req{method: "POST", path: "/v1/prompts/" + prompt + "/get", body: `{}`}); r.status != 200 {
		t.Errorf("wide gets %s: %s", prompt, r)
	}
	for _, c := range []struct {
		what          string
		hidden, ghost req
		hName, gName  string
	}{
		{"read", req{method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape(uri)}, req{method: "GET", path: "/v1/resources/read?uri=" + url.QueryEscape(ghostURI)}, uri, ghostURI},
		{"prompt", req{method: "POST", path: "/v1/prompts/" + prompt + "/get", body: `{}`}, req{method: "POST", path: "/v1/prompts/" + ghostPrompt + "/get", body: `{}`}, prompt, ghostPrompt},
		{"completion", req{method: "POST", path: "/v1/completions", body: `{"ref": {"type": "ref/prompt", "name": "` + prompt + `"}, "argument": {"name": "x", "value": ""}}`},
			req{method: "POST", path: "/v1/completions", body: `{"ref": {"type": "ref/prompt", "name": "` + ghostPrompt + `"}, "argument": {"name": "x", "value": ""}}`}, prompt, ghostPrompt},
	} {
		h, g := as("narrow", c.hidden), as("narrow", c.ghost)
		gb := strings.ReplaceAll(string(g.body), c.gName, c.hName)
		gb = strings.ReplaceAll(gb, strings.TrimPrefix(strings.Split(c.gName, ".srv")[0], "utcpd://"), "conf")
		if h.status != g.status || string(h.body) != gb || h.status != 404 {
			t.Errorf("%s outside the scope:\n hidden %s\n  ghost %d %s", c.what, h, g.status, gb)
		}
	}
}
