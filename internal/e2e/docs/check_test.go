package docs

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The commands the docs test checks instead of running them, because
// running them is the job of the test suite itself (go test), of .ci/run
// (npm ci) or is either of these (make):
//
//   - go test FLAGS PACKAGES: every flag is one go test knows, every
//     package folder exists, and in each package -run, -bench and -fuzz
//     (when not ^$) match at least one test, benchmark or fuzz target
//     declared in its _test.go files.
//   - npm ci --prefix DIR: DIR holds package.json and package-lock.json.
//   - make TARGET...: the Makefile has each target.

// checked reports whether the command whose words (assignments removed)
// are w is one the docs test checks rather than runs.
func checked(w []string) bool {
	switch {
	case len(w) >= 2 && w[0] == "go" && w[1] == "test":
		return true
	case len(w) >= 2 && w[0] == "npm" && w[1] == "ci":
		return true
	case len(w) >= 1 && w[0] == "make":
		return true
	}
	return false
}

// check checks a command checked reports true for, against the
// repository at root.
func check(root string, w []string) error {
	switch w[0] {
	case "go":
		return checkGoTest(root, w[2:])
	case "npm":
		return checkNPMCI(root, w[2:])
	default:
		return checkMake(root, w[1:])
	}
}

// goTestFlags are the go test flags the docs may use: true takes a
// value.
var goTestFlags = map[string]bool{
	"run": true, "bench": true, "fuzz": true, "skip": true, "count": true, "benchtime": true,
	"fuzztime": true, "timeout": true, "cpu": true, "parallel": true, "shuffle": true, "tags": true,
	"list": true, "coverprofile": true, "o": true,
	"v": false, "race": false, "benchmem": false, "short": false, "failfast": false, "json": false,
	"cover": false,
}

func checkGoTest(root string, args []string) error {
	patterns := map[string]string{}
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takes, known := goTestFlags[name]
		if !known {
			return fmt.Errorf("go test: the flag %s is not one the docs test knows (extend goTestFlags if go test has it)", a)
		}
		if takes && !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("go test: %s needs a value", a)
			}
			i++
			value = args[i]
		}
		patterns[name] = value
	}
	if len(pkgs) == 0 {
		pkgs = []string{"."}
	}
	kinds := map[string][]string{"run": {"Test", "Example", "Fuzz"}, "bench": {"Benchmark"}, "fuzz": {"Fuzz"}}
	for _, pkg := range pkgs {
		if !strings.HasPrefix(pkg, ".") {
			return fmt.Errorf("go test: the package %q is not a ./relative path", pkg)
		}
		dir, all := strings.CutSuffix(strings.TrimSuffix(pkg, "/"), "/...")
		full := filepath.Join(root, filepath.FromSlash(dir))
		if st, err := os.Stat(full); err != nil || !st.IsDir() {
			return fmt.Errorf("go test: the package folder %s does not exist", pkg)
		}
		if all {
			continue
		}
		funcs, err := testFuncs(full)
		if err != nil {
			return fmt.Errorf("go test %s: %w", pkg, err)
		}
		if len(funcs) == 0 {
			return fmt.Errorf("go test: %s has no tests", pkg)
		}
		for flag, prefixes := range kinds {
			pat, ok := patterns[flag]
			if !ok || pat == "^$" || pat == "" {
				continue
			}
			top, _, _ := strings.Cut(pat, "/")
			re, err := regexp.Compile(top)
			if err != nil {
				return fmt.Errorf("go test: -%s %q: %w", flag, pat, err)
			}
			if !anyMatch(funcs, prefixes, re) {
				return fmt.Errorf("go test: -%s %q matches no %s function in %s", flag, pat, strings.Join(prefixes, "/"), pkg)
			}
		}
	}
	return nil
}

// anyMatch reports whether a function with one of the prefixes matches re.
func anyMatch(funcs []string, prefixes []string, re *regexp.Regexp) bool {
	for _, f := range funcs {
		for _, p := range prefixes {
			if strings.HasPrefix(f, p) && re.MatchString(f) {
				return true
			}
		}
	}
	return false
}

// testFuncs returns the top-level functions of dir's _test.go files
// whatever their build tags.
func testFuncs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names, nil
}

func checkNPMCI(root string, args []string) error {
	prefix := "."
	for i := 0; i < len(args); i++ {
		if v, ok := strings.CutPrefix(args[i], "--prefix="); ok {
			prefix = v
		} else if args[i] == "--prefix" && i+1 < len(args) {
			prefix = args[i+1]
			i++
		}
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(prefix), f)); err != nil {
			return fmt.Errorf("npm ci --prefix %s: no %s there", prefix, f)
		}
	}
	return nil
}

func checkMake(root string, args []string) error {
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return fmt.Errorf("make: %w", err)
	}
	targets := 0
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		targets++
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `\s*:`).Match(data) {
			return fmt.Errorf("make %s: the Makefile has no target %s", a, a)
		}
	}
	if targets == 0 && !regexp.MustCompile(`(?m)^all\s*:`).Match(data) {
		return fmt.Errorf("make: the Makefile has no default target all")
	}
	return nil
}

// checkNPX checks the package an npx command runs (words w, assignments
// removed) against the docs' npm peer: the package@version the docs name
// must be a dependency of testdata/peer/package.json at that version, so
// that the test runs what the reader would.
func checkNPX(peerDir string, w []string) (pkg string, err error) {
	spec := ""
	for _, a := range w[1:] {
		if !strings.HasPrefix(a, "-") {
			spec = a
			break
		}
	}
	if spec == "" {
		return "", fmt.Errorf("npx without a package")
	}
	name, version := spec, ""
	if at := strings.LastIndex(spec, "@"); at > 0 {
		name, version = spec[:at], spec[at+1:]
	}
	if version == "" {
		return "", fmt.Errorf("npx %s: pin the version (npx %s@VERSION), as testdata/peer does", spec, name)
	}
	data, err := os.ReadFile(filepath.Join(peerDir, "package.json"))
	if err != nil {
		return "", err
	}
	var pj struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(data, &pj); err != nil {
		return "", fmt.Errorf("%s/package.json: %w", peerDir, err)
	}
	if got, ok := pj.Dependencies[name]; !ok || got != version {
		return "", fmt.Errorf("npx %s: internal/e2e/docs/testdata/peer/package.json pins %s at %q; pin the same version in both", spec, name, got)
	}
	return name, nil
}
