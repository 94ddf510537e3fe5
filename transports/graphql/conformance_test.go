package graphql_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/graphql/graphqlserver"
	"github.com/utcpd/utcpd/transports/graphql"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo server for f on 127.0.0.1:0 and returns it
// with its /graphql URL.
func serveFixture(t testing.TB, f *fixture.Fixture, opts graphqlserver.Options) (*graphqlserver.Server, string) {
	t.Helper()
	s := graphqlserver.New(f, opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.DropConnections()
		srv.Close()
	})
	return s, srv.URL + "/graphql"
}

func TestConformance(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Info: graphql.Info,
		Serve: func(t *testing.T, f *fixture.Fixture) json.RawMessage {
			_, url := serveFixture(t, f, graphqlserver.Options{})
			return transporttest.Template(t, graphql.Type, map[string]any{"url": url})
		},
		Required: []string{"url"},
		Caps:     transporttest.Caps{Stream: true, Sessions: true, CancelReachesServer: true},
	})
}
