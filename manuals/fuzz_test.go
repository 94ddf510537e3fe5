package manuals

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/utcpd/utcpd/utcp"
)

// fuzzReadFile serves providers files to FuzzParseConfig without touching
// the disk.
func fuzzReadFile(name string) ([]byte, error) {
	if name == "/fuzz/providers.json" {
		return []byte(`[{"name":"p","provider_type":"http","url":"u"}]`), nil
	}
	return nil, os.ErrNotExist
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(configV11), false)
	f.Add([]byte(`[{"name":"openlibrary","provider_type":"http","http_method":"GET","url":"https://openlibrary.org/static/openapi.json","metadata":{"a":1}}]`), false)
	f.Add([]byte(`{"providers_file_path":"providers.json","providers":[{"name":"x","type":"http_stream","url":"u","method":"POST"}],"load_variables_from":[{"type":"dotenv","env_file_path":".env"}]}`), false)
	f.Add([]byte(`{"manual_call_templates":[{"name":"a-b","call_template_type":"cli","command_name":"x","cwd":"/"},{"name":"a_b","call_template_type":"file","file_path":"m.json"}]}`), false)
	f.Add([]byte("{\n  \"variables\": {\"a\": \"b\",}\n}"), false)
	f.Add([]byte("manual_call_templates:\n  - name: g\n    call_template_type: http\n    url: https://x\n"), true)
	f.Add([]byte("a: &x [*x]\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		path := "/fuzz/utcpd.json"
		if asYAML {
			path = "/fuzz/utcpd.yaml"
		}
		for _, strict := range []bool{false, true} {
			cfg, err := ParseConfig(path, data, Options{Strict: strict, ReadFile: fuzzReadFile})
			if err != nil {
				if cfg != nil {
					t.Fatal("config returned with an error")
				}
				var ue *utcp.Error
				if !errors.As(err, &ue) {
					t.Fatalf("error is not a *utcp.Error: %v", err)
				}
				continue
			}
			names := map[string]bool{}
			for _, mt := range cfg.ManualCallTemplates {
				if !json.Valid(mt.Raw) {
					t.Fatalf("invalid raw %q", mt.Raw)
				}
				if mt.Name == "" || utcp.SanitizeName(mt.Name) != mt.Name || names[mt.Name] {
					t.Fatalf("bad name %q", mt.Name)
				}
				names[mt.Name] = true
				var head struct {
					Name string `json:"name"`
					Type string `json:"call_template_type"`
				}
				if err := json.Unmarshal(mt.Raw, &head); err != nil || head.Name != mt.Name || head.Type != mt.Type {
					t.Fatalf("raw %s does not match name %q type %q (%v)", mt.Raw, mt.Name, mt.Type, err)
				}
			}
			_ = Validate(cfg, fakeParser{}, strict)
		}
	})
}

