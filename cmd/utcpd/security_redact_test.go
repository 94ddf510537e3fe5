package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecurityRedactionByValue replays issue 14's redaction leaks against
// the real binary: a manual template whose URL carries ?api_key=… and
// user info, with a header resolved from a variable; registrations (from
// the config and the admin API) that fail on such URLs; and a reviewed call whose arguments hold an OpenAI
// and a GitHub token. None of the secrets may appear in GET
// /admin/manuals, GET /admin/manuals/{name}, the error answers, GET
// /admin/reviews, GET /admin/reviews/{id}, GET /v1/reviews/{id}, GET
// /admin/audit, or the daemon's log (at debug level).
func TestSecurityRedactionByValue(t *testing.T) {
	t.Parallel()
	be := startBackend(t)
	dir := t.TempDir()
	const (
		querySecret  = "SECRET123qv"
		headerSecret = "HEADERSECRET456hv"
		userSecret   = "USERPASS789up"
		openAIKey    = "sk-proj-Ab3dEfGhIjKlMnOpQrStUvWx0123456789"
		githubToken  = "ghp_0123456789abcdefghijABCDEFGHIJklmnop"
	)
	secrets := []string{querySecret, headerSecret, userSecret, "Ab3dEfGhIjKlMnOpQrStUvWx", "0123456789abcdefghijABCDEFGHIJ"}
	host := strings.TrimPrefix(be.URL, "http://")
	writeFile(t, filepath.Join(dir, "utcpd.json"), fmt.Sprintf(`{
  "manual_call_templates": [{"name": "fix", "call_template_type": "http", "http_method": "GET",
    "url": %q, "headers": {"X-Api-Key": "${API_KEY}"}},
    {"name": "broken", "call_template_type": "http", "http_method": "GET", "url": %q}],
  "gateway": {
    "guards": [{"kind": "policy", "default": "allow", "rules": [{"tools": ["fix.echo"], "decision": "review", "reason": "echo needs a look"}]}],
    "review_timeout": "1m"
  }
}
`, be.URL+"/utcp?api_key="+querySecret+"&format=json", "http://bob:"+userSecret+"@127.0.0.1:9x/utcp?api_key="+querySecret))
	tok := randomToken(t)
	d := startDaemon(t, daemonOpts{dir: dir, env: []string{"UTCPD_ADMIN_TOKEN=" + tok, "UTCPD_LOG_LEVEL=debug", "fix_API_KEY=" + headerSecret}})

	noSecret := func(what string, body []byte) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(string(body), s) {
				t.Errorf("%s shows the secret %q: %s", what, s, body)
			}
		}
	}
	get := func(path, token string) []byte {
		t.Helper()
		st, body := request(t, http.MethodGet, d.URL+path, token, "")
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, st, body)
		}
		return body
	}

	// A manual registered through the admin API with user info and an
	// api_key in its URL.
	st, body := request(t, http.MethodPost, d.URL+"/admin/manuals", tok, fmt.Sprintf(
		`{"name": "cred", "call_template_type": "http", "http_method": "GET", "url": "http://alice:%s@%s/utcp?token=%s"}`, userSecret, host, querySecret))
	if st != http.StatusOK && st != http.StatusCreated {
		t.Fatalf("registering cred: %d %s", st, body)
	}
	noSecret("the registration answer", body)

	list := get("/admin/manuals", tok)
	noSecret("GET /admin/manuals", list)
	if !strings.Contains(string(list), `"fix"`) || !strings.Contains(string(list), `"cred"`) {
		t.Fatalf("GET /admin/manuals lacks the manuals: %s", list)
	}
	fix := get("/admin/manuals/fix", tok)
	noSecret("GET /admin/manuals/fix", fix)
	for _, kept := range []string{"api_key=[redacted]", "format=json", "${API_KEY}"} {
		if !strings.Contains(string(fix), kept) {
			t.Errorf("GET /admin/manuals/fix lacks %q: %s", kept, fix)
		}
	}
	cred := get("/admin/manuals/cred", tok)
	noSecret("GET /admin/manuals/cred", cred)
	if !strings.Contains(string(cred), "alice:[redacted]@") {
		t.Errorf("GET /admin/manuals/cred: %s", cred)
	}

	// Registrations that fail on such URLs: unreachable, and unparsable.
	for _, url := range []string{
		"http://127.0.0.1:1/utcp?api_key=" + querySecret,
		"http://bob:" + userSecret + "@127.0.0.1:9x/utcp?api_key=" + querySecret,
	} {
		st, body := request(t, http.MethodPost, d.URL+"/admin/manuals", tok,
			fmt.Sprintf(`{"name": "bad", "call_template_type": "http", "http_method": "GET", "url": %q}`, url))
		if st < 400 || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("registering %s: %d %s, want an error", url, st, body)
		}
		noSecret("the error answer for "+url, body)
	}

	// A reviewed call whose arguments hold tokens, parked.
	st, body = request(t, http.MethodPost, d.URL+"/v1/tools/fix.echo/call?wait=false", "",
		fmt.Sprintf(`{"arguments": {"prompt": "use %s", "gh": %q, "n": 1}}`, openAIKey, githubToken))
	var parked struct {
		ReviewID string `json:"review_id"`
	}
	if st != http.StatusAccepted || json.Unmarshal(body, &parked) != nil || parked.ReviewID == "" {
		t.Fatalf("parking fix.echo: %d %s", st, body)
	}
	reviews := get("/admin/reviews", tok)
	noSecret("GET /admin/reviews", reviews)
	if !strings.Contains(string(reviews), parked.ReviewID) || !strings.Contains(string(reviews), "sk-[redacted]") ||
		!strings.Contains(string(reviews), "ghp_[redacted]") {
		t.Errorf("GET /admin/reviews does not show the redacted arguments: %s", reviews)
	}
	noSecret("GET /admin/reviews/{id}", get("/admin/reviews/"+parked.ReviewID, tok))
	noSecret("GET /v1/reviews/{id}", get("/v1/reviews/"+parked.ReviewID, ""))
	if st, body := request(t, http.MethodPost, d.URL+"/admin/reviews/"+parked.ReviewID+"/deny", tok,
		fmt.Sprintf(`{"note": "do not paste %s here"}`, githubToken)); st != http.StatusOK {
		t.Fatalf("deny: %d %s", st, body)
	}
	noSecret("GET /admin/reviews?status=all", get("/admin/reviews?status=all", tok))
	var polled, audit []byte
	eventually(t, 10*time.Second, "the denied review", func() bool {
		polled = get("/v1/reviews/"+parked.ReviewID, "")
		return strings.Contains(string(polled), `"denied"`)
	})
	noSecret("GET /v1/reviews/{id} after the denial", polled)
	if !strings.Contains(string(polled), "ghp_[redacted]") {
		t.Errorf("GET /v1/reviews/{id} does not show the redacted note: %s", polled)
	}
	eventually(t, 10*time.Second, "the audit record of fix.echo", func() bool {
		audit = get("/admin/audit?tool=fix.echo", tok)
		return strings.Contains(string(audit), `"review"`)
	})
	noSecret("GET /admin/audit", audit)
	if be.F.Calls() != 0 {
		t.Errorf("backend calls: %d, want 0 (the call was denied)", be.F.Calls())
	}

	if code := d.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	log := d.stderr.String()
	noSecret("the daemon's log", []byte(log))
	// The refused config manual's error quotes its URL: it must be in the
	// log, redacted, or the check above proves little.
	if !strings.Contains(log, "level=DEBUG") || !strings.Contains(log, "manual=broken") ||
		!strings.Contains(log, "bob:[redacted]@127.0.0.1:9x/utcp?api_key=[redacted]") {
		t.Errorf("the log lacks the debug lines or the redacted URL of the broken manual:\n%s", log)
	}
}
