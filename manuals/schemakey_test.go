package manuals

import (
	"slices"
	"testing"
)

// TestConfigSchemaKey: a configuration may name its JSON Schema with a
// top-level "$schema" key (docs/configuration.md) without a warning, in
// strict mode too, and in YAML; the key is not a manual or a variable.
// A misspelled "schema" still warns, pointing at "$schema".
func TestConfigSchemaKey(t *testing.T) {
	for _, tc := range []struct{ name, data string }{
		{"utcpd.json", `{"$schema": "./docs/config.schema.json", "manual_call_templates": [{"name": "a", "call_template_type": "cli", "commands": [{"command": "true"}]}]}`},
		{"utcpd.yaml", "$schema: https://example.com/config.schema.json\nmanual_call_templates:\n  - {name: a, call_template_type: cli, commands: [{command: \"true\"}]}\n"},
	} {
		for _, strict := range []bool{false, true} {
			cfg, err := ParseConfig(tc.name, []byte(tc.data), Options{Strict: strict})
			if err != nil {
				t.Fatalf("%s (strict %v): %v", tc.name, strict, err)
			}
			if len(cfg.Warnings) != 0 {
				t.Errorf("%s (strict %v): warnings %v", tc.name, strict, cfg.Warnings)
			}
			if len(cfg.ManualCallTemplates) != 1 || len(cfg.Variables) != 0 {
				t.Errorf("%s: templates %v, variables %v", tc.name, cfg.ManualCallTemplates, cfg.Variables)
			}
		}
	}

	cfg, err := ParseConfig("utcpd.json", []byte(`{"schema": "./docs/config.schema.json"}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].Kind != WarnUnknownField || cfg.Warnings[0].Suggestion != "$schema" {
		t.Errorf("warnings = %+v, want one unknown field suggesting $schema", cfg.Warnings)
	}
	if _, err := ParseConfig("utcpd.json", []byte(`{"schema": "x"}`), Options{Strict: true}); err == nil {
		t.Error("strict: an unknown schema key loaded")
	}
}

// TestKnownConfigKeys: KnownConfigKeys lists what ParseConfig checks
// against, and hands out copies.
func TestKnownConfigKeys(t *testing.T) {
	k := KnownConfigKeys()
	if !slices.Equal(k.Config, configFields) || !slices.Equal(k.LoaderLegacy, loaderLegacyFields) || len(k.PostProcessor) != len(postProcessorFields) {
		t.Fatalf("KnownConfigKeys() = %+v", k)
	}
	k.Config[0] = "changed"
	k.PostProcessor[FilterDictType][0] = "changed"
	if configFields[0] == "changed" || postProcessorFields[FilterDictType][0] == "changed" {
		t.Error("KnownConfigKeys shares its slices with the parser")
	}
}
