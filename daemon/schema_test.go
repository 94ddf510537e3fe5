package daemon

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/internal/schematest"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// schemas are the compiled configuration schema and its manual call
// template definition, of one variant.
type schemas struct {
	raw      []byte
	config   *jsonschema.Schema
	template *jsonschema.Schema
	gateway  *jsonschema.Schema
	auth     *jsonschema.Schema
}

// compileSchemas generates and compiles the schema (strict: the strict
// variant), after checking it against the 2020-12 meta-schema.
func compileSchemas(t *testing.T, strict bool) schemas {
	t.Helper()
	raw, err := ConfigSchema(testSchemaOptions(strict))
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Check(raw); err != nil {
		t.Fatalf("the config schema (strict %v) is not valid JSON Schema 2020-12: %v", strict, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	id := SchemaID
	if strict {
		id = StrictSchemaID
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	s := schemas{raw: raw}
	for dst, loc := range map[**jsonschema.Schema]string{&s.config: id, &s.template: id + "#/$defs/manual_call_template",
		&s.gateway: id + "#/$defs/gateway", &s.auth: id + "#/$defs/utcp.Auth"} {
		if *dst, err = c.Compile(loc); err != nil {
			t.Fatalf("compiling %s: %v", loc, err)
		}
	}
	return s
}

// check validates the JSON document doc against s.
func check(s *jsonschema.Schema, doc string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// verdict is what utcpd says of a configuration file: its errors and
// warnings, as utcpd config validate prints them (without the guard
// chain, whose kinds check their own sections).
type verdict struct {
	errs, warnings []string
}

func (v verdict) ok() bool { return len(v.errs) == 0 }

// load checks data as utcpd config validate does, in dir.
func load(t *testing.T, dir, data string, strict bool) verdict {
	t.Helper()
	name := "utcpd.json"
	if d := strings.TrimSpace(data); d != "" && d[0] != '{' && d[0] != '[' {
		name = "utcpd.yaml"
	}
	var out verdict
	add := func(ps []manuals.Problem) {
		for _, p := range ps {
			if p.Severity == manuals.SeverityError {
				out.errs = append(out.errs, p.String())
			} else {
				out.warnings = append(out.warnings, p.String())
			}
		}
	}
	cfg, err := manuals.ParseConfig(filepath.Join(dir, name), []byte(data), manuals.Options{Strict: strict, Parser: transports.Default})
	if err != nil {
		if ps := manuals.ProblemsOf(err); len(ps) > 0 {
			add(ps)
		} else {
			out.errs = append(out.errs, err.Error())
		}
		return out
	}
	add(manuals.Validate(cfg, transports.Default, strict))
	var s Settings
	gwErrs, gwWarnings := ApplyGateway(&s, cfg, []byte(data), strict)
	add(gwErrs)
	add(gwWarnings)
	return out
}

// TestConfigSchemaValid: both variants are valid JSON Schema 2020-12
// (the meta-schema, the compiler, no keyword outside the vocabularies),
// name themselves, and the same options give the same bytes.
func TestConfigSchemaValid(t *testing.T) {
	for _, strict := range []bool{false, true} {
		s := compileSchemas(t, strict)
		var doc map[string]any
		if err := json.Unmarshal(s.raw, &doc); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: SchemaID, true: StrictSchemaID}[strict]
		if doc["$id"] != want || doc["$schema"] != schematest.MetaSchemaURL {
			t.Errorf("strict %v: $id %v, $schema %v", strict, doc["$id"], doc["$schema"])
		}
		again, err := ConfigSchema(testSchemaOptions(strict))
		if err != nil || !bytes.Equal(again, s.raw) {
			t.Errorf("strict %v: a second ConfigSchema differs (err %v)", strict, err)
		}
		if !bytes.HasSuffix(s.raw, []byte("}\n")) {
			t.Errorf("strict %v: the schema does not end with a newline", strict)
		}
	}
	if _, err := ConfigSchema(SchemaOptions{}); err == nil {
		t.Error("ConfigSchema without transports succeeded")
	}
}

// TestConfigSchemaKeys: the schema describes exactly the keys
// manuals.ParseConfig knows at the top level, in variable loaders and in
// post-processors (whose structs must carry the keys the parser checks),
// and every gateway key of Settings, and every property it lists has a
// description.
func TestConfigSchemaKeys(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(compileSchemas(t, false).raw, &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	keysOf := func(s any) []string {
		props, _ := s.(map[string]any)["properties"].(map[string]any)
		return slices.Sorted(func(yield func(string) bool) {
			for k := range props {
				if !yield(k) {
					return
				}
			}
		})
	}
	k := manuals.KnownConfigKeys()
	sorted := func(lists ...[]string) []string { return slices.Sorted(slices.Values(slices.Concat(lists...))) }
	if got, want := keysOf(doc), sorted(k.Config, k.ConfigLegacy); !slices.Equal(got, want) {
		t.Errorf("top-level properties %v, want %v", got, want)
	}
	if got, want := keysOf(defs["variable_loader"]), sorted(k.Loader, k.LoaderLegacy); !slices.Equal(got, want) {
		t.Errorf("variable loader properties %v, want %v", got, want)
	}
	for typ, keys := range k.PostProcessor {
		st, ok := postProcessorStructs[typ]
		if !ok {
			t.Errorf("post-processor %s has no struct", typ)
			continue
		}
		got := append(keysOf(defs[st.String()]), "tool_post_processor_type")
		if want := sorted(keys); !slices.Equal(sorted(got), want) {
			t.Errorf("post-processor %s: struct %s has keys %v, the parser checks %v", typ, st, sorted(got), want)
		}
	}
	var settingKeys []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		if key := jsonName(f); key != "" {
			settingKeys = append(settingKeys, key)
		}
	}
	if got := keysOf(defs["gateway"]); !slices.Equal(got, sorted(settingKeys)) {
		t.Errorf("gateway properties %v, want Settings' keys %v", got, sorted(settingKeys))
	}

	// Every property described (legacy providers' and the auth rules'
	// branches only narrow properties described elsewhere).
	var walk func(path string, s any)
	walk = func(path string, s any) {
		switch s := s.(type) {
		case map[string]any:
			if props, ok := s["properties"].(map[string]any); ok && !strings.Contains(path, "/if") &&
				!strings.Contains(path, "/then") && !strings.Contains(path, "legacy_provider") {
				for name, p := range props {
					if pm, _ := p.(map[string]any); pm["description"] == nil {
						t.Errorf("%s.%s has no description (a doc comment starting with the field's name, or daemon/schema.go's tables)", path, name)
					}
				}
			}
			for k, v := range s {
				walk(path+"/"+k, v)
			}
		case []any:
			for _, v := range s {
				walk(path, v)
			}
		}
	}
	walk("", doc)
}

// example is a configuration or a manual call template found in the
// repository.
type example struct {
	where string // file, and line for a Markdown code block
	text  string
}

// repoExamples returns every example configuration and every example
// manual call template of the repository: the JSON files of
// examples/manuals (UTCP manuals, which are neither, are left out) and
// the JSON code blocks of the Markdown documentation (README.md,
// CONTRIBUTING.md, docs/*.md, examples/**/*.md) that are one or the
// other; a block that is a "gateway": {...} member counts as the
// configuration holding it.
func repoExamples(t *testing.T) (configs, templates []example) {
	t.Helper()
	classify := func(where, text string) {
		var top map[string]json.RawMessage
		if json.Unmarshal([]byte(text), &top) != nil {
			var list []json.RawMessage
			if json.Unmarshal([]byte(text), &list) == nil {
				configs = append(configs, example{where, text}) // a bare list of providers
			}
			return
		}
		if _, ok := top["call_template_type"]; ok {
			templates = append(templates, example{where, text})
			return
		}
		k := manuals.KnownConfigKeys()
		for key := range top {
			if slices.Contains(k.Config, key) || slices.Contains(k.ConfigLegacy, key) {
				configs = append(configs, example{where, text})
				return
			}
		}
	}
	files, err := filepath.Glob("../examples/manuals/*.json")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../examples/manuals/*/*.json")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		classify(strings.TrimPrefix(f, "../"), string(b))
	}
	docs, _ := filepath.Glob("../docs/*.md")
	exampleDocs, _ := filepath.Glob("../examples/*/*.md")
	block := regexp.MustCompile("(?s)```json\n(.*?)```")
	for _, f := range slices.Concat([]string{"../README.md", "../CONTRIBUTING.md"}, docs, exampleDocs) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(b, -1) {
			text := strings.TrimSpace(string(b[m[2]:m[3]]))
			where := strings.TrimPrefix(f, "../") + ":" + strconv.Itoa(bytes.Count(b[:m[0]], []byte("\n"))+1)
			if strings.HasPrefix(text, `"gateway"`) {
				text = "{" + text + "}"
			}
			classify(where, text)
		}
	}
	return configs, templates
}

// TestConfigSchemaExamples: every example configuration of the
// repository (examples/manuals, and the configurations in the docs)
// and every example manual call template (one at least per transport,
// docs/transports.md) is valid to the schema and loads in utcpd; the
// strict variant agrees with utcpd config validate --strict.
func TestConfigSchemaExamples(t *testing.T) {
	configs, templates := repoExamples(t)
	if len(configs) < 5 {
		t.Fatalf("found only %d example configurations: %v", len(configs), configs)
	}
	var found []string
	for _, e := range configs {
		found = append(found, e.where)
	}
	for _, want := range []string{"examples/manuals/daemon.json", "examples/manuals/quickstart.json", "docs/cli.md:", "README.md:"} {
		if !slices.ContainsFunc(found, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("no example configuration from %s among %v", want, found)
		}
	}
	t.Logf("example configurations: %v", found)
	dir := t.TempDir()
	def, strict := compileSchemas(t, false), compileSchemas(t, true)
	for _, e := range configs {
		if v := load(t, dir, e.text, false); !v.ok() {
			t.Errorf("%s: utcpd rejects the example: %v", e.where, v.errs)
		}
		if err := check(def.config, e.text); err != nil {
			t.Errorf("%s: not valid to the config schema: %v", e.where, err)
		}
		strictOK := load(t, dir, e.text, true).ok()
		if err := check(strict.config, e.text); (err == nil) != strictOK {
			t.Errorf("%s: strict schema says %v, utcpd config validate --strict says ok=%v", e.where, err, strictOK)
		}
	}

	types := map[string]bool{}
	for _, e := range templates {
		ct, err := transports.Default.ParseTemplate(json.RawMessage(e.text))
		if err != nil {
			t.Errorf("%s: utcpd rejects the example template: %v", e.where, err)
			continue
		}
		types[ct.Type] = true
		if err := check(def.template, e.text); err != nil {
			t.Errorf("%s: not a valid manual call template to the schema: %v", e.where, err)
		}
		if err := check(strict.template, e.text); (err == nil) != (len(ct.Unknown) == 0) {
			t.Errorf("%s: strict schema says %v, utcpd's unknown fields are %v", e.where, err, ct.Unknown)
		}
	}
	for _, typ := range transports.Default.Types() {
		if !types[typ] {
			t.Errorf("no example template of type %s (docs/transports.md has one for every transport)", typ)
		}
	}
}

// TestConfigSchemaRejects: configurations utcpd refuses are invalid to
// the schema too: a wrong type or value in the gateway section, a
// template without a field its transport requires, and the like.
func TestConfigSchemaRejects(t *testing.T) {
	const http = `{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:8081/utcp"}`
	variants := []schemas{compileSchemas(t, false), compileSchemas(t, true)}
	for name, cfg := range map[string]string{
		"gateway key of the wrong type":     `{"gateway": {"max_body_bytes": "4MB"}}`,
		"gateway duration not a duration":   `{"gateway": {"default_timeout": "soon"}}`,
		"gateway duration negative":         `{"gateway": {"max_timeout": -5}}`,
		"gateway integer over its max":      `{"gateway": {"store_max_conns": 5000}}`,
		"gateway integer zero":              `{"gateway": {"max_connections": 0}}`,
		"gateway list not a list":           `{"gateway": {"api_keys": "k1,k2"}}`,
		"gateway guards not a list":         `{"gateway": {"guards": {"kind": "deny_all"}}}`,
		"gateway log format unknown":        `{"gateway": {"log_format": "xml"}}`,
		"gateway log level unknown":         `{"gateway": {"log_level": "loud"}}`,
		"gateway not an object":             `{"gateway": "127.0.0.1:8787"}`,
		"codemode unknown key":              `{"gateway": {"codemode": {"max_timout": "1m"}}}`,
		"codemode null key":                 `{"gateway": {"codemode": {"max_timeout": null}}}`,
		"template without its url":          `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "http_method": "GET"}]}`,
		"template with an empty url":        `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": ""}]}`,
		"cli template without commands":     `{"manual_call_templates": [{"name": "c", "call_template_type": "cli", "commands": []}]}`,
		"cli command without command":       `{"manual_call_templates": [{"name": "c", "call_template_type": "cli", "commands": [{"append_to_final_output": true}]}]}`,
		"tcp template without a port":       `{"manual_call_templates": [{"name": "t", "call_template_type": "tcp", "host": "127.0.0.1"}]}`,
		"tcp port as a string":              `{"manual_call_templates": [{"name": "t", "call_template_type": "tcp", "host": "127.0.0.1", "port": "9000"}]}`,
		"mcp template without servers":      `{"manual_call_templates": [{"name": "m", "call_template_type": "mcp", "config": {"mcpServers": {}}}]}`,
		"template timeout as a string":      `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:1/", "timeout": "30s"}]}`,
		"unknown call_template_type":        `{"manual_call_templates": [{"name": "h", "call_template_type": "htp", "url": "http://127.0.0.1:1/"}]}`,
		"template without a type":           `{"manual_call_templates": [{"name": "h", "url": "http://127.0.0.1:1/"}]}`,
		"template name not a string":        `{"manual_call_templates": [{"name": 5, "call_template_type": "http", "url": "http://127.0.0.1:1/"}]}`,
		"templates not a list":              `{"manual_call_templates": ` + http + `}`,
		"api_key auth without its key":      `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:1/", "auth": {"auth_type": "api_key"}}]}`,
		"auth of an unknown type":           `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:1/", "auth": {"auth_type": "token", "api_key": "k"}}]}`,
		"post-processor of unknown type":    `{"post_processing": [{"tool_post_processor_type": "truncate"}]}`,
		"post-processor limit not a number": `{"post_processing": [{"tool_post_processor_type": "limit_strings", "limit": "long"}]}`,
		"loader without its file":           `{"load_variables_from": [{"variable_loader_type": "dotenv"}]}`,
		"loader of an unknown type":         `{"load_variables_from": [{"variable_loader_type": "vault", "env_file_path": ".env"}]}`,
		"variable not a scalar":             `{"variables": {"API_KEY": {"value": "k"}}}`,
		"search weight not a number":        `{"tool_search_strategy": {"tag_weight": "high"}}`,
		"legacy provider without a type":    `{"providers": [{"name": "p", "url": "http://127.0.0.1:1/"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if v := load(t, t.TempDir(), cfg, false); v.ok() {
				t.Fatalf("utcpd loads %s (warnings %v); the case is wrong", cfg, v.warnings)
			}
			for _, s := range variants {
				if err := check(s.config, cfg); err == nil {
					t.Errorf("%s accepts %s, which utcpd refuses", s.config.Location, cfg)
				}
			}
		})
	}
}

// TestConfigSchemaUnknownFields: an unknown field, wherever utcpd checks
// fields, is valid to the schema (utcpd warns and goes on) and invalid
// to the strict variant (utcpd config validate --strict refuses it); so
// is an unknown tool_repository_type. A "$schema" key is known.
func TestConfigSchemaUnknownFields(t *testing.T) {
	def, strict := compileSchemas(t, false), compileSchemas(t, true)
	for name, cfg := range map[string]string{
		"top level":              `{"manual_call_template": []}`,
		"gateway":                `{"gateway": {"listn": "127.0.0.1:8787"}}`,
		"template":               `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:1/", "http_methd": "GET"}]}`,
		"variable loader":        `{"load_variables_from": [{"variable_loader_type": "dotenv", "env_file_path": ".env", "optional": true, "required": false}]}`,
		"post-processor":         `{"post_processing": [{"tool_post_processor_type": "limit_strings", "limt": 10}]}`,
		"search strategy":        `{"tool_search_strategy": {"tool_search_strategy_type": "tag_and_description_word_match", "tags_weight": 2}}`,
		"tool repository type":   `{"tool_repository": {"tool_repository_type": "redis"}}`,
		"communication protocol": `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "url": "http://127.0.0.1:1/", "allowed_communication_protocols": ["http", "carrier_pigeon"]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if v := load(t, dir, cfg, false); !v.ok() || len(v.warnings) == 0 {
				t.Fatalf("utcpd: errors %v, warnings %v; want a warning only", v.errs, v.warnings)
			}
			if v := load(t, dir, cfg, true); v.ok() {
				t.Fatalf("utcpd --strict loads %s", cfg)
			}
			if err := check(def.config, cfg); err != nil {
				t.Errorf("schema refuses %s: %v", cfg, err)
			}
			if err := check(strict.config, cfg); err == nil {
				t.Errorf("strict schema accepts %s", cfg)
			}
		})
	}
	const schemaKey = `{"$schema": "./docs/config.schema.json", "gateway": {"listen": "127.0.0.1:8787"}}`
	for _, s := range []schemas{def, strict} {
		if err := check(s.config, schemaKey); err != nil {
			t.Errorf("a $schema key is refused: %v", err)
		}
	}
	if v := load(t, t.TempDir(), schemaKey, true); !v.ok() || len(v.warnings) > 0 {
		t.Errorf("utcpd --strict on a $schema key: errors %v, warnings %v", v.errs, v.warnings)
	}
}

// TestConfigSchemaLegacy: what utcpd reads as legacy (UTCP v0.1
// providers, renamed fields and types, a bare list of providers) is
// valid to both variants, as utcpd only warns about it, even when strict.
func TestConfigSchemaLegacy(t *testing.T) {
	def, strict := compileSchemas(t, false), compileSchemas(t, true)
	for name, cfg := range map[string]string{
		"providers":           `{"providers": [{"name": "openlibrary", "provider_type": "http", "http_method": "GET", "url": "https://openlibrary.org/static/openapi.json", "content_type": "application/json"}]}`,
		"bare list":           `[{"name": "p", "provider_type": "http", "url": "https://example.com/utcp"}, {"name": "q", "type": "cli", "command_name": "echo hi"}]`,
		"provider_type":       `{"manual_call_templates": [{"name": "p", "provider_type": "http", "url": "https://example.com/utcp"}]}`,
		"http_stream":         `{"manual_call_templates": [{"name": "s", "call_template_type": "http_stream", "url": "https://example.com/stream"}]}`,
		"text with file_path": `{"manual_call_templates": [{"name": "f", "call_template_type": "text", "file_path": "/tmp/manual.json"}]}`,
		"cli command_name":    `{"manual_call_templates": [{"name": "c", "call_template_type": "cli", "command_name": "echo hi", "cwd": "/tmp"}]}`,
		"http method":         `{"manual_call_templates": [{"name": "h", "call_template_type": "http", "method": "POST", "url": "https://example.com/utcp"}]}`,
		"loader type":         `{"load_variables_from": [{"type": "dotenv", "env_file_path": ".env", "optional": true}]}`,
		"providers file":      `{"providers_file_path": "providers.json"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "providers.json"), []byte(`[{"name": "x", "provider_type": "http", "url": "https://example.com/utcp"}]`), 0o644); err != nil {
				t.Fatal(err)
			}
			if v := load(t, dir, cfg, true); !v.ok() {
				t.Fatalf("utcpd --strict: %v", v.errs)
			}
			for _, s := range []schemas{def, strict} {
				if err := check(s.config, cfg); err != nil {
					t.Errorf("%s refuses it: %v", s.config.Location, err)
				}
			}
		})
	}
}

