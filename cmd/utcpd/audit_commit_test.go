package main

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAuditGroupCommitStop replays both ends of the audit log's group
// commit against the built binary: on SIGTERM every call's record is
// written, those still waiting for their group's transaction included;
// after SIGKILL every record that had been written survives and only the
// tail not yet committed (the linger window's) can be missing.
func TestAuditGroupCommitStop(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	o := daemonOpts{dataDir: dataDir, args: []string{"--log-level", "warn"}}
	manual := `{"name": "t", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"hi\", \"inputs\": {\"type\": \"object\"}, \"tool_call_template\": {\"call_template_type\": \"text\", \"content\": \"\\\"hi\\\"\"}}]}"}`
	calls := func(d *proc, n int) {
		t.Helper()
		var wg sync.WaitGroup
		per := n / 8
		for range 8 {
			wg.Go(func() {
				for range per {
					status, body := request(t, http.MethodPost, d.URL+"/v1/tools/t.hi/call", "", `{"arguments": {}}`)
					if status != http.StatusOK {
						t.Errorf("call t.hi: %d %s", status, body)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	count := func() int {
		d := startDaemon(t, o)
		defer d.stop()
		return len(auditTimes(t, d, "t.hi"))
	}

	// SIGTERM right after the last call: every record is written.
	d := startDaemon(t, o)
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", manual); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	const n = 240
	calls(d, n)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, d.stderr.String())
	}
	if got := count(); got != n {
		t.Fatalf("after SIGTERM: %d audit records, want all %d", got, n)
	}

	// SIGKILL: what was written survives; at most the calls after it are
	// missing.
	d = startDaemon(t, o)
	const m, k = 160, 160
	calls(d, m)
	eventually(t, 30*time.Second, "the first calls' records to be written", func() bool {
		return len(auditTimes(t, d, "t.hi")) == n+m
	})
	calls(d, k)
	d.signal(syscall.SIGKILL)
	<-d.done
	got := count()
	if got < n+m || got > n+m+k {
		t.Fatalf("after SIGKILL: %d audit records, want between %d (all written before the last %d calls) and %d", got, n+m, k, n+m+k)
	}
	t.Logf("after SIGKILL: %d of the last %d calls' records were not yet committed", n+m+k-got, k)
}
