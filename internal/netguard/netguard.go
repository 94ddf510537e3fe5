// Package netguard decides which network addresses utcpd's outgoing
// connections may reach.
//
// Every transport that dials dials through DialContext (or the Control
// function it installs on a net.Dialer), so the check runs after name
// resolution and before the connect system call: a refused address is never
// sent a packet. What is refused depends on who wrote the template the
// connection serves, which the gateway says by putting a *Policy into the
// call's context (WithPolicy):
//
//   - No policy: the template is the admin's (the config file, the admin
//     API, a local manual file the admin named). It is trusted as written:
//     nothing is refused, except that a redirect hop (WithRedirect) never
//     reaches the daemon's own listeners, link-local, cloud-metadata,
//     unspecified or multicast addresses.
//   - A Policy: the template came from a remote manual. Link-local,
//     cloud-metadata, unspecified, multicast and broadcast addresses are
//     always refused; loopback and private ranges (10/8, 172.16/12,
//     192.168/16, 100.64/10, fc00::/7, 127/8, ::1, and IPv4 forms of them
//     inside IPv6) are refused unless the host being dialled is the
//     manual's own origin or in the allowed_hosts the admin put on the
//     manual template; the daemon's own listeners (RegisterListener) are
//     always refused.
//
// A refusal is a *utcp.Error with code forbidden whose details name the
// address and the reason.
//
// The package imports only the standard library and utcp, so that every
// transport may use it.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/utcpd/utcpd/utcp"
)

// HostPort is one entry of a host list: a host name or IP literal
// (lower case, no brackets, no trailing dot; loopback spellings are all
// "localhost") and a port, "" meaning any port.
type HostPort struct {
	Host string
	Port string
}

func (h HostPort) String() string {
	if h.Port == "" {
		return h.Host
	}
	return net.JoinHostPort(h.Host, h.Port)
}

// CanonicalHost returns host (a URL's Hostname, or a template's host field)
// in the form host lists compare: lower case, without brackets, zone or
// trailing dot, and "localhost" for every literal loopback spelling
// ("localhost", 127.0.0.0/8, ::1, their IPv4-mapped forms), so that a
// manual served from http://localhost:8080 and a tool at
// http://127.0.0.1:8080 share an origin.
func CanonicalHost(host string) string {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" {
		return h
	}
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i]
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		ip = ip.Unmap()
		if ip.IsLoopback() {
			return "localhost"
		}
		return ip.String()
	}
	return h
}

// ParseHosts parses an allowed_hosts list: each entry is a host name or IP
// literal ("api.example.com", "10.0.0.5", "::1") allowing every port, or a
// host and port ("api.example.com:8443", "[::1]:9000") allowing that port
// only. An entry with a scheme, path, wildcard or empty host is an error.
func ParseHosts(list []string) ([]HostPort, error) {
	out := make([]HostPort, 0, len(list))
	for _, e := range list {
		s := strings.TrimSpace(e)
		if s == "" || strings.ContainsAny(s, "/*@?# ") || strings.Contains(s, "://") {
			return nil, fmt.Errorf("allowed_hosts: %q is not a host or host:port", e)
		}
		host, port := s, ""
		if h, p, err := net.SplitHostPort(s); err == nil {
			host, port = h, p
			if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("allowed_hosts: %q has an invalid port", e)
			}
		} else if strings.Count(s, ":") == 1 {
			return nil, fmt.Errorf("allowed_hosts: %q has an invalid port", e)
		}
		host = CanonicalHost(host)
		if host == "" {
			return nil, fmt.Errorf("allowed_hosts: %q has no host", e)
		}
		out = append(out, HostPort{Host: host, Port: port})
	}
	return out, nil
}

// Policy is what the tools of one remote manual may reach: the manual's
// origin (the hosts and ports its manual template names) and the
// allowed_hosts the admin added. It is built once, at registration, and
// is safe for concurrent use.
type Policy struct {
	manual  string
	origin  []HostPort
	allowed []HostPort
}

// NewPolicy returns the policy of manual: origin lists the host and port
// of each destination the manual template names (an origin entry with
// Port "" matches every port); allowed is the admin's allowed_hosts.
func NewPolicy(manual string, origin, allowed []HostPort) *Policy {
	p := &Policy{manual: manual}
	for _, o := range origin {
		p.origin = append(p.origin, HostPort{Host: CanonicalHost(o.Host), Port: o.Port})
	}
	for _, a := range allowed {
		p.allowed = append(p.allowed, HostPort{Host: CanonicalHost(a.Host), Port: a.Port})
	}
	return p
}

