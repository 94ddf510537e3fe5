package streamablehttp

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the host and port of the template's url
// (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	e, err := transports.URLEndpoint("url", t.URL)
	if err != nil {
		return nil, err
	}
	return []netguard.HostPort{e}, nil
}
