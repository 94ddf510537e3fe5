package webrtc

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
)

// Endpoints returns the host and port of the template's signaling_server
// (transports.Endpointer). The ICE servers and peer candidates pion
// connects to are not listed: ICE is not dialled through netguard.
func (t *Template) Endpoints() ([]netguard.HostPort, error) {
	e, err := transports.URLEndpoint("signaling_server", t.SignalingServer)
	if err != nil {
		return nil, err
	}
	return []netguard.HostPort{e}, nil
}
