package utcpd_test

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/utcpd/utcpd"

// allowed is the module's package graph, one row per tree: the packages a
// row covers may import the module's packages its "may import" list
// names, and no others (the standard library and third-party modules are
// not checked here, except for utcp). Rows are tried in order and the
// first whose pattern matches a package applies; a package no row covers
// fails the test, so a new tree gets its row when it is added.
//
// Patterns: "x" is the package x alone, "x/..." is x and every package
// under it, "x/*" is every package one level under x (not x itself).
// Only non-test imports are checked: tests may import fixtures and
// servers from anywhere.
var allowed = []struct {
	pkgs      string
	mayImport []string
}{
	{"", nil}, // the module root holds only this test
	{"utcp", nil},
	{"manuals", []string{"utcp"}},
	{"registry/...", []string{"registry", "utcp"}},

	{"transports", []string{"utcp", "manuals", "internal/netguard"}},
	{"transports/all", []string{"transports/*"}},
	{"transports/transporttest", []string{"transports", "transports/transporttest/fixture", "utcp"}},
	{"transports/transporttest/fixture", []string{"utcp"}},
	// The helpers the transports share (HTTP client and calls, envelope,
	// sockets, sessions, process environments), private to transports/.
	{"transports/internal/...", []string{"transports", "transports/internal/...", "transports/oauth2", "utcp", "manuals",
		"internal/netguard", "internal/jsonx", "internal/tracing"}},
	// The oauth2 token cache is public: the gateway shares one across its
	// transports.
	{"transports/oauth2", []string{"transports", "transports/internal/httpclient", "utcp"}},
	// cli shares the bash lexer with holguard.
	{"transports/cli", []string{"transports", "transports/internal/...", "utcp", "manuals", "internal/netguard", "internal/jsonx",
		"internal/shellword"}},
	{"transports/*", []string{"transports", "transports/internal/...", "transports/oauth2", "utcp", "manuals", "internal/netguard",
		"internal/jsonx", "internal/eventstream", "internal/tracing"}},

	{"guard/holguard", []string{"guard/...", "utcp", "internal/shellword"}},
	{"guard/...", []string{"guard/...", "utcp", "internal/tracing", "internal/glob"}},
	{"gateway/...", []string{"gateway/...", "guard", "guard/review", "registry", "manuals", "transports", "transports/oauth2", "utcp",
		"internal/netguard", "internal/tracing", "internal/glob", "internal/jsonx"}},
	{"api/...", []string{"api/...", "gateway/...", "guard/review", "registry", "transports", "utcp", "internal/jsonx", "internal/tracing"}},
	{"store/...", []string{"store/...", "gateway/audit", "guard/review", "registry", "utcp"}},
	// The demo servers speak each protocol for the conformance suite
	// with their own code, never the client's: of transports/ they use
	// only the fixture tools.
	{"examples/...", []string{"examples/...", "transports/transporttest/fixture", "utcp", "proto/..."}},
	{"proto/...", nil},

	{"internal/netguard", []string{"utcp"}},
	{"internal/jsonx", nil},
	// The one name-pattern syntax and matcher (policy rules, key scopes,
	// toolsets, rate limits).
	{"internal/glob", nil},
	// The text/event-stream reader: transports read with it, and so do the
	// REST front's benchmarks, which is why it is not transports/internal.
	{"internal/eventstream", []string{"transports"}},
	{"internal/shellword", nil},
	// The trace context helpers (OpenTelemetry API only): the fronts,
	// the gateway, the review queue and the transports make spans and
	// pass traceparent on with them, so every layer may import it; it
	// imports only utcp.
	{"internal/tracing", []string{"utcp"}},
	// The OpenTelemetry SDK and exporters, set up from OTEL_* by the
	// daemon and `utcpd mcp` only.
	{"internal/telemetry", []string{"internal/tracing"}},
	{"internal/pgtest", []string{"utcp"}},
	{"internal/e2e", nil},
	{"internal/e2e/openapi", nil},
	{"internal/e2e/docs", nil},       // tests only: the docs' commands and /openapi.json
	{"internal/mcpconformance", nil}, // tests only
	{"internal/loadgen", nil},
	// make bench-compare: builds and drives the daemon from outside, as a
	// user's load generator would.
	{"internal/benchcompare", []string{"internal/loadgen"}},
	{"internal/protogen", nil},
	{"internal/schematest", nil},

	// The manual sources and the daemon's run loop, imported by cmd only.
	{"sources", []string{"gateway", "manuals", "registry", "transports", "utcp"}},
	{"daemon", []string{"api/...", "gateway/...", "guard/...", "registry/...", "store/...", "sources",
		"manuals", "transports", "transports/all", "utcp", "internal/netguard", "internal/telemetry"}},

	{"cmd/...", []string{"api/...", "gateway/...", "guard/...", "registry/...", "store/...", "daemon", "sources",
		"manuals", "transports", "transports/all", "utcp", "internal/netguard", "internal/telemetry", "internal/tracing"}},
}

// TestDependencyDirection keeps the package graph of the table above:
// utcp ← manuals ← registry ← gateway ← api ← cmd/utcpd; the contract
// package transports imports only utcp, manuals and internal/netguard; a
// transport imports only the contract, the shared helpers
// (transports/internal/..., transports/oauth2, internal/jsonx,
// internal/eventstream, internal/tracing), utcp, manuals and
// internal/netguard; internal/tracing (OpenTelemetry API only) may be
// used by every layer and imports only utcp, while the SDK
// (internal/telemetry) is for daemon and cmd alone; nothing
// outside transports/ imports transports/internal; a guard only guard and
// utcp; nothing imports cmd/; utcp imports only the standard library.
func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	used := make([]bool, len(allowed))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := rel(fields[0]), fields[1:]
		row := -1
		for i, r := range allowed {
			if match(r.pkgs, pkg) {
				row = i
				break
			}
		}
		if row < 0 {
			t.Errorf("%s: no row of deps_test.go's table covers it; add one", fields[0])
			continue
		}
		used[row] = true
		for _, imp := range imports {
			if !strings.HasPrefix(imp, mod) {
				if pkg == "utcp" && strings.Contains(strings.Split(imp, "/")[0], ".") {
					t.Errorf("utcp imports %s: it must use the standard library only", imp)
				}
				continue
			}
			if match("transports/internal/...", rel(imp)) && !match("transports/...", pkg) {
				t.Errorf("%s imports %s: only packages under transports/ may import transports/internal", fields[0], imp)
			}
			if !mayImport(allowed[row].mayImport, rel(imp)) {
				t.Errorf("%s imports %s: row %q may import only %s", fields[0], imp, allowed[row].pkgs, list(allowed[row].mayImport))
			}
		}
	}
	for i, r := range allowed {
		if !used[i] {
			t.Errorf("row %q covers no package; remove it", r.pkgs)
		}
	}
}

// rel returns an import path of the module relative to the module root
// ("" for the root itself).
func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, mod), "/")
}

// match reports whether pattern covers the relative package path pkg.
func match(pattern, pkg string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
	}
	if parent, ok := strings.CutSuffix(pattern, "/*"); ok {
		rest, ok := strings.CutPrefix(pkg, parent+"/")
		return ok && rest != "" && !strings.Contains(rest, "/")
	}
	return pattern == pkg
}

func mayImport(patterns []string, dep string) bool {
	for _, p := range patterns {
		if match(p, dep) {
			return true
		}
	}
	return false
}

func list(patterns []string) string {
	if len(patterns) == 0 {
		return "nothing of the module"
	}
	return strings.Join(patterns, ", ")
}
