package mcp_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/utcpd/utcpd/transports/mcp"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// TestMain turns the test binary into the fixture MCP server (stdio) when
// it is re-executed with the fixture environment set, so the stdio server
// of these tests is the test binary itself and no go build is needed.
func TestMain(m *testing.M) {
	if mcp.IsFixtureProcess() {
		os.Exit(mcp.FixtureMain())
	}
	os.Exit(m.Run())
}

// progressValue maps the stream of an MCP call (one "progress" event per
// notifications/progress, then a "result" event) to the counts the
// conformance suite compares: the progress value of each progress event.
func progressValue(ev *utcp.Event) (any, bool) {
	if ev.Type != "progress" {
		return nil, false
	}
	m, ok := ev.Data.(map[string]any)
	if !ok {
		return nil, false
	}
	return m["progress"], true
}

func TestConformance(t *testing.T) {
	harness := func(serve func(t *testing.T, f *fixture.Fixture) json.RawMessage) transporttest.Harness {
		return transporttest.Harness{
			Info:       mcp.Info,
			Serve:      serve,
			Required:   []string{"config"},
			Caps:       transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
			EventValue: progressValue,
		}
	}
	// The stdio server is this test binary re-executed; its tools run on
	// the suite's fixture in this process (over a loopback side channel),
	// so the suite sees the backend's counters.
	t.Run("stdio", func(t *testing.T) {
		transporttest.Run(t, harness(func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			return mcp.StdioFixtureTemplate(t, f, nil)
		}))
	})
	t.Run("http", func(t *testing.T) {
		transporttest.Run(t, harness(func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			return mcp.HTTPFixtureTemplate(t, f)
		}))
	})
}
