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
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "", "serve Streamable HTTP on this address (at /mcp) instead of stdio")
	stateless := flag.Bool("stateless", false, "serve HTTP without sessions")
	pageSize := flag.Int("page-size", 0, "tools per tools/list page (0: SDK default)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := mcpserver.New(fixture.New(), mcpserver.Options{PageSize: *pageSize})

	if *listen == "" {
		if err := srv.RunStdio(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler(mcpserver.HTTPOptions{Stateless: *stateless}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("serving the fixture tools over MCP at http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := hs.Shutdown(shutdown); err != nil {
			log.Print(err)
		}
	}
}
