// Command mcpconformance serves the MCP conformance fixture (package
// confserver): every tool, resource, prompt and completion the server
// scenarios of @modelcontextprotocol/conformance 0.1.16 call, over stdio
// (the default) or Streamable HTTP.
//
//	go build -o /tmp/mcpconformance ./examples/servers/mcpconformance
//	/tmp/mcpconformance                              # stdio
//	/tmp/mcpconformance -listen 127.0.0.1:8084       # Streamable HTTP at http://127.0.0.1:8084/mcp
//
// then run the suite against it directly (Node 22 or later):
//
//	conformance server --url http://127.0.0.1:8084/mcp --suite all
//
// or register it behind utcpd with the manual template
//
//	{"name": "conf", "call_template_type": "mcp",
//	 "config": {"mcpServers": {"everything": {"command": "/tmp/mcpconformance"}}}}
//
// or, for the HTTP server, {"everything": {"url": "http://127.0.0.1:8084/mcp"}}.
// With -listen it prints one line, "serving the MCP conformance fixture at
// http://ADDRESS/mcp", once it listens (use port 0 for a free port).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

func main() {
	listen := flag.String("listen", "", "serve Streamable HTTP on this address (at /mcp) instead of stdio")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()
	srv := confserver.New()

	if *listen == "" {
		if err := srv.RunStdio(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Fatal(err)
		}
		return
	}
	ln := serve.Listen(*listen)
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("serving the MCP conformance fixture at http://%s/mcp\n", ln.Addr())
	serve.HTTP(ctx, hs, ln)
}
