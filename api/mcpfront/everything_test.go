package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingPeer is @modelcontextprotocol/server-everything, the npm peer
// of the mcp transport's tests (transports/mcp/testdata/peer), whose
// node_modules also hold the TypeScript SDK it is built on.
type everythingPeer struct {
	node, script, modules, preload string
}

// everything gates a test on the peer: skipped without UTCPD_NPM_PEERS=1,
// failed when it is set and the peer is not installed.
func everything(t *testing.T) everythingPeer {
	t.Helper()
	const install = "npm ci --prefix transports/mcp/testdata/peer"
	if os.Getenv("UTCPD_NPM_PEERS") != "1" {
		t.Skip("the npm peers run with UTCPD_NPM_PEERS=1; install server-everything with: " + install)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "transports", "mcp", "testdata", "peer"))
	if err != nil {
		t.Fatal(err)
	}
	p := everythingPeer{
		modules: filepath.Join(dir, "node_modules"),
		preload: filepath.Join(dir, "loopback.cjs"),
	}
	p.script = filepath.Join(p.modules, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, f := range []string{p.script, filepath.Join(p.modules, "@modelcontextprotocol", "sdk", "package.json")} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("UTCPD_NPM_PEERS=1 but server-everything is not installed (%v); install it with: %s", err, install)
		}
	}
	if p.node, err = exec.LookPath("node"); err != nil {
		t.Fatalf("UTCPD_NPM_PEERS=1 but node is not installed: %v", err)
	}
	return p
}

// serveHTTP runs server-everything over Streamable HTTP on a free
// loopback port until the test ends and returns its endpoint.
func (p everythingPeer) serveHTTP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(p.node, p.script, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "NODE_OPTIONS=--require "+p.preload)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitFor(t, "server-everything on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "http://" + addr + "/mcp"
}

// everythingCalls are the calls compared: every server-everything tool
// that answers without asking the client anything, with arguments that
// make it show its kinds of content.
var everythingCalls = []struct {
	tool, args string
	progress   bool
	// invalid arguments are refused by the gateway's own validation,
	// before the call reaches the server: an isError result either way,
	// with utcpd's message.
	invalid bool
}{
	{"echo", `{"message":"héllo"}`, false, false},
	{"get-sum", `{"a":2,"b":40}`, false, false},
	{"get-tiny-image", `{}`, false, false},
	{"get-structured-content", `{"location":"New York"}`, false, false},
	{"get-annotated-message", `{"messageType":"error","includeImage":true}`, false, false},
	{"get-annotated-message", `{"messageType":"debug","includeImage":false}`, false, false},
	{"get-resource-links", `{"count":3}`, false, false},
	{"get-resource-reference", `{"resourceType":"Text","resourceId":2}`, false, false},
	{"get-sum", `{"a":"x","b":1}`, false, true},
	{"trigger-long-running-operation", `{"duration":1,"steps":3}`, true, false},
}

