package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
)

// loadTestConfig writes content to name in a temporary folder and loads
// it as a configuration whose gateway section is left to the test
// (effectiveSettings, ApplyGateway): its manuals and variables must load.
func loadTestConfig(t *testing.T, name, content string, strict bool) *daemonConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, content)
	cfg, err := manuals.LoadConfig(path, manuals.Options{Strict: strict, Parser: transports.Default})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	vars, err := manuals.NewResolver(cfg, manuals.ResolverOptions{})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return &daemonConfig{Path: path, Cfg: cfg, Data: []byte(content), Vars: vars}
}

func TestGatewaySection(t *testing.T) {
	for _, name := range []string{envListen, envAdminToken, envAPIKeys, envDataDir, envManualsDir, envLogFormat, envLogLevel} {
		t.Setenv(name, "")
	}
	cases := []struct {
		name, file, content string
		strict              bool
		check               func(t *testing.T, s settings, dir string)
		errs                []string // substrings of the error, in order
		warnings            []string
	}{
		{
			name: "every key", file: "c.json",
			content: `{
  "gateway": {
    "listen": "127.0.0.1:9000",
    "admin_token": "tok",
    "api_keys": ["a", " b ", ""],
    "data_dir": "state",
    "manuals_dir": "/abs/manuals",
    "max_body_bytes": 1024,
    "default_timeout": "10s",
    "max_timeout": 60,
    "shutdown_timeout": "1m",
    "log_format": "json",
    "log_level": "debug"
  }
}`,
			check: func(t *testing.T, s settings, dir string) {
				want := settings{Listen: "127.0.0.1:9000", AdminToken: "tok", APIKeys: []string{"a", "b"},
					DataDir: filepath.Join(dir, "state"), ManualsDir: "/abs/manuals", MaxBodyBytes: 1024,
					DefaultTimeout: 10 * time.Second, MaxTimeout: time.Minute, ShutdownTimeout: time.Minute,
					LogFormat: "json", LogLevel: "debug", ReadTimeout: defaultReadTimeout, MaxConnections: defaultMaxConnections}
				if diff := cmp.Diff(want, s); diff != "" {
					t.Errorf("settings (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "defaults", file: "c.json", content: `{"manual_call_templates": []}`,
			check: func(t *testing.T, s settings, _ string) {
				if s.Listen != defaultListen || s.MaxBodyBytes != 4<<20 || s.DefaultTimeout != 30*time.Second ||
					s.MaxTimeout != 5*time.Minute || s.ShutdownTimeout != 15*time.Second || s.LogFormat != "text" || s.LogLevel != "info" {
					t.Errorf("defaults: %+v", s)
				}
				if !strings.HasSuffix(s.DataDir, filepath.Join("utcpd")) {
					t.Errorf("default data dir %q", s.DataDir)
				}
			},
		},
		{
			name: "empty data_dir keeps manuals in memory", file: "c.json", content: `{"gateway": {"data_dir": ""}}`,
			check: func(t *testing.T, s settings, _ string) {
				if s.DataDir != "" {
					t.Errorf("data dir %q, want none", s.DataDir)
				}
			},
		},
		{
			name: "bad values", file: "bad.json",
			content: "{\n  \"gateway\": {\n    \"listen\": 8787,\n    \"api_keys\": \"k\",\n    \"max_body_bytes\": -1,\n    \"max_timeout\": \"forever\",\n    \"log_format\": \"xml\"\n  }\n}",
			errs: []string{
				"bad.json:3: gateway.listen: must be a string",
				"bad.json:4: gateway.api_keys: must be an array of keys: strings, or objects such as",
				"bad.json:5: gateway.max_body_bytes: must be a positive integer",
				"bad.json:6: gateway.max_timeout: must be a positive duration",
				"bad.json:7: gateway.log_format: log format \"xml\"",
			},
		},
		{
			name: "not an object", file: "c.json", content: "{\n  \"gateway\": [1]\n}",
			errs: []string{"c.json:2: gateway: the gateway section must be a JSON object"},
		},
		{
			name: "unknown key warns", file: "w.json", content: "{\n  \"gateway\": {\n    \"listn\": \"x\"\n  }\n}",
			warnings: []string{`w.json:3: gateway.listn: unknown field "listn" in the gateway section; ignored (did you mean "listen"?)`},
		},
		{
			name: "unknown key strict", file: "w.json", content: "{\n  \"gateway\": {\n    \"listn\": \"x\"\n  }\n}", strict: true,
			errs: []string{`w.json:3: gateway.listn: unknown field "listn" in the gateway section (did you mean "listen"?)`},
		},
		{
			name: "yaml lines", file: "c.yaml",
			content: "manual_call_templates: []\ngateway:\n  listen: 127.0.0.1:1\n  # comment\n  default_timeout: never\n",
			errs:    []string{"c.yaml:5: gateway.default_timeout: must be a positive duration"},
		},
		{
			name: "default above max", file: "c.json", content: `{"gateway": {"default_timeout": "10m"}}`,
			errs: []string{"default_timeout 10m0s is longer than max_timeout 5m0s"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dc := loadTestConfig(t, c.file, c.content, c.strict)
			var f serveFlags
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			s, warnings, err := effectiveSettings(fs, &f, dc, c.strict)
			if len(c.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", c.errs)
				}
				msg := err.Error()
				for _, want := range c.errs {
					i := strings.Index(msg, want)
					if i < 0 {
						t.Fatalf("error %q lacks %q", msg, want)
					}
					msg = msg[i:]
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range warnings {
				got = append(got, strings.TrimPrefix(w.String(), "warning: "))
			}
			for i := range got {
				got[i] = strings.TrimPrefix(got[i], filepath.Dir(dc.Path)+string(filepath.Separator))
			}
			if diff := cmp.Diff(c.warnings, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if c.check != nil {
				c.check(t, s, dc.Cfg.Dir)
			}
		})
	}
}

// TestPrecedence: flags > environment > file > defaults.
func TestPrecedence(t *testing.T) {
	dc := loadTestConfig(t, "c.json", `{"gateway": {"listen": "127.0.0.1:1", "log_level": "error", "api_keys": ["file"], "manuals_dir": "/file"}}`, false)
	build := func(args ...string) settings {
		t.Helper()
		var f serveFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		s, _, err := effectiveSettings(fs, &f, dc, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Setenv(envListen, "")
	t.Setenv(envLogLevel, "")
	t.Setenv(envAPIKeys, "")
	t.Setenv(envManualsDir, "")
	if s := build(); s.Listen != "127.0.0.1:1" || s.LogLevel != "error" || s.APIKeys[0] != "file" || s.ManualsDir != "/file" {
		t.Fatalf("file: %+v", s)
	}
	t.Setenv(envListen, "127.0.0.1:2")
	t.Setenv(envAPIKeys, "e1, e2,")
	if s := build(); s.Listen != "127.0.0.1:2" || s.LogLevel != "error" || !cmp.Equal(s.APIKeys, []string{"e1", "e2"}) {
		t.Fatalf("environment: %+v", s)
	}
	s := build("--listen", "127.0.0.1:3", "--log-level", "debug", "--no-store", "--manuals-dir", "")
	if s.Listen != "127.0.0.1:3" || s.LogLevel != "debug" || s.DataDir != "" || s.ManualsDir != "" {
		t.Fatalf("flags: %+v", s)
	}
	t.Setenv(envLogLevel, "loud")
	var f serveFlags
	if _, _, err := effectiveSettings(pflag.NewFlagSet("x", pflag.ContinueOnError), &f, dc, false); err == nil || !strings.Contains(err.Error(), envLogLevel) {
		t.Fatalf("bad UTCPD_LOG_LEVEL: %v", err)
	}
}

func TestCheckExposure(t *testing.T) {
	cases := []struct {
		listen, token string
		keys          []string
		loopback      bool
		err           string
	}{
		{"127.0.0.1:8787", "", nil, true, ""},
		{"[::1]:0", "", nil, true, ""},
		{"localhost:1", "", nil, true, ""},
		{"0.0.0.0:8787", "", nil, false, "without an admin token"},
		{":8787", "t", nil, false, "without API keys"},
		{"10.0.0.1:8787", "t", []string{"k"}, false, ""},
		{"nohostport", "", nil, false, "want host:port"},
	}
	for _, c := range cases {
		s := settings{Listen: c.listen, AdminToken: c.token, APIKeys: c.keys}
		loopback, err := checkExposure(&s)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.listen, err, c.err)
			}
			continue
		}
		if err != nil || loopback != c.loopback {
			t.Errorf("%s: loopback %v, error %v", c.listen, loopback, err)
		}
	}
}

func TestTemplateFor(t *testing.T) {
	dir := t.TempDir()
	raw, err := templateFor("https://api.example.com:8443/utcp", "", nil)
	if err != nil || string(raw) != `{"call_template_type":"http","http_method":"GET","name":"api_example_com_8443","url":"https://api.example.com:8443/utcp"}` {
		t.Fatalf("URL: %s, %v", raw, err)
	}
	path := filepath.Join(dir, "local-files.json")
	writeFile(t, path, `{"call_template_type": "file", "file_path": "m.json"}`)
	raw, err = templateFor(path, "", nil)
	if err != nil || !strings.Contains(string(raw), `"name":"local_files"`) || !strings.Contains(string(raw), filepath.Join(dir, "m.json")) {
		t.Fatalf("template file: %s, %v", raw, err)
	}
	raw, err = templateFor(path, "other", nil)
	if err != nil || !strings.Contains(string(raw), `"name":"other"`) {
		t.Fatalf("--name: %s, %v", raw, err)
	}
	manual := filepath.Join(dir, "m.yaml")
	writeFile(t, manual, "utcp_version: 1.1.0\ntools:\n  - name: t\n    tool_call_template:\n      call_template_type: http\n      url: http://127.0.0.1:1/t\n")
	raw, err = templateFor(manual, "", nil)
	if err != nil || !strings.Contains(string(raw), `"call_template_type":"text"`) || !strings.Contains(string(raw), `["text","http"]`) {
		t.Fatalf("manual file: %s, %v", raw, err)
	}
	if _, err := templateFor("-", "", strings.NewReader(`{"call_template_type": "http", "url": "http://127.0.0.1:1"}`)); err == nil {
		t.Fatal("stdin template without a name: no error")
	}
	if _, err := templateFor(filepath.Join(dir, "missing.json"), "", nil); err == nil {
		t.Fatal("missing file: no error")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
