package mcp

import (
	"fmt"
	"net/url"
	"sort"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Endpoints returns the host and port of every enabled HTTP server of the
// template (transports.Endpointer). A stdio server is an error: it starts
// a local command, which no host list can allow.
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	names := make([]string, 0, len(t.Config.MCPServers))
	for n := range t.Config.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []netguard.HostPort
	for _, n := range names {
		s := t.Config.MCPServers[n]
		if s == nil || s.Disabled {
			continue
		}
		if s.URL == "" {
			return nil, fmt.Errorf("server %q starts a local command", n)
		}
		e, err := transports.URLEndpoint(fmt.Sprintf("server %q: url", n), s.URL)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Check refuses what RegisterManual refuses before it connects: the url
// of an enabled HTTP server that does not parse, or plain http to a host
// that is not loopback without that server's allow_insecure
// (httpclient.CheckURL) (transports.Checker). stdio servers are not
// checked: whether their command runs is known only by starting it.
func (t *Template) Check() error {
	names := make([]string, 0, len(t.Config.MCPServers))
	for n := range t.Config.MCPServers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := t.Config.MCPServers[n]
		if s == nil || s.Disabled || s.URL == "" {
			continue
		}
		u, err := url.Parse(s.URL)
		if err != nil {
			return utcp.NewError(utcp.CodeInvalidTemplate, "mcp: server %q: url: %v", n, err)
		}
		if err := httpclient.CheckURL(u, s.AllowInsecure); err != nil {
			return utcp.Errorf(utcp.CodeInvalidTemplate, "mcp: server %q: %w", n, err)
		}
	}
	return nil
}
