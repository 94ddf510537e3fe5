package manuals

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/utcp"
)

func TestNamespace(t *testing.T) {
	tests := []struct{ manual, key, want string }{
		{"web_scraper", "API_KEY", "web__scraper_API_KEY"},
		{"github", "TOKEN", "github_TOKEN"},
		{"a__b", "K", "a____b_K"},
		{"my-api", "K", "my__api_K"}, // sanitised first
		{"_x_", "K", "__x___K"},
		{"", "PLAIN", "PLAIN"},
	}
	for _, tc := range tests {
		if got := Namespace(tc.manual, tc.key); got != tc.want {
			t.Errorf("Namespace(%q, %q) = %q, want %q", tc.manual, tc.key, got, tc.want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolverOrder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.env"), "A=from_a\nB=from_a\nEMPTY_IN_A=\nC=\n")
	writeFile(t, filepath.Join(dir, "b.env"), "B=from_b\nC=from_b\nD=\"quoted value\" # comment\n")
	in := `{
  "variables": {"V": "from_config", "EMPTY": "", "A": "config_wins"},
  "load_variables_from": [
    {"variable_loader_type": "dotenv", "env_file_path": "a.env"},
    {"variable_loader_type": "dotenv", "env_file_path": "b.env"}
  ]
}`
	cfg, err := ParseConfig(filepath.Join(dir, "utcpd.json"), []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"E": "from_env", "C": "from_env", "EMPTY": "env_fills_empty", "NOTHING": ""}
	r, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(env)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"V", "from_config", true},
		{"A", "config_wins", true},
		{"B", "from_a", true},       // first loader wins
		{"C", "from_b", true},       // empty in a.env counts as missing
		{"D", "quoted value", true}, // godotenv parsing
		{"E", "from_env", true},     // environment last
		{"EMPTY", "env_fills_empty", true},
		{"NOTHING", "", false}, // empty everywhere
		{"UNSET", "", false},
	}
	for _, tc := range tests {
		got, ok := r.Lookup(tc.key)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
	var nilR *Resolver
	if _, ok := nilR.Lookup("V"); ok {
		t.Error("nil resolver resolved")
	}
	if err := nilR.Reload(); err != nil {
		t.Error(err)
	}
}

func TestResolverDefaultEnv(t *testing.T) {
	t.Setenv("UTCPD_MANUALS_TEST_VAR", "x")
	r, err := NewResolver(nil, ResolverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Lookup("UTCPD_MANUALS_TEST_VAR"); !ok || v != "x" {
		t.Errorf("Lookup = %q, %v", v, ok)
	}
}

func TestResolverDotenvReread(t *testing.T) {
	dir := t.TempDir()
	envPath := filepath.Join(dir, ".env")
	writeFile(t, envPath, "github_TOKEN=old\n")
	cfg, err := ParseConfig(filepath.Join(dir, "c.json"),
		[]byte(`{"load_variables_from":[{"variable_loader_type":"dotenv","env_file_path":".env"}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Lookup("github_TOKEN"); v != "old" {
		t.Fatalf("got %q", v)
	}
	// A changed file is picked up at the next lookup (size changes here).
	writeFile(t, envPath, "github_TOKEN=rotated\n")
	if v, _ := r.Lookup("github_TOKEN"); v != "rotated" {
		t.Errorf("after rewrite: %q", v)
	}
	// Same size and a forced old mtime: Reload picks it up.
	writeFile(t, envPath, "github_TOKEN=rotatex\n")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(envPath, old, old); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Lookup("github_TOKEN"); v != "rotatex" {
		t.Errorf("after reload: %q", v)
	}
	// A deleted non-optional file keeps the last values; Reload reports it.
	if err := os.Remove(envPath); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Lookup("github_TOKEN"); v != "rotatex" {
		t.Errorf("after delete: %q", v)
	}
	if err := r.Reload(); codeOf(err) != utcp.CodeInvalidConfig {
		t.Errorf("Reload after delete: %v", err)
	}
}

func TestResolverMissingDotenv(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.json")
	cfg, err := ParseConfig(path, []byte(`{"load_variables_from":[{"variable_loader_type":"dotenv","env_file_path":"nope.env"}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	if codeOf(err) != utcp.CodeInvalidConfig || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	want := path + ":1: load_variables_from[0]: dotenv file " + filepath.Join(dir, "nope.env") + ` does not exist; create it or set "optional": true on the loader`
	if err.Error() != want {
		t.Errorf("message = %q\nwant      %q", err, want)
	}

	// optional: true makes it an empty source, filled once it appears.
	cfg, err = ParseConfig(path, []byte(`{"load_variables_from":[{"variable_loader_type":"dotenv","env_file_path":"nope.env","optional":true}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("X"); ok {
		t.Error("resolved from a missing file")
	}
	writeFile(t, filepath.Join(dir, "nope.env"), "X=1\n")
	if v, ok := r.Lookup("X"); !ok || v != "1" {
		t.Errorf("after creating: %q %v", v, ok)
	}
	if err := os.Remove(filepath.Join(dir, "nope.env")); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("X"); ok {
		t.Error("optional file removed but its values remain")
	}
}

func TestResolverConfigVariablesSubstituted(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".env"), "HOST=api.example.com\n")
	in := `{
  "variables": {
    "github_URL": "https://${HOST}/v1",
    "github_TOKEN": "Bearer $TOKEN",
    "price": "$$5 and $",
    "schema": "#/$ref",
    "other": "${github_URL}"
  },
  "load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": ".env"}]
}`
	path := filepath.Join(dir, "c.json")
	cfg, err := ParseConfig(path, []byte(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Config variables refer to loaders and the environment, not to each
	// other: "other" does not resolve.
	_, err = NewResolver(cfg, ResolverOptions{LookupEnv: envMap(map[string]string{"TOKEN": "t0k"})})
	var ue *utcp.Error
	if !errors.As(err, &ue) || ue.Code != utcp.CodeVariableNotFound || ue.Details["variable"] != "github_URL" || ue.Details["path"] != "variables.other" {
		t.Fatalf("err = %v (%v)", err, ue)
	}
	if !strings.Contains(err.Error(), "c.json:7: variables.other: configuration variable other refers to github_URL") {
		t.Errorf("message = %q", err)
	}

	delete(cfg.Variables, "other")
	r, err := NewResolver(cfg, ResolverOptions{LookupEnv: envMap(map[string]string{"TOKEN": "t0k"})})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"github_URL":   "https://api.example.com/v1",
		"github_TOKEN": "Bearer t0k",
		"price":        "$5 and $",
		"schema":       "#/$ref",
	} {
		if got, _ := r.Lookup(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestResolverConfigVariableMissingNamesAll(t *testing.T) {
	cfg, err := ParseConfig("", []byte(`{"variables":{"a":"$X $Y","b":"${X}"}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewResolver(cfg, ResolverOptions{LookupEnv: envMap(nil)})
	var ue *utcp.Error
	if !errors.As(err, &ue) {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"X", "Y"}, ue.Details["variables"]); diff != "" {
		t.Error(diff)
	}
}
