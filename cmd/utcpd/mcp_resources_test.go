package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// asJSON is v as generic JSON, without a result's cacheScope (the go-sdk
// servers default it alike; not the point).
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	_ = json.Unmarshal(b, &out)
	if m, ok := out.(map[string]any); ok {
		delete(m, "cacheScope")
	}
	return out
}

// catalog lists a session's resources, templates and prompts.
func catalog(t *testing.T, ctx context.Context, c *mcpClient) (res []*mcp.Resource, tpl []*mcp.ResourceTemplate, prompts []*mcp.Prompt) {
	t.Helper()
	for r, err := range c.s.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	for r, err := range c.s.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		tpl = append(tpl, r)
	}
	for p, err := range c.s.Prompts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		prompts = append(prompts, p)
	}
	return
}

// TestMCPStdioResources: "utcpd mcp --config" and "utcpd mcp --connect"
// serve an MCP server's resources, templates and prompts as the server
// does (--native-names), compared with the go-sdk client on the server
// directly; without native names they are under utcpd's names, a
// template's URI maps back, and a completion reaches the owning server.
func TestMCPStdioResources(t *testing.T) {
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(conf.Close)
	dir := t.TempDir()
	manual := fmt.Sprintf(`{"name": "conf", "call_template_type": "mcp", "config": {"mcpServers": {"srv": {"url": %q}}}}`, conf.URL)
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"manual_call_templates": [`+manual+`]}`)
	dcfg := filepath.Join(dir, "daemon.json")
	writeFile(t, dcfg, `{"manual_call_templates": [`+manual+`], "gateway": {"api_keys": ["k1"]}}`)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", dcfg}})
	const pv = "2025-11-25"
	direct, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: conf.URL, MaxRetries: -1}, pv)
	if err != nil {
		t.Fatal(err)
	}
	wr, wt, wp := catalog(t, t.Context(), direct)
	if len(wr) != 3 || len(wt) != 1 || len(wp) != 4 {
		t.Fatalf("the fixture lists %d resources, %d templates, %d prompts", len(wr), len(wt), len(wp))
	}
	ways := []struct {
		name string
		env  []string
		args []string
	}{
		{"config", nil, []string{"--config", cfg}},
		{"connect", []string{"UTCPD_API_KEY=k1"}, []string{"--connect", d.URL}},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			ctx := t.Context()
			native, err := connectMCP(t, mcpCommand(dir, way.env, append(way.args, "--native-names", "conf.srv")...), pv)
			if err != nil {
				t.Fatal(err)
			}
			gr, gt, gp := catalog(t, ctx, native)
			for what, pair := range map[string][2]any{"resources": {wr, gr}, "templates": {wt, gt}, "prompts": {wp, gp}} {
				if diff := cmp.Diff(asJSON(t, pair[0]), asJSON(t, pair[1])); diff != "" {
					t.Errorf("%s (-direct +utcpd mcp):\n%s", what, diff)
				}
			}
			for _, u := range []string{confserver.ResourceStaticText, confserver.ResourceStaticBinary, "test://template/42/data"} {
				w, err := direct.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
				if err != nil {
					t.Fatal(err)
				}
				g, err := native.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
				if err != nil {
					t.Fatalf("read %s through utcpd mcp: %v", u, err)
				}
				if diff := cmp.Diff(asJSON(t, w), asJSON(t, g)); diff != "" {
					t.Errorf("read %s (-direct +utcpd mcp):\n%s", u, diff)
				}
			}
			for _, p := range wp {
				args := map[string]string{}
				for _, a := range p.Arguments {
					args[a.Name] = "v-" + a.Name
				}
				w, err := direct.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name, Arguments: args})
				if err != nil {
					t.Fatal(err)
				}
				g, err := native.s.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.Name, Arguments: args})
				if err != nil {
					t.Fatalf("prompt %s through utcpd mcp: %v", p.Name, err)
				}
				if diff := cmp.Diff(asJSON(t, w), asJSON(t, g)); diff != "" {
					t.Errorf("prompt %s (-direct +utcpd mcp):\n%s", p.Name, diff)
				}
			}
			cp := &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: confserver.PromptWithArguments},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "pa"}}
			w, err := direct.s.Complete(ctx, cp)
			if err != nil {
				t.Fatal(err)
			}
			g, err := native.s.Complete(ctx, cp)
			if err != nil {
				t.Fatalf("completion through utcpd mcp: %v", err)
			}
			if diff := cmp.Diff(asJSON(t, w), asJSON(t, g)); diff != "" || len(g.Completion.Values) == 0 {
				t.Errorf("completion (-direct +utcpd mcp):\n%s", diff)
			}

			caps := native.s.InitializeResult().Capabilities
			if caps.Resources == nil || caps.Prompts == nil || caps.Completions == nil || caps.Resources.Subscribe != (way.name == "config") {
				t.Errorf("capabilities %+v (resources %+v): subscribe only in-process", caps, caps.Resources)
			}
			err = native.s.Subscribe(ctx, &mcp.SubscribeParams{URI: confserver.ResourceWatched})
			if (err == nil) != (way.name == "config") {
				t.Errorf("subscribe: %v", err)
			}

			// utcpd's names.
			named, err := connectMCP(t, mcpCommand(dir, way.env, way.args...), pv)
			if err != nil {
				t.Fatal(err)
			}
			nr, nt, np := catalog(t, ctx, named)
			if len(nr) != 3 || !strings.HasPrefix(nr[0].URI, "utcpd://conf.srv/test://") || len(nt) != 1 || nt[0].URITemplate != "utcpd://conf.srv/"+confserver.ResourceTemplate ||
				len(np) != 4 || !strings.HasPrefix(np[0].Name, "conf.srv.test_") {
				t.Fatalf("utcpd names: %v %v %v", asJSON(t, nr), asJSON(t, nt), asJSON(t, np))
			}
			u := "utcpd://conf.srv/test://template/9/data"
			res, err := named.s.ReadResource(ctx, &mcp.ReadResourceParams{URI: u})
			if err != nil || len(res.Contents) != 1 || res.Contents[0].URI != u || !strings.Contains(res.Contents[0].Text, "Data for ID: 9") {
				t.Fatalf("read %s: %v %v", u, asJSON(t, res), err)
			}
			cr, err := named.s.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: nt[0].URITemplate},
				Argument: mcp.CompleteParamsArgument{Name: "id", Value: "4"}})
			if err != nil || len(cr.Completion.Values) != 1 || cr.Completion.Values[0] != "42" {
				t.Errorf("completion: %v %v", asJSON(t, cr), err)
			}
		})
	}
}
