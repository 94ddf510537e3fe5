package mcpconformance

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// column is one way of reaching the fixture.
type column struct {
	name   string // subtest name
	header string // table header
}

var (
	colDirect       = column{"direct", "direct"}
	colDirectBridge = column{"direct-stdio-bridge", "direct, stdio via the bridge"}
	colMCPStdio     = column{"utcpd-mcp-stdio-backend", "via /mcp + stdio"}
	colMCPHTTP      = column{"utcpd-mcp-http-backend", "via /mcp + http"}
	colCLI          = column{"utcpd-mcp-command", "via utcpd mcp"}
)

// expectation is what a scenario is expected to do through utcpd: pass
// or not on each of the three paths, and why it differs from direct.
type expectation struct {
	stdio, http, cli bool
	reason           string
}

// all three paths.
var passes = expectation{stdio: true, http: true, cli: true}

// Reasons a scenario differs from direct, short, for the table; the
// numbers are the items of issue 16, and docs/mcp.md explains each one:
//
//   - polling: no check runs anywhere (0/0, warnings only): go-sdk sends
//     priming events and retry only on 2025-11-25 streams and the
//     scenario's raw request announces 2025-03-26; through utcpd its raw
//     call of test_reconnection is an unknown tool.
const (
	setLevel   = "answered by the front, which filters the backend's logs by it (4)"
	polling    = "0/0 everywhere, warnings only (see docs)"
	bridgeOnly = "via utcpd mcp it checks the test's bridge"
)

// throughUtcpd records which scenarios are expected to pass through
// utcpd. A scenario expected to pass that fails fails the test; one not
// expected to pass that passes is reported as UNEXPECTED PASS (an error
// with UTCPD_CONFORMANCE_STRICT=1) so that the table can be tightened.
// docs/mcp.md shows the same table. The fixture is served under its own
// names (gateway.mcp.native_names, utcpd mcp --native-names), as the suite
// calls its tools.
var throughUtcpd = map[string]expectation{
	"server-initialize":             passes,
	"logging-set-level":             {true, true, true, setLevel},
	"ping":                          passes,
	"completion-complete":           passes,
	"tools-list":                    passes,
	"tools-call-simple-text":        passes,
	"tools-call-image":              passes,
	"tools-call-audio":              passes,
	"tools-call-embedded-resource":  passes,
	"tools-call-mixed-content":      passes,
	"tools-call-with-logging":       passes,
	"tools-call-error":              passes,
	"tools-call-with-progress":      passes,
	"tools-call-sampling":           passes,
	"tools-call-elicitation":        passes,
	"json-schema-2020-12":           passes,
	"elicitation-sep1034-defaults":  passes,
	"server-sse-polling":            {true, true, true, polling},
	"server-sse-multiple-streams":   {true, true, true, bridgeOnly},
	"elicitation-sep1330-enums":     passes,
	"resources-list":                passes,
	"resources-read-text":           passes,
	"resources-read-binary":         passes,
	"resources-templates-read":      passes,
	"resources-subscribe":           passes,
	"resources-unsubscribe":         passes,
	"prompts-list":                  passes,
	"prompts-get-simple":            passes,
	"prompts-get-with-args":         passes,
	"prompts-get-embedded-resource": passes,
	"prompts-get-with-image":        passes,
	"dns-rebinding-protection":      {true, true, true, bridgeOnly},
}

func (e expectation) on(c column) bool {
	switch c {
	case colMCPStdio:
		return e.stdio
	case colMCPHTTP:
		return e.http
	case colCLI:
		return e.cli
	}
	return true
}

