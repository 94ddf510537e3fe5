// Command webrtc serves the fixture tools (echo, add, fail, sleep, count)
// as a WebRTC peer for utcpd's webrtc transport, with both signaling
// endpoints: HTTP (POST /signal, offer in, complete answer out) and
// WebSocket (/ws, trickled candidates both ways).
//
//	go run ./examples/servers/webrtc -addr 127.0.0.1:8092
//
// then register either manual template
//
//	{"name": "p2p", "call_template_type": "webrtc", "signaling_server": "http://127.0.0.1:8092/signal", "peer_id": "fixture"}
//	{"name": "p2p", "call_template_type": "webrtc", "signaling_server": "ws://127.0.0.1:8092/ws", "peer_id": "fixture"}
//
// Flags: -addr address (default 127.0.0.1:8092; -listen is the same);
// -peer-id the peer_id to answer (default "fixture"); -loopback gathers
// ICE candidates on 127.0.0.1 only (for a utcpd on the same machine);
// -allow-insecure marks the served tool templates "allow_insecure": true,
// needed when utcpd signals over plain http:// or ws:// through a host
// that is not loopback.
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"

	"github.com/utcpd/utcpd/examples/servers/internal/serve"
	"github.com/utcpd/utcpd/examples/servers/webrtc/webrtcserver"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8092", "address of the signaling endpoints")
	flag.StringVar(addr, "listen", "127.0.0.1:8092", "same as -addr")
	peerID := flag.String("peer-id", webrtcserver.DefaultPeerID, "the peer_id offers must name")
	loopback := flag.Bool("loopback", false, "gather ICE candidates on 127.0.0.1 only, mDNS off")
	insecure := flag.Bool("allow-insecure", false, "mark tool templates allow_insecure (plain http:// or ws:// signaling to non-loopback hosts)")
	flag.Parse()

	ctx, stop := serve.Context()
	defer stop()

	opts := webrtcserver.Options{PeerID: *peerID, AllowInsecure: *insecure, Logger: slog.Default()}
	if *loopback {
		opts.Network = webrtcserver.Loopback()
	}
	s, err := webrtcserver.New(fixture.New(), opts)
	if err != nil {
		log.Fatal(err)
	}
	ln := serve.Listen(*addr)
	srv := s.NewHTTPServer(*addr)
	fmt.Printf("serving the fixture tools as WebRTC peer %q; signaling: http://%s/signal and ws://%s/ws (manual as JSON: http://%s/utcp)\n",
		*peerID, ln.Addr(), ln.Addr(), ln.Addr())
	serve.HTTP(ctx, srv, ln)
	_ = s.Close()
}
