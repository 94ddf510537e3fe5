package all_test

import (
	"slices"
	"testing"

	"github.com/utcpd/utcpd/guard"
	_ "github.com/utcpd/utcpd/guard/all"
)

func TestKinds(t *testing.T) {
	kinds := guard.Default.Kinds()
	for _, k := range []string{guard.KindAllowAll, guard.KindDenyAll, "holguard", "policy", "webhook"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("kind %q is not registered (registered: %v)", k, kinds)
		}
	}
}
