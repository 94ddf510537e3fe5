package webrtc

import (
	"github.com/utcpd/utcpd/internal/netguard"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
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

// Check refuses what RegisterManual refuses before it signals: a
// signaling_server that is not an absolute http(s) or ws(s) URL, or plain
// http or ws to a host that is not loopback without allow_insecure
// (httpclient.CheckURL) (transports.Checker).
func (t *Template) Check() error {
	u, err := t.signalingURL()
	if err != nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "webrtc: %w", err)
	}
	return httpclient.CheckURL(u, t.AllowInsecure)
}
