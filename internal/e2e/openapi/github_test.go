// Package openapi holds the end-to-end schema tests of utcpd's OpenAPI
// conversion against GitHub's real REST API description (npm
// @octokit/openapi, pinned in testdata/peer): every input and output
// schema of every tool is valid JSON Schema 2020-12 as converted, as
// listed by /v1/tools, /utcp, the MCP front and the LLM exports, and the
// official TypeScript MCP SDK client lists all of GitHub's tools through
// the MCP front. The tests that need the description run when
// UTCPD_NPM_PEERS=1 (and fail when it is missing); the others always run.
package openapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/transports/transporttest"
)

// githubPeer is the installed @octokit/openapi package.
const githubPeer = "@octokit/openapi"

// githubDescription returns the bytes of GitHub's api.github.com
// description (OpenAPI 3.0) from the npm peer; it skips without
// UTCPD_NPM_PEERS=1 and fails when the peer is missing.
func githubDescription(t testing.TB) []byte {
	t.Helper()
	p := transporttest.NPMPeerDir(t, githubPeer)
	data, err := os.ReadFile(filepath.Join(p.Modules, "@octokit", "openapi", "generated", "api.github.com.json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// githubOperations counts the operations of the description that become
// tools by ConvertOpenAPI's rule (a GET, PUT, POST, DELETE or PATCH
// operation with an operationId not used by an earlier one), in all and
// by method.
func githubOperations(t testing.TB, data []byte) (int, map[string]int) {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, item := range doc.Paths {
		for _, method := range []string{"get", "put", "post", "delete", "patch"} {
			var op struct {
				OperationID string `json:"operationId"`
			}
			if raw, ok := item[method]; ok && json.Unmarshal(raw, &op) == nil && op.OperationID != "" {
				ids[op.OperationID] = method
			}
		}
	}
	byMethod := map[string]int{}
	for _, m := range ids {
		byMethod[m]++
	}
	return len(ids), byMethod
}

// TestGitHubSchemasAreJSONSchema2020 converts GitHub's description and
// checks every tool's inputs and outputs with schematest.Check.
func TestGitHubSchemasAreJSONSchema2020(t *testing.T) {
	data := githubDescription(t)
	m, err := manuals.ParseOpenAPI(data, manuals.OpenAPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := githubOperations(t, data)
	if len(m.Tools) != want || want < 1000 {
		t.Fatalf("%d tools, want one per operation: %d", len(m.Tools), want)
	}
	tally := checkSchemas(t, m.Tools)
	t.Logf("%d tools: %s", len(m.Tools), tally)
	if tally.invalid > 0 {
		t.Errorf("%d of %d schemas are not valid JSON Schema 2020-12", tally.invalid, tally.checked)
	}
}
