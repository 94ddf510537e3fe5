package manuals

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// value decodes JSON into a JSON-compatible value with json.Number.
func value(t *testing.T, s string) any {
	t.Helper()
	return decodeJSON(t, []byte(s))
}

func TestToolFilter(t *testing.T) {
	tests := []struct {
		name   string
		f      ToolFilter
		tool   string
		manual string
		want   bool
	}{
		{"no filter", ToolFilter{}, "github.search", "github", true},
		{"exclude qualified", ToolFilter{ExcludeTools: []string{"github.search"}}, "github.search", "github", false},
		{"exclude short", ToolFilter{ExcludeTools: []string{"search"}}, "github.search", "github", false},
		{"exclude other", ToolFilter{ExcludeTools: []string{"other"}}, "github.search", "github", true},
		{"only include", ToolFilter{OnlyIncludeTools: []string{"github.search"}}, "github.get", "github", false},
		{"only include hit", ToolFilter{OnlyIncludeTools: []string{"get"}}, "github.get", "github", true},
		{"mcp tool short name", ToolFilter{OnlyIncludeTools: []string{"fs.read"}}, "m.fs.read", "m", true},
		{"exclude manual", ToolFilter{ExcludeManuals: []string{"github"}}, "github.get", "github", false},
		{"only manual miss", ToolFilter{OnlyIncludeManuals: []string{"gitlab"}}, "github.get", "github", false},
		{"only manual hit (real manual name)", ToolFilter{OnlyIncludeManuals: []string{"github"}}, "github.get", "github", true},
	}
	for _, tc := range tests {
		if got := tc.f.Applies(tc.tool, tc.manual); got != tc.want {
			t.Errorf("%s: Applies = %v", tc.name, got)
		}
	}
}

func TestFilterDict(t *testing.T) {
	result := `{
  "id": 1,
  "_links": {"self": "x"},
  "items": [
    {"name": "a", "_links": {"self": "y"}, "meta": {"etag": "e"}},
    {"_links": {"self": "z"}},
    {},
    "scalar",
    [{"_links": 1}]
  ],
  "nested": {"deep": {"name": "b", "other": 2}, "empty": {}}
}`
	tests := []struct {
		name string
		f    FilterDict
		want string
	}{
		{"no keys configured", FilterDict{}, result},
		{"exclude", FilterDict{ExcludeKeys: []string{"_links", "meta"}},
			`{"id":1,"items":[{"name":"a"},{},"scalar"],"nested":{"deep":{"name":"b","other":2},"empty":{}}}`},
		{"only include", FilterDict{OnlyIncludeKeys: []string{"name", "id"}},
			`{"id":1,"items":[{"name":"a"}],"nested":{"deep":{"name":"b"}}}`},
		{"only include keeps non-object value whole", FilterDict{OnlyIncludeKeys: []string{"items"}},
			`{"items":[{"name":"a","_links":{"self":"y"},"meta":{"etag":"e"}},{"_links":{"self":"z"}},{},"scalar",[{"_links":1}]]}`},
		{"only include filters an object value", FilterDict{OnlyIncludeKeys: []string{"nested", "name"}},
			`{"items":[{"name":"a"}],"nested":{"deep":{"name":"b"}}}`},
		{"exclude then include", FilterDict{ExcludeKeys: []string{"deep"}, OnlyIncludeKeys: []string{"name"}},
			`{"items":[{"name":"a"}]}`},
		{"filtered out by tool", FilterDict{ExcludeKeys: []string{"id"}, ToolFilter: ToolFilter{ExcludeTools: []string{"t"}}}, result},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := value(t, result)
			before := value(t, result)
			got := tc.f.Process("m.t", "m", in)
			if diff := cmp.Diff(value(t, tc.want), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("input mutated:\n%s", diff)
			}
		})
	}
}

func TestFilterDictScalarsAndRaw(t *testing.T) {
	f := &FilterDict{ExcludeKeys: []string{"secret"}}
	if got := f.Process("m.t", "m", "plain"); got != "plain" {
		t.Errorf("string: %v", got)
	}
	if got := f.Process("m.t", "m", json.Number("3")); got != json.Number("3") {
		t.Errorf("number: %v", got)
	}
	got := f.Process("m.t", "m", json.RawMessage(`{"secret":1,"ok":2.50}`))
	if diff := cmp.Diff(map[string]any{"ok": json.Number("2.50")}, got); diff != "" {
		t.Error(diff)
	}
	got = f.Process("m.t", "m", map[string]string{"secret": "x", "a": "b"})
	if diff := cmp.Diff(map[string]any{"a": "b"}, got); diff != "" {
		t.Error(diff)
	}
	if f.Type() != FilterDictType {
		t.Error(f.Type())
	}
}

func TestLimitStrings(t *testing.T) {
	in := value(t, `{"short":"abc","long":"abcdefghij","unicode":"héllo wörld","keys_are_not_cut_abcdefgh":["abcdefghij",{"x":"0123456789"}],"n":12345678901,"b":true,"z":null}`)
	before := value(t, `{"short":"abc","long":"abcdefghij","unicode":"héllo wörld","keys_are_not_cut_abcdefgh":["abcdefghij",{"x":"0123456789"}],"n":12345678901,"b":true,"z":null}`)
	l := &LimitStrings{Limit: 5}
	got := l.Process("m.t", "m", in)
	want := value(t, `{"short":"abc","long":"abcde","unicode":"héllo","keys_are_not_cut_abcdefgh":["abcde",{"x":"01234"}],"n":12345678901,"b":true,"z":null}`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("input mutated:\n%s", diff)
	}
	if got := (&LimitStrings{Limit: 0}).Process("t", "m", "abc"); got != "" {
		t.Errorf("limit 0: %q", got)
	}
	if got := (&LimitStrings{Limit: 2, ToolFilter: ToolFilter{OnlyIncludeManuals: []string{"other"}}}).Process("m.t", "m", "abc"); got != "abc" {
		t.Errorf("filtered: %q", got)
	}
	if got := (&LimitStrings{Limit: 3}).Process("m.t", "m", json.RawMessage(`"日本語テキスト"`)); got != "日本語" {
		t.Errorf("raw: %q", got)
	}
	if got := (&LimitStrings{Limit: 3}).Process("m.t", "m", []string{"abcdef"}); !cmp.Equal(got, []any{"abc"}) {
		t.Errorf("[]string: %v", got)
	}
	long := strings.Repeat("é", DefaultStringLimit+5)
	if got := (&LimitStrings{Limit: DefaultStringLimit}).Process("t", "m", long).(string); len([]rune(got)) != DefaultStringLimit {
		t.Errorf("default limit: %d runes", len([]rune(got)))
	}
}

func TestApplyPostProcessors(t *testing.T) {
	cfg, err := ParseConfig("", []byte(`{"post_processing":[
	  {"tool_post_processor_type":"filter_dict","exclude_keys":["b"]},
	  {"tool_post_processor_type":"limit_strings","limit":2,"only_include_manuals":["m"]}
	]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := value(t, `{"a":"xyz","b":"drop"}`)
	if diff := cmp.Diff(value(t, `{"a":"xy"}`), ApplyPostProcessors(cfg.PostProcessors, "m.t", "m", in)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff(value(t, `{"a":"xyz"}`), ApplyPostProcessors(cfg.PostProcessors, "n.t", "n", in)); diff != "" {
		t.Error(diff)
	}
}