// wrongValue returns a JSON value of a type the property schema p does
// not allow, or "" when p allows every type.
func wrongValue(p map[string]any) string {
	var allowed []string
	switch typ := p["type"].(type) {
	case string:
		allowed = []string{typ}
	case []any:
		for _, x := range typ {
			allowed = append(allowed, x.(string))
		}
	default:
		return ""
	}
	for _, c := range []struct{ typ, value string }{
		{"string", `"not-a-value"`}, {"object", `{"z": 1}`}, {"array", `[1]`}, {"boolean", `true`}, {"number", `12.5`},
	} {
		if !slices.Contains(allowed, c.typ) {
			return c.value
		}
	}
	return ""
}

// TestTemplateSchemaAgrees holds each transport's part of the schema to
// its ParseTemplate, starting from the example templates of
// docs/transports.md: a template ParseTemplate takes is valid; without
// one of the fields the schema requires, or with it empty, both refuse
// it; with a field's value of a JSON type the schema does not allow,
// both refuse it; with an unknown field, ParseTemplate lists it and only
// the strict variant refuses it.
func TestTemplateSchemaAgrees(t *testing.T) {
	_, templates := repoExamples(t)
	loose, strict := compileSchemas(t, false), compileSchemas(t, true)
	var doc map[string]any
	if err := json.Unmarshal(loose.raw, &doc); err != nil {
		t.Fatal(err)
	}
	defs := doc["$defs"].(map[string]any)
	base := defs["manual_call_template"].(map[string]any)["properties"].(map[string]any)
	parses := func(m map[string]any) (utcp.CallTemplate, error) {
		raw, _ := json.Marshal(m)
		return transports.Default.ParseTemplate(raw)
	}
	valid := func(s *jsonschema.Schema, m map[string]any) error {
		raw, _ := json.Marshal(m)
		return check(s, string(raw))
	}
	mutations := 0
	for _, e := range templates {
		var tmpl map[string]any
		if err := json.Unmarshal([]byte(e.text), &tmpl); err != nil {
			t.Fatal(err)
		}
		typ, _ := tmpl["call_template_type"].(string)
		info, ok := transports.Default.Lookup(typ)
		if !ok {
			t.Errorf("%s: unknown type %q", e.where, typ)
			continue
		}
		if _, err := parses(tmpl); err != nil {
			continue // TestConfigSchemaExamples reports it
		}
		tdef := defs[reflect.TypeOf(info.Template).Elem().String()].(map[string]any)
		props := tdef["properties"].(map[string]any)
		required, _ := tdef["required"].([]any)
		with := func(key string, value any) map[string]any {
			m := map[string]any{}
			for k, v := range tmpl {
				m[k] = v
			}
			if value == nil {
				delete(m, key)
			} else {
				m[key] = value
			}
			return m
		}
		for _, r := range required {
			key := r.(string)
			empties := []any{nil} // nil: without the field
			switch props[key].(map[string]any)["type"] {
			case "string":
				empties = append(empties, "")
			case "array":
				empties = append(empties, []any{})
			case "object":
				empties = append(empties, map[string]any{})
			case "integer", "number":
				empties = append(empties, 0)
			}
			for _, empty := range empties {
				mutations++
				m := with(key, empty)
				if _, err := parses(m); err == nil {
					t.Errorf("%s: %s requires %s, but ParseTemplate takes %v", e.where, typ, key, m)
				}
				if err := valid(loose.template, m); err == nil {
					t.Errorf("%s: the schema takes %v, without %s", e.where, m, key)
				}
			}
		}
		check := func(key string, p map[string]any) {
			bad := wrongValue(p)
			if bad == "" {
				return
			}
			mutations++
			var v any
			_ = json.Unmarshal([]byte(bad), &v)
			m := with(key, v)
			_, perr := parses(m)
			serr := valid(loose.template, m)
			if perr == nil || serr == nil {
				t.Errorf("%s: %s.%s = %s: ParseTemplate says %v, the schema says %v; want both to refuse it", e.where, typ, key, bad, perr, serr)
			}
		}
		for key, p := range props {
			if pm, ok := p.(map[string]any); ok {
				check(key, pm)
			}
		}
		for _, key := range []string{"name", "allowed_communication_protocols", "allowed_hosts"} {
			check(key, base[key].(map[string]any))
		}

		m := with("zz_unknown_field", "x")
		ct, err := parses(m)
		if err != nil || !slices.Contains(ct.Unknown, "zz_unknown_field") {
			t.Errorf("%s: ParseTemplate with an unknown field: %v, unknown %v", e.where, err, ct.Unknown)
		}
		if err := valid(loose.template, m); err != nil {
			t.Errorf("%s: the schema refuses an unknown field: %v", e.where, err)
		}
		if err := valid(strict.template, m); err == nil {
			t.Errorf("%s: the strict schema takes an unknown field", e.where)
		}
	}
	// Every example has its fields (about ten each) changed.
	if mutations < 10*len(templates) {
		t.Errorf("only %d changed templates from %d examples", mutations, len(templates))
	}
	t.Logf("%d example templates, %d changed ones", len(templates), mutations)
}

