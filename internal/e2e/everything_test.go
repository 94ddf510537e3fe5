package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports/transporttest"
)

// TestServerEverythingThroughFronts runs @modelcontextprotocol/server-
// everything behind the gateway, over stdio and over Streamable HTTP, and
// drives it through the REST front and the MCP front served by api.New.
func TestServerEverythingThroughFronts(t *testing.T) {
	p := requirePeers(t)
	for _, kind := range []string{"stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			server := p.stdioServer()
			if kind == "http" {
				server = map[string]any{"url": everythingHTTP(t, p)}
			}
			s := newStack(t, server)
			t.Run("rest", func(t *testing.T) { restScenarios(t, s) })
			t.Run("mcp", func(t *testing.T) { mcpScenarios(t, s) })
			if kind != "stdio" {
				return
			}
			t.Run("restart after kill", func(t *testing.T) { restartAfterKill(t, p, s) })
			t.Run("64 concurrent calls, one process", func(t *testing.T) { concurrentCalls(t, p, s) })
			t.Run("deregister leaves no process", func(t *testing.T) {
				if err := s.g.DeregisterManual(t.Context(), manualName); err != nil {
					t.Fatal(err)
				}
				transporttest.WaitUntil(t, 20*time.Second, "the server-everything process to go", func() bool {
					return len(everythingChildren(t, p)) == 0
				})
				status, body, err := s.restCall(t.Context(), toolPrefix+"echo", map[string]any{"message": "gone"})
				if err != nil || status != http.StatusNotFound {
					t.Errorf("echo after deregistering: %d %v %v", status, body, err)
				}
			})
		})
	}
}

