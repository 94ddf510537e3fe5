package graphql

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the hosts and ports of the template's url and
// subscription_url (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return transports.URLEndpoints("url", t.URL, "subscription_url", t.SubscriptionURL)
}