// Manual names the manual the policy belongs to.
func (p *Policy) Manual() string { return p.manual }

// Hosts returns the origin and allowed entries, for messages.
func (p *Policy) Hosts() []string {
	var out []string
	for _, h := range p.origin {
		out = append(out, h.String())
	}
	for _, h := range p.allowed {
		out = append(out, h.String())
	}
	return out
}

// Allows reports whether host and port (port as digits) are the manual's
// origin or in its allowed_hosts.
func (p *Policy) Allows(host, port string) bool {
	if p == nil {
		return false
	}
	h := CanonicalHost(host)
	for _, list := range [][]HostPort{p.origin, p.allowed} {
		for _, e := range list {
			if e.Host == h && (e.Port == "" || e.Port == port) {
				return true
			}
		}
	}
	return false
}

type policyKey struct{}
type redirectKey struct{}
type dialHostKey struct{}

// WithPolicy returns ctx carrying p for the connections made with it. A
// nil p returns ctx unchanged.
func WithPolicy(ctx context.Context, p *Policy) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, policyKey{}, p)
}

// PolicyFrom returns the policy ctx carries, nil for none (admin trust).
func PolicyFrom(ctx context.Context) *Policy {
	p, _ := ctx.Value(policyKey{}).(*Policy)
	return p
}

// WithRedirect returns ctx marked as serving a redirect hop: the server,
// not the template, chose the destination.
func WithRedirect(ctx context.Context) context.Context {
	if IsRedirect(ctx) {
		return ctx
	}
	return context.WithValue(ctx, redirectKey{}, true)
}

// IsRedirect reports whether ctx was marked by WithRedirect.
func IsRedirect(ctx context.Context) bool {
	v, _ := ctx.Value(redirectKey{}).(bool)
	return v
}

// WithDialHost returns ctx telling Control the name being dialled (before
// resolution), for the origin and allowed_hosts comparison. DialContext
// sets it; callers that dial resolved addresses for a known name (gRPC)
// set it themselves.
func WithDialHost(ctx context.Context, host string) context.Context {
	return context.WithValue(ctx, dialHostKey{}, host)
}

// class is what an address is, for the policy.
type class int

const (
	classPublic  class = iota
	classPrivate       // loopback and private ranges: refused for remote manuals unless allowed
	classRefused       // link-local, metadata, unspecified, multicast: refused for remote manuals and redirects
)

var (
	privatePrefixes = mustPrefixes("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
		"127.0.0.0/8", "::1/128", "fc00::/7", "198.18.0.0/15")
	refusedPrefixes = mustPrefixes("0.0.0.0/8", "169.254.0.0/16", "fe80::/10", "224.0.0.0/4", "ff00::/8",
		"255.255.255.255/32", "::/128", "240.0.0.0/4")
	// metadata lists cloud instance-metadata addresses outside the
	// link-local range: AWS's IPv6 endpoint and Alibaba Cloud's.
	metadata = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}
	nat64    = netip.MustParsePrefix("64:ff9b::/96")
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// classify returns the class of ip and a short reason for refusals.
// IPv4 addresses inside IPv6 (mapped, compatible, NAT64) are judged by
// their IPv4 part.
func classify(ip netip.Addr) (class, string) {
	ip = ip.WithZone("")
	if ip.Is6() {
		b := ip.As16()
		if ip.Is4In6() || nat64.Contains(ip) || (b == [16]byte{12: b[12], 13: b[13], 14: b[14], 15: b[15]} && ip != netip.IPv6Unspecified() && ip != netip.IPv6Loopback()) {
			ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		}
	}
	for _, m := range metadata {
		if ip == m {
			return classRefused, "a cloud metadata address"
		}
	}
	if ip.Is4() && ip.As4() == [4]byte{169, 254, 169, 254} {
		return classRefused, "a cloud metadata address"
	}
	for _, p := range refusedPrefixes {
		if p.Contains(ip) {
			switch {
			case ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0:
				return classRefused, "an unspecified address"
			case ip.IsLinkLocalUnicast():
				return classRefused, "a link-local address"
			case ip.IsMulticast():
				return classRefused, "a multicast address"
			default:
				return classRefused, "a reserved address"
			}
		}
	}
	for _, p := range privatePrefixes {
		if p.Contains(ip) {
			if ip.IsLoopback() {
				return classPrivate, "a loopback address"
			}
			return classPrivate, "a private address"
		}
	}
	return classPublic, ""
}

