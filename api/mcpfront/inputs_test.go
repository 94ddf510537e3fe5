//lint:file-ignore SA1019 sampling is what the MCP servers behind utcpd ask; deprecated only from protocol 2026-07-28 on (SEP-2577), where it is asked as an input request

package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcpconformance/confserver"
)

// confBehind registers the conformance fixture (a go-sdk server over
// Streamable HTTP, which asks with input-required results itself) as the
// manual conf, its tools under their own names.
func confBehind(t *testing.T, front Options) *env {
	t.Helper()
	conf := httptest.NewServer(confserver.New().Handler())
	t.Cleanup(func() {
		// Registered first, so it runs last: after the front and the
		// gateway closed. A go-sdk server cannot close a session whose
		// tool still waits for an answer to its request; fail rather than
		// hang if utcpd left one unanswered.
		closed := make(chan struct{})
		go func() { conf.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(15 * time.Second):
			t.Error("the conformance server did not close within 15 s: one of its tools still waits for an answer to a request utcpd never answered")
		}
	})
	tmpl, _ := json.Marshal(map[string]any{"name": "conf", "call_template_type": "mcp",
		"config": map[string]any{"mcpServers": map[string]any{"srv": map[string]any{"url": conf.URL}}}})
	front.NativeNames = []string{"conf.srv"}
	return newEnv(t, envOptions{manuals: map[string]string{"conf": string(tmpl)}, front: front})
}

// rpc26 posts one JSON-RPC request of protocol 2026-07-28 (per-request
// _meta, capabilities caps) to url and returns its response.
func rpc26(t *testing.T, url, method string, params map[string]any, caps string) map[string]any {
	t.Helper()
	return rpc26Key(t, url, "", method, params, caps)
}

// rpc26Key is rpc26 with the API key key ("" for none).
func rpc26Key(t *testing.T, url, key, method string, params map[string]any, caps string) map[string]any {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": json.RawMessage(caps),
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
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
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(data), &m) == nil && m["id"] != nil {
				out = m
				break
			}
		}
	} else if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: status %d, %v", method, resp.StatusCode, err)
	}
	if out == nil {
		t.Fatalf("%s: status %d, no response", method, resp.StatusCode)
	}
	return out
}

