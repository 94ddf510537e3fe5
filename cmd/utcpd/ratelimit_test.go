package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/pgtest"
)

// rateDaemon starts the built daemon serving the demo HTTP server's
// tools as manual "demo", with the given gateway.rate_limits.
func rateDaemon(t *testing.T, rules string) (*proc, *backend) {
	t.Helper()
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"rate_limits": %s}}`, be.template("demo"), rules))
	return startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}}), be
}

// limitedCall posts a call and returns the status, the Retry-After header
// and the error code of the answer, if any.
func limitedCall(t *testing.T, d *proc, tool, args string) (status int, retryAfter string, code string) {
	t.Helper()
	return keyedCall(t, d, "", tool, args)
}

// keyedCall is limitedCall with an API key ("" for none).
func keyedCall(t *testing.T, d *proc, key, tool, args string) (status int, retryAfter string, code string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+"/v1/tools/"+tool+"/call", strings.NewReader(`{"arguments": `+args+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Error struct {
			Code    string         `json:"code"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	return resp.StatusCode, resp.Header.Get("Retry-After"), env.Error.Code
}

// TestRateLimitREST: a rule of 5/s on demo.echo. Calls in a quick row:
// the burst of 5 goes through, and the first refused one (the sixth,
// unless the machine is slow enough for the bucket to refill meanwhile)
// is 429 rate_limited with Retry-After 1, never reaches the backend, and
// is in the audit log with outcome rate_limited; other tools are not
// limited, and the refusal is counted in /metrics under the rule's name.
func TestRateLimitREST(t *testing.T) {
	d, be := rateDaemon(t, `[{"name": "echo5", "tools": "demo.echo", "rate": "5/s"}]`)
	start := time.Now()
	admitted := 0
	var status int
	var retry, code string
	for range 50 {
		status, retry, code = limitedCall(t, d, "demo.echo", `{"i": 1}`)
		if status != http.StatusOK {
			break
		}
		admitted++
	}
	elapsed := time.Since(start)
	if status != http.StatusTooManyRequests || code != "rate_limited" || retry != "1" {
		t.Fatalf("after %d calls: %d %q Retry-After %q; want 429 rate_limited, Retry-After 1", admitted, status, code, retry)
	}
	// The burst, plus at most what 5/s refilled while the calls ran.
	if maxOK := 5 + int(elapsed.Seconds()*5) + 1; admitted < 5 || admitted > maxOK {
		t.Errorf("%d calls admitted in %v, want 5 to %d", admitted, elapsed, maxOK)
	}
	if got := int(be.F.Calls()); got != admitted {
		t.Errorf("the backend saw %d calls, want the %d admitted", got, admitted)
	}
	if st, _, _ := limitedCall(t, d, "demo.add", `{"a": 1, "b": 2}`); st != http.StatusOK {
		t.Errorf("demo.add (no rule): %d", st)
	}
	var page struct {
		Records []struct {
			Tool, Decision, Outcome string
			Dispatched              bool
		} `json:"records"`
	}
	eventually(t, 5*time.Second, "the refusal in the audit log", func() bool {
		st, body := request(t, http.MethodGet, d.URL+"/admin/audit?outcome=rate_limited", "", "")
		if st != http.StatusOK {
			t.Fatalf("GET /admin/audit: %d %s", st, body)
		}
		page.Records = nil
		_ = json.Unmarshal(body, &page)
		return len(page.Records) > 0
	})
	if r := page.Records[0]; r.Tool != "demo.echo" || r.Decision != "allow" || r.Dispatched {
		t.Errorf("audit record %+v", r)
	}
	_, metrics := request(t, http.MethodGet, d.URL+"/metrics", "", "")
	if !strings.Contains(string(metrics), `utcpd_rate_limit_refused_total{limit="rate",rule="echo5"} 1`) {
		t.Errorf("metrics lack the refusal:\n%s", grepLines(string(metrics), "rate_limit"))
	}
}

