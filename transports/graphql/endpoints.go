package graphql

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the hosts and ports of the template's url and
// subscription_url (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	e, err := transports.URLEndpoint("url", t.URL)
	if err != nil {
		return nil, err
	}
	out := []netguard.HostPort{e}
	if t.SubscriptionURL != "" {
		s, err := transports.URLEndpoint("subscription_url", t.SubscriptionURL)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
