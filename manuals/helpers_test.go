package manuals

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

// decodeJSON decodes s for comparisons (numbers as json.Number).
func decodeJSON(t *testing.T, s []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(string(s)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("invalid JSON %q: %v", s, err)
	}
	return v
}

// assertJSON fails when got and want are not the same JSON value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if diff := cmp.Diff(decodeJSON(t, []byte(want)), decodeJSON(t, got)); diff != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s\ngot: %s", diff, got)
	}
}

// codeOf returns the utcp code of err.
func codeOf(err error) utcp.Code { return utcp.CodeOf(err) }

// warningPaths returns "kind path" for each warning, for compact
// comparisons.
func warningPaths(ws []Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, string(w.Kind)+" "+w.Path)
	}
	return out
}

// findWarning returns the first warning at path.
func findWarning(ws []Warning, path string) (Warning, bool) {
	for _, w := range ws {
		if w.Path == path {
			return w, true
		}
	}
	return Warning{}, false
}

// fakeParser stands in for *transports.Registry: it knows http, file and
// cli templates, lists their fields and its types.
type fakeParser struct{}

// baseFields are the fields every call template has: the JSON names of
// utcp.CallTemplate's fields.
var baseFields = func() []string {
	var out []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[utcp.CallTemplate]()) {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}()

var fakeFields = map[string][]string{
	"http": {"url", "http_method", "content_type", "headers", "body_field", "header_fields", "auth_tools", "timeout"},
	"file": {"file_path", "auth_tools"},
	"cli":  {"commands", "env_vars", "inherit_env_vars", "working_dir"},
}

func (fakeParser) ParseTemplate(raw json.RawMessage) (utcp.CallTemplate, error) {
	var ct utcp.CallTemplate
	if err := json.Unmarshal(raw, &ct); err != nil {
		return ct, utcp.Errorf(utcp.CodeInvalidTemplate, "call template: %v", err)
	}
	fields, ok := fakeFields[ct.Type]
	if !ok {
		return ct, utcp.NewError(utcp.CodeInvalidTemplate, "unknown call_template_type %q (valid types: cli, file, http)", ct.Type)
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	if ct.Type == "http" {
		if _, ok := m["url"]; !ok {
			return ct, utcp.NewError(utcp.CodeInvalidTemplate, "http: field url is required")
		}
	}
	for k := range m {
		if !slices.Contains(baseFields, k) && !slices.Contains(fields, k) {
			ct.Unknown = append(ct.Unknown, k)
		}
	}
	sort.Strings(ct.Unknown)
	return ct, nil
}

func (fakeParser) KnownFields(typ string) []string {
	f, ok := fakeFields[typ]
	if !ok {
		return nil
	}
	return append(slices.Clone(baseFields), f...)
}

func (fakeParser) Types() []string { return []string{"cli", "file", "http"} }

// envMap returns a LookupEnv over m.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}
