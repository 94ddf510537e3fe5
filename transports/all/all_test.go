package all_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/all"
)

// dir returns the package folder of a call_template_type
// ("streamable_http" lives in transports/streamablehttp).
func dir(typ string) string { return strings.ReplaceAll(typ, "_", "") }

// TestEveryTransportIsComplete fails when a registered transport lacks its
// conformance test, its example server or its section in
// docs/transports.md with a runnable example manual.
func TestEveryTransportIsComplete(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := os.ReadFile(filepath.Join(root, "docs", "transports.md"))
	if err != nil {
		t.Fatalf("docs/transports.md: %v", err)
	}
	types := transports.Default.Types()
	if len(types) < 4 {
		t.Fatalf("only %d transports registered: %v", len(types), types)
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			info, _ := transports.Default.Lookup(typ)
			if info.Template == nil {
				t.Errorf("Info.Template is not set: field lists and did-you-mean hints need it")
			}
			// One shape for every transport folder (CONTRIBUTING.md).
			for _, f := range []string{"doc.go", "template.go", "transport.go"} {
				if _, err := os.Stat(filepath.Join(root, "transports", dir(typ), f)); err != nil {
					t.Errorf("transports/%s has no %s (every transport folder has doc.go, template.go, transport.go)", dir(typ), f)
				}
			}
			conf, err := os.ReadFile(filepath.Join(root, "transports", dir(typ), "conformance_test.go"))
			if err != nil {
				t.Errorf("no conformance test: %v", err)
			} else if !strings.Contains(string(conf), "transporttest.Run(") {
				t.Errorf("transports/%s/conformance_test.go does not call transporttest.Run", dir(typ))
			}
			if st, err := os.Stat(filepath.Join(root, "examples", "servers", dir(typ))); err != nil || !st.IsDir() {
				t.Errorf("no example server in examples/servers/%s", dir(typ))
			}
			section := regexp.MustCompile("(?s)\n## `" + regexp.QuoteMeta(typ) + "`\n(.*?)(\n## |$)").FindSubmatch(docs)
			if section == nil {
				t.Errorf("docs/transports.md has no section \"## `%s`\"", typ)
				return
			}
			if !strings.Contains(string(section[1]), `"call_template_type": "`+typ+`"`) {
				t.Errorf("the docs section of %s has no example manual call template", typ)
			}
		})
	}
}
