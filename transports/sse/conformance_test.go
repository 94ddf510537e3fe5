package sse_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/sse/sseserver"
	"github.com/utcpd/utcpd/transports/sse"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns its
// base URL.
func serveFixture(t testing.TB, f *fixture.Fixture) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(sseserver.Handler(f))
	srv.Config.MaxHeaderBytes = sseserver.MaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: sse.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			return transporttest.Template(t, sse.Type, map[string]any{"url": serveFixture(t, f) + "/utcp"})
		},
		Required: []string{"url"},
		Caps:     transporttest.Caps{Stream: true, CancelReachesServer: true},
		Waive: map[string]string{
			"Call/UnknownTool": "an sse tool is a URL, not a name the server looks up: a call of a tool the server " +
				"lacks is a request to a URL it does not route, and that 404 cannot be told apart from a tool's own " +
				"404, which must stay a tool_error the caller sees (the http transport's rule, shared by sse). " +
				"TestUnknownToolIs404ToolError checks the 404 arrives as a *utcp.ToolError with status 404; an " +
				"unknown qualified name is caught by the registry before the transport is reached.",
		},
	})
}