// TestInputRequiredThroughFront: a client on protocol 2026-07-28 calls
// tools whose MCP server asks for sampling and elicitation. The front
// answers with input-required results (inputRequests, requestState)
// while the backend call waits, and the client's retry with the answers
// completes it: the go-sdk client fulfils them by itself and gets the
// same results as an older client gets through classic requests.
func TestInputRequiredThroughFront(t *testing.T) {
	e := confBehind(t, Options{})
	for _, pv := range []string{"", "2025-11-25"} {
		t.Run("protocol "+eraName(pv), func(t *testing.T) {
			asked := make(chan string, 4)
			cl := mcp.NewClient(&mcp.Implementation{Name: "ada", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					tc, _ := r.Params.Messages[0].Content.(*mcp.TextContent)
					return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "ada says: " + tc.Text}}, nil
				},
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked <- r.Params.Message
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
				},
			})
			ss, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
			if err != nil {
				t.Fatal(err)
			}
			defer ss.Close()
			res, err := ss.CallTool(t.Context(), &mcp.CallToolParams{Name: confserver.ToolElicitation, Arguments: map[string]any{"message": "who are you?"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(res); res.IsError || !strings.Contains(got, "action=accept") || !strings.Contains(got, `"username":"ada"`) {
				t.Errorf("elicitation: %q (isError %v)", got, res.IsError)
			}
			select {
			case m := <-asked:
				if m != "who are you?" {
					t.Errorf("asked %q", m)
				}
			default:
				t.Error("the client's elicitation handler was not asked")
			}
			res, err = ss.CallTool(t.Context(), &mcp.CallToolParams{Name: confserver.ToolSampling, Arguments: map[string]any{"prompt": "hello"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(res); res.IsError || !strings.Contains(got, "ada says: hello") {
				t.Errorf("sampling: %q (isError %v)", got, res.IsError)
			}
		})
	}
	if n := len(e.front.inputs.calls); n != 0 {
		t.Errorf("%d calls still parked after their results", n)
	}
}

// TestInputRequiredWire: the wire form of SEP-2322 on the front, by raw
// requests: the first tools/call answers resultType input_required with
// the server's elicitation under an id and an opaque requestState; the
// retry with inputResponses and the requestState gets the tool's result;
// the requestState is then spent, and a call parked too long is
// cancelled.
func TestInputRequiredWire(t *testing.T) {
	e := confBehind(t, Options{InputTimeout: 500 * time.Millisecond})
	const caps = `{"elicitation": {"form": {}}}`
	call := func(params map[string]any) map[string]any {
		t.Helper()
		params["name"] = confserver.ToolElicitation
		params["arguments"] = map[string]any{"message": "pick a name"}
		return rpc26(t, e.url, "tools/call", params, caps)
	}
	first := call(map[string]any{})
	res, _ := first["result"].(map[string]any)
	if res == nil || res["resultType"] != "input_required" {
		t.Fatalf("first round: %v", first)
	}
	reqs, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	if len(reqs) != 1 || state == "" {
		t.Fatalf("first round: inputRequests %v, requestState %q", reqs, state)
	}
	var id string
	for k, v := range reqs {
		id = k
		ir, _ := v.(map[string]any)
		params, _ := ir["params"].(map[string]any)
		if ir["method"] != "elicitation/create" || params["message"] != "pick a name" {
			t.Errorf("input request %s: %v", k, v)
		}
	}
	if strings.Contains(state, "conf") || len(state) < 20 {
		t.Errorf("requestState %q is not an opaque token", state)
	}

	second := call(map[string]any{"requestState": state,
		"inputResponses": map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"username": "raw", "email": "raw@example.com"}}}})
	res, _ = second["result"].(map[string]any)
	if res == nil || res["resultType"] == "input_required" || !strings.Contains(jsonText(res["content"]), `\"username\":\"raw\"`) {
		t.Fatalf("retry with the answer: %v", second)
	}

	again := call(map[string]any{"requestState": state,
		"inputResponses": map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"name": "raw"}}}})
	if er, _ := again["error"].(map[string]any); er == nil || !strings.Contains(jsonText(er), "requestState is unknown or expired") {
		t.Errorf("a spent requestState: %v", again)
	}

	// Never retried: the parked call is cancelled after InputTimeout.
	if r, _ := call(map[string]any{})["result"].(map[string]any); r == nil || r["resultType"] != "input_required" {
		t.Fatalf("a call to abandon: %v", r)
	}
	waitFor(t, "the abandoned call to be cancelled", func() bool {
		e.front.inputs.mu.Lock()
		defer e.front.inputs.mu.Unlock()
		return len(e.front.inputs.calls) == 0 && len(e.front.inputs.counts) == 0
	})
}

// TestInputRequiredLimit: one principal has at most MaxInputCalls calls
// parked on input-required results; the server's question of one more
// is declined (the server's tool then fails), and once the parked call
// is answered a new one can park again. A client on 2026-07-28 that
// declares none of the capabilities is not asked.
func TestInputRequiredLimit(t *testing.T) {
	e := confBehind(t, Options{MaxInputCalls: 1})
	const caps = `{"elicitation": {"form": {}}}`
	call := func(params map[string]any, caps string) map[string]any {
		t.Helper()
		params["name"] = confserver.ToolElicitation
		params["arguments"] = map[string]any{"message": "name?"}
		return rpc26(t, e.url, "tools/call", params, caps)
	}
	first, _ := call(map[string]any{}, caps)["result"].(map[string]any)
	if first == nil || first["resultType"] != "input_required" {
		t.Fatalf("first call: %v", first)
	}
	over := call(map[string]any{}, caps)
	res, _ := over["result"].(map[string]any)
	if res["resultType"] == "input_required" || !strings.Contains(jsonText(over), "calls waiting for its input") {
		t.Errorf("a call beyond the limit: %v", over)
	}
	var id string
	for k := range first["inputRequests"].(map[string]any) {
		id = k
	}
	done := call(map[string]any{"requestState": first["requestState"],
		"inputResponses": map[string]any{id: map[string]any{"action": "decline"}}}, caps)
	if r, _ := done["result"].(map[string]any); r == nil || !strings.Contains(jsonText(r), "action=decline") {
		t.Errorf("answering the parked call: %v", done)
	}
	if r, _ := call(map[string]any{}, caps)["result"].(map[string]any); r == nil || r["resultType"] != "input_required" {
		t.Errorf("parking again after the answer: %v", r)
	}
	none := call(map[string]any{}, `{}`)
	if r, _ := none["result"].(map[string]any); r["resultType"] == "input_required" || !strings.Contains(jsonText(none), "declared none of sampling, elicitation and roots") {
		t.Errorf("a client without the capabilities: %v", none)
	}
}

