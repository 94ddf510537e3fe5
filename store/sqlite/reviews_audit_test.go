package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestAuditToolIndexMigration opens a database written at schema version
// 5 (audit_tool over every row) with records called by a qualified name,
// an unqualified one and an unknown one: after migration 6 a query by
// tool finds each of them, and it reads the two indexes, not the table.
func TestAuditToolIndexMigration(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, FileName)
	if err := createFile(file); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, file)
	for v, stmts := range migrations[:5] {
		for _, stmt := range stmts {
			if _, err := db.ExecContext(t.Context(), stmt); err != nil {
				t.Fatalf("migration %d: %v", v+1, err)
			}
		}
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
		INSERT INTO schema_migrations VALUES (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)`); err != nil {
		t.Fatal(err)
	}
	recs := []audit.Record{audittest.Fixture("echo", 0), audittest.Fixture("demo.sum", time.Second), audittest.Fixture("nope", 2*time.Second)}
	recs[1].Qualified = "demo.sum"
	recs[2].Qualified = ""
	for _, r := range recs {
		data, err := audit.AppendJSON(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), `INSERT INTO audit (time, tool, qualified, decision, outcome, data) VALUES (?, ?, ?, ?, ?, ?)`,
			r.Time.UnixNano(), r.Tool, r.Qualified, r.Decision, r.Outcome, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, dir)
	for tool, want := range map[string]string{"echo": "echo", "demo.echo": "echo", "demo.sum": "demo.sum", "nope": "nope", "sum": ""} {
		got, err := s.Audit().Query(t.Context(), audit.Query{Tool: tool})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range got {
			names = append(names, r.Tool)
		}
		if (want == "" && len(names) != 0) || (want != "" && (len(names) != 1 || names[0] != want)) {
			t.Errorf("Query(tool %q) = %v, want [%s]", tool, names, want)
		}
	}

	q, args := auditQuery(audit.Query{Tool: "echo"})
	rows, err := s.reader.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(plan, "\n")
	for _, want := range []string{"USING INDEX audit_qualified", "USING INDEX audit_tool"} {
		if !strings.Contains(all, want) {
			t.Errorf("query plan does not read %s:\n%s", strings.TrimPrefix(want, "USING INDEX "), all)
		}
	}
	if strings.Contains(all, "SCAN audit") {
		t.Errorf("query plan scans the table:\n%s", all)
	}
}
