package all_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/all"
)

// module is the import path prefix of the repository's packages.
const module = "github.com/utcpd/utcpd/"

// root is the repository root, seen from this package's folder.
var root = filepath.Join("..", "..")

// dir returns the package folder of a call_template_type
// ("streamable_http" lives in transports/streamablehttp).
func dir(typ string) string { return strings.ReplaceAll(typ, "_", "") }

// notTransports are the folders of transports/ that hold no transport.
var notTransports = []string{"all", "internal", "oauth2", "transporttest"}

// methodOrder is the order of the Transport methods in transport.go
// (CONTRIBUTING.md); required marks the ones every transport has.
var methodOrder = []struct {
	name     string
	required bool
}{
	{"RegisterManual", true},
	{"RegistrationKey", false},
	{"CallTool", true},
	{"CallToolStream", false},
	{"Release", true},
	{"Close", true},
}

// TestEveryTransportIsComplete holds every transport to the ten steps of
// CONTRIBUTING.md ("Adding a transport"), in both directions: every
// folder of transports/ with a transport.go is imported by
// transports/all and registered under its folder's name, and every
// registered transport has doc.go, template.go (Type, Template,
// ParseTemplate) and transport.go (Info, the Transport type, New, then the methods in
// the documented order), Endpoints in endpoints.go when it has one, a
// conformance_test.go that calls transporttest.Run with its Info, tests
// that serve its examples/servers/<type> demo, and a section in
// docs/transports.md with an example manual call template.
func TestEveryTransportIsComplete(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join(root, "docs", "transports.md"))
	if err != nil {
		t.Fatalf("docs/transports.md: %v", err)
	}
	types := transports.Default.Types()
	if len(types) < 4 {
		t.Fatalf("only %d transports registered: %v", len(types), types)
	}

	// Step 9, and the registry: every transport folder joins.
	imported := allImports(t)
	folders, err := os.ReadDir(filepath.Join(root, "transports"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range folders {
		if !e.IsDir() || slices.Contains(notTransports, e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "transports", e.Name(), "transport.go")); err != nil {
			continue // not a transport (yet): the checks below need the registration
		}
		if !imported[module+"transports/"+e.Name()] {
			t.Errorf("transports/%s has a transport.go but transports/all/all.go does not import it", e.Name())
		}
		if !slices.ContainsFunc(types, func(typ string) bool { return dir(typ) == e.Name() }) {
			t.Errorf("transports/%s registers no call_template_type named after its folder (init must call transports.MustRegister(Info))", e.Name())
		}
	}

	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			pkgDir := filepath.Join(root, "transports", dir(typ))
			info, _ := transports.Default.Lookup(typ)
			if info.Template == nil {
				t.Errorf("Info.Template is not set: field lists and did-you-mean hints need it")
			}
			if !imported[module+"transports/"+dir(typ)] {
				t.Errorf("transports/all/all.go does not import transports/%s", dir(typ))
			}
			// One shape for every transport folder (CONTRIBUTING.md).
			for _, f := range []string{"doc.go", "template.go", "transport.go"} {
				if _, err := os.Stat(filepath.Join(pkgDir, f)); err != nil {
					t.Errorf("transports/%s has no %s (every transport folder has doc.go, template.go, transport.go)", dir(typ), f)
				}
			}
			src, tests := parsePackage(t, pkgDir)
			checkShape(t, dir(typ), src)

			conf, err := os.ReadFile(filepath.Join(pkgDir, "conformance_test.go"))
			if err != nil {
				t.Errorf("no conformance test: %v", err)
			} else {
				if !strings.Contains(string(conf), "transporttest.Run(") {
					t.Errorf("transports/%s/conformance_test.go does not call transporttest.Run", dir(typ))
				}
				if pkg := packageName(src); !regexp.MustCompile(`\bInfo:\s+\w+\.Info\b`).Match(conf) {
					t.Errorf("transports/%s/conformance_test.go does not hand the suite %s.Info", dir(typ), pkg)
				}
			}

			demo := filepath.Join(root, "examples", "servers", dir(typ))
			if st, err := os.Stat(demo); err != nil || !st.IsDir() {
				t.Errorf("no example server in examples/servers/%s", dir(typ))
			} else {
				if _, err := os.Stat(filepath.Join(demo, "main.go")); err != nil {
					if m, _ := filepath.Glob(filepath.Join(demo, "*.json")); len(m) == 0 {
						t.Errorf("examples/servers/%s has neither a main.go nor a manual to serve", dir(typ))
					}
				}
				if !usesDemo(tests, dir(typ)) {
					t.Errorf("no test of transports/%s serves examples/servers/%s (import its server package, or name its files)", dir(typ), dir(typ))
				}
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

// allImports returns the import paths of transports/all/all.go.
func allImports(t *testing.T) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "all.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		out[p] = true
	}
	return out
}

