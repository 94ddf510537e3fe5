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

// Check refuses what RegisterManual refuses before it sends anything: a
// url that does not parse or is not http(s), or plain http to a host that
// is not loopback without allow_insecure (httpclient.CheckURL)
// (transports.Checker).
func (t *Template) Check() error {
	_, err := t.endpointURL()
	return err
}
