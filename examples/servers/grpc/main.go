// Command grpc serves the fixture tools (echo, add, fail, sleep, count)
// plus sum (client streaming) and chat (bidirectional) for utcpd's grpc
// transport, as the utcpd.demo.v1.Demo service of
// proto/utcpd/demo/v1/demo.proto, with server reflection and health on.
//
//	go run ./examples/servers/grpc -addr 127.0.0.1:8092
//
// then register the manual template it prints, for example
//
//	{"name": "demo", "call_template_type": "grpc", "host": "127.0.0.1", "port": 8092}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"

	"github.com/utcpd/utcpd/examples/servers/grpc/grpcserver"
	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8092", "address to listen on")
	noReflection := flag.Bool("no-reflection", false, "leave server reflection off")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	ln := serve.Listen(*addr)
	srv := grpcserver.New(fixture.New(), grpcserver.Options{NoReflection: *noReflection})
	tmpl := grpcserver.Template(ln.Addr().String())
	tmpl["name"] = "demo"
	b, _ := json.Marshal(tmpl)
	fmt.Printf("serving the fixture tools over gRPC on %s; manual call template:\n%s\n", ln.Addr(), b)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
		srv.Stop()
	}
}
