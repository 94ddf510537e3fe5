package mcpfront

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/utcp"
)

func TestListTools(t *testing.T) {
	// A small page size makes the client follow nextCursor.
	e := newEnv(t, envOptions{front: Options{PageSize: 2}})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			tools := c.tools(t)
			var names []string
			byName := map[string]*mcp.Tool{}
			for _, tool := range tools {
				names = append(names, tool.Name)
				byName[tool.Name] = tool
			}
			slices.Sort(names)
			want := []string{"demo.add", "demo.count", "demo.echo", "demo.fail", "demo.sleep"}
			if diff := cmp.Diff(want, names); diff != "" {
				t.Fatalf("tool names (-want +got):\n%s", diff)
			}
			add := byName["demo.add"]
			if add.Description != "Add returns the sum of two numbers a and b." {
				t.Errorf("description = %q", add.Description)
			}
			in, _ := json.Marshal(add.InputSchema)
			if !strings.Contains(string(in), `"required":["a","b"]`) || !strings.Contains(string(in), `"type":"object"`) {
				t.Errorf("input schema = %s", in)
			}
			out, _ := json.Marshal(add.OutputSchema)
			if !strings.Contains(string(out), `"sum"`) {
				t.Errorf("output schema = %s", out)
			}
			if byName["demo.fail"].OutputSchema != nil {
				t.Errorf("fail has no output schema, got %v", byName["demo.fail"].OutputSchema)
			}
			if got := add.Meta[MetaQualifiedName]; got != "demo.add" {
				t.Errorf("_meta qualified name = %v", got)
			}
			if c.session.InitializeResult() != nil {
				caps := c.session.InitializeResult().Capabilities
				if caps.Tools == nil || !caps.Tools.ListChanged {
					t.Errorf("capabilities = %+v, want tools.listChanged", caps)
				}
			}
		})
	}
}

func TestNegotiatedVersions(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			got := c.session.InitializeResult().ProtocolVersion
			want := pv
			if pv == "" {
				want = "2026-07-28"
			}
			if got != want {
				t.Errorf("negotiated %q, want %q", got, want)
			}
			if (c.session.ID() != "") != (pv != "") {
				t.Errorf("session id %q: want one exactly for the session-based revisions", c.session.ID())
			}
		})
	}
}

func TestCallAdd(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			res, err := c.call(t, "demo.add", `{"a":2,"b":3}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("isError: %s", text(res))
			}
			if got := text(res); got != `{"sum":5}` {
				t.Errorf("text = %q", got)
			}
			sc, _ := json.Marshal(res.StructuredContent)
			if string(sc) != `{"sum":5}` {
				t.Errorf("structuredContent = %s", sc)
			}
			rec := e.lastRecord()
			if rec.Front != FrontName || rec.Qualified != "demo.add" || rec.Code != "" {
				t.Errorf("call record = %+v", rec)
			}
		})
	}
}

func TestToolErrorIsError(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			res, err := c.call(t, "demo.fail", `{"message":"the disk is on fire"}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(text(res), "the disk is on fire") {
				t.Errorf("result = isError %v %q, want isError with the tool's message", res.IsError, text(res))
			}
		})
	}
}

func TestUnknownTool(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			_, err := c.call(t, "demo.nope", `{}`, nil)
			if err == nil {
				t.Fatal("calling an unknown tool succeeded")
			}
			if code, _ := rpcCode(t, err); code != jsonrpc.CodeInvalidParams {
				t.Errorf("JSON-RPC code %d, want %d", code, jsonrpc.CodeInvalidParams)
			}
		})
	}
}