// ---- the daemon's own listeners ----

var listeners struct {
	mu    sync.RWMutex
	addrs map[netip.AddrPort]int // listener address → registrations
	local []netip.Addr           // interface addresses, for unspecified listeners
}

// RegisterListener records addr (a listener's Addr) as one of the daemon's
// own: connections of remote-manual tools and redirect hops never reach
// it. A listener on an unspecified address (0.0.0.0, ::) covers its port
// on every loopback and interface address. The returned function removes
// the registration (call it when the listener closes).
func RegisterListener(addr net.Addr) (unregister func()) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return func() {}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	var local []netip.Addr
	if ap.Addr().IsUnspecified() {
		if ifs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range ifs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					local = append(local, p.Addr().Unmap())
				}
			}
		}
	}
	listeners.mu.Lock()
	if listeners.addrs == nil {
		listeners.addrs = map[netip.AddrPort]int{}
	}
	listeners.addrs[ap]++
	listeners.local = append(listeners.local, local...)
	listeners.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			listeners.mu.Lock()
			defer listeners.mu.Unlock()
			if listeners.addrs[ap]--; listeners.addrs[ap] <= 0 {
				delete(listeners.addrs, ap)
			}
		})
	}
}

// OwnListener reports whether a connection to ip:port would reach one of
// the daemon's registered listeners.
func OwnListener(ip netip.Addr, port uint16) bool {
	ip = ip.Unmap().WithZone("")
	listeners.mu.RLock()
	defer listeners.mu.RUnlock()
	for ap := range listeners.addrs {
		if ap.Port() != port {
			continue
		}
		l := ap.Addr()
		switch {
		case l == ip:
			return true
		case l.IsUnspecified():
			if ip.IsLoopback() || ip.IsUnspecified() {
				return true
			}
			for _, a := range listeners.local {
				if a == ip {
					return true
				}
			}
		}
	}
	return false
}

// OwnListenerHost reports whether host (a literal IP or "localhost") and
// port name one of the daemon's listeners. Names other than localhost are
// not resolved (the dial-time check catches them).
func OwnListenerHost(host, port string) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return false
	}
	h := CanonicalHost(host)
	if h == "localhost" {
		return OwnListener(netip.MustParseAddr("127.0.0.1"), uint16(n)) || OwnListener(netip.IPv6Loopback(), uint16(n))
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && OwnListener(ip, uint16(n))
}

// ---- the checks ----

// Check decides whether a connection made with ctx may reach ip:port,
// where host is the name that was resolved to ip ("" when unknown). It
// returns nil or a forbidden *utcp.Error.
func Check(ctx context.Context, host string, ip netip.Addr, port uint16) error {
	pol := PolicyFrom(ctx)
	redirect := IsRedirect(ctx)
	if pol == nil && !redirect {
		return nil
	}
	addr := netip.AddrPortFrom(ip, port).String()
	if OwnListener(ip, port) {
		return refusal(pol, host, addr, "one of utcpd's own listeners")
	}
	c, why := classify(ip)
	switch c {
	case classRefused:
		return refusal(pol, host, addr, why)
	case classPrivate:
		if pol != nil && !pol.Allows(host, strconv.Itoa(int(port))) {
			return refusal(pol, host, addr, why+" outside the manual's origin and allowed_hosts")
		}
	}
	return nil
}

func refusal(pol *Policy, host, addr, why string) error {
	who := "a redirect"
	if pol != nil {
		who = fmt.Sprintf("a tool of remote manual %q", pol.manual)
	}
	target := addr
	if host != "" && CanonicalHost(host) != addr {
		target = fmt.Sprintf("%s (%s)", host, addr)
	}
	e := utcp.NewError(utcp.CodeForbidden, "connection to %s refused: it is %s, which %s may not reach", target, why, who).
		WithDetail("address", addr).WithDetail("reason", why)
	if pol != nil {
		e = e.WithDetail("manual", pol.manual)
	}
	return e
}