// TestRateLimitMCP: through /mcp a refused call is an isError result a
// model can read ("rate limited: retry after N s"), not a protocol error.
func TestRateLimitMCP(t *testing.T) {
	d, be := rateDaemon(t, `[{"tools": "demo.add", "rate": "1/h"}]`)
	c, err := connectMCP(t, &mcp.StreamableClientTransport{Endpoint: d.URL + "/mcp", MaxRetries: -1}, "")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.call(t, "demo.add", `{"a": 1, "b": 2}`, nil)
	if err != nil || res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	res, err = c.call(t, "demo.add", `{"a": 1, "b": 2}`, nil)
	if err != nil {
		t.Fatalf("second call: a protocol error %v, want an isError result", err)
	}
	if text := resultText(res); !res.IsError || !strings.HasPrefix(text, "rate limited: retry after ") || !strings.Contains(text, " s (rate limit") {
		t.Errorf("second call: isError %v, text %q", res.IsError, text)
	}
	if be.F.Calls() != 1 {
		t.Errorf("the backend saw %d calls, want 1", be.F.Calls())
	}
}

// TestRateLimitMCPStdio: "utcpd mcp --config" applies the
// configuration's rate limits in its own process.
func TestRateLimitMCPStdio(t *testing.T) {
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"rate_limits": [{"tools": "demo.add", "rate": "1/h"}]}}`, be.template("demo")))
	c, err := connectMCP(t, mcpCommand(dir, nil, "--config", cfg), "")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.call(t, "demo.add", `{"a": 1, "b": 2}`, nil); err != nil || res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	res, err := c.call(t, "demo.add", `{"a": 1, "b": 2}`, nil)
	if err != nil || !res.IsError || !strings.HasPrefix(resultText(res), "rate limited: retry after ") {
		t.Errorf("second call: %v %+v", err, res)
	}
	if be.F.Calls() != 1 {
		t.Errorf("the backend saw %d calls, want 1", be.F.Calls())
	}
}

// TestRateLimitCodeMode: calls from CodeMode's call_tool count against
// the rules like any other front's; the refusal raises a table whose
// code is rate_limited.
func TestRateLimitCodeMode(t *testing.T) {
	d, be := rateDaemon(t, `[{"tools": "demo.add", "rate": "2/h"}]`)
	code := `local codes = {}
for i = 1, 3 do
  local ok, err = pcall(call_tool, "demo.add", {a = i, b = 1})
  codes[i] = ok and "ok" or err.code
