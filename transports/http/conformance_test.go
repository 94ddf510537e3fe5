package http_test

import (
	"encoding/json"
	nethttp "net/http"
	"net/http/httptest"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns its
// base URL.
func serveFixture(t *testing.T, f *fixture.Fixture) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(httpserver.Handler(f))
	srv.Config.MaxHeaderBytes = httpserver.MaxHeaderBytes
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: utcphttp.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			return transporttest.Template(t, "http", map[string]any{
				"url":         serveFixture(t, f) + "/utcp",
				"http_method": nethttp.MethodGet,
			})
		},
		Required: []string{"url"},
		Caps:     transporttest.Caps{CancelReachesServer: true},
		Waive: map[string]string{
			"Call/UnknownTool": "an HTTP tool is a URL, not a name the server looks up: a call of a tool the " +
				"server lacks is a request to a URL it does not route, and its 404 cannot be told apart from a " +
				"tool's own 404 (GET /users/{id} for a missing user), which must stay a tool_error the caller sees. " +
				"The http transport therefore reports any 4xx as *utcp.ToolError with the status (TestUnknownToolIs404ToolError); " +
				"an unknown qualified name is caught by the registry before the transport is reached.",
		},
	})
}