func restScenarios(t *testing.T, s *stack) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	call := func(tool string, args any) map[string]any {
		t.Helper()
		status, body, err := s.restCall(ctx, tool, args)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %v", tool, status, body)
		}
		return body
	}

	if body := call(toolPrefix+"echo", map[string]any{"message": "héllo"}); body["result"] != "Echo: héllo" || body["is_error"] != false {
		t.Errorf("echo: %v", body)
	}
	if body := call(toolPrefix+"get-sum", map[string]any{"a": 2, "b": 40}); body["result"] != "The sum of 2 and 40 is 42." {
		t.Errorf("get-sum: %v", body)
	}
	weather, _ := call(toolPrefix+"get-structured-content", map[string]any{"location": "New York"})["result"].(map[string]any)
	if weather["temperature"] == nil || weather["conditions"] == nil || weather["humidity"] == nil {
		t.Errorf("get-structured-content: result %v, want the structured weather object", weather)
	}
	img, _ := call(toolPrefix+"get-tiny-image", map[string]any{})["result"].(map[string]any)
	if !hasPNG(img) {
		t.Errorf("get-tiny-image: no PNG image block in %.300v", img)
	}

	// A tool error: the tool throws, the server answers isError, the front
	// answers 200 with is_error.
	body := call(toolPrefix+"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 0})
	if body["is_error"] != true || !strings.Contains(fmt.Sprint(body["result"]), "Invalid resourceId") {
		t.Errorf("get-resource-reference with resourceId 0: %v, want a tool error", body)
	}

	// Unknown tool: 404 tool_not_found.
	status, body, err := s.restCall(ctx, toolPrefix+"nope", map[string]any{})
	if err != nil || status != http.StatusNotFound || errCode(body) != "tool_not_found" {
		t.Errorf("unknown tool: %d %v %v, want 404 tool_not_found", status, body, err)
	}

	// A long-running operation streams its progress, then its result.
	events, err := s.restStream(ctx, toolPrefix+"trigger-long-running-operation", map[string]any{"duration": 1, "steps": 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 5 || events[4].name != "end" {
		t.Fatalf("stream events %v, want 3 progress chunks, the result chunk and end", events)
	}
	for i, ev := range events[:3] {
		var data map[string]any
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil || ev.name != "chunk" || data["progress"] != float64(i+1) || data["total"] != 3.0 {
			t.Errorf("progress event %d = %+v", i, ev)
		}
	}
	if events[3].name != "chunk" || !strings.Contains(events[3].data, "Long running operation completed") {
		t.Errorf("result event = %+v", events[3])
	}
}

func mcpScenarios(t *testing.T, s *stack) {
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	sess := mcpSession(t, s.base+"/mcp", "", progress)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	call := func(name string, args any) *mcp.CallToolResult {
		t.Helper()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}

	var names []string
	for tool, err := range sess.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "get-sum", "get-structured-content", "get-tiny-image", "get-resource-reference", "trigger-long-running-operation"} {
		if !slices.Contains(names, toolPrefix+want) {
			t.Errorf("tools/list lacks %s: %v", toolPrefix+want, names)
		}
	}

	if res := call(toolPrefix+"echo", map[string]any{"message": "héllo"}); res.IsError || textOf(res) != "Echo: héllo" {
		t.Errorf("echo: %+v", res)
	}
	if res := call(toolPrefix+"get-sum", map[string]any{"a": 2, "b": 40}); res.IsError || textOf(res) != "The sum of 2 and 40 is 42." {
		t.Errorf("get-sum: %+v", res)
	}
	res := call(toolPrefix+"get-structured-content", map[string]any{"location": "New York"})
	weather, _ := res.StructuredContent.(map[string]any)
	if res.IsError || weather["temperature"] == nil || weather["conditions"] == nil || weather["humidity"] == nil {
		t.Errorf("get-structured-content: %+v, want structuredContent with the weather", res)
	}
	// The image reaches the MCP client as the image block the server
	// sent (issue 16), not flattened into text.
	res = call(toolPrefix+"get-tiny-image", map[string]any{})
	pngBlock := false
	for _, c := range res.Content {
		if im, ok := c.(*mcp.ImageContent); ok && im.MIMEType == "image/png" && len(im.Data) > 0 {
			pngBlock = true
		}
	}
	if res.IsError || !pngBlock {
		t.Errorf("get-tiny-image: no image/png block in %d blocks (%.300s)", len(res.Content), textOf(res))
	}

	res = call(toolPrefix+"get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 0})
	if !res.IsError || !strings.Contains(textOf(res), "Invalid resourceId") {
		t.Errorf("get-resource-reference with resourceId 0: %+v (%s), want a tool error", res, textOf(res))
	}

	_, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: toolPrefix + "nope", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
		t.Errorf("unknown tool: err = %v, want JSON-RPC -32602", err)
	}

	params := &mcp.CallToolParams{Name: toolPrefix + "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	params.SetProgressToken("lro")
	res, err = sess.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(textOf(res), "Long running operation completed") {
		t.Errorf("long-running operation: %+v (%s)", res, textOf(res))
	}
	transporttest.WaitUntil(t, 5*time.Second, "3 progress notifications", func() bool { return len(progress) >= 3 })
	var got []float64
	for len(progress) > 0 {
		n := <-progress
		if n.ProgressToken != "lro" {
			t.Errorf("progress token %v, want lro", n.ProgressToken)
		}
		got = append(got, n.Progress)
	}
	if len(got) < 3 || !slices.IsSorted(got) {
		t.Errorf("progress notifications %v, want at least 3, increasing", got)
	}
}

// restartAfterKill kills the stdio server; once the supervisor has
// restarted it, the next call succeeds on the new process.
func restartAfterKill(t *testing.T, p peers, s *stack) {
	pids := everythingChildren(t, p)
	if len(pids) != 1 {
		t.Fatalf("server-everything processes %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A call sent while the process is dying is in flight when it dies
	// and fails (it may have run, so it is not repeated): wait until the
	// supervisor has reaped the old process and started a new one.
	transporttest.WaitUntil(t, 30*time.Second, "server-everything to be restarted", func() bool {
		now := everythingChildren(t, p)
		return len(now) == 1 && now[0] != pids[0]
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	status, body, err := s.restCall(ctx, toolPrefix+"echo", map[string]any{"message": "after the kill"})
	if err != nil || status != http.StatusOK || body["result"] != "Echo: after the kill" {
		t.Fatalf("echo after killing the server: %d %v %v", status, body, err)
	}
	now := everythingChildren(t, p)
	if len(now) != 1 || now[0] == pids[0] {
		t.Errorf("server-everything processes after the restart %v (killed %d), want one new one", now, pids[0])
	}
}

// concurrentCalls sends 64 calls at once through the REST front: all
// succeed over the one server process.
func concurrentCalls(t *testing.T, p peers, s *stack) {
	before := everythingChildren(t, p)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			msg := fmt.Sprintf("call %d", i)
			status, body, err := s.restCall(ctx, toolPrefix+"echo", map[string]any{"message": msg})
			if err == nil && (status != http.StatusOK || body["result"] != "Echo: "+msg) {
				err = fmt.Errorf("%s: %d %v", msg, status, body)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after := everythingChildren(t, p)
	if len(before) != 1 || !slices.Equal(before, after) {
		t.Errorf("server-everything processes %v before and %v after 64 concurrent calls, want the same one", before, after)
	}
}

// hasPNG reports whether v ({"content": [blocks]}) holds a PNG image block.
func hasPNG(v map[string]any) bool {
	blocks, _ := v["content"].([]any)
	for _, b := range blocks {
		block, _ := b.(map[string]any)
		if block["type"] != "image" || block["mimeType"] != "image/png" {
			continue
		}
		s, _ := block["data"].(string)
		data, err := base64.StdEncoding.DecodeString(s)
		if err == nil && bytes.HasPrefix(data, []byte("\x89PNG")) {
			return true
		}
	}
	return false
}

// errCode returns the code of an error envelope.
func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}
