package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestMCPSettings: gateway.mcp offers codemode.run on /mcp (off by
// default) and names the MCP servers listed under their own names; bad
// values are configuration errors naming the key.
func TestMCPSettings(t *testing.T) {
	build := func(cfg string) (settings, error) {
		t.Helper()
		dc := loadTestConfig(t, "c.json", cfg, false)
		var f serveFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.bind(fs)
		s, _, err := effectiveSettings(fs, &f, dc, false)
		return s, err
	}
	s, err := build(`{"gateway": {}}`)
	if err != nil || s.MCP.CodeMode || s.MCP.NativeNames != nil {
		t.Fatalf("default: codemode %v, native %v, %v", s.MCP.CodeMode, s.MCP.NativeNames, err)
	}
	s, err = build(`{"gateway": {"mcp": {"codemode": true, "native_names": ["everything.srv"]}}}`)
	if err != nil || !s.MCP.CodeMode || !slices.Equal(s.MCP.NativeNames, []string{"everything.srv"}) {
		t.Fatalf("set: codemode %v, native %v, %v", s.MCP.CodeMode, s.MCP.NativeNames, err)
	}
	for _, bad := range []struct{ cfg, want string }{
		{`{"gateway": {"mcp": true}}`, "gateway.mcp"},
		{`{"gateway": {"mcp": {"codemode": "yes"}}}`, "mcp.codemode must be true or false"},
		{`{"gateway": {"mcp": {"native_names": ["everything"]}}}`, `"everything" is not a "manual.server" name`},
		{`{"gateway": {"mcp": {"native_name": []}}}`, `unknown field "native_name"`},
	} {
		if _, err := build(bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %q", bad.cfg, err, bad.want)
		}
	}
}