// TestGatewaySchemaAgrees holds the gateway part of the schema to
// ApplyGateway, key by key: a good value of the key's type (and null) is
// taken by both; a value of another JSON type, an integer out of its
// bounds, a duration that is not one and a log setting utcpd does not
// know are refused by both.
func TestGatewaySchemaAgrees(t *testing.T) {
	s := compileSchemas(t, true).gateway
	apply := func(section string) []manuals.Problem {
		var st Settings
		errs, warnings := ApplyGateway(&st, &manuals.Config{Path: "c.json", Dir: t.TempDir(), Gateway: json.RawMessage(section)}, nil, true)
		return append(errs, warnings...)
	}
	good := map[reflect.Type][]string{
		reflect.TypeFor[string]():           {`"x"`},
		reflect.TypeFor[[]string]():         {`["a", "b"]`, `[]`},
		reflect.TypeFor[time.Duration]():    {`"2s"`, `"1h30m"`, `"+1.5m"`, `90`, `0.25`},
		reflect.TypeFor[int]():              {`1`, `5`},
		reflect.TypeFor[int64]():            {`1`, `7`},
		reflect.TypeFor[json.RawMessage]():  {`[{"kind": "deny_all"}]`, `[]`},
		reflect.TypeFor[codemode.Options](): {`{"max_timeout": "1m", "enabled": false, "max_tool_calls": 10}`, `{}`},
		reflect.TypeFor[MCPSection]():       {`{"codemode": true, "native_names": ["m.s"]}`, `{}`, `{"input_timeout": "90s", "max_input_calls": 3}`},
		reflect.TypeFor[[]ratelimit.Rule](): {`[]`, `[{"rate": "5/s"}]`, `[{"max_concurrent": 2}, {"name": "ci", "principal": "ci-bot", "tools": "github.*", "manuals": "g*", "rate": " 100 / m", "burst": 10, "max_concurrent": 4}, {"rate": "20/10s"}, {"rate": "3/1m30s"}]`},
		reflect.TypeFor[Toolsets](): {`{}`, `{"mini": {"include": ["demo.add"], "rename": {"demo.add": "plus"}}}`,
			`{"gh": {"include": ["github.*"], "exclude": ["github.admin*"], "tags": ["read"], "hidden": {"github.repos/list": {"owner": "acme"}},
			  "description": {"github.repos/list": "List acme's repositories."}, "annotations": {"readOnlyHint": true}, "discovery": "search"}}`},
	}
	bad := map[reflect.Type][]string{
		reflect.TypeFor[string]():           {`5`, `["x"]`, `{}`},
		reflect.TypeFor[[]string]():         {`"a,b"`, `[1]`, `{}`},
		reflect.TypeFor[time.Duration]():    {`"soon"`, `"5"`, `"-1s"`, `0`, `-3`, `true`},
		reflect.TypeFor[int]():              {`0`, `-1`, `1.5`, `"5"`},
		reflect.TypeFor[int64]():            {`0`, `-1`, `"7"`},
		reflect.TypeFor[json.RawMessage]():  {`{"kind": "deny_all"}`, `"deny_all"`},
		reflect.TypeFor[codemode.Options](): {`5`, `{"max_timout": "1m"}`, `{"enabled": "no"}`, `{"max_tool_calls": 0}`, `{"default_timeout": null}`},
		reflect.TypeFor[MCPSection]():       {`5`, `{"codmode": true}`, `{"codemode": "yes"}`, `{"native_names": ["nodot"]}`, `{"max_input_calls": 0}`, `{"input_timeout": "soon"}`},
		reflect.TypeFor[[]ratelimit.Rule](): {`{"rate": "5/s"}`, `[{"tools": "x"}]`, `[{"rate": "5/d"}]`, `[{"rate": "0/s"}]`, `[{"rate": "5/s", "burts": 1}]`,
			`[{"rate": "5/s", "burst": "ten"}]`, `[{"max_concurrent": 1, "burst": 1}]`, `[{"max_concurrent": -1}]`, `[{"rate": "5/s", "name": "a b"}]`, `[5]`},
		reflect.TypeFor[Toolsets](): {`5`, `["mini"]`, `{"mini": {"includ": ["a"]}}`, `{"bad name": {"include": ["a"]}}`,
			`{"mini": {"include": "a"}}`, `{"mini": {"include": ["a"], "discovery": "list"}}`,
			`{"mini": {"include": ["a"], "rename": {"a": "no spaces"}}}`, `{"mini": {"include": ["a"], "annotations": {"readOnly": true}}}`},
	}
	overrides := map[string]struct{ good, bad []string }{
		"log_format":      {[]string{`"text"`, `"json"`}, []string{`"xml"`, `"JSON "`}},
		"log_level":       {[]string{`"debug"`, `"INFO"`, `"Warn+2"`, `"error-4"`}, []string{`"loud"`, `"info+"`, `"warning"`}},
		"store_max_conns": {[]string{`1`, `1000`}, []string{`1001`, `0`}},
		"audit_max_rows":  {[]string{`0`, `5`}, []string{`-1`, `"7"`}},
		"audit_max_bytes": {[]string{`0`, `1048576`}, []string{`-1`, `"1GB"`}},
		"pin_default":     {[]string{`"off"`, `"warn"`, `"hold"`}, []string{`"x"`, `"HOLD"`}},
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		key := jsonName(f)
		if key == "" {
			continue
		}
		goods, bads := good[f.Type], bad[f.Type]
		if len(goods) == 0 {
			t.Errorf("%s: no samples of Go type %s; add them", key, f.Type)
		}
		if o, ok := overrides[key]; ok {
			goods, bads = o.good, append(slices.DeleteFunc(slices.Clone(bads), func(v string) bool { return slices.Contains(o.good, v) }), o.bad...)
		}
		if f.Type == reflect.TypeFor[json.RawMessage]() && key != "guards" {
			t.Errorf("%s: a new array key; give it samples", key)
		}
		for _, v := range append(goods, `null`) {
			section := `{"` + key + `": ` + v + `}`
			if ps := apply(section); len(ps) > 0 {
				t.Errorf("ApplyGateway(%s): %v", section, ps)
			}
			if err := check(s, section); err != nil {
				t.Errorf("the schema refuses %s: %v", section, err)
			}
		}
		for _, v := range bads {
			section := `{"` + key + `": ` + v + `}`
			if ps := apply(section); len(ps) == 0 {
				t.Errorf("ApplyGateway takes %s; the sample is wrong", section)
			}
			if err := check(s, section); err == nil {
				t.Errorf("the schema takes %s, which ApplyGateway refuses", section)
			}
		}
	}
}

