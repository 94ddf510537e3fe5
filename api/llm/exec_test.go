package llm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/api/llm"
	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

const apiKey = "test-key"

type env struct {
	url     string
	mu      sync.Mutex
	records []gateway.CallRecord
}

func (e *env) recs() []gateway.CallRecord {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]gateway.CallRecord(nil), e.records...)
}

// newEnv serves the demo HTTP tool server on 127.0.0.1:0, registers it as
// manual "demo" in a real gateway, and serves the LLM routes behind an
// API key.
func newEnv(t *testing.T) *env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", fixture.New(), httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	e := &env{}
	types := transports.NewRegistry()
	if err := types.Register(utcphttp.Info); err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: types, OnCall: func(r *gateway.CallRecord) {
		e.mu.Lock()
		e.records = append(e.records, *r)
		e.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	manual := fmt.Sprintf(`{"name":"demo","call_template_type":"http","url":%q}`, "http://"+ln.Addr().String()+"/utcp")
	if _, err := g.RegisterManual(t.Context(), json.RawMessage(manual), gateway.RegisterOptions{}); err != nil {
		t.Fatal(err)
	}
	rt := httpx.NewRouter()
	llm.New(llm.Options{Gateway: g, Timeout: 5 * time.Second}).Register(rt, httpx.RequireKeys(httpx.NewKeys([]string{apiKey}), "utcpd"))
	hs := httptest.NewServer(rt)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

func (e *env) do(t *testing.T, method, path, body, key string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// errorCode returns the envelope's code.
func errorCode(t *testing.T, data []byte) string {
	t.Helper()
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(data, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("not an error envelope: %s", data)
	}
	return env.Error.Code
}

func TestExportRoute(t *testing.T) {
	e := newEnv(t)
	if st, body := e.do(t, "GET", "/v1/export/openai", "", ""); st != 401 {
		t.Fatalf("without a key: %d %s", st, body)
	}
	if st, body := e.do(t, "GET", "/v1/export/mistral", "", apiKey); st != 404 || errorCode(t, body) != "not_found" {
		t.Fatalf("unknown provider: %d %s", st, body)
	}
	if st, body := e.do(t, "GET", "/v1/export/openai?strict=maybe", "", apiKey); st != 400 {
		t.Fatalf("bad strict: %d %s", st, body)
	}
	st, body := e.do(t, "GET", "/v1/export/openai?strict=true&q=sum+numbers&limit=1", "", apiKey)
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	var tools []openai.ChatCompletionToolUnionParam
	if err := json.Unmarshal(body, &tools); err != nil || len(tools) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	if fn := tools[0].GetFunction(); fn.Name != "demo__add" || !fn.Strict.Value {
		t.Errorf("got %s", body)
	}
	for _, p := range llm.Providers {
		st, body := e.do(t, "GET", "/v1/export/"+string(p)+"?tags=math,time", "", apiKey)
		if st != 200 || !strings.Contains(string(body), "demo__add") || !strings.Contains(string(body), "demo__sleep") || strings.Contains(string(body), "demo__echo") {
			t.Errorf("%s: %d %s", p, st, body)
		}
	}
}

// resultOf decodes a tool result content.
func resultOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("content %q is not a JSON object", s)
	}
	return m
}

