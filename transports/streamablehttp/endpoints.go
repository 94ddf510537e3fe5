package streamablehttp

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpcall"
)

// Endpoints returns the host and port of the template's url
// (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return transports.URLEndpoints("url", t.URL)
}

// Check refuses what RegisterManual refuses before it sends anything: a
// url that does not parse, or plain http to a host that is not loopback
// without allow_insecure (httpclient.CheckURL) (transports.Checker).
func (t *Template) Check() error {
	_, _, err := httpcall.ManualTarget("streamable_http", t.URL, nil, t.AllowInsecure)
	return err
}
