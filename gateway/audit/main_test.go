package audit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: a
// Writer's background writer ends with Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
