package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestMCPMalformedInput: the daemon's /mcp answers a body that is not
// JSON, and a request it cannot serve, with JSON-RPC error objects, not
// text/plain.
func TestMCPMalformedInput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{args: []string{"--no-store"}})
	for _, tc := range []struct {
		body, accept string
		status       int
		rpc          float64
	}{
		{`{"jsonrpc": "2.0", "id": 1, "method": "initialize", `, "application/json, text/event-stream", http.StatusBadRequest, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "text/html", http.StatusBadRequest, -32600},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+"/mcp", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", tc.accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
			Error   struct {
				Code float64 `json:"code"`
				Data struct {
					Code string `json:"code"`
				} `json:"data"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&msg)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" ||
			msg.JSONRPC != "2.0" || msg.Error.Code != tc.rpc || msg.Error.Data.Code != "invalid_request" {
			t.Errorf("POST /mcp %q: %d %q %+v %v", tc.body, resp.StatusCode, resp.Header.Get("Content-Type"), msg, err)
		}
	}
}
