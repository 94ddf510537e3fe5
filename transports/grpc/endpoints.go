package grpc

import (
	"fmt"
	"net"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the host and port the template's target reaches
// (transports.Endpointer); for a target listing several addresses, the
// first. A unix-socket target is an error: it is not a network
// destination a host list can allow.
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	tgt := t.target()
	addr, local := targetAddr(tgt)
	if local {
		return nil, fmt.Errorf("target %q is a local socket", tgt)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	e := netguard.HostPort{Host: netguard.CanonicalHost(host), Port: port}
	if e.Host == "" {
		return nil, fmt.Errorf("target %q has no host", tgt)
	}
	return []netguard.HostPort{e}, nil
}

var _ transports.Endpointer = (*Template)(nil)

// Check refuses what RegisterManual refuses before it dials: plaintext
// (use_ssl false) to a target that is not loopback or a unix socket
// without allow_insecure (transports.Checker).
func (t *Template) Check() error { return checkTarget(t) }
