package httpx_test

import (
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/api/httpx"
)

// FuzzPerimeter feeds arbitrary Host and Origin headers to the perimeter.
// It must never panic, and whatever it admits must be admissible by the
// rules of docs/security.md: a Host whose name is a loopback name, an IP
// literal or the configured host; an Origin that is the configured one or
// names exactly the request's host and port.
func FuzzPerimeter(f *testing.F) {
	for _, s := range [][2]string{
		{"127.0.0.1:8787", "http://127.0.0.1:8787"},
		{"localhost", "http://localhost"},
		{"rebind.attacker.example:8787", "http://rebind.attacker.example:8787"},
		{"[::1]:8787", "http://[::1]:8787"},
		{"app.localhost:1", "null"},
		{"LOCALHOST.:80", "HTTP://LOCALHOST"},
		{"allowed.example", "https://app.example.com"},
		{"127.0.0.1:8787", "http://127.0.0.1:8787@evil.example"},
		{"127.0.0.1%25eth0", "http://127.0.0.1%25eth0"},
	} {
		f.Add(s[0], s[1])
	}
	p := httpx.Perimeter{AllowedHosts: []string{"allowed.example"}, AllowedOrigins: []string{"https://app.example.com"}}
	f.Fuzz(func(t *testing.T, host, origin string) {
		r := httptest.NewRequest("GET", "http://x/v1/tools", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		if p.Check(r) != nil {
			return
		}
		if host != "" {
			name := host
			if h, _, err := net.SplitHostPort(host); err == nil {
				name = h
			}
			name = strings.TrimSuffix(strings.ToLower(strings.Trim(strings.TrimSpace(name), "[]")), ".")
			if i := strings.IndexByte(name, '%'); i >= 0 && net.ParseIP(name[:i]) != nil {
				name = name[:i]
			}
			if name != "localhost" && !strings.HasSuffix(name, ".localhost") && net.ParseIP(name) == nil && name != "allowed.example" {
				t.Fatalf("host %q admitted", host)
			}
		}
		if origin == "" || strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(origin), "/"), "https://app.example.com") {
			return
		}
		u, err := url.Parse(strings.ToLower(strings.TrimSpace(origin)))
		if err != nil || u.Host == "" {
			t.Fatalf("origin %q admitted for host %q", origin, host)
		}
		if !strings.EqualFold(strings.TrimSuffix(u.Hostname(), "."), strings.TrimSuffix(strings.Trim(hostOnly(host), "[]"), ".")) {
			t.Fatalf("origin %q admitted for host %q", origin, host)
		}
	})
}

func hostOnly(h string) string {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		return hh
	}
	return h
}
