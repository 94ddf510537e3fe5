package tcp

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the template's host and port (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return []netguard.HostPort{transports.HostEndpoint(t.Host, t.Port)}, nil
}

// Check refuses what RegisterManual refuses before it dials: a host that
// is not loopback without allow_insecure (transports.Checker).
func (t *Template) Check() error { return checkHost(t) }
