package mcpfront

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
)

// rawSession is a JSON session driven with raw HTTP requests.
type rawSession struct {
	t   *testing.T
	url string
	key string
	id  string
}

func openRawSession(t *testing.T, url, key string) *rawSession {
	t.Helper()
	rs := &rawSession{t: t, url: url, key: key}
	resp, _ := rs.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	rs.id = resp.Header.Get("Mcp-Session-Id")
	if rs.id == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("initialize: %d %q, want a JSON session", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if r, _ := rs.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", r.StatusCode)
	}
	return rs
}

func (rs *rawSession) post(body string) (*http.Response, []byte) {
	rs.t.Helper()
	req, err := http.NewRequestWithContext(rs.t.Context(), http.MethodPost, rs.url, bytes.NewBufferString(body))
	if err != nil {
		rs.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if rs.key != "" {
		req.Header.Set("Authorization", "Bearer "+rs.key)
	}
	if rs.id != "" {
		req.Header.Set("Mcp-Session-Id", rs.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rs.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestLeanPathMatchesSDK: on a JSON session, a tools/call answered by
// the lean path (lean.go) decodes to the same JSON-RPC response, with
// the same status and Content-Type, as the SDK's answer to the same
// request: a result, a tool error, arguments that are not an object,
// arguments the tool refuses, an unknown tool, a tool outside the key's
// scope; and the calls the lean path may serve were served by it.
func TestLeanPathMatchesSDK(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{Keys: []gateway.APIKey{
		scopedKey(t, "wide", "demo.*"), scopedKey(t, "narrow", "demo.echo"),
	}}})
	cases := []struct {
		key, body string
		lean      bool // the lean path answers it
	}{
		{"wide-key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":2,"b":3}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"demo.echo","arguments":{"message":"hé <b>"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo.fail","arguments":{"message":"boom"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo.add","arguments":[1]}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":"x"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"demo.add"}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, false},
		{"narrow-key", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}`, true},
		{"narrow-key", `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"demo.echo","arguments":{"message":"x"},"_meta":{"k":"v"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":15,"method":"tools/list"}`, false},
		// Not of the plain form the lean path scans itself: encoding/json
		// reads them, as before, and the answers still match the SDK's.
		{"wide-key", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"demo.\u0061dd","arguments":{"a":1,"b":2}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"demo.add","name":"demo.echo","arguments":{"message":"dup"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":"\u0031\u0039","method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"demo.echo","arguments":{"message":"x"},"extra":1}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":-21,"method":"tools/call","params":{"name":"demo.echo","arguments":{"message":"line\nbreak \"quoted\" \u2028 <&>"}}}`, true},
		{"wide-key", `{"jsonrpc":"2.0","id":"<22>","method":"tools/call","params":{"name":"demo.add","arguments":{"a":1.5,"b":2e3}}}`, true},
		{"wide-key", `[{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}]`, false},
	}
	sessions := map[string]*rawSession{}
	for _, c := range cases {
		rs := sessions[c.key]
		if rs == nil {
			rs = openRawSession(t, e.url, c.key)
			sessions[c.key] = rs
		}
		before := e.front.leanServed.Load()
		e.front.leanOff.Store(false)
		lr, lb := rs.post(c.body)
		served := e.front.leanServed.Load() - before
		e.front.leanOff.Store(true)
		sr, sb := rs.post(c.body)
		e.front.leanOff.Store(false)
		if (served == 1) != c.lean {
			t.Errorf("%s: served on the lean path %d times, want lean %v", c.body, served, c.lean)
		}
		if lr.StatusCode != sr.StatusCode || lr.Header.Get("Content-Type") != sr.Header.Get("Content-Type") {
			t.Errorf("%s: lean %d %q, SDK %d %q", c.body, lr.StatusCode, lr.Header.Get("Content-Type"), sr.StatusCode, sr.Header.Get("Content-Type"))
		}
		t.Logf("%s\n  lean %d %s  SDK %d %s", c.body, lr.StatusCode, bytes.TrimSpace(lb), sr.StatusCode, bytes.TrimSpace(sb))
		var lv, sv any
		if json.Unmarshal(lb, &lv) != nil || json.Unmarshal(sb, &sv) != nil || !reflect.DeepEqual(lv, sv) {
			t.Errorf("%s:\nlean %s\nSDK  %s", c.body, lb, sb)
		}
	}
}

// TestLeanPathCancel: a notifications/cancelled naming a call in flight
// on the lean path cancels it (the sleep ends at once, well before its
// minute); the call's answer is the SDK's for a cancelled call.
func TestLeanPathCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	rs := openRawSession(t, e.url, "")
	done := make(chan []byte, 1)
	go func() {
		_, b := rs.post(`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"demo.sleep","arguments":{"ms":60000}}}`)
		done <- b
	}()
	waitFor(t, "the lean call in flight", func() bool {
		v, _ := e.front.jsonIDs.Load(rs.id)
		return v.(*jsonSessionInfo).calls.inFlight() == 1
	})
	if r, b := rs.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41}}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: %d %s", r.StatusCode, b)
	}
	select {
	case b := <-done:
		var msg struct {
			ID     int             `json:"id"`
			Error  json.RawMessage `json:"error"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(b, &msg) != nil || msg.ID != 41 || len(msg.Error)+len(msg.Result) == 0 {
			t.Errorf("the cancelled call's answer: %s", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call was not cancelled")
	}
	if got := e.front.leanServed.Load(); got != 1 {
		t.Errorf("lean path served %d calls, want 1", got)
	}
}

// TestLeanPathIdleExpiry: a JSON session used only by lean calls does
// not expire while in use (the front keeps the idle timer, as the SDK
// never sees those calls); left idle, it expires and is unknown.
func TestLeanPathIdleExpiry(t *testing.T) {
	e := newEnv(t, envOptions{front: Options{SessionIdleTimeout: 200 * time.Millisecond}})
	rs := openRawSession(t, e.url, "")
	for i := range 5 {
		r, b := rs.post(`{"jsonrpc":"2.0","id":` + string(rune('1'+i)) + `,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}`)
		if r.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"sum":3`)) {
			t.Fatalf("call %d of a session in use: %d %s", i, r.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := e.front.leanServed.Load(); got != 5 {
		t.Errorf("lean path served %d calls, want 5", got)
	}
	waitFor(t, "the idle session to expire", func() bool { return e.front.Sessions() == 0 })
	if r, _ := rs.post(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}`); r.StatusCode != http.StatusNotFound {
		t.Errorf("a call on the expired session: %d, want 404", r.StatusCode)
	}
}

// TestLeanPathGoSDKClient: the go-sdk client with default options at
// protocol 2025-11-25 (a
// JSON session; what the benchmarks drive) has its tool calls served on
// the lean path, with the answers the SDK gives.
func TestLeanPathGoSDKClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: e.url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "demo.add", Arguments: map[string]any{"a": 40, "b": 2}})
	if err != nil || res.IsError || text(res) != `{"sum":42}` {
		t.Fatalf("add: %v %+v", err, res)
	}
	if got := e.front.leanServed.Load(); got != 1 {
		t.Errorf("lean path served %d calls, want 1", got)
	}
}

