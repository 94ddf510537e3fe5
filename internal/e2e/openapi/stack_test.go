package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/all" // file and http
	"github.com/utcpd/utcpd/transports/transporttest"
)

// stack is a gateway holding one OpenAPI description as a file manual,
// with api.New served on 127.0.0.1.
type stack struct {
	g    *gateway.Gateway
	base string // http://127.0.0.1:port
}

// newStack writes doc to a file and registers it as the file manual
// named manual (its http tools allowed), then serves the API.
func newStack(t testing.TB, manual string, doc []byte) *stack {
	t.Helper()
	path := filepath.Join(t.TempDir(), manual+".json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: transports.Default})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	tmpl, err := json.Marshal(map[string]any{
		"name": manual, "call_template_type": "file", "file_path": path,
		"allowed_communication_protocols": []string{"http"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := g.RegisterManual(ctx, tmpl, gateway.RegisterOptions{Source: "config"}); err != nil {
		t.Fatalf("registering %s: %v", manual, err)
	}
	h, err := api.New(api.Options{Gateway: g, Version: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &stack{g: g, base: "http://" + ln.Addr().String()}
}

// get decodes the JSON answer to GET path into out, failing t unless
// the status is 200.
func (s *stack) get(t testing.TB, path string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// present reports whether raw is a schema rather than absent or null.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null"
}

// listed checks every schema the fronts list for the stack's tools:
// /utcp, /v1/tools?limit=1000 and /v1/tools/{name} for every tool, the
// MCP front's tools/list (through the go-sdk client) and the OpenAI
// (plain and strict) and Anthropic exports. It returns the number of
// tools /utcp lists. Gemini's export is not JSON Schema by design (its
// parameters are Gemini's OpenAPI-3.0 subset, upper-case types and
// nullable) and is not checked here.
func (s *stack) listed(t *testing.T) int {
	t.Helper()
	var manual struct {
		Tools []struct {
			Name    string          `json:"name"`
			Inputs  json.RawMessage `json:"inputs"`
			Outputs json.RawMessage `json:"outputs"`
		} `json:"tools"`
	}
	s.get(t, "/utcp", &manual)
	var y tally
	for _, tool := range manual.Tools {
		y.add(t, "/utcp "+tool.Name+" inputs", tool.Inputs)
		if present(tool.Outputs) {
			y.add(t, "/utcp "+tool.Name+" outputs", tool.Outputs)
		}
	}
	t.Logf("/utcp: %d tools: %s", len(manual.Tools), y)

	type restTool struct {
		Name    string          `json:"name"`
		Inputs  json.RawMessage `json:"inputs"`
		Outputs json.RawMessage `json:"outputs"`
	}
	var page struct {
		Tools []restTool `json:"tools"`
	}
	s.get(t, "/v1/tools?limit=1000", &page)
	y = tally{}
	for _, tool := range page.Tools {
		y.add(t, "/v1/tools "+tool.Name+" inputs", tool.Inputs)
		if present(tool.Outputs) {
			y.add(t, "/v1/tools "+tool.Name+" outputs", tool.Outputs)
		}
	}
	for _, m := range manual.Tools {
		var tool restTool
		s.get(t, "/v1/tools/"+url.PathEscape(m.Name), &tool)
		y.add(t, "/v1/tools/{name} "+tool.Name+" inputs", tool.Inputs)
		if present(tool.Outputs) {
			y.add(t, "/v1/tools/{name} "+tool.Name+" outputs", tool.Outputs)
		}
	}
	t.Logf("/v1/tools: %d tools in the first page, then each of %d: %s", len(page.Tools), len(manual.Tools), y)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "openapi-e2e", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	y = tally{}
	var names []string
	for tool, err := range session.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		in, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		y.add(t, "/mcp "+tool.Name+" inputSchema", in)
		if tool.OutputSchema != nil {
			out, err := json.Marshal(tool.OutputSchema)
			if err != nil {
				t.Fatal(err)
			}
			y.add(t, "/mcp "+tool.Name+" outputSchema", out)
		}
	}
	t.Logf("/mcp: %d tools: %s", len(names), y)
	if n := len(withoutCodeMode(names)); n != len(manual.Tools) {
		t.Errorf("/mcp lists %d tools, /utcp %d", n, len(manual.Tools))
	}

	for _, export := range []string{"openai", "openai?strict=true", "anthropic"} {
		var tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		s.get(t, "/v1/export/"+export, &tools)
		y = tally{}
		names = names[:0]
		for _, tool := range tools {
			names = append(names, tool.Name+tool.Function.Name)
			if export == "anthropic" {
				y.add(t, fmt.Sprintf("/v1/export/%s %s", export, tool.Name), tool.InputSchema)
			} else {
				y.add(t, fmt.Sprintf("/v1/export/%s %s", export, tool.Function.Name), tool.Function.Parameters)
			}
		}
		t.Logf("/v1/export/%s: %d tools: %s", export, len(tools), y)
		if n := len(withoutCodeMode(names)); n != len(manual.Tools) {
			t.Errorf("/v1/export/%s lists %d tools, /utcp %d", export, n, len(manual.Tools))
		}
	}
	return len(manual.Tools)
}

// TestGitHubListedSchemas registers GitHub's description behind the
// gateway and checks every schema every front lists for its tools.
func TestGitHubListedSchemas(t *testing.T) {
	data := githubDescription(t)
	s := newStack(t, "github", data)
	if n, want := s.listed(t), must(githubOperations(t, data)); n != want {
		t.Errorf("/utcp lists %d tools, want %d", n, want)
	}
}

// sdkListing is what testdata/peer/list.mjs prints.
type sdkListing struct {
	Names         []string `json:"names"`
	OutputSchemas int      `json:"outputSchemas"`
	ReadOnly      []string `json:"readOnly"`
	Destructive   []string `json:"destructive"`
	Pages         int      `json:"pages"`
	Error         string   `json:"error"`
}

// sdkList lists the stack's MCP front's tools with the official
// TypeScript MCP SDK client (testdata/peer/list.mjs).
func (s *stack) sdkList(t *testing.T) sdkListing {
	t.Helper()
	peer := transporttest.NPMPeer(t, "@modelcontextprotocol/sdk")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, peer.Node, filepath.Join(peer.Dir, "list.mjs"))
	cmd.Dir = peer.Dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s.base+"/mcp")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("list.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var got sdkListing
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("list.mjs printed %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	return got
}

// TestGitHubTypeScriptSDKListsAllTools lists GitHub's tools through the
// MCP front with the official TypeScript SDK client, which compiles every
// output schema while listing: it must list them all without throwing.
func TestGitHubTypeScriptSDKListsAllTools(t *testing.T) {
	data := githubDescription(t)
	s := newStack(t, "github", data)
	got := s.sdkList(t)
	t.Logf("the TypeScript SDK client listed %d tools in %d pages, %d with an output schema, %d read-only, %d destructive",
		len(got.Names), got.Pages, got.OutputSchemas, len(got.ReadOnly), len(got.Destructive))
	if got.Error != "" {
		t.Fatalf("the TypeScript SDK client threw while listing (after %d tools): %s", len(got.Names), got.Error)
	}
	want, byMethod := githubOperations(t, data)
	if n := len(withoutCodeMode(got.Names)); n != want {
		t.Errorf("the TypeScript SDK client listed %d GitHub tools, want %d", n, want)
	}
	// GET operations are read-only, DELETE ones destructive.
	if len(got.ReadOnly) != byMethod["get"] || len(got.Destructive) != byMethod["delete"] {
		t.Errorf("%d tools read-only and %d destructive, want the %d GET and %d DELETE operations",
			len(got.ReadOnly), len(got.Destructive), byMethod["get"], byMethod["delete"])
	}
}

// must returns n, dropping the second result.
func must(n int, _ map[string]int) int { return n }

// withoutCodeMode drops codemode.run (MCP) and codemode__run (exports).
func withoutCodeMode(names []string) []string {
	var out []string
	for _, n := range names {
		if n != "codemode.run" && n != "codemode__run" {
			out = append(out, n)
		}
	}
	return out
}
