package mcpfront

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestMalformedInputIsJSONRPC: what the SDK refuses at the HTTP level —
// a body that is not JSON, a missing Accept, an unknown session, a GET
// without a session, a body over the cap — is answered with a JSON-RPC
// error object (no id, the utcpd code in data), never text/plain, with
// the SDK's status.
func TestMalformedInputIsJSONRPC(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{MaxBodyBytes: 1024}})
	const accept = "application/json, text/event-stream"
	for _, tc := range []struct {
		name    string
		method  string
		body    string
		header  map[string]string
		status  int
		rpc     int64
		code    string
		message string
	}{
		{"bad JSON", http.MethodPost, `{"jsonrpc": "2.0", "id": 1, "method": `, map[string]string{"Accept": accept},
			http.StatusBadRequest, -32700, "invalid_request", "malformed payload"},
		{"not a JSON-RPC message", http.MethodPost, `[1, 2, 3]`, map[string]string{"Accept": accept},
			http.StatusBadRequest, -32600, "invalid_request", "malformed payload"},
		{"no Accept", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "text/html"},
			http.StatusBadRequest, -32600, "invalid_request", "Accept"},
		{"unknown session", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			map[string]string{"Accept": accept, headerSessionID: "no-such-session", headerProtocolVersion: "2025-11-25"},
			http.StatusNotFound, -32001, "not_found", "session not found"},
		{"GET without a session", http.MethodGet, "", map[string]string{"Accept": "text/event-stream"},
			http.StatusBadRequest, -32600, "invalid_request", "Mcp-Session-Id"},
		{"body over the cap", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 2000) + `"}}`,
			map[string]string{"Accept": accept}, http.StatusRequestEntityTooLarge, -32000, "payload_too_large", "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, e.url, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.method == http.MethodPost {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d, Content-Type %q, want %d application/json: %s", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, raw)
			}
			var msg struct {
				JSONRPC string           `json:"jsonrpc"`
				ID      *json.RawMessage `json:"id"`
				Error   struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
					Data    struct {
						Code    string         `json:"code"`
						Details map[string]any `json:"details"`
					} `json:"data"`
				} `json:"error"`
			}
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&msg); err != nil {
				t.Fatalf("not one JSON-RPC error object (%v): %s", err, raw)
			}
			if msg.JSONRPC != "2.0" || msg.ID != nil && string(*msg.ID) != "null" || msg.Error.Code != tc.rpc ||
				msg.Error.Data.Code != tc.code || !strings.Contains(msg.Error.Message, tc.message) {
				t.Errorf("answer %s, want code %d, data.code %s, a message with %q", raw, tc.rpc, tc.code, tc.message)
			}
		})
	}
	// A well-formed request still works through the wrapper, streams
	// included (the go-sdk clients of the other tests), and initialize
	// answers as before.
	if resp := post(t, e.url, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("initialize: status %d", resp.StatusCode)
	}
}