// TestPlainResponseIsMarshals: what appendPlainResponse writes is byte
// for byte what json.Marshal writes of leanRun's response, for texts
// that need every kind of escape, several blocks, none, isError and a
// structuredContent; and it declines what it does not write itself.
func TestPlainResponseIsMarshals(t *testing.T) {
	text := func(s ...string) []mcp.Content {
		out := []mcp.Content{}
		for _, x := range s {
			out = append(out, &mcp.TextContent{Text: x})
		}
		return out
	}
	marshal := func(id json.RawMessage, res any) []byte {
		b, err := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result,omitempty"`
		}{"2.0", id, res})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	written := []struct {
		id  string
		res *mcp.CallToolResult
	}{
		{`7`, &mcp.CallToolResult{Content: text("Echo: hi")}},
		{`"s-1"`, &mcp.CallToolResult{Content: text(`{"sum":5}`), StructuredContent: json.RawMessage(` { "sum" : 5 } `)}},
		{`123456789012345678`, &mcp.CallToolResult{Content: text("a\nb\t\"c\" \\ \x01 é <b>&amp; \u2028\u2029 \xff end", ""), IsError: true}},
		{`0`, &mcp.CallToolResult{Content: []mcp.Content{}}},
		{`"x"`, &mcp.CallToolResult{Content: text("one", "two", "three"), StructuredContent: json.RawMessage(`{"a":[1,2,{"b":null}],"c":"\u00e9"}`)}},
	}
	for _, c := range written {
		got, ok := appendPlainResponse(nil, json.RawMessage(c.id), c.res)
		if !ok {
			t.Errorf("%s %+v: declined, want written", c.id, c.res)
			continue
		}
		if want := marshal(json.RawMessage(c.id), c.res); !bytes.Equal(got, want) {
			t.Errorf("%s:\ngot  %s\nwant %s", c.id, got, want)
		}
	}
	declined := []struct {
		id  string
		res any
	}{
		{`-1`, &mcp.CallToolResult{Content: text("x")}},
		{`1.5`, &mcp.CallToolResult{Content: text("x")}},
		{`"<id>"`, &mcp.CallToolResult{Content: text("x")}},
		{`"a\u0062"`, &mcp.CallToolResult{Content: text("x")}},
		{`1`, &mcp.CallToolResult{Content: text("x"), Meta: mcp.Meta{"k": "v"}}},
		{`1`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}}},
		{`1`, &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}}},
		{`1`, &mcp.CallToolResult{Content: text("x"), StructuredContent: map[string]any{"a": 1}}},
		{`1`, &mcp.CallToolResult{Content: text("x"), StructuredContent: json.RawMessage(`{"a":"<b>"}`)}},
		{`1`, &mcp.CallToolResult{Content: text("x"), StructuredContent: json.RawMessage(`{"a":`)}},
		{`1`, &mcp.CallToolResult{Content: text("x"), StructuredContent: json.RawMessage(nil)}},
		{`1`, nil},
	}
	for _, c := range declined {
		if got, ok := appendPlainResponse(nil, json.RawMessage(c.id), c.res); ok {
			t.Errorf("%s %+v: written %s, want declined", c.id, c.res, got)
		}
	}
}

