package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioSession runs the front's RunIO on pipes and speaks raw lines to it.
type stdioSession struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func openStdio(t *testing.T, s *Server) *stdioSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	ss := &stdioSession{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() { ss.done <- s.RunIO(ctx, inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case <-ss.done:
		case <-time.After(15 * time.Second):
			t.Error("RunIO did not return after its input ended")
		}
	})
	ss.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if l := ss.line(); !strings.Contains(l, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize answer: %s", l)
	}
	ss.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return ss
}

func (ss *stdioSession) send(line string) {
	ss.t.Helper()
	if _, err := io.WriteString(ss.in, line+"\n"); err != nil {
		ss.t.Fatal(err)
	}
}

// line reads the next line the front wrote (an answer), skipping
// notifications.
func (ss *stdioSession) line() string {
	ss.t.Helper()
	type res struct {
		s   string
		err error
	}
	for {
		ch := make(chan res, 1)
		go func() { s, err := ss.out.ReadString('\n'); ch <- res{s, err} }()
		select {
		case r := <-ch:
			if r.err != nil {
				ss.t.Fatalf("reading the front's output: %v", r.err)
			}
			if strings.Contains(r.s, `"method":"notifications/`) {
				continue
			}
			return r.s
		case <-time.After(30 * time.Second):
			ss.t.Fatal("no answer from the front within 30 s")
		}
	}
}

// TestLeanStdioMatchesSDK: over stdio ("utcpd mcp"), the calls the lean
// path takes are answered as the SDK answers them (each line sent both
// ways and compared), and what it must not take (another method, an
// unknown tool, a progress token, a message spanning two lines) reaches
// the SDK in order.
func TestLeanStdioMatchesSDK(t *testing.T) {
	e := newEnv(t, envOptions{})
	ss := openStdio(t, e.front)
	cases := []struct {
		line string
		lean bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":2,"b":3}}}`, true},
		{`{"jsonrpc":"2.0","id":"s-1","method":"tools/call","params":{"name":"demo.echo","arguments":{"message":"hé <b>"}}}`, true},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"demo.fail","arguments":{"message":"boom"}}}`, true},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":"x"}}}`, true},
		{`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"demo.add"}}`, true},
		{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, false},
		{`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2},"_meta":{"progressToken":"p"}}}`, false},
		{`{"jsonrpc":"2.0","id":15,"method":"tools/list"}`, false},
		{"{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"tools/call\",\n\"params\":{\"name\":\"demo.add\",\"arguments\":{\"a\":1,\"b\":2}}}", false},
		{"{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tools/call\",\"params\":{\"name\":\"demo.echo\",\"arguments\":{\"message\":\"{[\\\"\"}}}", true},
	}
	for _, c := range cases {
		before := e.front.leanServed.Load()
		e.front.leanOff.Store(false)
		ss.send(c.line)
		lean := ss.line()
		served := e.front.leanServed.Load() - before
		e.front.leanOff.Store(true)
		ss.send(c.line)
		sdk := ss.line()
		e.front.leanOff.Store(false)
		if (served == 1) != c.lean {
			t.Errorf("%s: served on the lean path %d times, want lean %v", c.line, served, c.lean)
		}
		var lv, sv any
		if json.Unmarshal([]byte(lean), &lv) != nil || json.Unmarshal([]byte(sdk), &sv) != nil || !reflect.DeepEqual(lv, sv) {
			t.Errorf("%s:\nlean %s\nSDK  %s", c.line, lean, sdk)
		}
	}
	// The line after a string holding brackets and a quote is still taken:
	// the scanner saw the value end.
	before := e.front.leanServed.Load()
	ss.send(`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":1}}}`)
	if l := ss.line(); !strings.Contains(l, `"id":18`) || e.front.leanServed.Load()-before != 1 {
		t.Errorf("after a string with brackets: %s (lean %d)", l, e.front.leanServed.Load()-before)
	}
}

// TestLeanStdioConcurrentAndCancel: lean calls over stdio run
// concurrently (a quick call is answered while a long one runs), and a
// notifications/cancelled naming the long one ends it at once.
func TestLeanStdioConcurrentAndCancel(t *testing.T) {
	e := newEnv(t, envOptions{})
	ss := openStdio(t, e.front)
	before := e.front.leanServed.Load()
	ss.send(`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"demo.sleep","arguments":{"ms":60000}}}`)
	ss.send(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"demo.add","arguments":{"a":1,"b":2}}}`)
	if l := ss.line(); !strings.Contains(l, `"id":42`) {
		t.Fatalf("the quick call's answer first: %s", l)
	}
	start := time.Now()
	ss.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":41,"reason":"test"}}`)
	l := ss.line()
	if !strings.Contains(l, `"id":41`) {
		t.Fatalf("the cancelled call's answer: %s", l)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the cancelled call took %v to end", d)
	}
	if n := e.front.leanServed.Load() - before; n != 2 {
		t.Errorf("%d calls served on the lean path, want 2", n)
	}
}

// TestLeanStdioGoSDKClient: the go-sdk client over the stdio front at
// protocol 2025-11-25, its calls on the lean path, gets its results. (At
// 2026-07-28 every request carries per-request protocol metadata, which
// only the SDK serves.)
func TestLeanStdioGoSDKClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	cr, fw := io.Pipe()
	fr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.front.RunIO(ctx, fr, fw) }()
	defer func() { cancel(); cw.Close(); <-done }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	before := e.front.leanServed.Load()
	for i := range 20 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo.add", Arguments: map[string]any{"a": i, "b": 1}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		if got := fmt.Sprint(res.StructuredContent); !strings.Contains(got, fmt.Sprint(i+1)) {
			t.Fatalf("call %d: %s", i, got)
		}
	}
	if n := e.front.leanServed.Load() - before; n != 20 {
		t.Errorf("%d of 20 calls on the lean path", n)
	}
}
