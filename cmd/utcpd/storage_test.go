package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unprivileged prepares a daemon to run where file permissions apply:
// as root (which ignores them) the daemon runs as nobody, from a copy of
// the binary in a folder nobody can reach. It returns the working folder,
// the data dir and the options to start the daemon with.
func unprivileged(t *testing.T) (dir, dataDir string, o daemonOpts) {
	t.Helper()
	base, err := os.MkdirTemp("", "utcpd-unwritable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	dir = filepath.Join(base, "work")
	dataDir = filepath.Join(base, "data")
	for _, d := range []string{dir, dataDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o = daemonOpts{dir: dir, dataDir: dataDir}
	if os.Geteuid() != 0 {
		return dir, dataDir, o
	}
	const nobody = 65534
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "utcpd")
	src, err := os.Open(binPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, dataDir} {
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	o.bin = bin
	o.sys = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return dir, dataDir, o
}

// chmodFiles sets the mode of every file in dir.
func chmodFiles(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), "utcpd.db") {
			if err := os.Chmod(filepath.Join(dir, e.Name()), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// auditTimes returns the times of the audited calls of tool, oldest
// first (GET /admin/audit lists newest first).
func auditTimes(t *testing.T, p *proc, tool string) []time.Time {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/admin/audit?tool="+tool+"&limit=1000", "", "")
	var page struct {
		Records []struct {
			ID   int64     `json:"id"`
			Time time.Time `json:"time"`
		} `json:"records"`
	}
	if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/audit: %d %s", status, body)
	}
	var out []time.Time
	for i := len(page.Records) - 1; i >= 0; i-- {
		out = append(out, page.Records[i].Time)
	}
	return out
}

// TestStoreUnwritable: with the database files made read-only (as a full
// disk or a read-only mount would refuse writes), the daemon starts and
// serves calls, /readyz answers 200 "degraded" naming the store, admin
// writes answer unavailable; the audit records it could not write are in
// a spill file in the data dir after SIGTERM; the next start replays
// them, and once the files are writable again the running daemon notices
// by itself: ready, every record written once, the spill file gone.
func TestStoreUnwritable(t *testing.T) {
	t.Parallel()
	_, dataDir, o := unprivileged(t)
	manual := `{"name": "t", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"hi\", \"inputs\": {\"type\": \"object\"}, \"tool_call_template\": {\"call_template_type\": \"text\", \"content\": \"\\\"hi\\\"\"}}]}"}`
	call := func(d *proc) {
		t.Helper()
		if status, res := callTool(t, d, "t.hi", `{}`); status != http.StatusOK || res["result"] != "hi" {
			t.Fatalf("call t.hi: %d %v", status, res)
		}
	}

	// Run 1: a writable store, one manual, one call.
	d := startDaemon(t, o)
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", manual); status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	call(d)
	if v := readyDetails(t, d); v["status"] != "ready" {
		t.Fatalf("readyz with a writable store: %v", v)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// Run 2: the database files are read-only.
	chmodFiles(t, dataDir, 0o444)
	d = startDaemon(t, o)
	v := readyDetails(t, d)
	if v["status"] != "degraded" || !strings.Contains(v["reason"].(string), "refuses writes") || !strings.Contains(v["reason"].(string), "utcpd.db") {
		t.Fatalf("readyz with a read-only store: %v", v)
	}
	status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", strings.Replace(manual, `"t"`, `"u"`, 1))
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "unavailable") {
		t.Errorf("admin write with a read-only store: %d %s", status, body)
	}
	call(d) // the stored manual serves
	call(d)
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	spill := filepath.Join(dataDir, "audit-spill.jsonl")
	data, err := os.ReadFile(spill)
	if err != nil || strings.Count(string(data), `"tool":"t.hi"`) != 2 {
		t.Fatalf("spill file after the read-only run: %v\n%s\n%s", err, data, d.stderr.String())
	}
	if !strings.Contains(d.stderr.String(), "written to the spill file") || strings.Contains(d.stderr.String(), "are lost") {
		t.Errorf("shutdown log:\n%s", d.stderr.String())
	}

	// Run 3: still read-only at start; the spilled records wait, then
	// the files are made writable while the daemon runs.
	d = startDaemon(t, o)
	if v := readyDetails(t, d); v["status"] != "degraded" {
		t.Errorf("readyz at the third start: %v", v)
	}
	call(d)
	chmodFiles(t, dataDir, 0o644)
	eventually(t, 60*time.Second, "readyz to say ready once the store is writable", func() bool {
		return readyDetails(t, d)["status"] == "ready"
	})
	d.waitLog("the store takes writes again", 10*time.Second)
	eventually(t, 60*time.Second, "the four calls in the audit log", func() bool {
		return len(auditTimes(t, d, "t.hi")) >= 4
	})
	times := auditTimes(t, d, "t.hi")
	if len(times) != 4 {
		t.Fatalf("%d audited calls, want 4 (1 + 2 spilled + 1)", len(times))
	}
	for i := 1; i < len(times); i++ {
		if times[i].Before(times[i-1]) {
			t.Errorf("audit records out of order: %v", times)
		}
	}
	eventually(t, 30*time.Second, "the spill file removed", func() bool {
		_, err := os.Stat(spill)
		return errors.Is(err, os.ErrNotExist)
	})
	if status, body := request(t, http.MethodPost, d.URL+"/admin/manuals", "", strings.Replace(manual, `"t"`, `"u"`, 1)); status != http.StatusCreated {
		t.Errorf("admin write once writable: %d %s", status, body)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(d.stderr.String(), "spill file, to be written") {
		t.Errorf("a spill at a shutdown with a writable store:\n%s", d.stderr.String())
	}
}

// TestMemoryAuditBounded: without a data dir, a caller cannot grow the
// daemon's memory with calls: the in-memory audit log keeps only the
// newest audit_max_rows records, at once (not at the prune interval),
// while every record is still counted as written.
func TestMemoryAuditBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), `{"manual_call_templates": [{"name": "t", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"hi\", \"inputs\": {\"type\": \"object\"}, \"tool_call_template\": {\"call_template_type\": \"text\", \"content\": \"\\\"hi\\\"\"}}]}"}],
		"gateway": {"audit_max_rows": 4}}`)
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--data-dir", ""}})
	for range 20 {
		if status, _ := callTool(t, d, "t.hi", `{}`); status != http.StatusOK {
			t.Fatalf("call: %d", status)
		}
	}
	eventually(t, 30*time.Second, "20 audit records written", func() bool {
		return strings.Contains(metricsText(t, d), "utcpd_audit_records_written_total 20\n")
	})
	if n := len(auditTimes(t, d, "t.hi")); n != 4 {
		t.Errorf("%d audit records kept in memory, want the newest 4", n)
	}
}

