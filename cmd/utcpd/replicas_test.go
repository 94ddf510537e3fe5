package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/internal/pgtest"
)

// replicaSet is several utcpd serve processes sharing one PostgreSQL
// database, each on its own loopback port and data directory.
type replicaSet struct {
	t      *testing.T
	srv    *pgtest.Server
	dsn    string
	config string // the configuration file every replica reads
}

func (rs *replicaSet) start(noWait bool) *proc {
	rs.t.Helper()
	return startDaemon(rs.t, daemonOpts{
		args: []string{"--config", rs.config, "--log-level", "debug"},
		env:  []string{"UTCPD_STORE=" + rs.dsn},
		// A replica answers 200 degraded while the database is away;
		// noWait starts one whose database is not there yet.
		noWait: noWait,
	})
}

// manualTemplate returns what GET /admin/manuals/{name} reports as the
// template of name on p, "" when p does not have it.
func manualTemplate(t *testing.T, p *proc, name string) string {
	t.Helper()
	st, body := request(t, http.MethodGet, p.URL+"/admin/manuals/"+name, "", "")
	if st == http.StatusNotFound {
		return ""
	}
	if st != http.StatusOK {
		t.Fatalf("GET /admin/manuals/%s: %d %s", name, st, body)
	}
	var d struct {
		Template json.RawMessage `json:"template"`
	}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	return string(d.Template)
}

// readyz returns /readyz's status code and "status" field.
func readyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	st, body := request(t, http.MethodGet, p.URL+"/readyz", "", "")
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &v)
	return st, v.Status
}