// parsePackage parses the Go files of a folder, by base name: the
// package's own files and its test files.
func parsePackage(t *testing.T, pkgDir string) (src, tests map[string]*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(pkgDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	src, tests = map[string]*ast.File{}, map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if strings.HasSuffix(p, "_test.go") {
			tests[filepath.Base(p)] = f
		} else {
			src[filepath.Base(p)] = f
		}
	}
	return src, tests
}

func packageName(src map[string]*ast.File) string {
	for _, f := range src {
		return f.Name.Name
	}
	return ""
}

// checkShape checks where the package declares what (CONTRIBUTING.md):
// template.go Type, Template and ParseTemplate; transport.go Info, then the Transport
// type, then New, then the Transport methods of methodOrder in that
// order; endpoints.go the Endpoints method, when there is one.
func checkShape(t *testing.T, folder string, src map[string]*ast.File) {
	t.Helper()
	type place struct {
		file string
		pos  token.Pos
	}
	decls := map[string]place{}   // "var Info", "type Transport", "func New", "const Type", …
	methods := map[string]place{} // of Transport, by name
	endpoints := []string{}       // files declaring an Endpoints method
	for name, f := range src {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decls["func "+d.Name.Name] = place{name, d.Pos()}
					continue
				}
				if d.Name.Name == "Endpoints" {
					endpoints = append(endpoints, name)
				}
				if receiver(d) == "Transport" {
					methods[d.Name.Name] = place{name, d.Pos()}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						decls["type "+s.Name.Name] = place{name, s.Pos()}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							decls[d.Tok.String()+" "+n.Name] = place{name, n.Pos()}
						}
					}
				}
			}
		}
	}
	for _, what := range []string{"const Type", "type Template", "func ParseTemplate"} {
		if p, ok := decls[what]; !ok || p.file != "template.go" {
			t.Errorf("transports/%s: %s is not declared in template.go (found in %q)", folder, what, p.file)
		}
	}
	last, lastName := token.NoPos, ""
	for _, what := range []string{"var Info", "type Transport", "func New"} {
		p, ok := decls[what]
		switch {
		case !ok || p.file != "transport.go":
			t.Errorf("transports/%s: %s is not declared in transport.go (found in %q)", folder, what, p.file)
			continue
		case p.pos < last:
			t.Errorf("transports/%s/transport.go: %s comes before %s (the order is Info, Transport, New, then the methods)", folder, what, lastName)
		}
		last, lastName = p.pos, what
	}
	for _, m := range methodOrder {
		p, ok := methods[m.name]
		switch {
		case !ok:
			if m.required {
				t.Errorf("transports/%s: Transport has no method %s", folder, m.name)
			}
			continue
		case p.file != "transport.go":
			t.Errorf("transports/%s: Transport.%s is in %s, not transport.go", folder, m.name, p.file)
			continue
		case p.pos < last:
			t.Errorf("transports/%s/transport.go: %s comes before %s (the order is %s)", folder, m.name, lastName, orderText())
		}
		last, lastName = p.pos, m.name
	}
	for _, f := range endpoints {
		if f != "endpoints.go" {
			t.Errorf("transports/%s: Endpoints is declared in %s, not endpoints.go", folder, f)
		}
	}
}

// receiver names the type of a method's receiver (pointer or not).
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	x := d.Recv.List[0].Type
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	if id, ok := x.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func orderText() string {
	names := make([]string, len(methodOrder))
	for i, m := range methodOrder {
		names[i] = m.name
		if !m.required {
			names[i] += " (if any)"
		}
	}
	return "New, " + strings.Join(names, ", ")
}

// usesDemo reports whether the package's tests reach the demo of folder:
// they import a package below examples/servers/<folder>, or build a path
// with the elements "examples", "servers", folder in that order.
func usesDemo(tests map[string]*ast.File, folder string) bool {
	prefix := module + "examples/servers/" + folder
	for _, f := range tests {
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return true
			}
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || found {
				return !found
			}
			var parts []string
			for _, a := range call.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					parts = append(parts, s)
				}
			}
			found = strings.Contains("/"+strings.Join(parts, "/")+"/", "/examples/servers/"+folder+"/")
			return !found
		})
		if found {
			return true
		}
	}
	return false
}
