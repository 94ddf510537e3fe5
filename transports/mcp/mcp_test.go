package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// both runs fn against the stdio and the HTTP fixture server.
func both(t *testing.T, fn func(t *testing.T, f *fixture.Fixture, raw json.RawMessage)) {
	t.Run("stdio", func(t *testing.T) {
		f := fixture.New()
		fn(t, f, StdioFixtureTemplate(t, f, nil))
	})
	t.Run("http", func(t *testing.T) {
		f := fixture.New()
		fn(t, f, HTTPFixtureTemplate(t, f))
	})
}

func TestRegisterNamesAndSchemas(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		m := register(t, tr, parse(t, raw))
		byName := map[string]utcp.Tool{}
		for _, tool := range m.Tools {
			byName[tool.Name] = tool
			if tool.ToolCallTemplate != nil {
				t.Errorf("%s has a tool_call_template; the manual's must be used", tool.Name)
			}
		}
		// Page size 2: every page of tools/list was followed.
		for _, want := range []string{"demo.echo", "demo.add", "demo.fail", "demo.sleep", "demo.count", "demo.add_tool", "demo.content_types"} {
			if _, ok := byName[want]; !ok {
				t.Errorf("tool %s missing (got %d tools)", want, len(m.Tools))
			}
		}
		add := byName["demo.add"]
		if diff := cmp.Diff([]string{"mcp", "demo", "read_only", "idempotent"}, add.Tags); diff != "" {
			t.Errorf("add tags (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(normalize(fixture.Tools()[1].Inputs), normalize(add.Inputs)); diff != "" {
			t.Errorf("add inputs (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(normalize(fixture.Tools()[1].Outputs), normalize(add.Outputs)); diff != "" {
			t.Errorf("add outputs (-want +got):\n%s", diff)
		}
		if tags := byName["demo.fail"].Tags; !slices.Contains(tags, "destructive") {
			t.Errorf("fail tags %v lack destructive", tags)
		}
	})
}

func TestStreamProgressOrder(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		for range 3 { // the order holds every time, not by luck
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 5}})
			if err != nil {
				t.Fatalf("CallToolStream: %v", err)
			}
			var got []any
			for {
				ev, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				got = append(got, normalize(ev))
			}
			_ = st.Close()
			cancel()
			var want []any
			for i := 1; i <= 5; i++ {
				want = append(want, map[string]any{"type": "progress", "data": map[string]any{"progress": float64(i), "total": 5.0, "message": strconv.Itoa(i)}})
			}
			want = append(want, map[string]any{"type": "result", "data": []any{1.0, 2.0, 3.0, 4.0, 5.0}})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
		}
		// Without a stream, count just returns its list.
		if diff := cmp.Diff([]any{1.0, 2.0}, normalize(mustCall(t, tr, tmpl, "demo.count", map[string]any{"n": 2}))); diff != "" {
			t.Errorf("count (-want +got):\n%s", diff)
		}
	})
}

func TestToolErrorsAndUnknownTools(t *testing.T) {
	for _, asResult := range []bool{false, true} {
		t.Run(fmt.Sprintf("unknown_as_result=%v", asResult), func(t *testing.T) {
			check := func(t *testing.T, tr *Transport, tmpl *utcp.CallTemplate) {
				_, err := callTool(t, tr, tmpl, "demo.no_such_tool", nil)
				if !errors.Is(err, transports.ErrToolNotFound) {
					t.Errorf("unknown tool: err = %v, want ErrToolNotFound", err)
				}
				_, err = callTool(t, tr, tmpl, "other.echo", nil)
				if !errors.Is(err, transports.ErrToolNotFound) {
					t.Errorf("unknown server: err = %v, want ErrToolNotFound", err)
				}
				_, err = callTool(t, tr, tmpl, "demo.fail", map[string]any{"message": "disk on fire"})
				var te *utcp.ToolError
				if !errors.As(err, &te) || te.Message != "disk on fire" {
					t.Errorf("fail: err = %#v, want a ToolError carrying the message", err)
				} else if diff := cmp.Diff("disk on fire", te.Value); diff != "" {
					t.Errorf("ToolError.Value (-want +got):\n%s", diff)
				}
				_, err = callTool(t, tr, tmpl, "demo.add", map[string]any{"a": "x", "b": 1})
				if !errors.As(err, &te) || !strings.Contains(te.Message, "not a number") {
					t.Errorf("bad argument: err = %v, want a ToolError", err)
				}
			}
			t.Run("stdio", func(t *testing.T) {
				tr := newTestTransport(t, transports.Options{})
				tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
					"demo": fixtureServer{unknownRes: asResult}.config(t)}}}))
				register(t, tr, tmpl)
				check(t, tr, tmpl)
			})
			t.Run("http", func(t *testing.T) {
				hf := newHTTPFixture(t, fixture.New(), mcpserver.Options{UnknownToolAsResult: asResult})
				tr := newTestTransport(t, transports.Options{})
				tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
					"demo": map[string]any{"url": hf.url()}}}}))
				register(t, tr, tmpl)
				check(t, tr, tmpl)
			})
		})
	}
}

