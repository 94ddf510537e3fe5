package text_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/transports/text"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// exampleManual is the example text manual that serves the fixture tool
// definitions.
var exampleManual = filepath.Join("..", "..", "examples", "servers", "text", "manual.json")

func serve(t *testing.T, _ *fixture.Fixture) json.RawMessage {
	t.Helper()
	content, err := os.ReadFile(exampleManual)
	if err != nil {
		t.Fatalf("example manual: %v", err)
	}
	return transporttest.Template(t, "text", map[string]any{"content": string(content)})
}

const cannotRun = "text tools return their template's content; they cannot run code, "

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info:     text.Info,
		Serve:    serve,
		Required: []string{"content"},
		Waive: map[string]string{
			"Call/Echo":        cannotRun + "so they cannot echo their arguments",
			"Call/Add":         cannotRun + "so they cannot add",
			"Call/ToolError":   cannotRun + "so they never report a tool error",
			"Call/UnknownTool": cannotRun + "and any template answers whatever tool name it is called under: there is no backend to know tool names",
			"Call/Cancel":      cannotRun + "so a call returns at once and has nothing to cancel",
			"Call/Concurrent":  cannotRun + "so concurrent add calls cannot return sums (concurrency is covered by TestConcurrentCalls)",
		},
	})
}
