package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

func TestToolsetGlob(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"demo.add", "demo.add", true},
		{"demo.add", "demo.adder", false},
		{"demo.*", "demo.add", true},
		{"demo.*", "demox.add", false},
		{"github.repos/*", "github.repos/list", true},
		{"*", "a.b/c", true},
		{"*.get*", "gh.repos/get-content", false},
		{"*get*", "gh.repos/get-content", true},
		{"demo.?dd", "demo.add", true},
		{"demo.?dd", "demo.dd", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
	} {
		if got := matchGlob(c.pattern, c.name); got != c.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestToolsetValidate(t *testing.T) {
	ok := []string{
		`{"include": ["demo.add"], "rename": {"demo.add": "plus"}}`,
		`{"include": ["demo.*"], "rename": {"demo.add": "demo.echo2", "demo.echo": "echo"}}`,
		`{"tags": ["math"], "hidden": {"anything.x": {"k": 1}}}`,
		`{"include": ["github.*"], "hidden": {"github.repos/list": {"owner": "acme"}}, "annotations": {"readOnlyHint": true, "title": "GH"}, "discovery": "search"}`,
	}
	for _, s := range ok {
		if _, err := ParseToolsetSpec("ok", json.RawMessage(s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := map[string]string{
		`{}`:                   "selects no tools",
		`{"include": [""]}`:    "empty",
		`{"include": ["a b"]}`: "space",
		`{"include": ["demo.*"], "rename": {"demo.add": "x", "demo.echo": "x"}}`:             "both renamed",
		`{"include": ["demo.add", "demo.echo"], "rename": {"demo.add": "demo.echo"}}`:        "another member's name",
		`{"include": ["demo.add"], "rename": {"demo.add": "has space"}}`:                     "listed name",
		`{"include": ["demo.add"], "rename": {"other.tool": "x"}}`:                           "not in the toolset",
		`{"include": ["demo.*"], "exclude": ["demo.add"], "description": {"demo.add": "x"}}`: "not in the toolset",
		`{"include": ["demo.add"], "hidden": {"demo.add": {"": 1}}}`:                         "argument name is empty",
		`{"include": ["demo.add"], "annotations": {"readOnly": true}}`:                       "unknown annotation",
		`{"include": ["demo.add"], "annotations": {"readOnlyHint": "yes"}}`:                  "true or false",
		`{"include": ["demo.add"], "discovery": "list"}`:                                     "discovery mode",
		`{"include": ["demo.add"], "includes": ["x"]}`:                                       "unknown field",
	}
	for s, want := range bad {
		_, err := ParseToolsetSpec("mini", json.RawMessage(s))
		if err == nil || !strings.Contains(err.Error(), want) || utcp.CodeOf(err) != utcp.CodeInvalidRequest {
			t.Errorf("%s: %v, want invalid_request saying %q", s, err, want)
		}
	}
	for _, name := range []string{"", "a b", "a/b", strings.Repeat("x", 65), "ü"} {
		if err := ValidateToolset(name, ToolsetSpec{Include: []string{"x"}}); err == nil {
			t.Errorf("toolset name %q accepted", name)
		}
	}
}

func TestToolsetHiddenSchema(t *testing.T) {
	in := json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)
	got := string(hideArguments(in, map[string]any{"b": 1}))
	if strings.Contains(got, `"b"`) || !strings.Contains(got, `"required":["a"]`) {
		t.Errorf("hideArguments: %s", got)
	}
	got = string(hideArguments(in, map[string]any{"a": 1, "b": 1}))
	if strings.Contains(got, "required") || strings.Contains(got, `"a"`) {
		t.Errorf("hideArguments of every argument: %s", got)
	}
	ann := string(withAnnotations(json.RawMessage(`{"annotations":{"readOnlyHint":false},"title":"T"}`), map[string]any{"readOnlyHint": true, "idempotentHint": true}))
	if !strings.Contains(ann, `"readOnlyHint":false`) || !strings.Contains(ann, `"idempotentHint":true`) || !strings.Contains(ann, `"title":"T"`) {
		t.Errorf("withAnnotations: %s (the server's hint wins, the default fills the rest)", ann)
	}
}
