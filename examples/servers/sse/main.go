// Command sse serves the fixture tools (echo, add, fail, sleep, count) for
// utcpd's sse transport: a UTCP manual at /utcp and the tools at
// /tools/{name}, count as a Server-Sent Events stream.
//
//	go run ./examples/servers/sse -listen 127.0.0.1:8082
//
// then register the manual template
//
//	{"name": "events", "call_template_type": "sse", "url": "http://127.0.0.1:8082/utcp"}
//
// Flags: -listen address (default 127.0.0.1:8082); -allow-insecure marks
// the served tool templates "allow_insecure": true, needed when utcpd
// reaches the server over plain http through a host that is not loopback.
package main

import (
	"flag"
	"fmt"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/sse/sseserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8082", "address to listen on")
	insecure := flag.Bool("allow-insecure", false, "mark tool templates allow_insecure (plain http to non-loopback hosts)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*listen)
	srv := sseserver.NewServer(*listen, fixture.New(), sseserver.Options{AllowInsecure: *insecure})
	fmt.Printf("serving the fixture tools over SSE on http://%s (manual: /utcp)\n", ln.Addr())
	serve.HTTP(ctx, srv, ln)
}
