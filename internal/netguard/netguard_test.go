package netguard

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/utcpd/utcpd/utcp"
)

func TestClassifyEveryRange(t *testing.T) {
	tests := []struct {
		ip   string
		want class
	}{
		// always refused
		{"169.254.169.254", classRefused},
		{"169.254.0.1", classRefused},
		{"fe80::1", classRefused},
		{"fe80::1%eth0", classRefused},
		{"fd00:ec2::254", classRefused},
		{"100.100.100.200", classRefused},
		{"0.0.0.0", classRefused},
		{"0.1.2.3", classRefused},
		{"::", classRefused},
		{"224.0.0.1", classRefused},
		{"239.255.255.250", classRefused},
		{"ff02::1", classRefused},
		{"255.255.255.255", classRefused},
		// IPv4 inside IPv6 is judged by its IPv4 part
		{"::ffff:169.254.169.254", classRefused},
		{"::ffff:0.0.0.0", classRefused},
		{"64:ff9b::a9fe:a9fe", classRefused}, // NAT64 of 169.254.169.254
		{"::a9fe:a9fe", classRefused},        // IPv4-compatible 169.254.169.254
		// private and loopback
		{"127.0.0.1", classPrivate},
		{"127.255.0.9", classPrivate},
		{"::1", classPrivate},
		{"::ffff:127.0.0.1", classPrivate},
		{"10.0.0.1", classPrivate},
		{"::ffff:10.0.0.1", classPrivate},
		{"64:ff9b::a00:1", classPrivate}, // NAT64 of 10.0.0.1
		{"172.16.0.1", classPrivate},
		{"172.31.255.255", classPrivate},
		{"192.168.1.1", classPrivate},
		{"100.64.0.1", classPrivate},
		{"100.127.255.255", classPrivate},
		{"fc00::1", classPrivate},
		{"fd12:3456::1", classPrivate},
		{"198.18.0.1", classPrivate},
		// public
		{"8.8.8.8", classPublic},
		{"172.32.0.1", classPublic},
		{"100.128.0.1", classPublic},
		{"2001:db8::1", classPublic},
		{"::ffff:8.8.8.8", classPublic},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			got, why := classify(netip.MustParseAddr(tt.ip))
			if got != tt.want {
				t.Errorf("classify(%s) = %d (%s), want %d", tt.ip, got, why, tt.want)
			}
			if got != classPublic && why == "" {
				t.Errorf("classify(%s): no reason", tt.ip)
			}
		})
	}
}

func TestCheckByTrust(t *testing.T) {
	pol := NewPolicy("evil", []HostPort{{Host: "127.0.0.1", Port: "5000"}}, []HostPort{{Host: "10.0.0.5"}})
	admin := context.Background()
	remote := WithPolicy(admin, pol)
	redirect := WithRedirect(admin)
	tests := []struct {
		name string
		ctx  context.Context
		host string
		addr string
		ok   bool
	}{
		{"admin may reach metadata", admin, "169.254.169.254", "169.254.169.254:80", true},
		{"admin may reach private", admin, "10.0.0.1", "10.0.0.1:80", true},
		{"remote: metadata", remote, "169.254.169.254", "169.254.169.254:80", false},
		{"remote: mapped metadata", remote, "::ffff:169.254.169.254", "[::ffff:169.254.169.254]:80", false},
		{"remote: unspecified", remote, "0.0.0.0", "0.0.0.0:5000", false},
		{"remote: multicast", remote, "224.0.0.251", "224.0.0.251:5353", false},
		{"remote: private not allowed", remote, "10.0.0.1", "10.0.0.1:80", false},
		{"remote: private in allowed_hosts, any port", remote, "10.0.0.5", "10.0.0.5:9999", true},
		{"remote: origin on loopback", remote, "127.0.0.1", "127.0.0.1:5000", true},
		{"remote: origin spelled localhost", remote, "localhost", "127.0.0.1:5000", true},
		{"remote: origin via ::1", remote, "::1", "[::1]:5000", true},
		{"remote: other loopback port", remote, "127.0.0.1", "127.0.0.1:5001", false},
		{"remote: a name resolving to loopback", remote, "rebind.example", "127.0.0.1:5000", false},
		{"remote: public", remote, "example.com", "93.184.216.34:443", true},
		{"redirect: metadata", redirect, "169.254.169.254", "169.254.169.254:80", false},
		{"redirect: private is the admin's backend's business", redirect, "10.0.0.1", "10.0.0.1:80", true},
		{"redirect: link-local v6", redirect, "fe80::1", "[fe80::1]:80", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap := netip.MustParseAddrPort(tt.addr)
			err := Check(tt.ctx, tt.host, ap.Addr(), ap.Port())
			if (err == nil) != tt.ok {
				t.Fatalf("Check(%s, %s) = %v, want ok=%v", tt.host, tt.addr, err, tt.ok)
			}
			if err != nil && utcp.CodeOf(err) != utcp.CodeForbidden {
				t.Errorf("code %q, want forbidden", utcp.CodeOf(err))
			}
		})
	}
}