end
return codes`
	body, _ := json.Marshal(map[string]any{"code": code})
	status, data := request(t, http.MethodPost, d.URL+"/v1/codemode", "", string(body))
	var out struct {
		Result []string `json:"result"`
	}
	if err := json.Unmarshal(data, &out); status != http.StatusOK || err != nil {
		t.Fatalf("POST /v1/codemode: %d %s", status, data)
	}
	if strings.Join(out.Result, ",") != "ok,ok,rate_limited" {
		t.Errorf("CodeMode calls: %v (%s), want ok, ok, rate_limited", out.Result, data)
	}
	if be.F.Calls() != 2 {
		t.Errorf("the backend saw %d calls, want 2", be.F.Calls())
	}
}

// TestRateLimitConcurrency: max_concurrent 1 on the slow sleep tool. While
// one sleep runs, a second concurrent call is refused at once (429,
// limit max_concurrent) without reaching the backend; once the first
// ends, a call goes through again.
func TestRateLimitConcurrency(t *testing.T) {
	d, be := rateDaemon(t, `[{"name": "one-sleep", "tools": "demo.sleep", "max_concurrent": 1}]`)
	first := make(chan int, 1)
	go func() {
		st, _, _ := limitedCall(t, d, "demo.sleep", `{"ms": 3000}`)
		first <- st
	}()
	eventually(t, 10*time.Second, "the first sleep at the backend", func() bool { return be.F.Calls() == 1 })
	status, retry, code := limitedCall(t, d, "demo.sleep", `{"ms": 1}`)
	if status != http.StatusTooManyRequests || code != "rate_limited" || retry == "" {
		t.Errorf("second concurrent sleep: %d %q Retry-After %q, want 429 rate_limited", status, code, retry)
	}
	if be.F.Calls() != 1 {
		t.Errorf("the refused call reached the backend (%d calls)", be.F.Calls())
	}
	if st := <-first; st != http.StatusOK {
		t.Fatalf("first sleep: %d", st)
	}
	if st, _, _ := limitedCall(t, d, "demo.sleep", `{"ms": 1}`); st != http.StatusOK {
		t.Errorf("a sleep after the first ended: %d", st)
	}
}

// TestRateLimitConfigErrors: a bad rule stops the daemon at start with a
// message naming it (exit 2, as every invalid configuration).
func TestRateLimitConfigErrors(t *testing.T) {
	for rules, want := range map[string]string{
		`[{"tools": "demo.*", "rate": "5/d"}]`: "gateway.rate_limits: [0]: rate \"5/d\": the period must be s, m, h or a duration such as 10s",
		`[{"tools": "demo.*", "rat": "5/s"}]`:  `unknown field "rat" (did you mean "rate"?)`,
		`[{"tools": "demo.*", "burst": 3}]`:    `needs a "rate"`,
		`{"tools": "demo.*", "rate": "5/s"}`:   "must be an array of rule objects",
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "utcpd.json")
		writeFile(t, cfg, `{"gateway": {"rate_limits": `+rules+`}}`)
		out, stderr, code := cli(t, dir, nil, "config", "validate", cfg)
		if code != 2 || !strings.Contains(out+stderr, want) {
			t.Errorf("%s: exit %d, output %q; want 2 and %q", rules, code, out+stderr, want)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestRateLimitReplicas: two daemons on one PostgreSQL database share a
// rule's bucket (10 calls an hour): 40 calls at once spread over both
// admit at most the burst plus one share per replica (docs/deploy.md).
// And a replica's unused share goes back at shutdown: A makes one call
// of another such rule (leasing a share of 2), B then spends what is
// left (8), and once A stopped a third replica finds A's unused token.
func TestRateLimitReplicas(t *testing.T) {
	srv := pgtest.New(t)
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"rate_limits": [
  {"name": "echo", "tools": "demo.echo", "rate": "10/h"},
  {"name": "add", "tools": "demo.add", "rate": "10/h"}]}}`, be.template("demo")))
	rs := &replicaSet{t: t, srv: srv, dsn: srv.Database(t), config: cfg}
	a, b := rs.start(false), rs.start(false)
	const calls, burst, share = 40, 10, 2
	codes := make(chan int, calls)
	var wg sync.WaitGroup
	for i := range calls {
		p := []*proc{a, b}[i%2]
		wg.Go(func() {
			st, retry, code := limitedCall(t, p, "demo.echo", `{"i": 1}`)
			if st == http.StatusTooManyRequests && (code != "rate_limited" || retry == "") {
				t.Errorf("429 with code %q, Retry-After %q", code, retry)
			}
			codes <- st
		})
	}
	wg.Wait()
	close(codes)
	admitted := 0
	for st := range codes {
		switch st {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("status %d", st)
		}
	}
	t.Logf("two replicas admitted %d of %d concurrent calls", admitted, calls)
	if admitted > burst+2*share || admitted < burst-2*share {
		t.Errorf("two replicas admitted %d of %d calls; want %d ± one share per replica", admitted, calls, burst)
	}
	if got := int(be.F.Calls()); got != admitted {
		t.Errorf("the backend saw %d calls, want %d", got, admitted)
	}

	add := func(p *proc, n int) (ok int) {
		for range n {
			if st, _, _ := limitedCall(t, p, "demo.add", `{"a": 1, "b": 2}`); st == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	if got := add(a, 1); got != 1 {
		t.Fatalf("A: %d of 1", got)
	}
	if got := add(b, burst+5); got != burst-share {
		t.Errorf("B admitted %d, want %d (the bucket less A's share)", got, burst-share)
	}
	a.stop()
	b.stop()
	c := rs.start(false)
	if got := add(c, 3); got != share-1 {
		t.Errorf("C admitted %d after A stopped, want %d: A's unused token returned", got, share-1)
	}
}

// TestRateLimitNamedKeys: a named key's rate_limit and max_concurrent
// are rules for its principal ("apikey:<name>"): the key is refused over
// them while a plain key calling the same tool is not, the refusal names
// the rule, the audit names the key, and /metrics counts it.
func TestRateLimitNamedKeys(t *testing.T) {
	be := startBackend(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [%s], "gateway": {"api_keys": [
  {"name": "ci-bot", "key_env": "CI_KEY", "rate_limit": "2/h"},
  {"name": "slow", "key_env": "SLOW_KEY", "max_concurrent": 1},
  "plain-secret"]}}`, be.template("demo")))
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}, env: []string{"CI_KEY=ci-secret", "SLOW_KEY=slow-secret"}})
	for i := range 2 {
		if st, _, code := keyedCall(t, d, "ci-secret", "demo.echo", `{"i": 1}`); st != http.StatusOK {
			t.Fatalf("ci-bot call %d: %d %s", i, st, code)
		}
	}
	st, retry, code := keyedCall(t, d, "ci-secret", "demo.echo", `{"i": 1}`)
	if st != http.StatusTooManyRequests || code != "rate_limited" || retry == "" {
		t.Errorf("ci-bot's third call: %d %q Retry-After %q, want 429 rate_limited", st, code, retry)
	}
	for i := range 3 {
		if st, _, code := keyedCall(t, d, "plain-secret", "demo.echo", `{"i": 1}`); st != http.StatusOK {
			t.Errorf("plain key call %d: %d %s", i, st, code)
		}
	}
	// slow: one call at a time.
	first := make(chan int, 1)
	before := be.F.Calls()
	go func() {
		st, _, _ := keyedCall(t, d, "slow-secret", "demo.sleep", `{"ms": 3000}`)
		first <- st
	}()
	eventually(t, 10*time.Second, "slow's first sleep at the backend", func() bool { return be.F.Calls() == before+1 })
	if st, _, code := keyedCall(t, d, "slow-secret", "demo.echo", `{"i": 1}`); st != http.StatusTooManyRequests || code != "rate_limited" {
		t.Errorf("slow's second concurrent call: %d %s, want 429 rate_limited", st, code)
	}
	if st, _, _ := keyedCall(t, d, "ci-secret", "demo.sleep", `{"ms": 1}`); st != http.StatusTooManyRequests {
		t.Errorf("ci-bot is still over its rate: %d", st)
	}
	if st := <-first; st != http.StatusOK {
		t.Errorf("slow's first sleep: %d", st)
	}

	var page struct {
		Records []struct{ Principal, Tool, Outcome string } `json:"records"`
	}
	eventually(t, 5*time.Second, "the refusals in the audit log", func() bool {
		_, body := request(t, http.MethodGet, d.URL+"/admin/audit?outcome=rate_limited", "", "")
		page.Records = nil
		_ = json.Unmarshal(body, &page)
		return len(page.Records) >= 3
	})
	principals := map[string]int{}
	for _, r := range page.Records {
		principals[r.Principal]++
	}
	if principals["ci-bot"] != 2 || principals["slow"] != 1 {
		t.Errorf("refusals by principal %v, want ci-bot 2, slow 1", principals)
	}
	_, metrics := request(t, http.MethodGet, d.URL+"/metrics", "", "")
	for _, want := range []string{`utcpd_rate_limit_refused_total{limit="rate",rule="apikey:ci-bot"} 2`,
		`utcpd_rate_limit_refused_total{limit="max_concurrent",rule="apikey:slow"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(metrics), "rate_limit"))
		}
	}
}
