package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEveryPageRenders: once logged in, every page answers 200 HTML with
// the console's security headers.
func TestEveryPageRenders(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	b := d.loggedIn()
	for _, p := range []string{"/ui/manuals", "/ui/manual?name=demo", "/ui/tools", "/ui/tools?q=add", "/ui/tool?name=demo.add",
		"/ui/tool?name=demo.echo", "/ui/reviews", "/ui/audit", "/ui/traffic"} {
		a := b.get(p)
		if a.status != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %s", p, a)
			continue
		}
		if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if a.header.Get("X-Frame-Options") != "DENY" || a.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", p, a.header)
		}
	}
}
