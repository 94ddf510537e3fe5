package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateSchema rewrites docs/config.schema.json and
// docs/config.strict.schema.json from utcpd config schema instead of
// comparing them: go test ./cmd/utcpd -run '^TestConfigSchemaFiles$' -update
// (go generate ./daemon runs it).
var updateSchema = flag.Bool("update", false, "rewrite docs/config*.schema.json from utcpd config schema")

// TestConfigSchemaFiles: the published schemas are what utcpd config
// schema prints (and --strict), so they cannot fall behind the code;
// daemon's tests hold the schema itself to the decoders.
func TestConfigSchemaFiles(t *testing.T) {
	for file, args := range map[string][]string{
		"config.schema.json":        {"config", "schema"},
		"config.strict.schema.json": {"config", "schema", "--strict"},
	} {
		stdout, stderr, code := cli(t, t.TempDir(), nil, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("utcpd %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
		path := filepath.Join("..", "..", "docs", file)
		if *updateSchema {
			if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, []byte(stdout)) {
			t.Errorf("docs/%s differs from utcpd %s: run go generate ./daemon (or make schema) and commit the result", file, strings.Join(args, " "))
		}
	}
	if _, _, code := cli(t, t.TempDir(), nil, "config", "schema", "extra"); code != exitUsage {
		t.Errorf("utcpd config schema extra: exit %d, want %d", code, exitUsage)
	}
}

// TestConfigSchemaMachineIndependent: the schema does not depend on the
// environment (the data folder's default does), so the published file is
// the same wherever it is generated.
func TestConfigSchemaMachineIndependent(t *testing.T) {
	a, _, _ := cli(t, t.TempDir(), []string{"HOME=/nonexistent-a", "XDG_STATE_HOME=/state-a"}, "config", "schema")
	b, _, _ := cli(t, t.TempDir(), []string{"HOME=/nonexistent-b", "XDG_STATE_HOME=/state-b"}, "config", "schema")
	if a == "" || a != b {
		t.Errorf("utcpd config schema depends on HOME or XDG_STATE_HOME")
	}
	if strings.Contains(a, "state-a") || strings.Contains(a, "nonexistent") {
		t.Errorf("the schema names a machine's folder")
	}
}
