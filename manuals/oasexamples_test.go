package manuals_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/manuals"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest"
)

// oasMethods are the operations the http call template can send; a path
// item's head, options and trace operations cannot become tools.
var oasMethods = []string{"get", "put", "post", "delete", "patch"}

// TestOASExamples converts the 60 example documents of the npm package
// @readme/oas-examples (Swagger 2.0, OpenAPI 3.0 and 3.1, JSON; pinned in
// testdata/peer; UTCPD_NPM_PEERS=1): each gives exactly one tool per
// GET, PUT, POST, DELETE and PATCH operation, counted here from the
// document itself (HEAD, OPTIONS and TRACE operations are left out: the
// http call template cannot send them), with unique names, and every tool
// call template is a valid http template.
func TestOASExamples(t *testing.T) {
	peer := transporttest.NPMPeerDir(t, "@readme/oas-examples")
	root := filepath.Join(peer.Modules, "@readme", "oas-examples")
	var files []string
	for _, v := range []string{"2.0", "3.0", "3.1"} {
		err := filepath.WalkDir(filepath.Join(root, v, "json"), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "openapi-workshop" { // fragments of a workshop, not examples
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".json") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) != 60 {
		t.Fatalf("%d example documents, want 60", len(files))
	}
	operations, tools, unnamed, cookieTools := 0, 0, 0, 0
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := manuals.DecodeDocument(data)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		ops, noID := countOperations(doc)
		// As if fetched from a server: relative server URLs (and documents
		// without any) resolve against it.
		m, err := manuals.ConvertOpenAPI(doc, manuals.OpenAPIOptions{SpecURL: "https://specs.example.com/" + filepath.ToSlash(rel)})
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		operations, tools, unnamed = operations+ops, tools+len(m.Tools), unnamed+noID
		if len(m.Tools) != ops {
			t.Errorf("%s: %d tools for %d operations", rel, len(m.Tools), ops)
		}
		var names []string
		for _, tool := range m.Tools {
			names = append(names, tool.Name)
			ct, err := utcphttp.ParseTemplate(tool.ToolCallTemplate.Raw)
			if err != nil {
				t.Errorf("%s: tool %s: %v", rel, tool.Name, err)
				continue
			}
			if spec := ct.Spec.(*utcphttp.Template); len(spec.CookieFields) > 0 {
				cookieTools++
			}
		}
		slices.Sort(names)
		if len(slices.Compact(names)) != len(m.Tools) {
			t.Errorf("%s: names are not unique: %v", rel, names)
		}
	}
	t.Logf("%d documents: %d operations (%d without operationId), %d tools, %d with cookie parameters", len(files), operations, unnamed, tools, cookieTools)
	if operations != tools || unnamed == 0 || cookieTools == 0 {
		t.Errorf("%d tools for %d operations (%d without operationId)", tools, operations, unnamed)
	}
}

// countOperations counts the operations of doc the http template can
// send (a path item given as a local $ref is followed), and those
// without an operationId.
func countOperations(doc map[string]any) (ops, noID int) {
	paths, _ := doc["paths"].(map[string]any)
	for _, v := range paths {
		item, _ := v.(map[string]any)
		if ref, ok := item["$ref"].(string); ok {
			item, _ = pointer(doc, ref).(map[string]any)
		}
		for _, method := range oasMethods {
			op, ok := item[method].(map[string]any)
			if !ok {
				continue
			}
			ops++
			if id, _ := op["operationId"].(string); id == "" {
				noID++
			}
		}
	}
	return ops, noID
}

// pointer resolves a local JSON pointer ("#/a/b") in doc.
func pointer(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, seg := range strings.Split(rest, "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		m, _ := cur.(map[string]any)
		cur = m[seg]
	}
	return cur
}
