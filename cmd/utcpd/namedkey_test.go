package main

// Named API keys with scopes (docs/security.md, "Tool callers"), against
// the real binary: two keys see different tools on every front, and a
// tool outside a key's scope is refused exactly as one that does not
// exist (no oracle).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// namedKeyDaemon starts a daemon with two manuals of the demo HTTP
// server (demo and other, each with the fixture tools) and the keys:
// math (demo.add only, key from $MATH_KEY), ops (other.* but other.fail,
// key by its SHA-256) and a plain key (every tool).
func namedKeyDaemon(t *testing.T) *proc {
	t.Helper()
	b := startBackend(t)
	dir := t.TempDir()
	opsSum := sha256.Sum256([]byte("ops-secret"))
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"manual_call_templates": [`+b.template("demo")+`, `+b.template("other")+`],
  "gateway": {"api_keys": [
    {"name": "math", "key_env": "MATH_KEY", "tools": ["demo.add"]},
    {"name": "ops", "key_sha256": "`+hex.EncodeToString(opsSum[:])+`", "tools": ["other.*", "!other.fail"], "rate_limit": "5/s", "max_concurrent": 2},
    "plain-secret"]}}`)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}, env: []string{"MATH_KEY=math-secret"}})
	eventually(t, 20*time.Second, "both manuals registered", func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/v1/tools?limit=100", "plain-secret", "")
		return st == 200 && strings.Count(string(body), `"name":"`) >= 10
	})
	return d
}

// keyFronts reads what one key sees on every front.
type keyFronts struct {
	t   *testing.T
	d   *proc
	key string
}

func (k keyFronts) get(path string) []byte {
	k.t.Helper()
	st, body := request(k.t, http.MethodGet, k.d.URL+path, k.key, "")
	if st != http.StatusOK {
		k.t.Fatalf("GET %s as %s: %d %s", path, k.key, st, body)
	}
	return body
}

func names[T any](list []T, name func(T) string) []string {
	out := []string{}
	for _, x := range list {
		out = append(out, name(x))
	}
	slices.Sort(out)
	return out
}

func (k keyFronts) rest(q string) []string {
	var l struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(k.get("/v1/tools?limit=100"+q), &l); err != nil {
		k.t.Fatal(err)
	}
	return names(l.Tools, func(x struct{ Name string }) string { return x.Name })
}

func (k keyFronts) utcp() []string {
	var m struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(k.get("/utcp"), &m); err != nil {
		k.t.Fatal(err)
	}
	return names(m.Tools, func(x struct{ Name string }) string { return x.Name })
}

// export returns the tools of the OpenAI export, by their descriptions'
// qualified names (the function names are mangled).
func (k keyFronts) export() []string {
	var l []struct {
		Function struct{ Name string } `json:"function"`
	}
	if err := json.Unmarshal(k.get("/v1/export/openai?codemode=false"), &l); err != nil {
		k.t.Fatal(err)
	}
	return names(l, func(x struct {
		Function struct{ Name string } `json:"function"`
	}) string {
		return strings.Replace(x.Function.Name, "__", ".", 1)
	})
}

