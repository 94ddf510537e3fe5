package transports

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/utcp"
)

// Endpointer is implemented by the Spec of every call template type that
// connects to the network. Endpoints lists each destination the template
// names (its URLs, its host and port), the port filled in from the scheme
// when a URL leaves it out. An error means the template names something
// that cannot be judged as a network destination (an MCP server started
// as a local command, a URL that does not parse).
//
// The gateway uses it for templates that came from a remote manual: every
// endpoint must be the manual's origin or in its allowed_hosts. Types
// that name no destination (cli, text, file) do not implement it.
type Endpointer interface {
	Endpoints() ([]netguard.HostPort, error)
}

// URLEndpoint returns the host and port of a URL (the scheme's default
// port when it names none: 443 for https and wss, 80 for http and ws).
func URLEndpoint(field, raw string) (netguard.HostPort, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return netguard.HostPort{}, fmt.Errorf("%s: %w", field, err)
	}
	if u.Hostname() == "" {
		return netguard.HostPort{}, fmt.Errorf("%s: URL %q has no host", field, utcp.RedactURL(u))
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		}
	}
	return netguard.HostPort{Host: netguard.CanonicalHost(u.Hostname()), Port: port}, nil
}

// URLEndpoints returns the endpoints of URL fields given as name, value
// pairs, skipping empty values: what the Endpoints method of a template
// whose destinations are URLs returns.
func URLEndpoints(fieldValues ...string) ([]netguard.HostPort, error) {
	out := make([]netguard.HostPort, 0, len(fieldValues)/2)
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if fieldValues[i+1] == "" && i > 0 {
			continue
		}
		e, err := URLEndpoint(fieldValues[i], fieldValues[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// HostEndpoint returns the endpoint of a host field and a port field.
func HostEndpoint(host string, port int) netguard.HostPort {
	p := ""
	if port > 0 {
		p = strconv.Itoa(port)
	}
	return netguard.HostPort{Host: netguard.CanonicalHost(host), Port: p}
}

// AddrEndpoint returns the endpoint of a "host:port" address.
func AddrEndpoint(field, addr string) (netguard.HostPort, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return netguard.HostPort{}, fmt.Errorf("%s: %w", field, err)
	}
	return netguard.HostPort{Host: netguard.CanonicalHost(h), Port: p}, nil
}
