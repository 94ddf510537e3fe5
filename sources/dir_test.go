package sources

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/utcpd/utcpd/transports/all"
)

func TestReadDirFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// A template without a name is named after the file.
	w, err := ReadDirFile(write("my-api.json", `{"call_template_type": "http", "url": "http://127.0.0.1:1/utcp"}`))
	if err != nil || w.Name != "my_api" || !strings.Contains(string(w.Raw), `"name":"my_api"`) {
		t.Fatalf("template: %+v, %v", w, err)
	}
	// A template keeps its own name; a legacy provider is normalised.
	w, err = ReadDirFile(write("x.json", `{"name": "legacy", "provider_type": "http", "url": "http://127.0.0.1:1/utcp", "http_method": "GET"}`))
	if err != nil || w.Name != "legacy" || !strings.Contains(string(w.Raw), `"call_template_type":"http"`) {
		t.Fatalf("legacy template: %+v, %v", w, err)
	}
	// A manual becomes a file template allowing its tools' protocols.
	path := write("tools.json", `{"utcp_version": "1.1.0", "tools": [{"name": "t", "tool_call_template": {"call_template_type": "cli", "commands": [{"command": "echo"}]}}]}`)
	w, err = ReadDirFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(w.Raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "tools", "call_template_type": "file", "file_path": path, "allowed_communication_protocols": []any{"file", "cli"}}
	if diff := cmp.Diff(want, tmpl); diff != "" || len(w.Extra) == 0 {
		t.Fatalf("manual template (-want +got):\n%s", diff)
	}
	// An OpenAPI document allows http.
	w, err = ReadDirFile(write("spec.json", `{"openapi": "3.0.0", "paths": {}}`))
	if err != nil || !strings.Contains(string(w.Raw), `["file","http"]`) {
		t.Fatalf("openapi: %+v, %v", w, err)
	}
	for name, content := range map[string]string{
		"broken.json":   `{"name": "x", `,
		"array.json":    `[1, 2]`,
		"neither.json":  `{"hello": "world"}`,
		"badtmpl.json":  `{"name": "x", "call_template_type": "http"}`,
		"badtools.json": `{"utcp_version": "1.1.0", "tools": [{"description": "no name"}]}`,
	} {
		if w, err := ReadDirFile(write(name, content)); err == nil {
			t.Errorf("%s: no error, got %+v", name, w)
		}
	}
}
