// Command tcp serves the fixture tools (echo, add, fail, sleep, count)
// for utcpd's tcp transport, speaking the utcpd envelope as
// newline-delimited JSON (or length-prefixed with -framing length_prefix).
//
//	go run ./examples/servers/tcp -listen 127.0.0.1:8090
//
// then register the manual template it prints, for example
//
//	{"name": "sock", "call_template_type": "tcp", "host": "127.0.0.1", "port": 8090,
//	 "envelope": true, "framing_strategy": "delimiter", "message_delimiter": "\n"}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/tcp/tcpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8090", "address to listen on")
	framing := flag.String("framing", "delimiter", "delimiter (newline) or length_prefix (4 bytes, big endian)")
	insecure := flag.Bool("allow-insecure", false, "mark the printed template allow_insecure (hosts that are not loopback)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	opts := tcpserver.Options{AllowInsecure: *insecure}
	switch *framing {
	case "delimiter":
	case "length_prefix":
		opts.Framing = tcpserver.Framing{PrefixBytes: 4}
	default:
		log.Fatalf("unknown -framing %q", *framing)
	}
	ln := serve.Listen(*listen)
	srv := tcpserver.New(fixture.New(), opts)
	tmpl := srv.Template(ln.Addr().String())
	tmpl["name"] = "sock"
	b, _ := json.Marshal(tmpl)
	fmt.Printf("serving the fixture tools over TCP on %s; manual call template:\n%s\n", ln.Addr(), b)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
		_ = srv.Close()
	}
}