// TestReplicas runs three replicas of the real binary on one PostgreSQL
// database: registrations, replacements and removals through any one are
// live on the others; a review created on one and approved through another
// runs its waiting call once, on its own replica; the audit log is shared;
// with the database stopped, calls to registered tools keep working,
// /readyz says degraded and writes fail with unavailable; a replica
// started meanwhile waits, not ready; once the database is back everything
// recovers without a restart and nothing acknowledged is lost.
func TestReplicas(t *testing.T) {
	srv := pgtest.New(t)
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, `{
  "gateway": {
    "guards": [{"kind": "policy", "default": "allow", "rules": [{"tools": ["shared.add"], "decision": "review", "reason": "check sums"}]}],
    "review_timeout": "1m"
  }
}
`)
	rs := &replicaSet{t: t, srv: srv, dsn: srv.Database(t), config: cfg}
	a, b, c := rs.start(false), rs.start(false), rs.start(false)
	all := []*proc{a, b, c}
	for _, p := range all {
		if st, status := readyz(t, p); st != 200 || status != "ready" {
			t.Fatalf("/readyz: %d %q", st, status)
		}
	}

	// Register on A: B and C serve it.
	if st, body := request(t, http.MethodPost, a.URL+"/admin/manuals", "", be.template("shared")); st != http.StatusCreated {
		t.Fatalf("register on A: %d %s", st, body)
	}
	for _, p := range []*proc{b, c} {
		eventually(t, 5*time.Second, "shared on "+p.URL, func() bool { return toolNames(t, p)["shared.echo"] })
		if st, res := callTool(t, p, "shared.echo", `{"message": "hi"}`); st != 200 {
			t.Fatalf("call through another replica: %d %v", st, res)
		}
	}

	// Replace through B: A and C follow.
	replaced := strings.TrimSuffix(be.template("shared"), "}") + `, "headers": {"X-Version": "2"}}`
	if st, body := request(t, http.MethodPut, b.URL+"/admin/manuals/shared", "", replaced); st != http.StatusOK {
		t.Fatalf("replace on B: %d %s", st, body)
	}
	for _, p := range []*proc{a, c} {
		eventually(t, 5*time.Second, "the replacement on "+p.URL, func() bool {
			return strings.Contains(manualTemplate(t, p, "shared"), "X-Version")
		})
	}

	// Delete through C: A and B drop it.
	if st, body := request(t, http.MethodDelete, c.URL+"/admin/manuals/shared", "", ""); st != http.StatusNoContent {
		t.Fatalf("delete on C: %d %s", st, body)
	}
	for _, p := range []*proc{a, b} {
		eventually(t, 5*time.Second, "the removal on "+p.URL, func() bool { return !toolNames(t, p)["shared.echo"] })
	}

	// A review created on A, approved through B: A's waiting call runs
	// once, on A.
	if st, body := request(t, http.MethodPost, c.URL+"/admin/manuals", "", be.template("shared")); st != http.StatusCreated {
		t.Fatalf("register on C: %d %s", st, body)
	}
	eventually(t, 5*time.Second, "shared on A", func() bool { return toolNames(t, a)["shared.add"] })
	callsBefore := be.F.Calls()
	type answer struct {
		status int
		body   []byte
	}
	ch := make(chan answer, 1)
	go func() {
		st, body := request(t, http.MethodPost, a.URL+"/v1/tools/shared.add/call", "", `{"arguments": {"a": 20, "b": 22}}`)
		ch <- answer{st, body}
	}()
	var id string
	eventually(t, 5*time.Second, "the review pending through B", func() bool {
		var list struct {
			Reviews []map[string]any `json:"reviews"`
		}
		st, body := request(t, http.MethodGet, b.URL+"/admin/reviews", "", "")
		if st != 200 || json.Unmarshal(body, &list) != nil || len(list.Reviews) != 1 {
			return false
		}
		id, _ = list.Reviews[0]["id"].(string)
		return id != ""
	})
	if st, body := request(t, http.MethodPost, b.URL+"/admin/reviews/"+id+"/approve", "", `{"note": "fine"}`); st != 200 {
		t.Fatalf("approve through B: %d %s", st, body)
	}
	var ans answer
	select {
	case ans = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("A's waiting call did not proceed after the approval through B")
	}
	if ans.status != 200 || !strings.Contains(string(ans.body), `"sum":42`) {
		t.Fatalf("A's call: %d %s", ans.status, ans.body)
	}
	time.Sleep(1500 * time.Millisecond) // a few dispatcher sweeps on every replica
	if n := be.F.Calls() - callsBefore; n != 1 {
		t.Errorf("the approved call reached the backend %d times, want once", n)
	}
	var rv map[string]any
	st, body := request(t, http.MethodGet, c.URL+"/admin/reviews/"+id, "", "")
	if st != 200 || json.Unmarshal(body, &rv) != nil || rv["status"] != "done" || rv["dispatcher"] != "caller" {
		t.Errorf("the review seen through C: %d %s", st, body)
	}

	// A call parked on A (wait=false), approved through C, polled through
	// B: A's dispatcher runs it, once.
	callsBefore = be.F.Calls()
	st, body = request(t, http.MethodPost, a.URL+"/v1/tools/shared.add/call?wait=false", "", `{"arguments": {"a": 1, "b": 1}}`)
	var parked struct {
		ReviewID string `json:"review_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("wait=false on A: %d %s", st, body)
	}
	if st, body := request(t, http.MethodPost, c.URL+"/admin/reviews/"+parked.ReviewID+"/approve", "", `{}`); st != 200 {
		t.Fatalf("approve through C: %d %s", st, body)
	}
	var polled map[string]any
	eventually(t, 10*time.Second, "the parked call done, polled through B", func() bool {
		st, body := request(t, http.MethodGet, b.URL+"/v1/reviews/"+parked.ReviewID, "", "")
		polled = map[string]any{}
		return st == 200 && json.Unmarshal(body, &polled) == nil && polled["done"] == true
	})
	if fmt.Sprint(polled["result"]) != "map[sum:2]" {
		t.Errorf("the parked call's result: %v", polled)
	}
	time.Sleep(1500 * time.Millisecond)
	if n := be.F.Calls() - callsBefore; n != 1 {
		t.Errorf("the parked call reached the backend %d times, want once", n)
	}
	if !strings.Contains(a.stderr.String(), "dispatching an approved call") {
		t.Error("A's dispatcher did not run the call parked on A")
	}

	// The audit log is shared: C lists A's call.
	eventually(t, 5*time.Second, "A's call in C's audit log", func() bool {
		st, body := request(t, http.MethodGet, c.URL+"/admin/audit?tool=shared.add", "", "")
		return st == 200 && strings.Contains(string(body), id)
	})

	// An in-process CLI call with the same store is audited in the shared
	// log too.
	cliCfg := filepath.Join(dir, "cli.json")
	writeFile(t, cliCfg, `{"manual_call_templates": [`+be.template("clitool")+`]}`)
	if out, errOut, code := cli(t, dir, []string{"UTCPD_STORE=" + rs.dsn}, "call", "clitool.echo", "--config", cliCfg,
		"--args", `{"message": "from the cli"}`); code != 0 {
		t.Fatalf("in-process call: exit %d\n%s%s", code, out, errOut)
	}
	st, body = request(t, http.MethodGet, c.URL+"/admin/audit?tool=clitool.echo", "", "")
	if st != 200 || !strings.Contains(string(body), `"front":"cli"`) {
		t.Errorf("the CLI call in the shared audit log: %d %s", st, body)
	}

	// A write acknowledged before the database goes away.
	if st, body := request(t, http.MethodPost, b.URL+"/admin/manuals", "", be.template("durable")); st != http.StatusCreated {
		t.Fatalf("register durable: %d %s", st, body)
	}
	for _, p := range all { // acknowledged on B, then live everywhere before the outage
		eventually(t, 5*time.Second, "durable on "+p.URL, func() bool { return toolNames(t, p)["durable.echo"] })
	}

	// The database goes away.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range all {
		eventually(t, 10*time.Second, "degraded on "+p.URL, func() bool {
			st, status := readyz(t, p)
			return st == 200 && status == "degraded"
		})
		if st, res := callTool(t, p, "durable.echo", `{"message": "still here"}`); st != 200 {
			t.Errorf("a call to %s while the database is away: %d %v", p.URL, st, res)
		}
	}
	st, body = request(t, http.MethodPost, a.URL+"/admin/manuals", "", be.template("lost"))
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), `"unavailable"`) {
		t.Errorf("a write while the database is away: %d %s", st, body)
	}
	if toolNames(t, a)["lost.echo"] {
		t.Error("a write that failed registered anyway")
	}
	late := rs.start(true)
	time.Sleep(500 * time.Millisecond)
	if st, _ := readyz(t, late); st != http.StatusServiceUnavailable {
		t.Errorf("a replica started without its database: /readyz %d, want 503", st)
	}

	// The database comes back: every replica recovers by itself.
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	all = append(all, late)
	for _, p := range all {
		eventually(t, 20*time.Second, "ready again on "+p.URL, func() bool {
			st, status := readyz(t, p)
			return st == 200 && status == "ready"
		})
	}
	if !toolNames(t, late)["durable.echo"] {
		t.Error("the replica started during the outage lacks a manual acknowledged before it")
	}
	if st, body := request(t, http.MethodPost, c.URL+"/admin/manuals", "", be.template("after")); st != http.StatusCreated {
		t.Fatalf("register after the restart: %d %s", st, body)
	}
	for _, p := range []*proc{a, b, late} {
		eventually(t, 5*time.Second, "after on "+p.URL, func() bool { return toolNames(t, p)["after.echo"] })
	}
	conn, err := pgx.Connect(t.Context(), rs.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var names string
	if err := conn.QueryRow(t.Context(), `SELECT string_agg(name, ',' ORDER BY name) FROM manuals`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "after,durable,shared" {
		t.Errorf("stored manuals %q, want after,durable,shared", names)
	}
	for _, p := range all {
		if strings.Contains(p.stderr.String(), "postgres://") {
			t.Errorf("a replica logged the DSN:\n%s", p.stderr.String())
		}
	}
}
