package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/audit/audittest"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/guard/review/reviewtest"
)

func TestReviewStoreConformance(t *testing.T) {
	reviewtest.Run(t, func(t *testing.T) review.Store { return openStore(t, t.TempDir()).Reviews() })
}

func TestAuditStoreConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T) audit.Store { return openStore(t, t.TempDir()).Audit() })
}

// TestReviewsSurviveReopen checks that a review written by one Store is
// read by the next one on the same file, with its status.
func TestReviewsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	r := reviewtest.Fixture("rv_keep", 0)
	if err := s.Reviews().Put(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Audit().Append(t.Context(), []audit.Record{audittest.Fixture("echo", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir)
	got, err := s2.Reviews().List(t.Context(), review.StatusPending)
	if err != nil || len(got) != 1 {
		t.Fatalf("after reopening %s: %v, %v", filepath.Join(dir, FileName), got, err)
	}
	if d := reviewtest.Diff(reviewtest.Fixture("rv_keep", 0), got[0]); d != "" {
		t.Errorf("reopened review (-want +got):\n%s", d)
	}
	recs, err := s2.Audit().Query(t.Context(), audit.Query{})
	if err != nil || len(recs) != 1 || recs[0].Tool != "echo" {
		t.Errorf("reopened audit: %v, %v", recs, err)
	}
}
