package file_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/transports/file"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// exampleManual is the example file manual that serves the fixture tool
// definitions.
var exampleManual = filepath.Join("..", "..", "examples", "servers", "file", "manual.json")

func serve(t *testing.T, _ *fixture.Fixture) json.RawMessage {
	t.Helper()
	abs, err := filepath.Abs(exampleManual)
	if err != nil {
		t.Fatal(err)
	}
	return transporttest.Template(t, "file", map[string]any{"file_path": abs})
}

const cannotRun = "file tools return their file's contents; they cannot run code, "

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info:     file.Info,
		Serve:    serve,
		Required: []string{"file_path"},
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
