package sse

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the host and port of the template's url
// (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return transports.URLEndpoints("url", t.URL)
}
