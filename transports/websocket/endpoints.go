package websocket

import (
	"net/url"
	"strings"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Endpoints returns the host and port of the template's url
// (transports.Endpointer).
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	return transports.URLEndpoints("url", t.URL)
}

// Check refuses what RegisterManual refuses before it dials: a url that
// does not parse or is not ws:// or wss://, or plain ws to a host that is
// not loopback without allow_insecure (httpclient.CheckURL)
// (transports.Checker).
func (t *Template) Check() error {
	u, err := url.Parse(t.URL)
	if err != nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "websocket: url: %w", err)
	}
	if err := httpclient.CheckURL(u, t.AllowInsecure); err != nil {
		return err
	}
	if scheme := strings.ToLower(u.Scheme); scheme != "ws" && scheme != "wss" {
		return utcp.NewError(utcp.CodeInvalidTemplate, "websocket: url %q is not ws:// or wss://", utcp.RedactURL(u))
	}
	return nil
}
