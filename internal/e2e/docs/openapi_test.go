package docs

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/utcpd/utcpd/transports/transporttest"
)

// TestOpenAPIValidates validates the /openapi.json a real daemon serves
// with @apidevtools/swagger-parser (pinned in testdata/peer), the
// validator client generators build on: the document must pass its
// OpenAPI 3.1 schema and semantic checks. That the validator is not
// lenient is shown on the same document with the info.license it once
// had ({"name": ...} alone, which OpenAPI 3.1 refuses): it must fail.
func TestOpenAPIValidates(t *testing.T) {
	peer := transporttest.NPMPeer(t, "@apidevtools/swagger-parser")
	root := repoRoot(t)
	base := startServe(t, binaries(t, root))

	res := validateOpenAPI(t, peer, base+"/openapi.json")
	if !res.OK {
		t.Fatalf("swagger-parser refuses the served /openapi.json: %s", res.Error)
	}
	if res.OpenAPI != "3.1.0" || res.Paths < 20 {
		t.Errorf("validated openapi %q with %d paths; want 3.1.0 and every route (20 or more)", res.OpenAPI, res.Paths)
	}

	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	doc["info"].(map[string]any)["license"] = map[string]any{"name": "see the repository"}
	broken, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(broken)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	res = validateOpenAPI(t, peer, "http://"+ln.Addr().String()+"/openapi.json")
	if res.OK || !strings.Contains(res.Error, "license") {
		t.Errorf("swagger-parser on a license without url or identifier: ok=%v error=%q; want a refusal naming the license", res.OK, res.Error)
	}
}

// validation is validate.cjs's answer.
type validation struct {
	OK      bool   `json:"ok"`
	OpenAPI string `json:"openapi"`
	Paths   int    `json:"paths"`
	Error   string `json:"error"`
}

// validateOpenAPI runs testdata/peer/validate.cjs on url.
func validateOpenAPI(t *testing.T, peer transporttest.Peer, url string) validation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, peer.Node, filepath.Join(peer.Dir, "validate.cjs"), url)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var v validation
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		t.Fatalf("validate.cjs %s: %v; its output %q is not its JSON line: %v", url, err, out, jerr)
	}
	if v.OK != (err == nil) {
		t.Fatalf("validate.cjs %s: ok=%v but exit %v", url, v.OK, err)
	}
	return v
}

// startServe runs the built utcpd serve on 127.0.0.1:0 with a fresh
// HOME and data dir and no configuration, waits until /readyz answers
// 200 and returns its base URL; cleanup stops it.
func startServe(t *testing.T, bins string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(bins, "utcpd"), "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(home, "data"))
	cmd.Dir = home
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "UTCPD_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+home)
	var log transporttest.SyncBuffer
	cmd.Stderr = &log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("utcpd serve's log:\n%s", log.String())
		}
	})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "utcpd listening on "); ok {
				urlc <- u
			}
		}
	}()
	var base string
	select {
	case base = <-urlc:
	case <-time.After(30 * time.Second):
		t.Fatalf("utcpd serve did not print its address\n%s", log.String())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz did not answer 200 within 30 s\n%s", base, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
