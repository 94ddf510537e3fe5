// Package docs runs the documentation: every fenced sh, bash, shell and
// console block of README.md (and the other markdown files at the
// repository root), docs/*.md and examples/**/*.md, so the commands the
// docs show cannot stop working unnoticed; and it validates the served
// OpenAPI description with a third-party validator.
//
// # How a markdown file runs
//
// Each file is one session, as a reader following it in one terminal:
// its blocks run in document order in one bash process (set -e, pipefail)
// from a fresh sandbox — a working directory that looks like the
// repository (its top-level entries linked, examples/ copied), a fresh
// HOME (so a fresh default data dir and admin token) and no UTCPD_*
// variables. bin/utcpd and utcpd on PATH are the utcpd built from the
// tree; `go run ./cmd/utcpd` and `go run ./examples/servers/NAME` run the
// binaries built from the tree. Every loopback address with a fixed port
// (127.0.0.1:8787, localhost:8081, ...) in the commands and in the copied
// examples is moved to a free port, consistently, so the test never
// meets another daemon on this machine; $UTCPD_SERVER points at the
// moved 8787, and a `utcpd serve` that would listen on the default gets
// $UTCPD_LISTEN set to it.
//
// What the harness does beyond running the text:
//
//   - A command ending with & that starts `utcpd serve` is waited for
//     until its /readyz answers 200; one that starts a demo server (or
//     names a 127.0.0.1:PORT address) until that port accepts
//     connections. The harness cannot wait for any other background
//     command and says so.
//   - `utcpd serve` or a demo server in the foreground (which would run
//     forever) is started, waited for as above, stopped with SIGTERM and
//     must exit 0 (a demo server may also die of the signal).
//   - curl is called with --fail-with-body, so an HTTP error fails the
//     block.
//   - go test, npm ci and make are checked, not run (see check_test.go):
//     running the suite from inside the suite would only cost time.
//   - npx runs only with UTCPD_NPM_PEERS=1, offline, from the packages
//     pinned in testdata/peer (the version the docs name must be the one
//     pinned there); without it the command is reported as not run.
//
// A block passes when every command exits 0 (or the exit directive's
// status for its last command), its output contains each expected text,
// and no output shows a Go panic. Directives are HTML comments on the
// lines just before a block, invisible to readers:
//
//	<!-- docs-test: skip (REASON) -->  not run; the reason is required
//	<!-- docs-test: expect TEXT -->    the output contains TEXT, ignoring whitespace
//	<!-- docs-test: exit N -->         the last command exits N
//	<!-- docs-test: timeout 90s -->    the block may run that long (default 60s)
//
// A console block's $-lines are its commands and its other lines the
// output they must show. Adding a block to a doc needs nothing else.
//
// DOCS_TEST_KEEP=DIR copies each session (its script, sandbox and every
// block's output) into DIR, to see what ran.
package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// built is the binaries built from the tree once per test process.
var built struct {
	once sync.Once
	dir  string // utcpd and the demo servers, named after their folders
	// goEnv is GOCACHE, GOMODCACHE and GOPATH as NAME=VALUE, so that a
	// go command a doc runs under the sandbox's fresh HOME uses the
	// caches it would have used.
	goEnv []string
	err   error
}

// binaries builds utcpd and every demo server of examples/servers into
// one folder and returns it.
func binaries(t *testing.T, root string) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "utcpd-docs-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/utcpd", "./examples/servers/...")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
			return
		}
		names := []string{"GOCACHE", "GOMODCACHE", "GOPATH"}
		out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
		if err != nil {
			built.err = fmt.Errorf("go env: %w", err)
			return
		}
		for i, v := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if i < len(names) && v != "" {
				built.goEnv = append(built.goEnv, names[i]+"="+v)
			}
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// repoRoot is the folder holding go.mod above the test's folder.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// docFiles returns the markdown files the test runs, relative to root:
// *.md at the root, docs/*.md and every *.md under examples/.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = filepath.ToSlash(rel)
	}
	sort.Strings(files)
	return files
}

// TestDocs runs the shell blocks of every markdown file (one subtest per
// file, named after it), as the package documentation describes.
func TestDocs(t *testing.T) {
	root := repoRoot(t)
	files := docFiles(t, root)
	if len(files) == 0 {
		t.Fatal("no markdown files found")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseMarkdown(f, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			for _, p := range runDoc(t, root, blocks) {
				t.Error(p)
			}
		})
	}
}

// TestReadmeRuns keeps the harness honest about the one file every user
// follows: the parser finds the README's runnable blocks (the quickstart
// alone has five) and at least one checks its output.
func TestReadmeRuns(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parseMarkdown("README.md", data)
	if err != nil {
		t.Fatal(err)
	}
	run := 0
	for _, b := range blocks {
		if b.Skip == "" {
			run++
		}
	}
	if run < 5 {
		t.Errorf("README.md: %d runnable shell blocks; the quickstart alone has 5", run)
	}
	var expects int
	for _, b := range blocks {
		expects += len(b.Expect)
	}
	if expects == 0 {
		t.Errorf("README.md: no block checks its output")
	}
}
