// Command http serves the fixture tools (echo, add, fail, sleep, count)
// over plain HTTP for utcpd's http transport: a UTCP manual at /utcp, an
// OpenAPI 3 document at /openapi.json, and the tools at /tools/{name}.
//
//	go run ./examples/servers/http -listen 127.0.0.1:8081
//
// then register the manual template
//
//	{"name": "fixture", "call_template_type": "http", "url": "http://127.0.0.1:8081/utcp"}
//
// Flags: -listen address (default 127.0.0.1:8081); -allow-insecure marks
// the served tool templates "allow_insecure": true, needed when utcpd
// reaches the server over plain http through a host that is not loopback.
package main

import (
	"flag"
	"fmt"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to listen on")
	insecure := flag.Bool("allow-insecure", false, "mark tool templates allow_insecure (plain http to non-loopback hosts)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*listen)
	srv := httpserver.NewServer(*listen, fixture.New(), httpserver.Options{AllowInsecure: *insecure})
	fmt.Printf("serving the fixture tools on http://%s (manual: /utcp, OpenAPI: /openapi.json)\n", ln.Addr())
	serve.HTTP(ctx, srv, ln)
}