func TestConformance(t *testing.T) {
	p := requirePeer(t)
	utcpd, fixture := binaries(t)
	results := map[column]map[string]outcome{}

	t.Run(colDirect.name, func(t *testing.T) {
		results[colDirect] = p.runSuite(t, serveFixture(t))
		mustPassAll(t, results[colDirect])
	})
	t.Run(colDirectBridge.name, func(t *testing.T) {
		b := startBridge(t, func() *exec.Cmd { return exec.Command(fixture) })
		results[colDirectBridge] = p.runSuite(t, b.URL)
		mustPassAll(t, results[colDirectBridge])
	})
	t.Run(colMCPStdio.name, func(t *testing.T) {
		dir := t.TempDir()
		base := startDaemon(t, utcpd, dir, writeConfig(t, dir, map[string]any{"command": fixture}))
		results[colMCPStdio] = p.runSuite(t, base+"/mcp")
		compare(t, colMCPStdio, results[colMCPStdio])
	})
	t.Run(colMCPHTTP.name, func(t *testing.T) {
		dir := t.TempDir()
		base := startDaemon(t, utcpd, dir, writeConfig(t, dir, map[string]any{"url": serveFixture(t)}))
		results[colMCPHTTP] = p.runSuite(t, base+"/mcp")
		compare(t, colMCPHTTP, results[colMCPHTTP])
	})
	t.Run(colCLI.name, func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, map[string]any{"command": fixture})
		b := startBridge(t, func() *exec.Cmd {
			cmd := exec.Command(utcpd, "mcp", "--config", cfg, "--log-level", "warn", "--native-names", manualName+"."+serverName)
			cmd.Dir = dir
			cmd.Env = cleanEnv(dir)
			return cmd
		})
		results[colCLI] = p.runSuite(t, b.URL)
		compare(t, colCLI, results[colCLI])
	})
	t.Logf("side by side (docs/mcp.md):\n%s", table(results))
	for _, c := range []column{colMCPStdio, colMCPHTTP, colCLI} {
		for _, sc := range scenarios {
			if o, ok := results[c][sc]; ok && !o.ok() {
				t.Logf("%s %s: %s", sc, c.header, o)
			}
		}
	}
}

// mustPassAll fails t for every scenario that did not pass.
func mustPassAll(t *testing.T, got map[string]outcome) {
	t.Helper()
	for _, sc := range scenarios {
		if o := got[sc]; !o.ok() {
			t.Errorf("%s: %s", sc, o)
		}
	}
}

// compare checks a through-utcpd run against throughUtcpd.
func compare(t *testing.T, c column, got map[string]outcome) {
	t.Helper()
	var unexpected []string
	for _, sc := range scenarios {
		o, want := got[sc], throughUtcpd[sc].on(c)
		switch {
		case want && !o.ok():
			t.Errorf("%s, %s: expected to pass, got %s", sc, c.header, o)
		case !want && o.ok():
			unexpected = append(unexpected, sc)
		}
	}
	if len(unexpected) > 0 {
		report := t.Logf
		if os.Getenv("UTCPD_CONFORMANCE_STRICT") == "1" {
			report = t.Errorf
		}
		report("UNEXPECTED PASS %s (tighten throughUtcpd and docs/mcp.md): %s", c.header, strings.Join(unexpected, ", "))
	}
}

// table is the results as the Markdown table of docs/mcp.md: one row
// per scenario, the direct run and the three paths through utcpd, and the
// reason when they differ. (The direct run over stdio through the bridge
// must pass everything; it is not a column.)
func table(results map[column]map[string]outcome) string {
	cols := []column{colDirect, colMCPStdio, colMCPHTTP, colCLI}
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range cols {
		b.WriteString(" " + c.header + " |")
	}
	b.WriteString(" reason when different |\n| --- |" + strings.Repeat(" --- |", len(cols)+1) + "\n")
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "| %s |", sc)
		for _, c := range cols {
			b.WriteString(" " + cell(results[c], sc) + " |")
		}
		b.WriteString(" " + strings.ReplaceAll(throughUtcpd[sc].reason, "|", "\\|") + " |\n")
	}
	return b.String()
}

// cell is "pass 1/1", "**fail** 0/1" or "pass 0/0, 2 warnings" (– when
// the column did not run).
func cell(results map[string]outcome, sc string) string {
	o, ok := results[sc]
	if !ok {
		return "–"
	}
	s := fmt.Sprintf("pass %d/%d", o.Passed, o.Passed+o.Failed)
	if !o.ok() {
		s = fmt.Sprintf("**fail** %d/%d", o.Passed, o.Passed+o.Failed)
	}
	if o.Warnings > 0 {
		s += fmt.Sprintf(", %d warnings", o.Warnings)
	}
	return s
}
