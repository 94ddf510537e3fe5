package text_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/text"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t *testing.T) transports.Transport {
	t.Helper()
	tr, err := text.Info.New(transports.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func parse(t *testing.T, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "doc", "call_template_type": "text"}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	tmpl, err := text.Info.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

func register(t *testing.T, content string, fields map[string]any) (*utcp.Manual, error) {
	t.Helper()
	if fields == nil {
		fields = map[string]any{}
	}
	fields["content"] = content
	return newTransport(t).RegisterManual(t.Context(), parse(t, fields))
}

func toolNames(m *utcp.Manual) []string {
	var names []string
	for _, tool := range m.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// templateField returns one field of a tool's raw call template.
func templateField(t *testing.T, tool utcp.Tool, field string) any {
	t.Helper()
	if tool.ToolCallTemplate == nil {
		t.Fatalf("tool %s has no call template", tool.Name)
	}
	var m map[string]any
	if err := json.Unmarshal(tool.ToolCallTemplate.Raw, &m); err != nil {
		t.Fatalf("tool %s: template %s: %v", tool.Name, tool.ToolCallTemplate.Raw, err)
	}
	return m[field]
}

const openAPIJSON = `{
  "openapi": "3.0.3",
  "info": {"title": "Pets", "version": "1.0.0"},
  "servers": [{"url": "https://pets.example.com/v1"}],
  "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}},
  "security": [{"key": []}],
  "paths": {
    "/pets/{id}": {"get": {"operationId": "getPet", "summary": "Get a pet",
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "the pet"}}}},
    "/pets": {"post": {"operationId": "createPet", "summary": "Create a pet",
      "requestBody": {"content": {"application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}},
      "responses": {"201": {"description": "created"}}}}
  }
}`

const openAPIYAML = `openapi: 3.0.3
info:
  title: Pets
  version: 1.0.0
servers:
  - url: https://pets.example.com/v1
paths:
  /pets/{id}:
    get:
      operationId: getPet
      summary: Get a pet
      parameters:
        - name: id
          in: path
          required: true
          schema: {type: string}
      responses:
        200:
          description: the pet
  /pets:
    post:
      operationId: createPet
      summary: Create a pet
      responses:
        201:
          description: created
`

func TestOpenAPIContent(t *testing.T) {
	for name, content := range map[string]string{"json": openAPIJSON, "yaml": openAPIYAML} {
		t.Run(name, func(t *testing.T) {
			m, err := register(t, content, nil)
			if err != nil {
				t.Fatalf("RegisterManual: %v", err)
			}
			if diff := cmp.Diff([]string{"createPet", "getPet"}, toolNames(m)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			for _, tool := range m.Tools {
				if got := templateField(t, tool, "call_template_type"); got != "http" {
					t.Errorf("tool %s: call_template_type = %v, want http", tool.Name, got)
				}
				if url, _ := templateField(t, tool, "url").(string); !strings.HasPrefix(url, "https://pets.example.com/v1/pets") {
					t.Errorf("tool %s: url = %q", tool.Name, url)
				}
			}
		})
	}
	t.Run("base_url overrides the servers", func(t *testing.T) {
		m, err := register(t, openAPIJSON, map[string]any{"base_url": "https://staging.example.com/api"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range m.Tools {
			if url, _ := templateField(t, tool, "url").(string); !strings.HasPrefix(url, "https://staging.example.com/api/pets") {
				t.Errorf("tool %s: url = %q, want it under base_url", tool.Name, url)
			}
		}
	})
	t.Run("auth_tools replaces generated auth", func(t *testing.T) {
		auth := map[string]any{"auth_type": "api_key", "api_key": "real-key", "var_name": "X-Api-Key", "location": "header"}
		m, err := register(t, openAPIJSON, map[string]any{"auth_tools": auth})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range m.Tools {
			got, _ := templateField(t, tool, "auth").(map[string]any)
			if got["api_key"] != "real-key" {
				t.Errorf("tool %s: auth = %v, want auth_tools", tool.Name, got)
			}
		}
	})
}

func TestManualContent(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    []string
	}{
		{"v1.1 json", `{"utcp_version":"1.1.0","manual_version":"1.0.0","tools":[{"name":"a","description":"A","tool_call_template":{"call_template_type":"text","content":"x"}}]}`, []string{"a"}},
		{"v1.1 yaml", "utcp_version: 1.1.0\nmanual_version: 1.0.0\ntools:\n  - name: a\n    description: A\n  - name: b\n    description: B\n", []string{"a", "b"}},
		{"legacy v0.1", `{"version":"0.1.0","tools":[{"name":"weather","description":"Weather","parameters":{"type":"object"},
			"tool_provider":{"provider_type":"http","url":"https://api.example.com/weather","http_method":"GET"}}]}`, []string{"weather"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := register(t, c.content, nil)
			if err != nil {
				t.Fatalf("RegisterManual: %v", err)
			}
			if diff := cmp.Diff(c.want, toolNames(m)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("legacy provider becomes a v1.1 template", func(t *testing.T) {
		m, err := register(t, cases[2].content, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := templateField(t, m.Tools[0], "call_template_type"); got != "http" {
			t.Errorf("call_template_type = %v, want http", got)
		}
	})
}

func TestMalformedContent(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"broken json", `{"utcp_version": "1.1.0", "tools": [`, "JSON"},
		{"neither json nor yaml", "key: [unclosed\n  - : :", "YAML"},
		{"plain text", "just some words", "string"},
		{"a list", `[1, 2]`, "array"},
		{"no tools", `{"utcp_version": "1.1.0"}`, "tools"},
		{"tool without a name", `{"utcp_version": "1.1.0", "tools": [{"description": "x"}]}`, "name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := register(t, c.content, nil)
			t.Log(err)
			if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
				t.Fatalf("err = %v (code %s), want discovery_failed", err, utcp.CodeOf(err))
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "manual doc") {
				t.Errorf("error %q does not name the manual and the problem (%q)", err, c.want)
			}
		})
	}
}

func TestCallReturnsContent(t *testing.T) {
	tr := newTransport(t)
	cases := []struct {
		content string
		want    any
	}{
		{`{"a": [1, "two", null]}`, map[string]any{"a": []any{json.Number("1"), "two", nil}}},
		{" 42 ", json.Number("42")},
		{"plain text answer\n", "plain text answer\n"},
		{"key: value\n", "key: value\n"},
		{`{"broken": `, `{"broken": `},
	}
	for _, c := range cases {
		res, err := tr.CallTool(t.Context(), &utcp.Call{Tool: "doc.t", Template: parse(t, map[string]any{"content": c.content}), Arguments: map[string]any{"ignored": true}})
		if err != nil {
			t.Fatalf("CallTool(%q): %v", c.content, err)
		}
		if diff := cmp.Diff(c.want, res.Value); diff != "" {
			t.Errorf("CallTool(%q) (-want +got):\n%s", c.content, diff)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tr.CallTool(ctx, &utcp.Call{Template: parse(t, map[string]any{"content": "x"})}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	tr := newTransport(t)
	tmpl := parse(t, map[string]any{"content": `{"sum": 3}`})
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			res, err := tr.CallTool(t.Context(), &utcp.Call{Tool: "doc.add", Template: tmpl})
			if err != nil {
				t.Error(err)
				return
			}
			if diff := cmp.Diff(map[string]any{"sum": json.Number("3")}, res.Value); diff != "" {
				t.Error(diff)
			}
		})
	}
	wg.Wait()
}

func TestTemplate(t *testing.T) {
	cases := []struct {
		name, raw, want string
	}{
		{"auth set", `{"call_template_type":"text","content":"x","auth":{"auth_type":"basic","username":"u"}}`, "auth must be null"},
		{"no content", `{"call_template_type":"text"}`, "content"},
		{"bad base_url", `{"call_template_type":"text","content":"x","base_url":"ftp://x"}`, "base_url"},
		{"bad auth_tools", `{"call_template_type":"text","content":"x","auth_tools":{"auth_type":"magic"}}`, "auth_tools"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := text.Info.ParseTemplate(json.RawMessage(c.raw))
			if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want invalid_template mentioning %q", err, c.want)
			}
		})
	}
	tmpl, err := text.Info.ParseTemplate(json.RawMessage(`{"call_template_type":"text","content":"x","file_path":"old.json"}`))
	if err != nil || !slices.Contains(tmpl.Unknown, "file_path") {
		t.Errorf("v1.0 file_path: err = %v, Unknown = %v; want a warning, not an error", err, tmpl.Unknown)
	}
}

func TestClosed(t *testing.T) {
	tr := newTransport(t)
	tmpl := parse(t, map[string]any{"content": "x"})
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.CallTool(t.Context(), &utcp.Call{Template: tmpl}); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("CallTool after Close: %v", err)
	}
	if _, err := tr.RegisterManual(t.Context(), tmpl); utcp.CodeOf(err) != utcp.CodeUnavailable {
		t.Errorf("RegisterManual after Close: %v", err)
	}
}

// TestExampleManual checks that the example text manual serves exactly the
// fixture tool definitions, each with a text template.
func TestExampleManual(t *testing.T) {
	content, err := os.ReadFile(exampleManual)
	if err != nil {
		t.Fatal(err)
	}
	m, err := register(t, string(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fixture.Tools()
	if len(m.Tools) != len(want) {
		t.Fatalf("%d tools, want %d", len(m.Tools), len(want))
	}
	for i, tool := range m.Tools {
		w := want[i]
		if tool.Name != w.Name || tool.Description != w.Description || !slices.Equal(tool.Tags, w.Tags) {
			t.Errorf("tool %d = %s %q %v, want %s %q %v", i, tool.Name, tool.Description, tool.Tags, w.Name, w.Description, w.Tags)
		}
		var got, exp any
		_ = json.Unmarshal(tool.Inputs, &got)
		_ = json.Unmarshal(w.Inputs, &exp)
		if diff := cmp.Diff(exp, got); diff != "" {
			t.Errorf("tool %s inputs (-want +got):\n%s", tool.Name, diff)
		}
		if tool.ToolCallTemplate == nil || tool.ToolCallTemplate.Type != "text" {
			t.Errorf("tool %s: template %v, want a text template", tool.Name, tool.ToolCallTemplate)
		}
	}
}