func FuzzParseManual(f *testing.F) {
	f.Add([]byte(manualV11))
	f.Add([]byte(manualV01))
	f.Add([]byte(`{"version":"0.1","tools":[{"name":"a","parameters":{},"provider":{"type":"http_stream","url":"u"}}]}`))
	f.Add([]byte("utcp_version: 1.1\ntools:\n  - name: a\n    tool_call_template: {call_template_type: cli, commands: [{command: ls}]}\n"))
	f.Add([]byte(`{"tools":[{"name":"a","average_response_size":1e3,"tags":["x"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := ParseManual(data)
		if err != nil {
			if codeOf(err) != utcp.CodeInvalidManual {
				t.Fatalf("code %s: %v", codeOf(err), err)
			}
			return
		}
		for _, tool := range m.Tools {
			if tool.Name == "" {
				t.Fatal("tool without name")
			}
			if tool.ToolCallTemplate != nil && !json.Valid(tool.ToolCallTemplate.Raw) {
				t.Fatalf("invalid raw %q", tool.ToolCallTemplate.Raw)
			}
		}
		_ = IsManual(data)
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("manual does not encode: %v", err)
		}
	})
}

func FuzzNormalizeTemplate(f *testing.F) {
	for _, s := range []string{
		`{"name":"openlibrary","provider_type":"http","http_method":"GET","url":"https://x","metadata":{}}`,
		`{"provider_type":"http_stream","url":"u","method":"POST"}`,
		`{"provider_type":"cli","command_name":"ls -l","cwd":"/tmp"}`,
		`{"type":"text","file_path":"./m.json"}`,
		`{"transport":"websocket","url":"wss://x"}`,
		`{"call_template_type":"http","provider_type":"sse","method":"GET","http_method":"PUT"}`,
		`{"a":1,"a":2,"provider_type":"http"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, err := NormalizeTemplate(data)
		if err != nil {
			if codeOf(err) != utcp.CodeInvalidTemplate {
				t.Fatalf("code %s: %v", codeOf(err), err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		again, ws, err := NormalizeTemplate(out)
		if err != nil || len(ws) != 0 || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %s -> %s (%v, %v)", out, again, ws, err)
		}
	})
}

func FuzzSubstitute(f *testing.F) {
	f.Add([]byte(`{"url":"https://${HOST}/x","auth":{"auth_type":"api_key","api_key":"$KEY"}}`), "web_scraper")
	f.Add([]byte(`{"commands":[{"command":"echo $HOME"}],"env_vars":{"T":"${KEY}","P":"$$x"}}`), "m")
	f.Add([]byte(`{"query":"query($id: ID!) { x(id: $id) }","headers":{"A":"#/$ref"}}`), "")
	f.Add([]byte(`{"a":"\u0024KEY","b":["$KEY",1,true,null,{"c":"${KEY}"}]}`), "m")
	f.Add([]byte(`"$KEY"`), "")
	f.Fuzz(func(t *testing.T, raw []byte, ns string) {
		vars := map[string]string{}
		for _, k := range []string{"KEY", "HOST", "x"} {
			vars[Namespace(ns, k)] = "v\"\\<\x01é" + k
		}
		r, err := NewResolver(nil, ResolverOptions{LookupEnv: envMap(vars)})
		if err != nil {
			t.Fatal(err)
		}
		out, err := Substitute(raw, ns, r)
		required := RequiredVariables(raw, ns)
		if err != nil {
			code := codeOf(err)
			if code != utcp.CodeVariableNotFound && code != utcp.CodeInvalidTemplate {
				t.Fatalf("code %s: %v", code, err)
			}
			if code == utcp.CodeVariableNotFound && len(required) == 0 {
				t.Fatalf("missing variable but none required: %v", err)
			}
			return
		}
		if json.Valid(raw) && !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, raw)
		}
		for _, k := range required {
			if _, ok := r.Lookup(k); !ok {
				t.Fatalf("%s required but Substitute succeeded", k)
			}
		}
		if !HasVariables(raw) && !bytes.Equal(out, raw) {
			t.Fatal("HasVariables false but output changed")
		}
	})
}

func FuzzAppendQuoted(f *testing.F) {
	f.Add("plain")
	f.Add("quote\" backslash\\ ctl\x01\n\t é \xff <&>")
	f.Fuzz(func(t *testing.T, s string) {
		lit := appendQuoted(nil, s)
		var got string
		if err := json.Unmarshal(lit, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, lit, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = string(bytes.ToValidUTF8([]byte(s), []byte("\uFFFD")))
			// encoding/json replaces each invalid byte; ToValidUTF8 runs
			// of them. Compare by re-decoding json.Marshal's output.
			b, _ := json.Marshal(s)
			_ = json.Unmarshal(b, &want)
		}
		if got != want {
			t.Fatalf("round trip %q -> %q, want %q", s, got, want)
		}
	})
}

// FuzzCheckConfig: CheckConfig never panics, agrees with ParseConfig
// (no error exactly when ParseConfig succeeds, the same usable templates)
// and rejects only templates with a problem of their own.
func FuzzCheckConfig(f *testing.F) {
	f.Add([]byte(configV11), false)
	f.Add([]byte(`[{"name":"openlibrary","provider_type":"htp","url":"https://x","metadata":{"a":1}},{"call_templat_type":"http","url":"u"}]`), false)
	f.Add([]byte(`{"manual_call_templates":[{"name":"a","call_template_type":"http"},{"name":"a","call_template_type":"file","file_path":"m.json"}]}`), false)
	f.Add([]byte("manual_call_templates:\n  - name: g\n    call_template_type: cli\n    commands: []\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, strict bool) {
		path := "/fuzz/utcpd.json"
		opts := Options{Strict: strict, ReadFile: fuzzReadFile, Parser: fakeParser{}}
		cfg, ps := CheckConfig(path, data, opts)
		errs := 0
		for _, p := range ps {
			if p.Severity == SeverityError {
				errs++
			}
		}
		pcfg, err := ParseConfig(path, data, opts)
		switch {
		case err != nil && errs == 0:
			t.Fatalf("ParseConfig fails (%v), CheckConfig finds no error", err)
		case err == nil && cfg == nil:
			t.Fatal("ParseConfig succeeds, CheckConfig gives no configuration")
		case err == nil && len(cfg.ManualCallTemplates)+len(cfg.Rejected) != len(pcfg.ManualCallTemplates):
			t.Fatalf("%d usable and %d rejected templates, ParseConfig has %d", len(cfg.ManualCallTemplates), len(cfg.Rejected), len(pcfg.ManualCallTemplates))
		}
		if cfg == nil {
			return
		}
		for _, r := range cfg.Rejected {
			if len(r.Problems) == 0 || r.Err() == nil {
				t.Fatalf("rejected %s without a problem", r.Name)
			}
		}
	})
}
