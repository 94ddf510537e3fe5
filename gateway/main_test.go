package gateway_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: every
// background goroutine of a Gateway (rediscovery, refreshes, retirements)
// is waited for by Close, and every test closes what it opens.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