// TestAuthSchemaAgrees holds the auth part of the schema (authRules,
// authEnums) to transports.ValidateAuth: each auth_type with its
// required fields is valid to both, and without one of them invalid to
// both; the listed values of location, ownership and grant_type are
// taken by both, others refused by both.
func TestAuthSchemaAgrees(t *testing.T) {
	s := compileSchemas(t, false).auth
	agree := func(auth map[string]any, want bool) {
		t.Helper()
		raw, _ := json.Marshal(auth)
		var a utcp.Auth
		_ = json.Unmarshal(raw, &a)
		verr := transports.ValidateAuth(&a)
		serr := check(s, string(raw))
		if (verr == nil) != want || (serr == nil) != want {
			t.Errorf("%s: ValidateAuth says %v, the schema says %v; want valid=%v", raw, verr, serr, want)
		}
	}
	minimal := func(r authRule) map[string]any {
		m := map[string]any{"auth_type": r.typ}
		for _, f := range r.required {
			m[f] = "${SECRET}"
		}
		return m
	}
	with := func(m map[string]any, k string, v any) map[string]any {
		out := map[string]any{}
		for kk, vv := range m {
			out[kk] = vv
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	for _, r := range authRules {
		m := minimal(r)
		agree(m, true)
		for _, f := range r.required {
			agree(with(m, f, nil), false)
			agree(with(m, f, ""), false)
		}
		for _, g := range r.grantTypes {
			agree(with(m, "grant_type", g), true)
		}
		agree(with(m, "grant_type", "password"), false)
		for key, values := range authEnums {
			for _, v := range values {
				agree(with(m, key, v), true)
			}
			agree(with(m, key, "somewhere"), false)
		}
		for key, values := range r.enums {
			for _, v := range values {
				agree(with(m, key, v), true)
			}
			agree(with(m, key, "somewhere"), false)
		}
	}
	// A field another type narrows takes any value here.
	agree(map[string]any{"auth_type": utcp.AuthBasic, "username": "u", "location": "somewhere"}, true)
	agree(map[string]any{"auth_type": "token", "api_key": "k"}, false)
	agree(map[string]any{"api_key": "k"}, false)
}

// TestPostProcessorSchemaAgrees: the post-processors' parts agree with
// the configuration parser on the values it reads (limit_strings' limit,
// read as a JSON number or a numeric string; the filter lists).
func TestPostProcessorSchemaAgrees(t *testing.T) {
	s := compileSchemas(t, true).config
	for _, c := range []struct {
		entry string
		ok    bool
	}{
		{`{"tool_post_processor_type": "limit_strings", "limit": 10}`, true},
		{`{"tool_post_processor_type": "limit_strings", "limit": 0}`, true},
		{`{"tool_post_processor_type": "limit_strings", "limit": "10"}`, true},
		{`{"tool_post_processor_type": "limit_strings", "limit": 1e2}`, true},
		{`{"tool_post_processor_type": "limit_strings", "limit": null}`, true},
		{`{"tool_post_processor_type": "limit_strings", "limit": -1}`, false},
		{`{"tool_post_processor_type": "limit_strings", "limit": "-1"}`, false},
		{`{"tool_post_processor_type": "limit_strings", "limit": "many"}`, false},
		{`{"tool_post_processor_type": "limit_strings", "limit": true}`, false},
		{`{"tool_post_processor_type": "limit_strings", "exclude_tools": ["a.b"], "only_include_manuals": ["a"]}`, true},
		{`{"tool_post_processor_type": "limit_strings", "exclude_tools": "a.b"}`, false},
		{`{"tool_post_processor_type": "filter_dict", "exclude_keys": ["_links"], "only_include_keys": null}`, true},
		{`{"tool_post_processor_type": "filter_dict", "exclude_keys": [1]}`, false},
		{`{"tool_post_processor_type": "filter_dict", "only_include_keys": {"a": true}}`, false},
	} {
		cfg := `{"post_processing": [` + c.entry + `]}`
		v := load(t, t.TempDir(), cfg, true)
		serr := check(s, cfg)
		if v.ok() != c.ok || (serr == nil) != c.ok {
			t.Errorf("%s: utcpd says %v, the schema says %v; want valid=%v", c.entry, v.errs, serr, c.ok)
		}
	}
}
