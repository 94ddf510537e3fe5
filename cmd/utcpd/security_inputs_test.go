package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// TestSecuritySpentOrStolenRequestState replays taking over another
// caller's call parked on an input-required result (protocol 2026-07-28,
// docs/security.md "Server requests") against the real binary: Mallory,
// with her own API key and Alice's requestState (leaked, say, through a
// log), retries Alice's call with her own answer; she is told the state
// is unknown and her answer never reaches the server. Alice's retry
// completes the call with Alice's answer, after which the state is spent
// for her too.
func TestSecuritySpentOrStolenRequestState(t *testing.T) {
	t.Parallel()
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(conf.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "utcpd.json")
	writeFile(t, cfg, fmt.Sprintf(`{"manual_call_templates": [{"name": "conf", "call_template_type": "mcp", "config": {"mcpServers": {"srv": {"url": %q}}}}],
  "gateway": {"api_keys": ["k-alice", "k-mallory"], "mcp": {"native_names": ["conf.srv"]}}}`, conf.URL))
	d := startDaemon(t, daemonOpts{dir: dir, args: []string{"--config", cfg}})
	call := func(key string, extra map[string]any) map[string]any {
		t.Helper()
		params := map[string]any{"name": confserver.ToolElicitation, "arguments": map[string]any{"message": "your name?"},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
			}}
		for k, v := range extra {
			params[k] = v
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+"/mcp", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": confserver.ToolElicitation, "Authorization": "Bearer " + key} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && json.Unmarshal([]byte(data), &out) == nil && out["id"] != nil {
					break
				}
			}
		} else {
			_ = json.NewDecoder(resp.Body).Decode(&out)
		}
		if out == nil {
			t.Fatalf("status %d, no JSON-RPC response", resp.StatusCode)
		}
		return out
	}
	text := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	first, _ := call("k-alice", nil)["result"].(map[string]any)
	if first == nil || first["resultType"] != "input_required" {
		t.Fatalf("Alice's call: %v", first)
	}
	var id string
	for k := range first["inputRequests"].(map[string]any) {
		id = k
	}
	answer := func(name string) map[string]any {
		return map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"username": name, "email": name + "@example.com"}}}
	}
	stolen := call("k-mallory", map[string]any{"requestState": first["requestState"], "inputResponses": answer("mallory")})
	if er, _ := stolen["error"].(map[string]any); er == nil || !strings.Contains(text(er), "requestState is unknown or expired") {
		t.Fatalf("Mallory's retry with Alice's requestState: %v", stolen)
	}
	own := call("k-alice", map[string]any{"requestState": first["requestState"], "inputResponses": answer("alice")})
	res, _ := own["result"].(map[string]any)
	if res == nil || !strings.Contains(text(res), `\"username\":\"alice\"`) || strings.Contains(text(res), "mallory") {
		t.Fatalf("Alice's retry: %v", own)
	}
	spent := call("k-alice", map[string]any{"requestState": first["requestState"], "inputResponses": answer("alice")})
	if er, _ := spent["error"].(map[string]any); er == nil || !strings.Contains(text(er), "requestState is unknown or expired") {
		t.Errorf("a spent requestState: %v", spent)
	}
}