func TestToolCallsOpenAI(t *testing.T) {
	e := newEnv(t)
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
	  {"id":"c1","type":"function","function":{"name":"demo__add","arguments":"{\"a\":2,\"b\":3.5}"}},
	  {"id":"c2","type":"function","function":{"name":"demo__fail","arguments":"{\"message\":\"boom\"}"}},
	  {"id":"c3","type":"function","function":{"name":"demo__nope","arguments":"{}"}},
	  {"id":"c4","type":"function","function":{"name":"demo__add","arguments":"{not json"}},
	  {"id":"c5","type":"function","function":{"name":"demo__add","arguments":"{\"a\":\"x\"}"}},
	  {"id":"c6","type":"function","function":{"name":"demo__echo","arguments":""}}]}}]}`
	var resp openai.ChatCompletion // the body is a real response shape
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Choices[0].Message.ToolCalls) != 6 {
		t.Fatalf("test body: %v", err)
	}
	st, data := e.do(t, "POST", "/v1/llm/openai/tool_calls", body, apiKey)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	var msgs []openai.ChatCompletionMessageParamUnion
	if err := json.Unmarshal(data, &msgs); err != nil || len(msgs) != 6 {
		t.Fatalf("into []openai.ChatCompletionMessageParamUnion: %v: %s", err, data)
	}
	if diff := cmp.Diff(generic(t, data), generic(t, mustJSON(t, msgs))); diff != "" {
		t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
	}
	wantCodes := []string{"", "tool_error", "tool_not_found", "invalid_arguments", "invalid_arguments", ""}
	for i, m := range msgs {
		tm := m.OfTool
		if tm == nil || tm.ToolCallID != fmt.Sprintf("c%d", i+1) {
			t.Fatalf("message %d: %s", i, data)
		}
		got := resultOf(t, tm.Content.OfString.Value)
		code, _ := got["code"].(string)
		if code != wantCodes[i] {
			t.Errorf("c%d: content %v, want code %q", i+1, got, wantCodes[i])
		}
	}
	if got := resultOf(t, msgs[0].OfTool.Content.OfString.Value); got["sum"] != 5.5 {
		t.Errorf("add: %v", got)
	}
	if got := resultOf(t, msgs[1].OfTool.Content.OfString.Value); !strings.Contains(fmt.Sprint(got["error"]), "boom") {
		t.Errorf("fail: %v", got)
	}
	// Calls went through the gateway with front llm and the key's principal.
	recs := e.recs()
	if len(recs) != 5 { // all but the call whose arguments are not JSON (an unknown tool is refused by the gateway)
		t.Errorf("%d calls reached the gateway, want 5", len(recs))
	}
	for _, r := range recs {
		if r.Front != llm.FrontName || !strings.HasPrefix(r.Principal, "key:") {
			t.Errorf("record %+v", r)
		}
	}
	// An assistant message works as well.
	st, data = e.do(t, "POST", "/v1/llm/openai/tool_calls", `{"role":"assistant","tool_calls":[{"id":"x","type":"function","function":{"name":"demo__add","arguments":"{\"a\":1,\"b\":1}"}}]}`, apiKey)
	if st != 200 || !strings.Contains(string(data), `"tool_call_id":"x"`) || !strings.Contains(string(data), `{\"sum\":2}`) {
		t.Errorf("assistant message: %d %s", st, data)
	}
}

