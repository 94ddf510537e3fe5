// Command udp serves the fixture tools (echo, add, fail, sleep, count)
// for utcpd's udp transport, speaking the utcpd envelope, one JSON frame
// per datagram.
//
//	go run ./examples/servers/udp -listen 127.0.0.1:8091
//
// then register the manual template it prints, for example
//
//	{"name": "dgram", "call_template_type": "udp", "host": "127.0.0.1", "port": 8091, "envelope": true}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/udp/udpserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8091", "address to listen on")
	insecure := flag.Bool("allow-insecure", false, "mark the printed template allow_insecure (hosts that are not loopback)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	pc, err := net.ListenPacket("udp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := udpserver.New(fixture.New(), udpserver.Options{AllowInsecure: *insecure})
	tmpl := srv.Template(pc.LocalAddr().String())
	tmpl["name"] = "dgram"
	b, _ := json.Marshal(tmpl)
	fmt.Printf("serving the fixture tools over UDP on %s; manual call template:\n%s\n", pc.LocalAddr(), b)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(pc) }()
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
		_ = srv.Close()
	}
}
