package webrtc

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/pion/ice/v4"
	"github.com/pion/webrtc/v4"
)

// Network says which local addresses ICE may use. The transport's Config
// embeds it (the demo server has a similar type of its own). The zero
// value is pion's default behaviour: host candidates on every
// non-loopback interface, UDP over IPv4 and IPv6, mDNS used only to
// resolve the peer's .local candidates (browsers hide their addresses
// behind them).
type Network struct {
	// CandidateIPs, when set, restricts host candidates to these local
	// IP addresses. Listing a loopback address (127.0.0.1, ::1) also
	// turns on loopback candidates, which ICE leaves out by default.
	CandidateIPs []string `json:"candidate_ips,omitempty"`
	// NetworkTypes are the candidate network types: "udp4", "udp6",
	// "tcp4", "tcp6". Empty means udp4 and udp6.
	NetworkTypes []string `json:"network_types,omitempty"`
	// MDNS is "query" (the default: resolve the peer's .local
	// candidates), "gather" (also announce our own host candidates as
	// .local names) or "disabled".
	MDNS string `json:"mdns,omitempty"`
}

// LoopbackNetwork returns the Network of tests and local demos: host
// candidates on 127.0.0.1 only, UDP over IPv4, mDNS off.
func LoopbackNetwork() Network {
	return Network{CandidateIPs: []string{"127.0.0.1"}, NetworkTypes: []string{"udp4"}, MDNS: "disabled"}
}

// Validate checks the fields.
func (n Network) Validate() error {
	for _, s := range n.CandidateIPs {
		if net.ParseIP(s) == nil {
			return fmt.Errorf("candidate_ips: %q is not an IP address", s)
		}
	}
	for _, s := range n.NetworkTypes {
		if _, err := webrtc.NewNetworkType(strings.ToLower(s)); err != nil {
			return fmt.Errorf("network_types: %q is not one of udp4, udp6, tcp4, tcp6", s)
		}
	}
	switch n.MDNS {
	case "", "query", "gather", "disabled":
	default:
		return fmt.Errorf("mdns: %q is not one of query, gather, disabled", n.MDNS)
	}
	return nil
}

// API returns a pion API whose peer connections follow n. DTLS is always
// on (pion offers no way to turn it off), and data channels are plain
// SCTP streams as every WebRTC stack opens them.
func (n Network) API() (*webrtc.API, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var se webrtc.SettingEngine
	switch n.MDNS {
	case "disabled":
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	case "gather":
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeQueryAndGather)
	default:
		se.SetICEMulticastDNSMode(ice.MulticastDNSModeQueryOnly)
	}
	if len(n.NetworkTypes) > 0 {
		types := make([]webrtc.NetworkType, 0, len(n.NetworkTypes))
		for _, s := range n.NetworkTypes {
			nt, _ := webrtc.NewNetworkType(strings.ToLower(s))
			types = append(types, nt)
		}
		se.SetNetworkTypes(types)
	}
	if len(n.CandidateIPs) > 0 {
		ips := make([]net.IP, 0, len(n.CandidateIPs))
		loopback := false
		for _, s := range n.CandidateIPs {
			ip := net.ParseIP(s)
			ips = append(ips, ip)
			loopback = loopback || ip.IsLoopback()
		}
		se.SetIPFilter(func(ip net.IP) bool {
			return slices.ContainsFunc(ips, ip.Equal)
		})
		if loopback {
			se.SetIncludeLoopbackCandidate(true)
		}
	}
	return webrtc.NewAPI(webrtc.WithSettingEngine(se)), nil
}
