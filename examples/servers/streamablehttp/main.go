// Command streamablehttp serves the fixture tools (echo, add, fail, sleep,
// count) for utcpd's streamable_http transport: a UTCP manual at /utcp and
// the tools at /tools/{name}, count streamed as NDJSON (or SSE, or text).
//
//	go run ./examples/servers/streamablehttp -listen 127.0.0.1:8083
//
// then register the manual template
//
//	{"name": "chunks", "call_template_type": "streamable_http", "url": "http://127.0.0.1:8083/utcp"}
//
// Flags: -listen address (default 127.0.0.1:8083); -allow-insecure marks
// the served tool templates "allow_insecure": true, needed when utcpd
// reaches the server over plain http through a host that is not loopback.
package main

import (
	"flag"
	"fmt"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/streamablehttp/streamablehttpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8083", "address to listen on")
	insecure := flag.Bool("allow-insecure", false, "mark tool templates allow_insecure (plain http to non-loopback hosts)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*listen)
	srv := streamablehttpserver.NewServer(*listen, fixture.New(), streamablehttpserver.Options{AllowInsecure: *insecure})
	fmt.Printf("serving the fixture tools over streamable HTTP on http://%s (manual: /utcp)\n", ln.Addr())
	serve.HTTP(ctx, srv, ln)
}