func (k keyFronts) codemode(code string) map[string]any {
	k.t.Helper()
	body, _ := json.Marshal(map[string]any{"code": code})
	st, data := request(k.t, http.MethodPost, k.d.URL+"/v1/codemode", k.key, string(body))
	if st != http.StatusOK {
		k.t.Fatalf("codemode as %s: %d %s", k.key, st, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		k.t.Fatal(err)
	}
	return out
}

func (k keyFronts) codemodeList(code string) []string {
	res, _ := k.codemode(code)["result"].([]any)
	out := []string{}
	for _, x := range res {
		s, _ := x.(string)
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (k keyFronts) mcp() *mcpClient {
	k.t.Helper()
	c, err := connectMCP(k.t, &mcp.StreamableClientTransport{Endpoint: k.d.URL + "/mcp",
		HTTPClient: &http.Client{Transport: keyTransport{k.key}}, MaxRetries: -1}, "")
	if err != nil {
		k.t.Fatalf("MCP as %s: %v", k.key, err)
	}
	return c
}

// TestNamedKeyScopesEveryFront: two named keys with different scopes see
// different tool lists on /v1/tools (and its search), /mcp, /utcp,
// /v1/export/openai and CodeMode's list_tools and search_tools, and can
// call what they see; a plain key sees every tool; the audit names each
// call's key.
func TestNamedKeyScopesEveryFront(t *testing.T) {
	t.Parallel()
	d := namedKeyDaemon(t)
	all := []string{}
	for _, m := range []string{"demo", "other"} {
		for _, tl := range []string{"add", "count", "echo", "fail", "sleep"} {
			all = append(all, m+"."+tl)
		}
	}
	for _, c := range []struct {
		key        string
		want, adds []string
	}{
		{"math-secret", []string{"demo.add"}, []string{"demo.add"}},
		{"ops-secret", []string{"other.add", "other.count", "other.echo", "other.sleep"}, []string{"other.add"}},
		{"plain-secret", all, []string{"demo.add", "other.add"}},
	} {
		k := keyFronts{t, d, c.key}
		for front, got := range map[string][]string{
			"/v1/tools":           k.rest(""),
			"/utcp":               k.utcp(),
			"/v1/export/openai":   k.export(),
			"/mcp tools/list":     k.mcp().toolNames(t),
			"CodeMode list_tools": k.codemodeList(`return list_tools()`),
		} {
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s on %s (-want +got):\n%s", c.key, front, diff)
			}
		}
		for front, got := range map[string][]string{
			"/v1/tools?q=add":       k.rest("&q=add"),
			"CodeMode search_tools": k.codemodeList(`local out = {} for _, t in ipairs(search_tools("add", 100)) do out[#out+1] = t.name end return out`),
		} {
			// Search ranks every tool; the ones the key may not see are not among them.
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: %s found %v, want %v", c.key, front, got, c.want)
			}
		}
		for _, tl := range c.adds {
			st, body := request(t, http.MethodPost, d.URL+"/v1/tools/"+tl+"/call", c.key, `{"arguments": {"a": 2, "b": 3}}`)
			if st != 200 || !strings.Contains(string(body), "5") {
				t.Errorf("%s calls %s: %d %s", c.key, tl, st, body)
			}
		}
	}

	// The audit names the key: its name for named keys, key:<8 hex> for
	// a plain one.
	plainSum := sha256.Sum256([]byte("plain-secret"))
	want := map[string]bool{"math": true, "ops": true, "key:" + hex.EncodeToString(plainSum[:4]): true}
	eventually(t, 10*time.Second, "audit records of the calls", func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/admin/audit?limit=100", "", "")
		if st != 200 {
			t.Fatalf("GET /admin/audit: %d %s", st, body)
		}
		var p struct {
			Records []struct{ Principal, Qualified string }
		}
		_ = json.Unmarshal(body, &p)
		got := map[string]bool{}
		for _, r := range p.Records {
			if r.Qualified == "demo.add" && r.Principal == "math" || r.Qualified == "other.add" && r.Principal == "ops" ||
				strings.HasPrefix(r.Principal, "key:") {
				got[r.Principal] = true
			}
		}
		return cmp.Equal(want, got)
	})
	if strings.Contains(d.stderr.String(), "math-secret") || strings.Contains(d.stderr.String(), "ops-secret") {
		t.Error("the log shows a key")
	}
}

