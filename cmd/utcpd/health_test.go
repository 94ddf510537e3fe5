package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// demoBins are the example servers built for these tests, by name.
var (
	demoMu   sync.Mutex
	demoBins = map[string]string{}
)

// demoServer builds examples/servers/<name> once per test binary and
// returns its path.
func demoServer(t *testing.T, name string) string {
	t.Helper()
	demoMu.Lock()
	defer demoMu.Unlock()
	if p, ok := demoBins[name]; ok {
		return p
	}
	p := filepath.Join(filepath.Dir(binPath), "demo-"+name)
	build := exec.Command("go", "build", "-o", p, "../../examples/servers/"+name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/servers/%s: %v\n%s", name, err, out)
	}
	demoBins[name] = p
	return p
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// adminManual is one entry of GET /admin/manuals, with its health.
type adminManual struct {
	Name      string  `json:"name"`
	Source    string  `json:"source"`
	Status    string  `json:"status"`
	ToolCount int     `json:"tool_count"`
	Failures  int     `json:"failures"`
	NextRetry *string `json:"next_retry"`
	LastError *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		At      string `json:"at"`
	} `json:"last_error"`
}

func adminManuals(t *testing.T, p *proc) map[string]adminManual {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/admin/manuals", "", "")
	var list struct {
		Manuals []adminManual `json:"manuals"`
	}
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/manuals: %d %s", status, body)
	}
	out := map[string]adminManual{}
	for _, m := range list.Manuals {
		out[m.Name] = m
	}
	return out
}

func readyDetails(t *testing.T, p *proc) map[string]any {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/readyz", "", "")
	var v map[string]any
	if err := json.Unmarshal(body, &v); status != http.StatusOK || err != nil {
		t.Fatalf("GET /readyz: %d %s", status, body)
	}
	return v
}

func metricsText(t *testing.T, p *proc) string {
	t.Helper()
	status, body := request(t, http.MethodGet, p.URL+"/metrics", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	return string(body)
}

// TestManualComesUpLater: a configuration manual whose backend (the demo
// http server, a separate process) starts 5 s after the daemon is ready
// is listed as failed with its error, named by /readyz, reported by
// utcpd_manual_up and the STATUS column, retried at once by a refresh,
// and becomes ready by itself once its backend runs; the failure is one
// log line.
func TestManualComesUpLater(t *testing.T) {
	t.Parallel()
	server := demoServer(t, "http")
	addr := freeAddr(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "utcpd.json"), fmt.Sprintf(`{"manual_call_templates": [
		{"name": "late", "call_template_type": "http", "http_method": "GET", "url": "http://%s/utcp"},
		{"name": "now", "call_template_type": "text", "content": "{\"utcp_version\": \"1.1.0\", \"tools\": [{\"name\": \"hello\", \"inputs\": {\"type\": \"object\"}, \"tool_call_template\": {\"call_template_type\": \"text\", \"content\": \"\\\"hi\\\"\"}}]}"}
	]}`, addr))
	d := startDaemon(t, daemonOpts{dir: dir})
	readyAt := time.Now()

	ms := adminManuals(t, d)
	late := ms["late"]
	if late.Status != "failed" || late.Source != "config" || late.ToolCount != 0 || late.LastError == nil ||
		late.LastError.Code != "discovery_failed" || !strings.Contains(late.LastError.Message, addr) || late.NextRetry == nil {
		t.Fatalf("late before its backend runs: %+v %+v", late, late.LastError)
	}
	if ms["now"].Status != "ready" || ms["now"].ToolCount != 1 {
		t.Errorf("now: %+v", ms["now"])
	}
	v := readyDetails(t, d)
	if v["status"] != "ready" || fmt.Sprint(v["failed_manuals"]) != "[late]" {
		t.Errorf("readyz: %v", v)
	}
	if m := metricsText(t, d); !strings.Contains(m, `utcpd_manual_up{manual="late"} 0`) || !strings.Contains(m, `utcpd_manual_up{manual="now"} 1`) {
		t.Errorf("metrics lack utcpd_manual_up:\n%s", m)
	}
	out, errOut, code := cli(t, dir, []string{"UTCPD_SERVER=" + d.URL}, "manuals", "list")
	if code != 0 || !strings.Contains(out, "STATUS") || !strings.Contains(out, "LAST ERROR") {
		t.Fatalf("manuals list: exit %d\n%s%s", code, out, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "late" && (f[3] != "failed" || !strings.Contains(line, "discovery_failed")) {
			t.Errorf("manuals list row of late: %q", line)
		}
	}

	// A refresh tries at once: one more failure, a newer error.
	status, body := request(t, http.MethodPost, d.URL+"/admin/manuals/late/refresh", "", "")
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "discovery_failed") {
		t.Fatalf("refresh while the backend is down: %d %s", status, body)
	}
	if again := adminManuals(t, d)["late"]; again.Failures <= late.Failures || again.LastError.At <= late.LastError.At {
		t.Errorf("refresh did not retry: %+v then %+v", late, again)
	}

	// The backend starts 5 s after the daemon became ready.
	time.Sleep(time.Until(readyAt.Add(5 * time.Second)))
	backend := exec.Command(server, "-listen", addr)
	backend.Stdout, backend.Stderr = os.Stderr, os.Stderr
	if err := backend.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = backend.Process.Kill()
		_ = backend.Wait()
	})
	eventually(t, 90*time.Second, "late to become ready by itself", func() bool {
		return adminManuals(t, d)["late"].Status == "ready"
	})
	if got := adminManuals(t, d)["late"]; got.ToolCount != 5 || got.LastError != nil || got.NextRetry != nil {
		t.Errorf("late once ready: %+v", got)
	}
	if status, res := callTool(t, d, "late.add", `{"a": 2, "b": 3}`); status != http.StatusOK || fmt.Sprint(res["result"]) != "map[sum:5]" {
		t.Errorf("call late.add: %d %v", status, res)
	}
	if v := readyDetails(t, d); fmt.Sprint(v["failed_manuals"]) != "[]" {
		t.Errorf("readyz once ready: %v", v)
	}
	if m := metricsText(t, d); !strings.Contains(m, `utcpd_manual_up{manual="late"} 1`) {
		t.Errorf("utcpd_manual_up once ready:\n%s", m)
	}
	d.waitLog(`msg="manual recovered" component=gateway manual=late`, 10*time.Second)

	// One log line per failure, naming the manual once (the address is not
	// the name, so it appears once as manual=late).
	var failures []string
	for _, line := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(line, "manual=late") && strings.Contains(line, "level=ERROR") {
			failures = append(failures, line)
		}
	}
	if len(failures) != 1 {
		t.Fatalf("%d ERROR lines for late, want 1:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if n := len(regexp.MustCompile(`\blate\b`).FindAllString(failures[0], -1)); n != 1 || !strings.Contains(failures[0], "code=discovery_failed") || !strings.Contains(failures[0], "retry_in=") {
		t.Errorf("failure line (name %d times): %s", n, failures[0])
	}
}
