package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// startPprof serves net/http/pprof's handlers (/debug/pprof/...) on their
// own listener at addr, for profiling the daemon under load (utcpd serve
// --pprof-listen; docs/benchmarks.md). The address must be a loopback one:
// profiles show the daemon's memory, goroutines and command line, so they
// are never exposed, and the listener takes no credentials. The handlers
// are on their own mux, never on the daemon's listener. It returns a
// function that closes the listener; checkPprofAddr has vetted addr.
func startPprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	log.Info("pprof listening", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { _ = srv.Close() }, nil
}

// checkPprofAddr refuses a --pprof-listen address that is not a loopback
// IP with a port. localhost is refused too: it names whatever the
// resolver says.
func checkPprofAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen %q: %w (want a loopback host:port, e.g. 127.0.0.1:6060)", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--pprof-listen %q: refusing to serve profiles on an address that is not a loopback IP "+
			"(profiles expose the daemon's memory and take no credentials); use 127.0.0.1:PORT or [::1]:PORT", addr)
	}
	return nil
}