func TestInvalidArguments(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			res, err := c.call(t, "demo.add", `{"a":"two"}`, nil)
			if pv == "2025-06-18" {
				// Before 2025-11-25 invalid arguments are a protocol error.
				if err == nil {
					t.Fatalf("got a result (%q), want a JSON-RPC error", text(res))
				}
				code, ucode := rpcCode(t, err)
				if code != jsonrpc.CodeInvalidParams || ucode != string(utcp.CodeInvalidArguments) {
					t.Errorf("error %d %q, want -32602 invalid_arguments", code, ucode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.HasPrefix(text(res), "invalid_arguments: ") {
				t.Errorf("result = isError %v %q, want an invalid_arguments isError result", res.IsError, text(res))
			}
			// Arguments that are not an object never reach the gateway.
			_, err = c.call(t, "demo.add", `[1,2]`, nil)
			if code, _ := rpcCode(t, err); code != jsonrpc.CodeInvalidParams {
				t.Errorf("array arguments: JSON-RPC code %d, want -32602", code)
			}
		})
	}
}

func TestGuardDeny(t *testing.T) {
	deny := guard.Func(func(_ context.Context, c *guard.Call) (guard.Verdict, error) {
		if c.Arguments["blocked"] == true {
			return guard.Verdict{Decision: guard.Deny, Reason: "blocked by the test policy"}, nil
		}
		return guard.Verdict{Decision: guard.Allow}, nil
	})
	e := newEnv(t, envOptions{guard: deny})
	before := e.fix.Calls()
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			res, err := c.call(t, "demo.echo", `{"blocked":true}`, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.HasPrefix(text(res), "guard_denied: ") || !strings.Contains(text(res), "blocked by the test policy") {
				t.Errorf("result = isError %v %q, want a guard_denied isError result", res.IsError, text(res))
			}
			if rec := e.lastRecord(); rec.Code != utcp.CodeGuardDenied || rec.Front != FrontName {
				t.Errorf("call record = %+v", rec)
			}
			res, err = c.call(t, "demo.echo", `{"blocked":false}`, nil)
			if err != nil || res.IsError {
				t.Fatalf("allowed call: %v %v", err, res)
			}
		})
	}
	if got := e.fix.Calls() - before; got != int64(len(eras)) {
		t.Errorf("the backend saw %d calls, want %d (only the allowed ones)", got, len(eras))
	}
}

func TestProgress(t *testing.T) {
	e := newEnv(t, envOptions{cli: true})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			res, err := c.call(t, "clidemo.count", `{"n":3,"delay_ms":20}`, "tok-"+eraName(pv))
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("isError: %s", text(res))
			}
			var got []float64
			var msgs []string
			for len(got) < 3 {
				select {
				case p := <-c.progress:
					if p.ProgressToken != "tok-"+eraName(pv) {
						t.Errorf("progress token %v", p.ProgressToken)
					}
					got = append(got, p.Progress)
					msgs = append(msgs, p.Message)
				case <-time.After(5 * time.Second):
					t.Fatalf("got %d progress notifications, want 3", len(got))
				}
			}
			if diff := cmp.Diff([]float64{1, 2, 3}, got); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"1", "2", "3"}, msgs); diff != "" {
				t.Errorf("progress messages (-want +got):\n%s", diff)
			}
			if got := text(res); got != "1\n2\n3" {
				t.Errorf("result text = %q, want the three events", got)
			}
			if rec := e.lastRecord(); !rec.Stream {
				t.Errorf("the call did not take the stream path: %+v", rec)
			}
			// A transport that does not stream is one event.
			res, err = c.call(t, "demo.count", `{"n":3}`, "one")
			if err != nil || res.IsError {
				t.Fatalf("demo.count: %v %v", err, res)
			}
			if got := text(res); got != "[1,2,3]" {
				t.Errorf("demo.count text = %q", got)
			}
			select {
			case p := <-c.progress:
				if p.Progress != 1 {
					t.Errorf("progress %v, want 1", p.Progress)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no progress notification for a single-event call")
			}
		})
	}
}

func TestListChanged(t *testing.T) {
	e := newEnv(t, envOptions{})
	for i, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c := e.mustConnect(pv)
			if pv == "" {
				// The 2026-07-28 client learns of changes through its
				// subscriptions/listen stream; give it time to open.
				waitFor(t, "the listen stream", func() bool { return e.front.Sessions() > 0 })
			}
			name := []string{"extra_a", "extra_b", "extra_c"}[i]
			e.register(name, e.demoManual(name))
			select {
			case <-c.changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no notifications/tools/list_changed after registering a manual")
			}
			var found bool
			for _, tool := range c.tools(t) {
				found = found || tool.Name == name+".add"
			}
			if !found {
				t.Errorf("%s.add is not listed after list_changed", name)
			}
			if err := e.g.DeregisterManual(t.Context(), name); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no notifications/tools/list_changed after removing a manual")
			}
		})
	}
}

