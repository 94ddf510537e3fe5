package utcpmanual_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/utcpd/utcpd/api/utcpmanual"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/utcp"
)

// TestTypeScriptClient registers the gateway as one manual in the
// TypeScript UTCP reference client (@utcp/sdk 1.1.2 with @utcp/http
// 1.1.11, unmodified; testdata/peer/client.mjs), which lists the tools
// and calls some with integer, number, boolean, string, array and nested
// object arguments. The Go side checks the exact JSON values the tool
// received, a real HTTP backend's result, a tool error and a guard
// refusal as the client saw them, and the audit records. It needs node
// and `npm ci` in testdata/peer; set UTCPD_NPM_PEERS=1 to run it (CI
// does), and it fails when that is set and the peer is missing.
func TestTypeScriptClient(t *testing.T) {
	peer := transporttest.NPMPeer(t, "@utcp/sdk", "@utcp/http")
	node, dir := peer.Node, peer.Dir

	e := newEnv(t, envOptions{keys: []string{apiKey}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "client.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "UTCPD_URL="+e.url, "utcpd_UTCPD_API_KEY="+apiKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), strings.ReplaceAll(stderr.String(), apiKey, "<api key>"))
	}
	// The client's own error log prints whole requests, Authorization
	// included: keep the key out of the test log.
	t.Logf("client log:\n%s", strings.ReplaceAll(stderr.String(), apiKey, "<api key>"))
	if strings.Contains(stdout.String(), apiKey) {
		t.Error("a result shows the API key")
	}

	type outcome struct {
		OK    json.RawMessage `json:"ok"`
		Error *struct {
			Status int             `json:"status"`
			Data   json.RawMessage `json:"data"`
		} `json:"error"`
	}
	var got struct {
		Tools                           []string
		Echo, Add, Weird, Crash, Denied outcome
	}
	decode(t, stdout.Bytes(), &got)

	wantTools := []string{"utcpd.demo.add", "utcpd.demo.count", "utcpd.demo.echo", "utcpd.demo.fail", "utcpd.demo.sleep",
		"utcpd.typed.crash", "utcpd.typed.echo", "utcpd.typed.odd", "utcpd.typed.plain", "utcpd.typed.we ird/$HOME{x}"}
	if diff := cmp.Diff(wantTools, got.Tools); diff != "" {
		t.Errorf("tools the client registered (-want +got):\n%s", diff)
	}

	// The tool received exactly the client's arguments, JSON types and
	// all: integer, number, boolean, strings with URL-special characters,
	// arrays, nested objects (query notation) and the body_field object
	// (with null, empty object and mixed array inside).
	same := func(what string, gotJSON json.RawMessage, want string) {
		t.Helper()
		var g, w any
		decode(t, gotJSON, &g)
		decode(t, []byte(want), &w)
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	if got.Echo.Error != nil {
		t.Fatalf("typed.echo failed: %d %s", got.Echo.Error.Status, got.Echo.Error.Data)
	}
	same("typed.echo arguments", got.Echo.OK, `{"count":3,"ratio":0.5,"flag":true,"label":"héllo wörld & co+[x]","tags":["a","b,c"],"ids":[7,8],
		"options":{"level":2,"deep":{"on":false,"name":"12"}},"config":{"nested":{"list":[1,null,{"z":true}],"empty":{}},"s":"x"}}`)
	if got.Add.Error != nil {
		t.Fatalf("demo.add failed: %d %s", got.Add.Error.Status, got.Add.Error.Data)
	}
	same("demo.add result", got.Add.OK, `{"sum":5.5}`)
	if got.Weird.Error != nil {
		t.Fatalf("the tool with an odd name failed: %d %s", got.Weird.Error.Status, got.Weird.Error.Data)
	}
	same("odd name result", got.Weird.OK, `{"label":"x"}`)

	for _, c := range []struct {
		name   string
		o      outcome
		status int
		code   utcp.Code
	}{{"typed.crash", got.Crash, 502, utcp.CodeToolError}, {"typed.echo count 13", got.Denied, 403, utcp.CodeGuardDenied}} {
		var env struct{ Error struct{ Code utcp.Code } }
		if c.o.Error == nil || c.o.Error.Status != c.status || json.Unmarshal(c.o.Error.Data, &env) != nil || env.Error.Code != c.code {
			t.Errorf("%s: the client saw %+v, want %d %s", c.name, c.o, c.status, c.code)
		}
	}

	recs := e.recs()
	if len(recs) != 5 {
		t.Errorf("%d audited calls, want 5: %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Front != utcpmanual.FrontName || !strings.HasPrefix(r.Principal, "key:") {
			t.Errorf("record %s: front %q principal %q", r.Tool, r.Front, r.Principal)
		}
	}
}