func TestOwnListenersAreRefusedToRemoteAndRedirects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	unregister := RegisterListener(ln.Addr())
	ap := netip.MustParseAddrPort(ln.Addr().String())
	// Even when the origin is the daemon's own address.
	pol := NewPolicy("m", []HostPort{{Host: "127.0.0.1", Port: strconv.Itoa(int(ap.Port()))}}, nil)
	for name, ctx := range map[string]context.Context{"remote": WithPolicy(t.Context(), pol), "redirect": WithRedirect(t.Context())} {
		for _, ip := range []string{"127.0.0.1", "::ffff:127.0.0.1"} {
			err := Check(ctx, "127.0.0.1", netip.MustParseAddr(ip), ap.Port())
			if err == nil || !strings.Contains(err.Error(), "own listeners") {
				t.Errorf("%s to own listener %s: %v", name, ip, err)
			}
		}
	}
	if err := Check(t.Context(), "127.0.0.1", ap.Addr(), ap.Port()); err != nil {
		t.Errorf("admin template to own listener: %v (admin templates are trusted)", err)
	}
	if !OwnListenerHost("localhost", strconv.Itoa(int(ap.Port()))) {
		t.Error("OwnListenerHost(localhost) false")
	}
	unregister()
	unregister() // idempotent
	if OwnListener(ap.Addr(), ap.Port()) {
		t.Error("listener still registered after unregister")
	}
}

func TestUnspecifiedListenerCoversLoopback(t *testing.T) {
	unregister := RegisterListener(&net.TCPAddr{IP: net.IPv4zero, Port: 41999})
	defer unregister()
	for _, ip := range []string{"127.0.0.1", "127.0.0.2", "::1", "0.0.0.0"} {
		if !OwnListener(netip.MustParseAddr(ip), 41999) {
			t.Errorf("OwnListener(%s:41999) false for a listener on 0.0.0.0", ip)
		}
	}
	if OwnListener(netip.MustParseAddr("127.0.0.1"), 41998) {
		t.Error("another port matched")
	}
}

func TestParseHosts(t *testing.T) {
	got, err := ParseHosts([]string{"API.Example.com.", "api.example.com:8443", "[::1]:9000", "::1", "10.0.0.5", "127.0.0.1:80"})
	if err != nil {
		t.Fatal(err)
	}
	want := []HostPort{{"api.example.com", ""}, {"api.example.com", "8443"}, {"localhost", "9000"}, {"localhost", ""}, {"10.0.0.5", ""}, {"localhost", "80"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %v, want %v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"", "http://x", "x/y", "*.example.com", "host:0", "host:99999", "host:abc", "user@host"} {
		if _, err := ParseHosts([]string{bad}); err == nil {
			t.Errorf("ParseHosts(%q) accepted", bad)
		}
	}
}

// TestDialRefusesBeforeConnecting dials refused addresses for real: the
// check runs before connect(2), so no packet leaves (the addresses are
// never reached; a refusal returns at once).
func TestDialRefusesBeforeConnecting(t *testing.T) {
	pol := NewPolicy("evil", []HostPort{{Host: "127.0.0.1", Port: "1"}}, nil)
	dial := DialContext(&net.Dialer{Timeout: 2 * time.Second})
	ctx := WithPolicy(t.Context(), pol)
	for _, addr := range []string{"169.254.169.254:80", "0.0.0.0:80", "10.0.0.1:80", "[fe80::1]:80", "[::ffff:169.254.169.254]:80", "100.100.100.200:80"} {
		start := time.Now()
		c, err := dial(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", addr)
		}
		if utcp.CodeOf(err) != utcp.CodeForbidden {
			t.Errorf("dial %s: %v (code %q), want forbidden", addr, err, utcp.CodeOf(err))
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("dial %s took %v: the refusal should come before any connection attempt", addr, d)
		}
	}
	c, err := dial(ctx, "udp", "169.254.169.254:53")
	if err == nil {
		c.Close()
		t.Fatal("udp dial to metadata succeeded")
	}
	if utcp.CodeOf(err) != utcp.CodeForbidden {
		t.Errorf("udp: %v", err)
	}
}

func TestDialLoopbackByOriginOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dial := DialContext(&net.Dialer{Timeout: 2 * time.Second})

	origin := WithPolicy(t.Context(), NewPolicy("m", []HostPort{{Host: "localhost", Port: port}}, nil))
	for _, host := range []string{"127.0.0.1", "localhost"} {
		c, err := dial(origin, "tcp", net.JoinHostPort(host, port))
		if err != nil {
			t.Fatalf("dial the origin %s: %v", host, err)
		}
		c.Close()
	}

	// The listener counts the two dials above asynchronously: wait for
	// them, so that a late count is not taken for the refused dial.
	for deadline := time.Now().Add(5 * time.Second); accepted.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	other := WithPolicy(t.Context(), NewPolicy("m", []HostPort{{Host: "localhost", Port: "1"}}, nil))
	before := accepted.Load()
	if c, err := dial(other, "tcp", net.JoinHostPort("localhost", port)); err == nil {
		c.Close()
		t.Fatal("dialled a loopback port outside the origin")
	} else if utcp.CodeOf(err) != utcp.CodeForbidden {
		t.Fatalf("got %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepted.Load() - before; n != 0 {
		t.Errorf("the refused dial reached the listener (%d accepts)", n)
	}

	// Admin trust: no policy, anything goes.
	c, err := dial(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("admin dial: %v", err)
	}
	c.Close()
}

// dnsServer answers A queries for the names in answers from 127.0.0.1
// (UDP), and every other query with no answer.
func dnsServer(t *testing.T, answers map[string]netip.Addr) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			if len(q) < 12 {
				continue
			}
			// Question: labels, then type and class.
			i, labels := 12, []string{}
			for i < len(q) && q[i] != 0 {
				l := int(q[i])
				if i+1+l > len(q) {
					break
				}
				labels = append(labels, string(q[i+1:i+1+l]))
				i += 1 + l
			}
			if i+5 > len(q) {
				continue
			}
			qtype := binary.BigEndian.Uint16(q[i+1:])
			question := q[12 : i+5]
			name := strings.ToLower(strings.Join(labels, "."))
			ip, ok := answers[name]
			resp := append([]byte{}, q[0:2]...)
			resp = append(resp, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0)
			resp = append(resp, question...)
			if ok && qtype == 1 && ip.Is4() {
				resp[7] = 1
				a := ip.As4()
				resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, a[0], a[1], a[2], a[3])
			}
			if !ok {
				resp[3] = 0x83 // NXDOMAIN
			}
			_, _ = pc.WriteTo(resp, from)
		}
	}()
	return pc.LocalAddr().String()
}

