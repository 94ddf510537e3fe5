package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestCodeModeSettings: gateway.codemode tunes CodeMode's limits and can
// turn it off; bad values and unknown keys are configuration errors that
// name the key.
func TestCodeModeSettings(t *testing.T) {
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
	if err != nil || s.CodeModeOff || s.CodeMode.MaxTimeout != 0 {
		t.Fatalf("default: %+v %v", s.CodeMode, err)
	}
	s, err = build(`{"gateway": {"codemode": {"default_timeout": "2s", "max_timeout": "30s", "default_tool_calls": 5,
		"max_tool_calls": 20, "max_instructions": 1000000, "memory_limit": 8388608, "max_total_memory": 33554432, "max_concurrent": 2}}}`)
	if err != nil {
		t.Fatal(err)
	}
	o := s.CodeMode
	if s.CodeModeOff || o.DefaultTimeout != 2*time.Second || o.MaxTimeout != 30*time.Second || o.DefaultToolCalls != 5 ||
		o.MaxToolCalls != 20 || o.MaxInstructions != 1000000 || o.MemoryLimit != 8<<20 || o.MaxConcurrent != 2 || o.MaxTotalMemory != 32<<20 {
		t.Errorf("tuned: %+v off=%v", o, s.CodeModeOff)
	}
	if s, err := build(`{"gateway": {"codemode": {"enabled": false}}}`); err != nil || !s.CodeModeOff {
		t.Errorf("enabled false: off=%v %v", s.CodeModeOff, err)
	}
	for _, bad := range []struct{ cfg, want string }{
		{`{"gateway": {"codemode": 5}}`, "gateway.codemode"},
		{`{"gateway": {"codemode": {"max_timeout": "never"}}}`, "codemode.max_timeout"},
		{`{"gateway": {"codemode": {"max_tool_calls": 0}}}`, "codemode.max_tool_calls"},
		{`{"gateway": {"codemode": {"default_timeout": "2m", "max_timeout": "1m"}}}`, "longer than"},
		{`{"gateway": {"codemode": {"max_tool_call": 3}}}`, `unknown field "max_tool_call"`},
		{`{"gateway": {"codemode": {"memory_limit": 8388608, "max_total_memory": 4194304}}}`, "less than codemode.memory_limit"},
	} {
		if _, err := build(bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %q", bad.cfg, err, bad.want)
		}
	}
}