// post sends one raw JSON-RPC initialize POST.
func post(t *testing.T, url string, header map[string]string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func TestOrigin(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{AllowedOrigins: []string{"https://App.Example.com/"}}})
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"http://127.0.0.1", http.StatusOK},
		{"http://[::1]:8080", http.StatusOK},
		{"https://app.example.com", http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"http://localhost.evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
		{"https://app.example.com.evil.example", http.StatusForbidden},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			h := map[string]string{}
			if tc.origin != "" {
				h["Origin"] = tc.origin
			}
			resp := post(t, e.url, h)
			if resp.StatusCode != tc.want {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, b)
			}
			if tc.want == http.StatusForbidden {
				var msg struct {
					Error struct {
						Code int64 `json:"code"`
						Data struct {
							Code string `json:"code"`
						} `json:"data"`
					} `json:"error"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Error.Data.Code != string(utcp.CodeForbidden) {
					t.Errorf("body: %v %+v", err, msg)
				}
			} else if tc.origin != "" && resp.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Errorf("Access-Control-Allow-Origin = %q", resp.Header.Get("Access-Control-Allow-Origin"))
			}
		})
	}
	t.Run("preflight", func(t *testing.T) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodOptions, e.url, nil)
		req.Header.Set("Origin", "http://localhost:6274")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Session-Id") {
			t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("dns rebinding", func(t *testing.T) {
		resp := post(t, e.url, map[string]string{"Host": "evil.example"})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Host evil.example: status %d, want 403", resp.StatusCode)
		}
	})
}

func TestAPIKeys(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{APIKeys: []string{"k1", "k2"}}})
	for _, tc := range []struct {
		name, auth string
	}{{"missing", ""}, {"wrong", "Bearer nope"}, {"not bearer", "Basic azE6"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			resp := post(t, e.url, h)
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("status %d, WWW-Authenticate %q; want 401 with a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		})
	}
	if _, err := e.connect("2025-11-25", ""); err == nil {
		t.Error("a client without a key connected")
	}
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			c, err := e.connect(pv, "k2")
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.call(t, "demo.add", `{"a":1,"b":1}`, nil)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			want, _ := httpx.NewKeys([]string{"k2"}).Match("k2")
			if rec := e.lastRecord(); rec.Principal != want {
				t.Errorf("principal %q, want %q", rec.Principal, want)
			}
		})
	}
	t.Run("session bound to its key", func(t *testing.T) {
		c, err := e.connect("2025-11-25", "k1")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url,
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer k2")
		req.Header.Set(headerSessionID, c.session.ID())
		req.Header.Set(headerProtocolVersion, "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("another key on the session: status %d, want 403", resp.StatusCode)
		}
	})
}

func TestSessionLimits(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{MaxSessions: 2}})
	a := e.mustConnect("2025-11-25")
	e.mustConnect("2025-06-18")
	if n := e.front.Sessions(); n != 2 {
		t.Fatalf("%d sessions open, want 2", n)
	}
	resp := post(t, e.url, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third session: status %d, want 503 with Retry-After", resp.StatusCode)
	}
	// A 2026-07-28 client's subscriptions/listen stream counts too.
	modern, err := e.connect("", "")
	if err == nil {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, _ = modern.session.ListTools(ctx, nil)
		cancel()
		if n := e.front.Sessions(); n > 2 {
			t.Errorf("%d sessions and listen streams open, limit 2", n)
		}
		_ = modern.session.Close()
	}
	// Ending a session makes room.
	if err := a.session.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the closed session to go", func() bool { return e.front.Sessions() < 2 })
	e.mustConnect("2025-11-25")
}

func TestSessionIdleExpiry(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{SessionIdleTimeout: 200 * time.Millisecond}})
	c := e.mustConnect("2025-11-25")
	waitFor(t, "the idle session to expire", func() bool { return e.front.Sessions() == 0 })
	if _, err := c.session.ListTools(t.Context(), nil); err == nil {
		t.Error("an expired session still answers")
	}
	// A session in use does not expire.
	c = e.mustConnect("2025-11-25")
	for range 5 {
		if _, err := c.session.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("a session in use expired: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestRunStdio(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{Principal: "stdio-user"}})
	for _, pv := range eras {
		t.Run(eraName(pv), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			serverT, clientT := mcp.NewInMemoryTransports()
			done := make(chan error, 1)
			go func() { done <- e.front.Run(ctx, serverT) }()
			c := newClient()
			if err := c.open(t, clientT, pv); err != nil {
				t.Fatal(err)
			}
			// The front follows the registry asynchronously: the previous
			// subtest's extra manual may still be leaving.
			waitFor(t, "the five demo tools", func() bool { return len(c.tools(t)) == 5 })
			res, err := c.call(t, "demo.add", `{"a":40,"b":2}`, nil)
			if err != nil || text(res) != `{"sum":42}` {
				t.Fatalf("add: %v %v", err, res)
			}
			if rec := e.lastRecord(); rec.Principal != "stdio-user" || rec.Front != FrontName {
				t.Errorf("call record %+v", rec)
			}
			e.register("stdio_extra", e.demoManual("stdio_extra"))
			select {
			case <-c.changed:
			case <-time.After(5 * time.Second):
				if pv != "" { // a 2026-07-28 session over stdio gets it through subscriptions/listen
					t.Fatal("no list_changed over stdio")
				}
			}
			if err := e.g.DeregisterManual(t.Context(), "stdio_extra"); err != nil {
				t.Fatal(err)
			}
			_ = c.session.Close()
			cancel()
			select {
			case err := <-done:
				// Closing the client's end first may surface as a closed
				// pipe on the server's end; both are a clean end.
				if err != nil && !errors.Is(err, io.ErrClosedPipe) {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return")
			}
		})
	}
}

// TestJSONSessions: a session whose client declares neither sampling nor
// elicitation gets its answers to POSTs as application/json (initialize
// and tools/call alike); a client that declares sampling gets an SSE
// stream per POST, on which a call's server requests can reach it; a
// deleted JSON session is unknown afterwards.
func TestJSONSessions(t *testing.T) {
	e := newEnv(t, envOptions{})
	send := func(id, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if id != "" {
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	initialize := func(caps string) *http.Response {
		return send("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`)
	}

	resp := initialize(`{"roots":{"listChanged":true}}`)
	id := resp.Header.Get("Mcp-Session-Id")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" || id == "" {
		t.Fatalf("initialize without sampling: %d %q session %q, want 200 application/json with a session", resp.StatusCode, ct, id)
	}
	if r := send(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", r.StatusCode)
	}
	resp = send(id, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":2,"b":3}}}`)
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
		t.Fatalf("tools/call in a JSON session: %d %q %s, want 200 application/json", resp.StatusCode, ct, body)
	}
	var answer struct {
		ID     int `json:"id"`
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.ID != 2 || answer.Result.StructuredContent["sum"] != float64(5) {
		t.Fatalf("tools/call answer %s (%v), want id 2 and sum 5", body, err)
	}

	for _, caps := range []string{`{"sampling":{}}`, `{"elicitation":{}}`} {
		if r := initialize(caps); r.Header.Get("Content-Type") != "text/event-stream" || r.Header.Get("Mcp-Session-Id") == "" {
			t.Errorf("initialize with %s: %d %q, want an SSE stream", caps, r.StatusCode, r.Header.Get("Content-Type"))
		}
	}

	del, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, e.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("Mcp-Session-Id", id)
	dr, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	dr.Body.Close()
	if r := send(id, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("tools/list after DELETE: %d, want 404", r.StatusCode)
	}
	if _, ok := e.front.jsonIDs.Load(id); ok {
		t.Errorf("the deleted session's ID is still kept")
	}
}
