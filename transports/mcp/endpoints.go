package mcp

import (
	"fmt"
	"sort"

	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
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