// TestAuditSizeSettings: audit_max_rows and audit_max_bytes are read from
// the gateway section (non-negative integers), and the daemon keeps only
// the newest audit_max_rows records (trimmed at start and every prune
// interval).
func TestAuditSizeSettings(t *testing.T) {
	t.Parallel()
	dc := loadTestConfig(t, "audit.json", `{"gateway": {"audit_max_rows": 3, "audit_max_bytes": 104857600}}`, true)
	s, warnings, err := effectiveSettings(newServeCmd().Flags(), &serveFlags{}, dc, true)
	if err != nil || len(warnings) != 0 || s.AuditMaxRows != 3 || s.AuditMaxBytes != 100<<20 {
		t.Fatalf("settings %d %d, %v %v", s.AuditMaxRows, s.AuditMaxBytes, err, warnings)
	}
	bad := loadTestConfig(t, "bad.json", `{"gateway": {"audit_max_rows": -1, "audit_max_bytes": "1GB"}}`, false)
	_, _, err = effectiveSettings(newServeCmd().Flags(), &serveFlags{}, bad, true)
	for _, w := range []string{"gateway.audit_max_rows", "gateway.audit_max_bytes"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}

	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	writeFile(t, filepath.Join(dir, "utcpd.json"), `{"manual_call_templates": [{"name": "t", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"hi\", \"inputs\": {\"type\": \"object\"}, \"tool_call_template\": {\"call_template_type\": \"text\", \"content\": \"\\\"hi\\\"\"}}]}"}],
		"gateway": {"audit_max_rows": 3}}`)
	d := startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	for range 5 {
		if status, _ := callTool(t, d, "t.hi", `{}`); status != http.StatusOK {
			t.Fatalf("call: %d", status)
		}
	}
	eventually(t, 30*time.Second, "five audit records", func() bool { return len(auditTimes(t, d, "t.hi")) == 5 })
	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	d = startDaemon(t, daemonOpts{dir: dir, dataDir: dataDir})
	d.waitLog("audit records trimmed", 30*time.Second)
	if n := len(auditTimes(t, d, "t.hi")); n != 3 {
		t.Errorf("%d audit records after the restart, want 3", n)
	}
}