func TestContentTypesRoundTrip(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		tr := newTestTransport(t, transports.Options{})
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		size := float64(len(mcpserver.ReadmeText))
		blocks := []any{
			map[string]any{"type": "text", "text": "one of each"},
			map[string]any{"type": "image", "data": base64.StdEncoding.EncodeToString(mcpserver.TinyPNG), "mimeType": "image/png"},
			map[string]any{"type": "audio", "data": base64.StdEncoding.EncodeToString(mcpserver.TinyWAV), "mimeType": "audio/wav"},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": mcpserver.ReadmeURI, "mimeType": "text/plain", "text": mcpserver.ReadmeText}},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "fixture://blob", "mimeType": "application/octet-stream", "blob": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})}},
			map[string]any{"type": "resource_link", "uri": mcpserver.ReadmeURI, "name": "readme", "mimeType": "text/plain", "size": size},
		}
		got := normalize(mustCall(t, tr, tmpl, "demo.content_types", nil))
		if diff := cmp.Diff(map[string]any{"content": blocks}, got); diff != "" {
			t.Errorf("content_types (-want +got):\n%s", diff)
		}
		got = normalize(mustCall(t, tr, tmpl, "demo.content_types", map[string]any{"structured": true}))
		if diff := cmp.Diff(map[string]any{"content": blocks, "structured": map[string]any{"blocks": 6.0}}, got); diff != "" {
			t.Errorf("content_types structured (-want +got):\n%s", diff)
		}
	})
}

func TestResourcesAsTools(t *testing.T) {
	f := fixture.New()
	tr := newTestTransport(t, transports.Options{})
	tmpl := parse(t, StdioFixtureTemplate(t, f, map[string]any{"register_resources_as_tools": true}))
	m := register(t, tr, tmpl)
	var found *utcp.Tool
	for i := range m.Tools {
		if m.Tools[i].Name == "demo.resource_readme" {
			found = &m.Tools[i]
		}
	}
	if found == nil || found.Description != "What this server serves." {
		t.Fatalf("resource tool missing or undescribed: %+v", found)
	}
	if got := mustCall(t, tr, tmpl, "demo.resource_readme", nil); got != mcpserver.ReadmeText {
		t.Errorf("resource_readme = %#v", got)
	}
}

func TestListChangedCallsBack(t *testing.T) {
	both(t, func(t *testing.T, f *fixture.Fixture, raw json.RawMessage) {
		changed := make(chan string, 10)
		tr := counted(newTestTransport(t, transports.Options{OnToolsChanged: func(m string) { changed <- m }}))
		tmpl := parse(t, raw)
		register(t, tr, tmpl)
		select {
		case m := <-changed:
			t.Fatalf("OnToolsChanged(%q) before any change", m)
		case <-time.After(3 * ToolsChangedDebounce):
		}
		mustCall(t, tr, tmpl, "demo.add_tool", map[string]any{"name": "late"})
		select {
		case m := <-changed:
			if m != "m" {
				t.Errorf("OnToolsChanged(%q), want m", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no OnToolsChanged after the server added a tool")
		}
		// The gateway re-registers: the same template re-lists over the
		// same session and finds the new tool.
		m := register(t, tr, tmpl)
		if !slices.ContainsFunc(m.Tools, func(tool utcp.Tool) bool { return tool.Name == "demo.late" }) {
			t.Errorf("re-registration does not list demo.late")
		}
		if got := normalize(mustCall(t, tr, tmpl, "demo.late", map[string]any{"x": 1})); !cmp.Equal(map[string]any{"x": 1.0}, got) {
			t.Errorf("late = %v", got)
		}
		if err := tr.DeregisterManual(t.Context(), tmpl); err != nil { // second registration
			t.Fatal(err)
		}
		mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 1}) // the first still holds the session
	})
}
