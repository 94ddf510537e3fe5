package daemon

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/gateway/ratelimit"
)

func TestKeyRules(t *testing.T) {
	own := []ratelimit.Rule{{Name: "gh", Tools: "github.*", Rate: "100/m"}}
	keys := []gateway.APIKey{
		{Name: "math"},
		{Name: "ci-bot", RateLimit: &gateway.RateLimit{Count: 20, Per: 10 * time.Second}},
		{Name: "ops", RateLimit: &gateway.RateLimit{Count: 5, Per: time.Second}, MaxConcurrent: 2},
		{Name: "slow", MaxConcurrent: 1},
	}
	want := []ratelimit.Rule{own[0],
		{Name: "apikey:ci-bot", Principal: "ci-bot", Rate: "20/10s"},
		{Name: "apikey:ops", Principal: "ops", Rate: "5/s", MaxConcurrent: 2},
		{Name: "apikey:slow", Principal: "slow", MaxConcurrent: 1},
	}
	got := KeyRules(own, keys)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("KeyRules (-want +got):\n%s", diff)
	}
	if _, err := ratelimit.New(got, ratelimit.Options{}); err != nil {
		t.Errorf("the rules do not load: %v", err)
	}
	if len(own) != 1 {
		t.Error("KeyRules changed its argument")
	}
	// The configuration's own rules may not take the prefix.
	if _, err := ratelimit.ParseRules([]byte(`[{"name": "apikey:x", "rate": "1/s"}]`)); err == nil {
		t.Error("a configured rule named apikey:x was accepted")
	}
}
