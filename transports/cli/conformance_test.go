package cli_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/cli/clifixture"
	"github.com/utcpd/utcpd/transports/cli"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// TestMain turns the test binary into the fixture CLI program when it is
// re-executed with clifixture.EnvVar set, so the "server" of these tests is
// the test binary itself and no go build is needed.
func TestMain(m *testing.M) {
	if os.Getenv(clifixture.EnvVar) == "1" {
		os.Exit(clifixture.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// fixtureEnv makes the re-executed test binary run the fixture program.
var fixtureEnv = map[string]string{clifixture.EnvVar: "1"}

func testExecutable(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	return exe
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: cli.Info,
		// The fixture program is a separate process with its own
		// fixture.Fixture, so the suite's in-process counters stay at zero;
		// only CancelReachesServer would read them, and it is off.
		Serve: func(t *testing.T, _ *fixture.Fixture) json.RawMessage {
			return clifixture.ManualTemplate(testExecutable(t), fixtureEnv)
		},
		Required: []string{"commands"},
		Caps: transporttest.Caps{
			Stream: true,
			// The process is killed (SIGKILL to its group): it cannot
			// observe the cancellation.
			CancelReachesServer: false,
		},
		Waive: map[string]string{
			"Call/UnknownTool": "a cli tool is its template's commands: the tool name never reaches the process, " +
				"so no backend can report an unknown tool, and exit statuses have no standard meaning to map to " +
				"tool_not_found (the fixture's exit 2 is a ToolError, see TestUnknownFixtureToolIsToolError); " +
				"unknown names are refused by the registry before dispatch",
		},
	})
}
