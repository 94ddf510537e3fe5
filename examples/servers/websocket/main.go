// Command websocket serves the fixture tools (echo, add, fail, sleep,
// count) for utcpd's websocket transport in both of its modes: the utcpd
// envelope at /ws, and python-utcp's plain frames at /plain (discovery)
// and /plain/{tool} (the envelope manual as plain JSON at /utcp).
//
//	go run ./examples/servers/websocket -listen 127.0.0.1:8084
//
// then register the manual template
//
//	{"name": "realtime", "call_template_type": "websocket", "url": "ws://127.0.0.1:8084/ws", "envelope": true}
//
// or, for plain frames,
//
//	{"name": "realtime_plain", "call_template_type": "websocket", "url": "ws://127.0.0.1:8084/plain"}
//
// Flags: -listen address (default 127.0.0.1:8084); -allow-insecure marks
// the served tool templates "allow_insecure": true, needed when utcpd
// reaches the server over plain ws:// through a host that is not loopback.
package main

import (
	"flag"
	"fmt"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/websocket/websocketserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8084", "address to listen on")
	insecure := flag.Bool("allow-insecure", false, "mark tool templates allow_insecure (plain ws:// to non-loopback hosts)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*listen)
	srv := websocketserver.NewServer(*listen, fixture.New(), websocketserver.Options{AllowInsecure: *insecure})
	fmt.Printf("serving the fixture tools over WebSocket: the utcpd envelope on ws://%s/ws, plain frames on ws://%s/plain (manual as JSON: http://%s/utcp)\n", ln.Addr(), ln.Addr(), ln.Addr())
	serve.HTTP(ctx, srv, ln)
}