func TestToolCallsAnthropic(t *testing.T) {
	e := newEnv(t)
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","stop_reason":"tool_use","content":[
	  {"type":"text","text":"Let me compute."},
	  {"type":"tool_use","id":"tu1","name":"demo__add","input":{"a":1,"b":2}},
	  {"type":"tool_use","id":"tu2","name":"demo__fail","input":{}},
	  {"type":"tool_use","id":"tu3","name":"nope__x","input":{}},
	  {"type":"tool_use","id":"tu4","name":"demo__add","input":[1]}],
	  "usage":{"input_tokens":1,"output_tokens":1}}`
	var m anthropic.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("test body: %v", err)
	}
	st, data := e.do(t, "POST", "/v1/llm/anthropic/tool_calls", body, apiKey)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	var msg anthropic.MessageParam
	if err := json.Unmarshal(data, &msg); err != nil || msg.OfUser == nil || len(msg.OfUser.Content) != 4 {
		t.Fatalf("into anthropic.MessageParam: %v: %s", err, data)
	}
	if diff := cmp.Diff(generic(t, data), generic(t, mustJSON(t, msg))); diff != "" {
		t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
	}
	wantErr := []bool{false, true, true, true}
	for i, b := range msg.OfUser.Content {
		tr := b.OfToolResult
		if tr == nil || tr.ToolUseID != fmt.Sprintf("tu%d", i+1) {
			t.Fatalf("block %d: %s", i, data)
		}
		if tr.IsError.Value != wantErr[i] {
			t.Errorf("tu%d: is_error %v", i+1, tr.IsError.Value)
		}
	}
	if got := resultOf(t, msg.OfUser.Content[0].OfToolResult.Content[0].OfText.Text); got["sum"] != 3.0 {
		t.Errorf("add: %v", got)
	}
	if got := resultOf(t, msg.OfUser.Content[3].OfToolResult.Content[0].OfText.Text); got["code"] != "invalid_arguments" {
		t.Errorf("array input: %v", got)
	}
}

func TestToolCallsGemini(t *testing.T) {
	e := newEnv(t)
	body := `{"candidates":[{"index":0,"finishReason":"STOP","content":{"role":"model","parts":[
	  {"functionCall":{"name":"demo__add","args":{"a":4,"b":5}},"thoughtSignature":"c2lnbmF0dXJl"},
	  {"functionCall":{"id":"g2","name":"demo__fail","args":{"message":"bad"}}},
	  {"functionCall":{"name":"demo__unknown","args":{}}}]}}],"modelVersion":"gemini-x"}`
	var resp genai.GenerateContentResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("test body: %v", err)
	}
	st, data := e.do(t, "POST", "/v1/llm/gemini/tool_calls", body, apiKey)
	if st != 200 {
		t.Fatalf("%d %s", st, data)
	}
	var contents []*genai.Content
	if err := json.Unmarshal(data, &contents); err != nil || len(contents) != 2 {
		t.Fatalf("into []*genai.Content: %v: %s", err, data)
	}
	// The function responses survive a round trip (the echoed model
	// content is compared with the SDK's reading of the request below).
	if diff := cmp.Diff(generic(t, data).([]any)[1], generic(t, mustJSON(t, contents[1]))); diff != "" {
		t.Errorf("round trip lost data (-ours +sdk):\n%s", diff)
	}
	if diff := cmp.Diff(resp.Candidates[0].Content, contents[0]); diff != "" {
		t.Errorf("the model content is not echoed unchanged:\n%s", diff)
	}
	parts := contents[1].Parts
	if contents[1].Role != "user" || len(parts) != 3 {
		t.Fatalf("%s", data)
	}
	if r := parts[0].FunctionResponse; r.Name != "demo__add" || fmt.Sprint(r.Response["result"]) != "map[sum:9]" {
		t.Errorf("add: %+v", r)
	}
	if r := parts[1].FunctionResponse; r.ID != "g2" || r.Response["code"] != "tool_error" || !strings.Contains(fmt.Sprint(r.Response["error"]), "bad") {
		t.Errorf("fail: %+v", r)
	}
	if r := parts[2].FunctionResponse; r.Response["code"] != "tool_not_found" {
		t.Errorf("unknown: %+v", r)
	}
}

func TestToolCallsParallel(t *testing.T) {
	e := newEnv(t)
	var calls []string
	for i := range 4 {
		calls = append(calls, fmt.Sprintf(`{"id":"s%d","type":"function","function":{"name":"demo__sleep","arguments":"{\"ms\":1500}"}}`, i))
	}
	// While the request runs, the gateway must have several calls in
	// flight at once (recorded by the call hook only when they end, so
	// watch the overlap of their time spans afterwards).
	st, data := e.do(t, "POST", "/v1/llm/openai/tool_calls", `{"role":"assistant","tool_calls":[`+strings.Join(calls, ",")+`]}`, apiKey)
	if st != 200 || strings.Contains(string(data), "error") {
		t.Fatalf("%d %s", st, data)
	}
	var spans [][2]time.Time
	for _, r := range e.recs() {
		if strings.HasSuffix(r.Qualified, ".sleep") {
			spans = append(spans, [2]time.Time{r.Start, r.Start.Add(r.Duration)})
		}
	}
	overlap := false
	for i := range spans {
		for j := range spans {
			if i != j && spans[i][0].Before(spans[j][1]) && spans[j][0].Before(spans[i][1]) {
				overlap = true
			}
		}
	}
	if len(spans) != 4 || !overlap {
		t.Errorf("%d sleep calls recorded, overlapping: %v: the calls did not run in parallel", len(spans), overlap)
	}
	for i := range 4 {
		if !bytes.Contains(data, fmt.Appendf(nil, `"tool_call_id":"s%d"`, i)) {
			t.Errorf("no result for s%d: %s", i, data)
		}
	}
}

func TestToolCallsMalformed(t *testing.T) {
	e := newEnv(t)
	cases := []struct{ provider, body string }{
		{"openai", `{`},
		{"openai", `{}`},
		{"openai", `[]`},
		{"openai", `{"choices":[]}`},
		{"openai", `{"role":"user","tool_calls":[]}`},
		{"openai", `{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"a","arguments":"{}"}}]}`},
		{"openai", `{"role":"assistant","tool_calls":[{"id":"x","type":"function","function":{"name":"a","arguments":{}}}]}`},
		{"anthropic", `{"role":"user","content":[]}`},
		{"anthropic", `{"role":"assistant","content":[{"type":"tool_use","name":"a","input":{}}]}`},
		{"anthropic", `{"role":"assistant","content":{}}`},
		{"gemini", `{"foo":1}`},
		{"gemini", `{"candidates":[]}`},
		{"gemini", `{"role":"user","parts":[]}`},
		{"gemini", `{"role":"model","parts":[{"functionCall":{"args":{}}}]}`},
		{"openai", ``},
	}
	for _, c := range cases {
		st, data := e.do(t, "POST", "/v1/llm/"+c.provider+"/tool_calls", c.body, apiKey)
		if st != 400 || errorCode(t, data) != "invalid_request" {
			t.Errorf("%s %s: %d %s", c.provider, c.body, st, data)
		}
	}
	if st, data := e.do(t, "POST", "/v1/llm/other/tool_calls", `{}`, apiKey); st != 404 {
		t.Errorf("unknown provider: %d %s", st, data)
	}
	if st, data := e.do(t, "POST", "/v1/llm/openai/tool_calls", `{}`, ""); st != 401 {
		t.Errorf("no key: %d %s", st, data)
	}
}
