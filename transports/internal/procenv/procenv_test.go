package procenv

import (
	"slices"
	"testing"
)

// TestProcessEnv: inherited names match exactly or by prefix*, a later
// Set replaces a value in place, SetAll goes in name order.
func TestProcessEnv(t *testing.T) {
	t.Setenv("UTCPD_PE_A", "1")
	t.Setenv("UTCPD_PE_PREFIX_B", "2")
	t.Setenv("UTCPD_PE_OTHER", "3")
	e := Inherit([]string{"UTCPD_PE_A", "UTCPD_PE_PREFIX_*"})
	e.SetAll(map[string]string{"Z": "z", "UTCPD_PE_A": "one", "M": "m"})
	e.Set("Z", "zz")
	got := e.List()
	want := []string{"UTCPD_PE_A=one", "UTCPD_PE_PREFIX_B=2", "M=m", "Z=zz"}
	if !slices.Equal(got, want) {
		t.Errorf("List() = %q, want %q", got, want)
	}
	var zero Env
	zero.Set("K", "v")
	if got := zero.List(); !slices.Equal(got, []string{"K=v"}) {
		t.Errorf("zero value: %q", got)
	}
}