func testResolver(server string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
}

// TestNamesAreJudgedByWhatTheyResolveTo: a remote manual's tool that
// names a host resolving to a metadata or private address is refused at
// dial time, after resolution.
func TestNamesAreJudgedByWhatTheyResolveTo(t *testing.T) {
	srv := dnsServer(t, map[string]netip.Addr{
		"metadata.test.": netip.MustParseAddr("169.254.169.254"),
		"metadata.test":  netip.MustParseAddr("169.254.169.254"),
		"internal.test":  netip.MustParseAddr("10.1.2.3"),
		"origin.test":    netip.MustParseAddr("127.0.0.1"),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	dial := DialContext(&net.Dialer{Timeout: 2 * time.Second, Resolver: testResolver(srv)})
	ctx := WithPolicy(t.Context(), NewPolicy("m", []HostPort{{Host: "origin.test", Port: port}}, nil))

	for _, name := range []string{"metadata.test", "internal.test"} {
		c, err := dial(ctx, "tcp", net.JoinHostPort(name, "80"))
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", name)
		}
		if utcp.CodeOf(err) != utcp.CodeForbidden || !strings.Contains(err.Error(), name) {
			t.Errorf("dial %s: %v, want forbidden naming the host", name, err)
		}
	}
	// The origin's name resolving to loopback: the admin chose it.
	c, err := dial(ctx, "tcp", net.JoinHostPort("origin.test", port))
	if err != nil {
		t.Fatalf("dial the origin by name: %v", err)
	}
	c.Close()

	// CheckURL resolves names of redirect hops.
	old := resolver
	resolver = testResolver(srv)
	defer func() { resolver = old }()
	u, _ := url.Parse("http://metadata.test/latest/meta-data/")
	if err := CheckURL(WithRedirect(t.Context()), u, true); utcp.CodeOf(err) != utcp.CodeForbidden {
		t.Errorf("CheckURL(redirect to metadata.test) = %v", err)
	}
	if err := CheckURL(t.Context(), u, true); err != nil {
		t.Errorf("CheckURL without policy or redirect = %v", err)
	}
	u, _ = url.Parse("http://[::ffff:a9fe:a9fe]/")
	if err := CheckURL(WithRedirect(t.Context()), u, false); utcp.CodeOf(err) != utcp.CodeForbidden {
		t.Errorf("CheckURL(literal mapped metadata) = %v", err)
	}
}

func TestDialerChainsControl(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	own := errors.New("the dialer's own control")
	base := &net.Dialer{ControlContext: func(context.Context, string, string, syscall.RawConn) error { return own }}
	if _, err := Dialer(base).DialContext(t.Context(), "tcp", ln.Addr().String()); !errors.Is(err, own) {
		t.Errorf("the dialer's own ControlContext was not chained: %v", err)
	}
	if base.ControlContext == nil {
		t.Error("Dialer modified its argument")
	}
}
