// Command mcp serves the fixture tools (echo, add, fail, sleep, count and
// the extras add_tool and content_types) as an MCP server for utcpd's mcp
// transport, over stdio (the default) or Streamable HTTP. See package
// mcpserver.
//
//	go build -o /tmp/mcpfixture ./examples/servers/mcp
//	/tmp/mcpfixture                              # stdio
//	/tmp/mcpfixture -listen 127.0.0.1:8083       # Streamable HTTP at http://127.0.0.1:8083/mcp
//
// then register the manual template
//
//	{"name": "fixture", "call_template_type": "mcp",
//	 "config": {"mcpServers": {"demo": {"command": "/tmp/mcpfixture"}}}}
//
// or, for the HTTP server, {"demo": {"url": "http://127.0.0.1:8083/mcp"}}.
// Flags: -listen address (serve HTTP instead of stdio); -stateless serves
// HTTP without sessions (protocol 2026-07-28); -page-size n splits
// tools/list into pages of n.
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
	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "", "serve Streamable HTTP on this address (at /mcp) instead of stdio")
	stateless := flag.Bool("stateless", false, "serve HTTP without sessions")
	pageSize := flag.Int("page-size", 0, "tools per tools/list page (0: SDK default)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()
	srv := mcpserver.New(fixture.New(), mcpserver.Options{PageSize: *pageSize})

	if *listen == "" {
		if err := srv.RunStdio(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Fatal(err)
		}
		return
	}
	ln := serve.Listen(*listen)
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(mcpserver.HTTPOptions{Stateless: *stateless}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("serving the fixture tools over MCP at http://%s/mcp\n", ln.Addr())
	serve.HTTP(ctx, hs, ln)
}
