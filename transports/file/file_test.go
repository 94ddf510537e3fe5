package file_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/file"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func newTransport(t *testing.T, config string) transports.Transport {
	t.Helper()
	opts := transports.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if config != "" {
		opts.Config = json.RawMessage(config)
	}
	tr, err := file.Info.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	return tr
}

func parse(t *testing.T, fields map[string]any) *utcp.CallTemplate {
	t.Helper()
	m := map[string]any{"name": "doc", "call_template_type": "file"}
	for k, v := range fields {
		m[k] = v
	}
	raw, _ := json.Marshal(m)
	tmpl, err := file.Info.ParseTemplate(raw)
	if err != nil {
		t.Fatalf("ParseTemplate(%s): %v", raw, err)
	}
	return &tmpl
}

// writeFile writes content to name in a fresh temporary directory and
// returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func toolNames(m *utcp.Manual) []string {
	var names []string
	for _, tool := range m.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

const openAPIYAML = `openapi: 3.0.3
info: {title: Pets, version: 1.0.0}
servers:
  - url: https://pets.example.com/v1
components:
  securitySchemes:
    key: {type: apiKey, in: header, name: X-Api-Key}
security:
  - key: []
paths:
  /pets/{id}:
    get:
      operationId: getPet
      summary: Get a pet
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        200: {description: the pet}
`

const swaggerJSON = `{"swagger": "2.0", "info": {"title": "Pets", "version": "1"}, "host": "pets.example.com", "basePath": "/v1", "schemes": ["https"],
  "paths": {"/pets": {"get": {"operationId": "listPets", "summary": "List pets", "responses": {"200": {"description": "ok"}}}}}}`

const manualJSON = `{"utcp_version": "1.1.0", "manual_version": "1.0.0", "tools": [{"name": "a", "description": "A"}]}`

const legacyJSON = `{"version": "0.1.0", "tools": [{"name": "w", "description": "W", "tool_provider": {"provider_type": "http", "url": "https://api.example.com/w"}}]}`

func TestDiscovery(t *testing.T) {
	cases := []struct {
		name, file, content string
		want                []string
	}{
		{"openapi yaml", "pets.yaml", openAPIYAML, []string{"getPet"}},
		{"openapi yaml in a .json file", "pets.json", openAPIYAML, []string{"getPet"}},
		{"swagger json", "pets.json", swaggerJSON, []string{"listPets"}},
		{"v1.1 manual", "manual.json", manualJSON, []string{"a"}},
		{"v1.1 manual in yaml", "manual.yml", "utcp_version: 1.1.0\ntools:\n  - {name: a, description: A}\n  - {name: b, description: B}\n", []string{"a", "b"}},
		{"legacy manual", "legacy.json", legacyJSON, []string{"w"}},
	}
	tr := newTransport(t, "")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"file_path": writeFile(t, c.file, c.content)}))
			if err != nil {
				t.Fatalf("RegisterManual: %v", err)
			}
			if diff := cmp.Diff(c.want, toolNames(m)); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("auth_tools", func(t *testing.T) {
		auth := map[string]any{"auth_type": "api_key", "api_key": "real-key", "var_name": "X-Api-Key", "location": "header"}
		m, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"file_path": writeFile(t, "pets.yaml", openAPIYAML), "auth_tools": auth}))
		if err != nil {
			t.Fatal(err)
		}
		var tmpl map[string]any
		_ = json.Unmarshal(m.Tools[0].ToolCallTemplate.Raw, &tmpl)
		if a, _ := tmpl["auth"].(map[string]any); a["api_key"] != "real-key" {
			t.Errorf("auth = %v, want auth_tools", tmpl["auth"])
		}
	})
	t.Run("relative path is relative to the working directory", func(t *testing.T) {
		dir := filepath.Dir(writeFile(t, "rel.json", manualJSON))
		t.Chdir(dir)
		m, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"file_path": "rel.json"}))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, toolNames(m)); diff != "" {
			t.Errorf("tools (-want +got):\n%s", diff)
		}
	})
}

