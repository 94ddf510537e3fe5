package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// TestReviewResourceKind: a policy guard asks for review of resource
// reads and prompt gets of an MCP server behind the real binary. A read
// through /mcp waits and gets the backend's contents once approved; a
// read and a prompt get parked with ?wait=false are run by the daemon
// once approved — the prompt across a restart — as what they are (a
// resource read, a prompt get), not as tool calls (which would be
// tool_not_found), and their MCP results are kept with the reviews.
func TestReviewResourceKind(t *testing.T) {
	t.Parallel()
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(conf.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), fmt.Sprintf(`{
  "manual_call_templates": [{"name": "conf", "call_template_type": "mcp", "config": {"mcpServers": {"srv": {"url": %q}}}}],
  "gateway": {
    "guards": [{"kind": "policy", "default": "allow", "rules": [{"kinds": ["resource", "prompt"], "decision": "review", "reason": "look first"}]}],
    "review_timeout": "1m"
  }
}
`, conf.URL))
	dataDir := filepath.Join(dir, "data")
	d := startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	text := "utcpd://conf.srv/" + confserver.ResourceStaticText
	prompt := "conf.srv." + confserver.PromptWithArguments

	pending := func(d *proc) []map[string]any {
		t.Helper()
		var list struct {
			Reviews []map[string]any `json:"reviews"`
		}
		st, body := request(t, http.MethodGet, d.URL+"/admin/reviews?status=pending", "", "")
		if st != 200 || json.Unmarshal(body, &list) != nil {
			t.Fatalf("GET /admin/reviews: %d %s", st, body)
		}
		return list.Reviews
	}
	approve := func(d *proc, id string) {
		t.Helper()
		if st, body := request(t, http.MethodPost, d.URL+"/admin/reviews/"+id+"/approve", "", `{"note": "fine"}`); st != 200 {
			t.Fatalf("approve %s: %d %s", id, st, body)
		}
	}
	poll := func(d *proc, id string) map[string]any {
		t.Helper()
		var v map[string]any
		eventually(t, 15*time.Second, "review "+id+" done", func() bool {
			st, body := request(t, http.MethodGet, d.URL+"/v1/reviews/"+id, "", "")
			v = map[string]any{}
			return st == 200 && json.Unmarshal(body, &v) == nil && v["done"] == true
		})
		return v
	}
	resultJSON := func(v map[string]any) string {
		b, _ := json.Marshal(v["result"])
		return string(b)
	}

	// An MCP client waits for the decision and gets the contents.
	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", MaxRetries: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	type readAnswer struct {
		res *mcp.ReadResourceResult
		err error
	}
	// The backend's resources join the front's lists once the daemon has
	// listed them from the server, which may be just after ready.
	eventually(t, 15*time.Second, "the backend's resource listed on /mcp", func() bool {
		res, err := c.s.ListResources(t.Context(), nil)
		if err != nil {
			return false
		}
		for _, r := range res.Resources {
			if r.URI == text {
				return true
			}
		}
		return false
	})
	ch := make(chan readAnswer, 1)
	go func() {
		res, err := c.s.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: text})
		ch <- readAnswer{res, err}
	}()
	var list []map[string]any
	eventually(t, 15*time.Second, "a pending review of the MCP read", func() bool {
		select {
		case a := <-ch:
			t.Fatalf("the MCP read ended before any review: %+v %v", a.res, a.err)
		default:
		}
		list = pending(d)
		return len(list) == 1
	})
	if list[0]["kind"] != "resource" || list[0]["tool"] != text || list[0]["front"] != "mcp" {
		t.Errorf("the MCP read's review: %v", list[0])
	}
	approve(d, list[0]["id"].(string))
	if a := <-ch; a.err != nil || len(a.res.Contents) != 1 || a.res.Contents[0].Text != confserver.StaticText {
		t.Fatalf("the waiting MCP read: %+v %v", a.res, a.err)
	}

	// A parked REST read, run by the daemon once approved.
	st, body := request(t, http.MethodGet, d.URL+"/v1/resources/read?wait=false&uri="+url.QueryEscape(text), "", "")
	var parked struct {
		ReviewID string `json:"review_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("read with wait=false: %d %s", st, body)
	}
	if list := pending(d); len(list) != 1 || list[0]["id"] != parked.ReviewID || list[0]["kind"] != "resource" {
		t.Fatalf("pending after the parked read: %v", list)
	}
	approve(d, parked.ReviewID)
	v := poll(d, parked.ReviewID)
	if v["kind"] != "resource" {
		t.Errorf("GET /v1/reviews/%s: kind %v, want resource", parked.ReviewID, v["kind"])
	}
	if v["dispatched"] != true || v["outcome"] != nil && v["outcome"] != "" || !strings.Contains(resultJSON(v), confserver.StaticText) {
		t.Errorf("the parked read after approval: %v", v)
	}

	// A parked prompt get across a restart.
	st, body = request(t, http.MethodPost, d.URL+"/v1/prompts/"+prompt+"/get?wait=false", "", `{"arguments": {"arg1": "one", "arg2": "two"}}`)
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("prompt get with wait=false: %d %s", st, body)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	d = startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	list = pending(d)
	if len(list) != 1 || list[0]["id"] != parked.ReviewID || list[0]["kind"] != "prompt" || list[0]["tool"] != prompt {
		t.Fatalf("pending after the restart: %v", list)
	}
	approve(d, parked.ReviewID)
	v = poll(d, parked.ReviewID)
	if want := "Prompt with arguments: arg1='one', arg2='two'"; v["dispatched"] != true || !strings.Contains(resultJSON(v), want) {
		t.Errorf("the parked prompt get after the restart and approval: %v, want a result with %q", v, want)
	}
}
