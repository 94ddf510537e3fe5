package main

// The MCP resources and prompts routes of the REST front (GET
// /v1/resources, /v1/resources/read, /v1/prompts, POST
// /v1/prompts/{name}/get) reopen what a tool call would: a web page or a
// caller without the key reading a backend's resources. Replayed against
// the real binary with an MCP server behind it.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// TestSecurityResourceRoutes: without the API key, with a web page's
// Origin, with another page's, or with a rebinding Host, the routes
// answer 401 or 403 and read nothing; with the key they serve, under
// utcpd's URIs, and a guard's deny of a resource read is refused and
// audited.
func TestSecurityResourceRoutes(t *testing.T) {
	t.Parallel()
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(conf.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [{"name": "conf", "call_template_type": "mcp",
    "config": {"mcpServers": {"srv": {"url": %q}}}}],
  "gateway": {"api_keys": ["k1"], "guards": [{"kind": "policy", "default": "allow", "rules": [
    {"kinds": ["resource"], "args": [{"pointer": "/uri", "regex": "binary"}], "decision": "deny", "reason": "no binaries"}]}]}}`, conf.URL))
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg, "--max-body-bytes", "4096"}})

	text := "utcpd://conf.srv/" + confserver.ResourceStaticText
	binary := "utcpd://conf.srv/" + confserver.ResourceStaticBinary
	read := "/v1/resources/read?uri=" + url.QueryEscape(text)
	prompt := "/v1/prompts/conf.srv." + confserver.PromptSimple + "/get"
	send := func(method, path, key, origin, host, ctype string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{}`)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, d.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		if host != "" {
			req.Host = host
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	const evil = "https://evil.example"
	rebind := "rebind.attacker.example:" + portOf(t, d.URL)
	for _, path := range []string{"/v1/resources", read, "/v1/prompts"} {
		for _, a := range []struct {
			name, key, origin, host string
			want                    int
		}{
			{"no key", "", "", "", 401},
			{"wrong key", "k2", "", "", 401},
			{"web page", "k1", evil, "", 403},
			{"another local page", "k1", "http://127.0.0.1:3000", "", 403},
			{"dns rebinding", "k1", "", rebind, 403},
		} {
			if got, body := send(http.MethodGet, path, a.key, a.origin, a.host, ""); got != a.want {
				t.Errorf("GET %s, %s: %d %s, want %d", path, a.name, got, body, a.want)
			}
		}
	}
	for _, a := range []struct {
		name, key, origin, ctype string
		want                     int
	}{
		{"no key", "", "", "application/json", 401},
		{"web page", "k1", evil, "application/json", 403},
		{"no-cors text/plain", "k1", evil, "text/plain", 403},
		{"text/plain without Origin", "k1", "", "text/plain", 415},
	} {
		if got, body := send(http.MethodPost, prompt, a.key, a.origin, "", a.ctype); got != a.want {
			t.Errorf("POST %s, %s: %d %s, want %d", prompt, a.name, got, body, a.want)
		}
	}

	// A body over max_body_bytes is refused before it reaches a backend
	// (Bounded input), on both POST routes.
	for _, path := range []string{prompt, "/v1/completions"} {
		big := `{"arguments": {"x": "` + strings.Repeat("a", 8192) + `"}}`
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+path, strings.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "payload_too_large") {
			t.Errorf("POST %s with an 8 KiB body over a 4 KiB limit: %d %s, want 413 payload_too_large", path, resp.StatusCode, b)
		}
	}

	// With the key and no Origin: served.
	status, body := send(http.MethodGet, "/v1/resources", "k1", "", "", "")
	if status != 200 || !strings.Contains(body, `"uri":"`+text+`"`) || !strings.Contains(body, `"uri_template":"utcpd://conf.srv/`+confserver.ResourceTemplate+`"`) {
		t.Errorf("GET /v1/resources: %d %s", status, body)
	}
	status, body = send(http.MethodGet, read, "k1", "", "", "")
	var rr struct {
		Contents []struct{ URI, Text string } `json:"contents"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &rr) != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != confserver.StaticText {
		t.Errorf("read: %d %s", status, body)
	}
	if status, body = send(http.MethodPost, prompt, "k1", "", "", "application/json"); status != 200 || !strings.Contains(body, confserver.SimplePromptText) {
		t.Errorf("prompt: %d %s", status, body)
	}
	if status, body = send(http.MethodGet, "/v1/prompts", "k1", "", "", ""); status != 200 || !strings.Contains(body, `"name":"conf.srv.`+confserver.PromptWithArguments+`"`) {
		t.Errorf("prompts: %d %s", status, body)
	}

	// The guard denies the binary resource; the refusal is audited.
	status, body = send(http.MethodGet, "/v1/resources/read?uri="+url.QueryEscape(binary), "k1", "", "", "")
	if status != 403 || !strings.Contains(body, "guard_denied") || !strings.Contains(body, "no binaries") {
		t.Errorf("denied read: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, audit := request(t, http.MethodGet, d.URL+"/admin/audit?decision=deny&since=1h", "", "")
		var page struct {
			Records []struct {
				Tool, Kind, Front, Decision, Outcome string
				Dispatched                           bool
			} `json:"records"`
		}
		_ = json.Unmarshal(audit, &page)
		found := false
		for _, r := range page.Records {
			if r.Tool == binary {
				found = true
				if r.Kind != "resource" || r.Front != "rest" || r.Outcome != "guard_denied" || r.Dispatched {
					t.Errorf("audit record %+v", r)
				}
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the denied read was not audited: %s", audit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