// clock is the time of day server-everything writes into its resources.
var clock = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?`)

// comparable is a result or a tool as generic JSON, the time of day
// blanked.
func comparable(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b = clock.ReplaceAll(b, []byte("TIME"))
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServerEverythingThroughFront puts server-everything behind utcpd
// (over stdio and over Streamable HTTP, its tools under their own names)
// and compares, with the go-sdk client, what the front serves with what
// the server serves directly: every tool's title, description,
// annotations and schemas; every call's result block for block
// (get-tiny-image is an image block through utcpd too); the progress of
// the long-running operation, and a result without it.
func TestServerEverythingThroughFront(t *testing.T) {
	p := everything(t)
	for _, kind := range []string{"stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			var server map[string]any
			var direct *client
			const pv = "2025-11-25"
			switch kind {
			case "stdio":
				server = map[string]any{"command": p.node, "args": []string{p.script, "stdio"}}
				direct = newClient()
				if err := direct.open(t, &mcp.CommandTransport{Command: exec.Command(p.node, p.script, "stdio")}, pv); err != nil {
					t.Fatal(err)
				}
			case "http":
				url := p.serveHTTP(t)
				server = map[string]any{"url": url}
				direct = connectTo(t, url, pv)
			}
			tmpl, _ := json.Marshal(map[string]any{"name": "everything", "call_template_type": "mcp",
				"config": map[string]any{"mcpServers": map[string]any{"srv": server}}})
			e := newEnv(t, envOptions{manuals: map[string]string{"everything": string(tmpl)}, front: Options{NativeNames: []string{"everything.srv"}}})
			front := e.mustConnect(pv)

			listed := map[string]*mcp.Tool{}
			for _, tool := range front.tools(t) {
				listed[tool.Name] = tool
			}
			compared := 0
			for _, want := range direct.tools(t) {
				got, ok := listed[want.Name]
				if !ok {
					// Tools server-everything registers only for clients
					// that declare sampling, elicitation or roots are
					// issue 16 item 4.
					continue
				}
				compared++
				w, g := *want, *got
				w.Meta, g.Meta = nil, nil
				if diff := cmp.Diff(comparable(t, &w), comparable(t, &g)); diff != "" {
					t.Errorf("tool %s (-direct +utcpd):\n%s", want.Name, diff)
				}
				if got.Meta[MetaQualifiedName] != "everything.srv."+want.Name {
					t.Errorf("tool %s: _meta %v", want.Name, got.Meta)
				}
			}
			if compared < 10 {
				t.Errorf("only %d tools compared; listed through utcpd: %v", compared, listed)
			}

			for _, c := range everythingCalls {
				tokens := []any{nil}
				if c.progress {
					tokens = append(tokens, "progress-"+c.tool)
				}
				for _, tok := range tokens {
					wantRes, err := direct.call(t, c.tool, c.args, tok)
					if err != nil {
						t.Fatalf("%s directly: %v", c.tool, err)
					}
					wantProgress := drain(direct)
					gotRes, err := front.call(t, c.tool, c.args, tok)
					if err != nil {
						t.Fatalf("%s through utcpd: %v", c.tool, err)
					}
					gotProgress := drain(front)
					if c.invalid {
						if !wantRes.IsError || !gotRes.IsError || !strings.HasPrefix(text(gotRes), "invalid_arguments: ") {
							t.Errorf("%s %s: direct isError %v, utcpd %v %q; want isError results, utcpd's invalid_arguments",
								c.tool, c.args, wantRes.IsError, gotRes.IsError, text(gotRes))
						}
						continue
					}
					if diff := cmp.Diff(comparable(t, wantRes), comparable(t, gotRes)); diff != "" {
						t.Errorf("%s %s (token %v) (-direct +utcpd):\n%s", c.tool, c.args, tok, diff)
					}
					if diff := cmp.Diff(comparable(t, wantProgress), comparable(t, gotProgress)); diff != "" {
						t.Errorf("%s progress (-direct +utcpd):\n%s", c.tool, diff)
					}
					if tok != nil && len(gotProgress) != 3 {
						t.Errorf("%s: %d progress notifications, want 3", c.tool, len(gotProgress))
					}
				}
			}
			res, err := front.call(t, "get-tiny-image", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			img := false
			for _, b := range res.Content {
				if ic, ok := b.(*mcp.ImageContent); ok && ic.MIMEType == "image/png" && bytes.HasPrefix(ic.Data, []byte("\x89PNG")) {
					img = true
				}
			}
			if !img {
				t.Errorf("get-tiny-image through utcpd has no PNG image block: %+v", res.Content)
			}
		})
	}
}

// TestServerEverythingTypeScriptClient drives the front with the
// TypeScript SDK's client (the @modelcontextprotocol/sdk that
// server-everything is built on) and compares with the same client on
// server-everything directly: tools (title, annotations), get-tiny-image,
// get-annotated-message, get-structured-content (which the client checks
// against the output schema) and the progress of a long operation.
func TestServerEverythingTypeScriptClient(t *testing.T) {
	p := everything(t)
	url := p.serveHTTP(t)
	tmpl, _ := json.Marshal(map[string]any{"name": "everything", "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"url": url}}}})
	e := newEnv(t, envOptions{manuals: map[string]string{"everything": string(tmpl)}, front: Options{NativeNames: []string{"everything.srv"}}})
	script, err := filepath.Abs(filepath.Join("testdata", "ts-client.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(endpoint string) any {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, p.node, script, endpoint)
		cmd.Env = append(os.Environ(), "NODE_PATH="+p.modules)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ts-client %s: %v\n%s", endpoint, err, stderr.String())
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("ts-client %s printed no JSON: %v\n%s", endpoint, err, out)
		}
		return comparable(t, v)
	}
	want, got := run(url), run(e.url)
	// The front also lists the env's demo tools: compare the server's.
	if wt, ok := want.(map[string]any)["tools"].(map[string]any); ok {
		gt, _ := got.(map[string]any)["tools"].(map[string]any)
		for name := range gt {
			if _, ok := wt[name]; !ok {
				delete(gt, name)
			}
		}
		if len(wt) < 10 {
			t.Errorf("server-everything listed only %d tools to the TypeScript client", len(wt))
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TypeScript client (-direct +utcpd):\n%s", diff)
	}
	if !strings.Contains(mustJSON(t, got), `"image/png"`) {
		t.Errorf("no image block through utcpd: %s", mustJSON(t, got))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
