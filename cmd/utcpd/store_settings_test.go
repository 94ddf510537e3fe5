package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestStoreSettings: the shared store's DSN comes from --store over
// $UTCPD_STORE over gateway.store; empty keeps SQLite; another scheme is
// refused; --no-store wins; the tuning keys are read and checked.
func TestStoreSettings(t *testing.T) {
	t.Setenv(envStore, "")
	dc := loadTestConfig(t, "c.json", `{"gateway": {"store": "postgres://file@db/utcpd", "store_resync_interval": "10s", "store_max_conns": 4}}`, false)
	build := func(args ...string) (settings, error) {
		t.Helper()
		var f serveFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		s, _, err := effectiveSettings(fs, &f, dc, false)
		return s, err
	}
	s, err := build()
	if err != nil || s.Store != "postgres://file@db/utcpd" || s.StoreResync != 10*time.Second || s.StoreMaxConns != 4 {
		t.Fatalf("file: %+v %v", s, err)
	}
	t.Setenv(envStore, "postgresql://env@db/utcpd")
	if s, err := build(); err != nil || s.Store != "postgresql://env@db/utcpd" {
		t.Fatalf("environment: %q %v", s.Store, err)
	}
	if s, err := build("--store", "postgres://flag@db/utcpd"); err != nil || s.Store != "postgres://flag@db/utcpd" {
		t.Fatalf("flag: %q %v", s.Store, err)
	}
	if s, err := build("--store", "postgres://flag@db/utcpd", "--no-store"); err != nil || s.Store != "" || s.DataDir != "" {
		t.Fatalf("--no-store: %q %q %v", s.Store, s.DataDir, err)
	}
	if _, err := build("--store", "mysql://x"); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("another scheme: %v", err)
	}
	if strings.Contains(func() string { _, err := build("--store", "mysql://secret@x"); return err.Error() }(), "secret") {
		t.Error("the refusal repeats the DSN")
	}

	bad := loadTestConfig(t, "bad.json", `{"gateway": {"store": 5, "store_max_conns": 0, "store_resync_interval": "never"}}`, false)
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.bind(fs)
	_, _, err = effectiveSettings(fs, &f, bad, false)
	for _, key := range []string{"gateway.store", "gateway.store_max_conns", "gateway.store_resync_interval"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("bad %s: %v", key, err)
		}
	}
}
