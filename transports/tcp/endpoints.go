package tcp

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the template's host and port (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return []netguard.HostPort{transports.HostEndpoint(t.Host, t.Port)}, nil
}