func TestDiscoveryErrors(t *testing.T) {
	tr := newTransport(t, `{"max_file_bytes": 4096}`)
	cases := []struct {
		name, path, want string
	}{
		{"missing file", filepath.Join(t.TempDir(), "nope.json"), "no such file"},
		{"broken json", writeFile(t, "broken.json", `{"tools": [`), "not valid JSON"},
		{"not a document", writeFile(t, "words.txt", "just words"), "top level is a string"},
		{"not a manual", writeFile(t, "other.json", `{"hello": "world"}`), "tools"},
		{"too large", writeFile(t, "big.json", `{"pad": "`+strings.Repeat("x", 5000)+`"}`), "larger than the cap"},
		{"a directory", t.TempDir(), "directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tr.RegisterManual(t.Context(), parse(t, map[string]any{"file_path": c.path}))
			t.Log(err)
			if utcp.CodeOf(err) != utcp.CodeDiscoveryFailed {
				t.Fatalf("err = %v (code %s), want discovery_failed", err, utcp.CodeOf(err))
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Errorf("error %q does not name the file and the problem (%q)", err, c.want)
			}
		})
	}
}

func TestCallReturnsContents(t *testing.T) {
	tr := newTransport(t, "")
	path := writeFile(t, "answer.json", `{"answer": 42}`)
	tmpl := parse(t, map[string]any{"file_path": path})
	call := &utcp.Call{Tool: "doc.answer", Template: tmpl, Arguments: map[string]any{"ignored": 1}}
	res, err := tr.CallTool(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"answer": json.Number("42")}, res.Value); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// The file is read on every call.
	if err := os.WriteFile(path, []byte("plain text now\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = tr.CallTool(t.Context(), call)
	if err != nil {
		t.Fatal(err)
	}
	if res.Value != "plain text now\n" {
		t.Errorf("after rewrite: %q", res.Value)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err = tr.CallTool(t.Context(), call)
	var te *utcp.TransportError
	if !errors.As(err, &te) {
		t.Errorf("missing file: err = %v, want *utcp.TransportError", err)
	}
}

func TestSizeCap(t *testing.T) {
	tr := newTransport(t, "")
	// /dev/zero never ends: the cap must stop the read.
	_, err := tr.CallTool(t.Context(), &utcp.Call{Tool: "doc.zero", Template: parse(t, map[string]any{"file_path": "/dev/zero"})})
	if utcp.CodeOf(err) != utcp.CodePayloadTooLarge || !errors.Is(err, transports.ErrTooLarge) {
		t.Errorf("err = %v, want payload_too_large", err)
	}
	if _, err := file.New(transports.Options{Config: json.RawMessage(`{"max_file_bytes": -1}`)}); utcp.CodeOf(err) != utcp.CodeInvalidConfig {
		t.Errorf("negative cap: err = %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := parse(t, map[string]any{"file_path": writeFile(t, "sum.json", `{"sum": 3}`)})
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
		{"auth set", `{"call_template_type":"file","file_path":"/x","auth":{"auth_type":"basic","username":"u"}}`, "auth must be null"},
		{"no file_path", `{"call_template_type":"file"}`, "file_path"},
		{"bad auth_tools", `{"call_template_type":"file","file_path":"/x","auth_tools":{"auth_type":"api_key"}}`, "auth_tools"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := file.Info.ParseTemplate(json.RawMessage(c.raw))
			if !errors.Is(err, transports.ErrInvalidTemplate) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want invalid_template mentioning %q", err, c.want)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	tr := newTransport(t, "")
	tmpl := parse(t, map[string]any{"file_path": writeFile(t, "m.json", manualJSON)})
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

// TestExampleManual checks that the example file manual serves exactly the
// fixture tool definitions, without tool templates.
func TestExampleManual(t *testing.T) {
	m, err := newTransport(t, "").RegisterManual(t.Context(), parse(t, map[string]any{"file_path": exampleManual}))
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
		if tool.ToolCallTemplate != nil {
			t.Errorf("tool %s has a template; the example relies on the manual's", tool.Name)
		}
	}
}
