package review_test

import (
	"testing"

	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/guard/review/reviewtest"
)

func TestMemStore(t *testing.T) {
	reviewtest.Run(t, func(*testing.T) review.Store { return review.NewMemStore() })
}