// TestScanLeanCallIsUnmarshal: a message scanLeanCall and scanCallParams
// read is read as json.Unmarshal reads it, and the ones they decline
// (other spellings, repeated keys, escapes, more keys) are left to it.
func TestScanLeanCallIsUnmarshal(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1}}}`, true},
		{` { "params" : { "arguments" : null , "name" : "x" } , "method" : "tools/call" , "id" : "s" , "jsonrpc" : "2.0" } `, true},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}`, true},
		{`{"jsonrpc":"2.0","id":7,"Method":"tools/call","params":{"name":"x"}}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","method":"tools/list"}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"tools\/call","params":{"name":"x"}}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"},"extra":true}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x\u0041"}}`, true}, // the message scans; its params do not
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{}}}`, true},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}`, false},
		{`{"jsonrpc":"2.0","id":7,"method":"\xff","params":{}}`, false},
	} {
		got, ok := scanLeanCall([]byte(bytes.TrimSpace([]byte(c.body))))
		if ok != c.ok {
			t.Errorf("%s: scanned %v, want %v", c.body, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		var want leanCall
		if err := json.Unmarshal([]byte(c.body), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nscanned   %+v\nunmarshal %+v", c.body, got, want)
		}
		p, plain := scanCallParams(got.Params)
		var wantP mcp.CallToolParamsRaw
		if err := json.Unmarshal(got.Params, &wantP); err != nil {
			t.Fatal(err)
		}
		if plain && !reflect.DeepEqual(*p, wantP) {
			t.Errorf("%s params:\nscanned   %+v\nunmarshal %+v", c.body, *p, wantP)
		}
		if plain && (bytes.Contains(got.Params, []byte(`\u`)) || bytes.Contains(got.Params, []byte(`_meta`))) {
			t.Errorf("%s: params scanned, want them left to json.Unmarshal", c.body)
		}
	}
	for _, c := range []struct {
		raw, key string
		ok       bool
	}{
		{`7`, "n:7", true}, {`0`, "n:0", true}, {`-3`, "n:-3", true}, {`1.50`, "n:1.50", true},
		{`"s-1"`, "s:s-1", true}, {`"\u0031"`, "s:1", true}, {`null`, "", false}, {`{}`, "", false}, {``, "", false},
	} {
		key, ok := compactID(json.RawMessage(c.raw))
		if key != c.key || ok != c.ok {
			t.Errorf("compactID(%s) = %q, %v; want %q, %v", c.raw, key, ok, c.key, c.ok)
		}
	}
}
