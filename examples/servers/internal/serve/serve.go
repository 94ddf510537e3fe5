// Package serve holds what the example servers' commands share: the
// signal context, the listener, and serving HTTP until a signal.
package serve

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// ShutdownGrace is how long HTTP waits for requests in flight after a
// signal.
const ShutdownGrace = 5 * time.Second

// Context returns a context that ends on SIGINT or SIGTERM, and its stop
// function.
func Context() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// Listen listens on TCP address addr, or exits through log.Fatal.
func Listen(addr string) net.Listener {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	return ln
}

// HTTP serves srv on ln until srv fails (log.Fatal) or ctx ends; then it
// shuts srv down, giving requests in flight ShutdownGrace, and returns.
// Shutdown does not wait for hijacked (WebSocket) connections; they end
// with the process.
func HTTP(ctx context.Context, srv *http.Server, ln net.Listener) {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			log.Print(err)
		}
	}
}