// TestInputRequiredFrontClose: the front closes while a call is parked
// on an input-required result. Its question is declined, which the MCP
// server behind gets as the answer to its request; the server's tool
// then ends, and Close returns once it has (the gateway closes its
// sessions only after that, with no request of the server unanswered).
func TestInputRequiredFrontClose(t *testing.T) {
	e := confBehind(t, Options{})
	first := rpc26(t, e.url, "tools/call", map[string]any{"name": confserver.ToolElicitation,
		"arguments": map[string]any{"message": "still there?"}}, `{"elicitation": {"form": {}}}`)
	if r, _ := first["result"].(map[string]any); r == nil || r["resultType"] != "input_required" {
		t.Fatalf("first round: %v", first)
	}
	e.front.inputs.mu.Lock()
	var c *inputCall
	for _, ic := range e.front.inputs.calls {
		c = ic
	}
	e.front.inputs.mu.Unlock()
	if c == nil {
		t.Fatal("no call parked")
	}
	_ = e.front.Close()
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned while the parked call was still running")
	}
	if got := jsonText(c.res) + fmt.Sprint(c.err); !strings.Contains(got, "MCP front is closing") {
		t.Errorf("the server's tool did not get the decline as its answer: %s", got)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestInputRequiredOtherPrincipal: a parked call is bound to the API key
// that made it: another key's retry with its requestState is told the
// state is unknown (and answers nothing), the owner's retry completes it.
func TestInputRequiredOtherPrincipal(t *testing.T) {
	e := confBehind(t, Options{APIKeys: []string{"k-alice", "k-mallory"}})
	const caps = `{"elicitation": {"form": {}}}`
	call := func(key string, params map[string]any) map[string]any {
		t.Helper()
		params["name"] = confserver.ToolElicitation
		params["arguments"] = map[string]any{"message": "name?"}
		return rpc26Key(t, e.url, key, "tools/call", params, caps)
	}
	first, _ := call("k-alice", map[string]any{})["result"].(map[string]any)
	if first == nil || first["resultType"] != "input_required" {
		t.Fatalf("first call: %v", first)
	}
	var id string
	for k := range first["inputRequests"].(map[string]any) {
		id = k
	}
	answer := map[string]any{id: map[string]any{"action": "accept", "content": map[string]any{"username": "mallory", "email": "m@example.com"}}}
	stolen := call("k-mallory", map[string]any{"requestState": first["requestState"], "inputResponses": answer})
	if er, _ := stolen["error"].(map[string]any); er == nil || !strings.Contains(jsonText(er), "requestState is unknown or expired") {
		t.Fatalf("another key's retry: %v", stolen)
	}
	answer[id].(map[string]any)["content"] = map[string]any{"username": "alice", "email": "a@example.com"}
	own := call("k-alice", map[string]any{"requestState": first["requestState"], "inputResponses": answer})
	if r, _ := own["result"].(map[string]any); r == nil || !strings.Contains(jsonText(r), `\"username\":\"alice\"`) {
		t.Errorf("the owner's retry: %v", own)
	}
}