// Control is a net.Dialer ControlContext function: it parses the resolved
// address being connected and applies Check, taking the dialled name from
// the context (WithDialHost, set by DialContext).
func Control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if PolicyFrom(ctx) == nil && !IsRedirect(ctx) {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return utcp.NewError(utcp.CodeForbidden, "connection to %s refused: not an IP address and port", address)
	}
	host, _ := ctx.Value(dialHostKey{}).(string)
	if proxyAddr(address, host) {
		return nil
	}
	return Check(ctx, host, ap.Addr(), ap.Port())
}

// Dialer returns a copy of d (a zero Dialer when nil) whose ControlContext
// is Control, chained after d's own Control or ControlContext.
func Dialer(d *net.Dialer) *net.Dialer {
	var c net.Dialer
	if d != nil {
		c = *d
	}
	prevCtx, prev := c.ControlContext, c.Control
	c.Control = nil
	c.ControlContext = func(ctx context.Context, network, address string, rc syscall.RawConn) error {
		if err := Control(ctx, network, address, rc); err != nil {
			return err
		}
		switch {
		case prevCtx != nil:
			return prevCtx(ctx, network, address, rc)
		case prev != nil:
			return prev(network, address, rc)
		}
		return nil
	}
	return &c
}

// DialContext returns a dial function (for http.Transport.DialContext,
// websocket.Dialer.NetDialContext, or direct use) that dials with
// Dialer(d), telling Control the host name of address (unless ctx
// already names it, see WithDialHost).
func DialContext(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	gd := Dialer(d)
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if _, set := ctx.Value(dialHostKey{}).(string); !set && (PolicyFrom(ctx) != nil || IsRedirect(ctx)) {
			if host, _, err := net.SplitHostPort(address); err == nil {
				ctx = WithDialHost(ctx, host)
			}
		}
		return gd.DialContext(ctx, network, address)
	}
}

// resolver resolves names for CheckURL; tests replace it.
var resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
} = net.DefaultResolver

// CheckURL applies Check to a request's URL before it is sent: to its
// address when the host is an IP literal or "localhost", and, when
// resolve is true, to every address its name resolves to (for a redirect
// hop that may reuse a pooled connection or go through a proxy, where no
// dial of the destination happens here). It is nil when ctx carries
// neither a policy nor the redirect mark. A name that does not resolve is
// left to the dial.
func CheckURL(ctx context.Context, u *url.URL, resolve bool) error {
	if PolicyFrom(ctx) == nil && !IsRedirect(ctx) {
		return nil
	}
	host := u.Hostname()
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "wss":
			port = "443"
		default:
			port = "80"
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return utcp.NewError(utcp.CodeForbidden, "connection to %s refused: invalid port", u.Host)
	}
	var ips []netip.Addr
	switch h := CanonicalHost(host); {
	case h == "localhost":
		ips = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	default:
		if ip, err := netip.ParseAddr(h); err == nil {
			ips = []netip.Addr{ip}
		} else if resolve {
			ips, _ = resolver.LookupNetIP(ctx, "ip", host)
		}
	}
	for _, ip := range ips {
		if err := Check(ctx, host, ip, uint16(n)); err != nil {
			return err
		}
	}
	return nil
}

// ---- proxies ----

var proxies struct {
	once  sync.Once
	addrs map[string]bool
}

// proxyAddr reports whether a dial to address (resolved, for the name
// host) is a dial of a proxy named by the environment (HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY and their lower-case forms): the operator chose
// the proxy, so it is not judged as a destination.
func proxyAddr(address, host string) bool {
	proxies.once.Do(func() {
		proxies.addrs = map[string]bool{}
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			v := os.Getenv(k)
			if v == "" {
				continue
			}
			if !strings.Contains(v, "://") {
				v = "http://" + v
			}
			u, err := url.Parse(v)
			if err != nil || u.Hostname() == "" {
				continue
			}
			port := u.Port()
			if port == "" {
				port = map[string]string{"https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
				if port == "" {
					port = "80"
				}
			}
			proxies.addrs[net.JoinHostPort(CanonicalHost(u.Hostname()), port)] = true
		}
	})
	if len(proxies.addrs) == 0 {
		return false
	}
	ip, port, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	return proxies.addrs[net.JoinHostPort(CanonicalHost(host), port)] || proxies.addrs[net.JoinHostPort(CanonicalHost(ip), port)]
}

// ProxyConfigured reports whether the environment names a proxy, in which
// case HTTP clients should resolve and check names before sending
// (CheckURL with resolve), since the destination is dialled by the proxy.
func ProxyConfigured() bool {
	proxyAddr("", "")
	return len(proxies.addrs) > 0
}