// TestNamedKeyRefusalIsNotFound replays the oracle attack: a caller
// probes names outside its scope (a tool of a manual it cannot see, an
// unqualified name whose only tools it cannot see) and compares each
// answer with the answer for a name that exists nowhere. On every front
// (REST describe, call and stream; /utcp/call; MCP tools/call; the LLM
// tool-call route; CodeMode call_tool) the two answers are byte for byte the same once the name is
// swapped, so the caller learns nothing of what exists outside its
// scope.
func TestNamedKeyRefusalIsNotFound(t *testing.T) {
	t.Parallel()
	d := namedKeyDaemon(t)
	for _, c := range []struct{ key, hidden, ghost string }{
		{"ops-secret", "demo.echo", "zzzz.echo"}, // demo is not the key's: as a manual that is not there
		{"ops-secret", "fail", "faix"},           // demo.fail and other.fail are both outside
		{"math-secret", "other.add", "zzzzz.add"},
		{"math-secret", "echo", "ech0"},
	} {
		k := keyFronts{t, d, c.key}
		mc := k.mcp()
		answers := func(name string) map[string]string {
			t.Helper()
			out := map[string]string{}
			esc := url.PathEscape(name)
			for _, r := range []struct{ front, method, path, body string }{
				{"GET /v1/tools/{name}", http.MethodGet, "/v1/tools/" + esc, ""},
				{"POST /v1/tools/{name}/call", http.MethodPost, "/v1/tools/" + esc + "/call", `{"arguments": {}}`},
				{"POST /v1/tools/{name}/stream", http.MethodPost, "/v1/tools/" + esc + "/stream", `{"arguments": {}}`},
				{"POST /utcp/call/{name}", http.MethodPost, "/utcp/call/" + esc, `{}`},
			} {
				st, body := request(t, r.method, d.URL+r.path, c.key, r.body)
				if st != http.StatusNotFound || !strings.Contains(string(body), `"tool_not_found"`) {
					t.Errorf("%s: %s %s: %d %s", c.key, r.front, name, st, body)
				}
				out[r.front] = string(body)
			}
			_, err := mc.call(t, name, `{}`, nil)
			if err == nil {
				t.Errorf("%s: MCP call of %s succeeded", c.key, name)
			} else {
				out["MCP tools/call"] = err.Error()
			}
			fn := strings.Replace(name, ".", "__", 1)
			st, body := request(t, http.MethodPost, d.URL+"/v1/llm/openai/tool_calls", c.key,
				`{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "`+fn+`", "arguments": "{}"}}]}`)
			if st != http.StatusOK || !strings.Contains(string(body), "tool_not_found") {
				t.Errorf("%s: LLM tool call of %s: %d %s", c.key, fn, st, body)
			}
			out["POST /v1/llm/openai/tool_calls"] = strings.ReplaceAll(string(body), fn, name)
			res := k.codemode(`local ok, e = pcall(call_tool, "` + name + `", {}) return {ok, tostring(e), e.code, e.message}`)
			b, _ := json.Marshal(res["result"])
			out["CodeMode call_tool"] = string(b)
			return out
		}
		hidden, ghost := answers(c.hidden), answers(c.ghost)
		for front, h := range hidden {
			g := strings.ReplaceAll(ghost[front], c.ghost, c.hidden)
			if h != g {
				t.Errorf("%s: %s tells %s (outside the scope) from %s (nowhere):\n hidden %s\n  ghost %s", c.key, front, c.hidden, c.ghost, h, g)
			}
		}
		if len(hidden) != 7 {
			t.Errorf("fronts answered: %v", hidden)
		}
	}
	// What the key can see answers otherwise (the test is not vacuous).
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if res, err := (keyFronts{t, d, "ops-secret"}).mcp().s.CallTool(ctx, &mcp.CallToolParams{Name: "other.echo", Arguments: map[string]any{"message": "hi"}}); err != nil || res.IsError {
		t.Errorf("ops calls other.echo on MCP: %v %+v", err, res)
	}
	if st, _ := request(t, http.MethodGet, d.URL+"/v1/tools/demo.echo", "plain-secret", ""); st != 200 {
		t.Errorf("the plain key describes demo.echo: %d", st)
	}
}

// TestNamedKeyMissingEnvFailsStart: a named key whose key_env is unset,
// or set empty, stops the start with a message naming the key and the
// variable (and no value); a bad scope stops it naming the entry.
func TestNamedKeyMissingEnvFailsStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{"gateway": {"api_keys": [{"name": "math", "key_env": "MATH_KEY", "tools": ["demo.add"]}]}}`)
	for _, env := range [][]string{nil, {"MATH_KEY="}} {
		_, stderr, code := cli(t, dir, env, "serve", "--listen", "127.0.0.1:0", "--no-store", "--config", cfg)
		if code == 0 || !strings.Contains(stderr, `API key "math"`) || !strings.Contains(stderr, "MATH_KEY") || !strings.Contains(stderr, "unset or empty") {
			t.Errorf("env %v: exit %d\n%s", env, code, stderr)
		}
	}
	writeFile(t, cfg, `{"gateway": {"api_keys": [{"name": "math", "key_env": "MATH_KEY", "tools": ["demo.[ab]"]}]}}`)
	_, stderr, code := cli(t, dir, []string{"MATH_KEY=secret-value"}, "serve", "--listen", "127.0.0.1:0", "--no-store", "--config", cfg)
	if code == 0 || !strings.Contains(stderr, "gateway.api_keys") || !strings.Contains(stderr, `tools[0] "demo.[ab]"`) || strings.Contains(stderr, "secret-value") {
		t.Errorf("bad glob: exit %d\n%s", code, stderr)
	}
}
