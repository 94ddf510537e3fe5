// Command graphql serves the fixture tools (echo, add, fail, sleep,
// count) as a GraphQL API for utcpd's graphql transport: queries and
// mutations over HTTP POST (and GET) at /graphql, and the count
// subscription over the graphql-transport-ws WebSocket protocol at the
// same path.
//
//	go run ./examples/servers/graphql -listen 127.0.0.1:8085
//
// then register the manual template
//
//	{"name": "gql", "call_template_type": "graphql", "url": "http://127.0.0.1:8085/graphql"}
//
// Flags: -listen address (default 127.0.0.1:8085); -no-introspection
// refuses introspection queries (__schema, __type), as production servers
// often do, so that discovery fails and only templates with an explicit
// query work.
package main

import (
	"flag"
	"fmt"

	"github.com/utcpd/utcpd/examples/servers/graphql/graphqlserver"
	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8085", "address to listen on")
	noIntrospection := flag.Bool("no-introspection", false, "refuse introspection queries")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*listen)
	srv := graphqlserver.NewServer(*listen, fixture.New(), graphqlserver.Options{DisableIntrospection: *noIntrospection})
	fmt.Printf("serving the fixture tools as GraphQL on http://%s/graphql (subscriptions: ws://%s/graphql, graphql-transport-ws)\n", ln.Addr(), ln.Addr())
	serve.HTTP(ctx, srv, ln)
}
