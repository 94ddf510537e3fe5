package front

import "testing"

func TestSlashPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/v1/tools/gh.repos/get", "/v1/tools/gh.repos%2Fget"},
		{"/v1/tools/gh.repos/get/call", "/v1/tools/gh.repos%2Fget/call"},
		{"/v1/tools/gh.repos/get/stream", "/v1/tools/gh.repos%2Fget/stream"},
		{"/v1/tools/gh.a/b/c/call", "/v1/tools/gh.a%2Fb%2Fc/call"},
		{"/v1/tools/gh.a%2Fb/c", "/v1/tools/gh.a%2Fb%2Fc"},
		{"/v1/tools/gh.x%20y/get", "/v1/tools/gh.x%20y%2Fget"},
		{"/v1/tools/gh.repos/call/call", "/v1/tools/gh.repos%2Fcall/call"},
		// Left alone.
		{"/v1/tools/demo.add", ""},
		{"/v1/tools/demo.add/call", ""},
		{"/v1/tools/demo.add/stream", ""},
		{"/v1/tools/gh.repos%2Fget/call", ""},
		{"/v1/tools/a//call", ""},
		{"/v1/tools/a/../b", ""},
		{"/v1/tools/a/b/", ""},
		{"/v1/tools", ""},
		{"/v1/tools/", ""},
		{"/v1/reviews/a/b", ""},
		{"/admin/manuals/a/b", ""},
	} {
		got, ok := slashPath("GET", c.in)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("slashPath(GET, %q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	// POST: only paths with an action.
	if got, ok := slashPath("POST", "/v1/tools/gh.repos/get/call"); !ok || got != "/v1/tools/gh.repos%2Fget/call" {
		t.Errorf("POST call: %q %v", got, ok)
	}
	if got, ok := slashPath("POST", "/v1/tools/demo.add/invoke"); ok {
		t.Errorf("POST /v1/tools/demo.add/invoke rewritten to %q", got)
	}
}
