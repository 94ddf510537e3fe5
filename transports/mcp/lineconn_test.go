package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireMessages are messages as servers send them (server-everything and
// the go-sdk), and shapes the fast decoder hands to the SDK's.
var wireMessages = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: hi"}]}}`,
	`{"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"example-servers/everything","version":"1.0.0"}},"jsonrpc":"2.0","id":0}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"utcpd-1","progress":2,"total":5}}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`,
	`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
	`{"jsonrpc":"2.0","id":"s-1","method":"ping","params":{}}`,
	`{"jsonrpc":"2.0","id":-3,"result":{}}`,
	`{ "jsonrpc" : "2.0" , "id" : 12 , "result" : { "a" : [ 1, 2, {"b":"}]\"\\"} ] } }`,
	`{"jsonrpc":"2.0","id":1,"result":{"content":[]},"extra":{"x":[1,2]}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: nope"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"x","data":{"k":1}}}`,
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
	`{"jsonrpc":"2.0","id":12345678901234567,"result":{}}`,
	`{"jsonrpc":"2.0","id":"a\"b","result":{}}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","method":"x","params":null}`,
	`{"jsonrpc":"2.0","method":null}`,
	`{"jsonrpc":"2.0","method":""}`,
	`{"jsonrpc":"2.0","method":"tools/\u0063all","id":2}`,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"JSONRPC":"2.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","Method":"ping","id":1}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"t":"ünï"}}`,
	`[1]`,
	`"2.0"`,
	`{}`,
}

// TestDecodeMessageMatchesSDK: the fast decoder gives what the SDK's
// gives, message or error.
func TestDecodeMessageMatchesSDK(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`
	for _, wire := range append(wireMessages, deep) {
		want, wantErr := jsonrpc.DecodeMessage([]byte(wire))
		got, gotErr := decodeMessage([]byte(wire))
		if (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%.80s: error %v, the SDK's %v", wire, gotErr, wantErr)
			continue
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b jsonrpc.ID) bool { return a == b })); diff != "" {
			t.Errorf("%.80s: (-SDK +fast):\n%s", wire, diff)
		}
	}
}

// TestDecodeFastTakesTheUsualShapes: the messages of a tool call take
// the fast path (so the benchmark measures it), the odd ones do not.
func TestDecodeFastTakesTheUsualShapes(t *testing.T) {
	slow := map[string]bool{}
	for _, w := range []string{
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: nope"}}`,
		`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
		`{"jsonrpc":"2.0","id":12345678901234567,"result":{}}`,
		`{"jsonrpc":"2.0","id":"a\"b","result":{}}`,
		`{"jsonrpc":"2.0","id":true,"result":{}}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"result":null}`,
		`{"jsonrpc":"2.0","method":"x","params":null}`,
		`{"jsonrpc":"2.0","method":null}`,
		`{"jsonrpc":"2.0","method":"tools/\u0063all","id":2}`,
		`{"jsonrpc":"1.0","id":1,"result":{}}`,
		`{"JSONRPC":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
		`[1]`,
	} {
		slow[w] = true
	}
	for i, wire := range wireMessages {
		fast := decodeFast([]byte(wire)) != nil
		if (i < 9 && !fast) || (slow[wire] && fast) {
			t.Errorf("%s: fast %v", wire, fast)
		}
	}
	if len(slow) != 14 {
		t.Fatal("a slow shape is listed twice")
	}
}

// TestAppendMessageMatchesSDK: what Write writes is jsonrpc.EncodeMessage's.
func TestAppendMessageMatchesSDK(t *testing.T) {
	id := func(v any) jsonrpc.ID {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, msg := range []jsonrpc.Message{
		&jsonrpc.Request{ID: id(float64(3)), Method: "tools/call", Params: json.RawMessage(`{"name":"echo","arguments":{"message":"<hi>"}}`)},
		&jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)},
		&jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage("{\n  \"requestId\": 3\n}")},
		&jsonrpc.Request{ID: id("x"), Method: "ping"},
		&jsonrpc.Request{ID: id(float64(1)), Method: "tööls"},
		&jsonrpc.Response{ID: id(float64(7)), Result: json.RawMessage(`{"roots":[]}`)},
		&jsonrpc.Response{ID: id(float64(7))},
		&jsonrpc.Response{ID: id(float64(8)), Error: &jsonrpc.Error{Code: -32601, Message: "no"}},
		&jsonrpc.Response{ID: id(float64(9)), Error: errors.New("plain")},
	} {
		want, wantErr := jsonrpc.EncodeMessage(msg)
		got, gotErr := appendMessage([]byte("junk")[:0], msg)
		if string(got) != string(want) || (wantErr == nil) != (gotErr == nil) {
			t.Errorf("encoded %s, %v; the SDK's %s, %v", got, gotErr, want, wantErr)
		}
	}
	if _, err := appendMessage(nil, &jsonrpc.Request{Method: "x", Params: json.RawMessage(`{`)}); err == nil {
		t.Error("invalid params encoded without an error")
	}
}

// pipeConn is a lineConn over pipes; the test writes what the server
// says to srv and reads what the client wrote from out.
func pipeConn(t *testing.T, max int, tap func([]byte)) (c *lineConn, srv *os.File, out *os.File) {
	t.Helper()
	r, srv, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c = newLineConn(r, w, max, tap)
	t.Cleanup(func() { c.Close(); srv.Close(); out.Close() })
	return c, srv, out
}

func readAll(t *testing.T, c *lineConn) ([]string, error) {
	t.Helper()
	var got []string
	for {
		msg, err := c.Read(context.Background())
		if err != nil {
			return got, err
		}
		data, _ := jsonrpc.EncodeMessage(msg)
		got = append(got, string(data))
	}
}

// TestLineConnFraming: one message a line, CRLF or LF, blank lines
// skipped, a value over several lines read as one (as the SDK's
// streaming decoder does), the last line without its newline delivered;
// the tap sees each line.
func TestLineConnFraming(t *testing.T) {
	var tapped []string
	c, srv, _ := pipeConn(t, 0, func(b []byte) { tapped = append(tapped, string(b)) })
	big := `{"jsonrpc":"2.0","id":2,"result":{"text":"` + strings.Repeat("x", 200<<10) + `"}}`
	go func() {
		io.WriteString(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\n  \n"+
			"{\"jsonrpc\":\"2.0\",\n \"method\":\"ping\"}\n"+big+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)
		srv.Close()
	}()
	got, err := readAll(t, c)
	if err != io.EOF {
		t.Errorf("end: %v, want io.EOF", err)
	}
	want := []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","method":"ping"}`, big,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	// The big line is over tapLimit: not tapped.
	wantTap := []string{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r", "", "  ", `{"jsonrpc":"2.0",`, ` "method":"ping"}`}
	if diff := cmp.Diff(wantTap, tapped); diff != "" {
		t.Errorf("tapped (-want +got):\n%s", diff)
	}
}

// TestLineConnRefusals: a line over the cap, a malformed line, trailing
// data, an empty batch and a line cut by the end each end the reading
// with an error, after the messages before them.
func TestLineConnRefusals(t *testing.T) {
	ok := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	for _, c := range []struct {
		name, wire, want string
	}{
		{"oversized", `{"jsonrpc":"2.0","id":2,"result":"` + strings.Repeat("y", 300<<10) + "\"}\n", "longer than 100000 bytes (max_message_bytes)"},
		{"oversized short line", `{"jsonrpc":"2.0","id":2,"result":"` + strings.Repeat("y", 100000) + "\"}\n", "longer than 100000 bytes"},
		{"malformed", "{\"jsonrpc\":\"2.0\",\"id\":}\n", "not JSON"},
		{"trailing data", `{"jsonrpc":"2.0","id":2,"result":{}} {"x":1}` + "\n", "not JSON"},
		{"not a message", `{"jsonrpc":"2.0"}` + "\n", "invalid request"},
		{"empty batch", "[]\n", "empty batch"},
		{"cut", `{"jsonrpc":"2.0","id":2,`, io.ErrUnexpectedEOF.Error()},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, srv, _ := pipeConn(t, 100000, nil)
			after := ok
			if c.name == "cut" {
				after = ""
			}
			go func() { io.WriteString(srv, ok+c.wire+after); srv.Close() }()
			got, err := readAll(t, conn)
			if len(got) != 1 || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("read %q, then %v; want one message, then an error with %q", got, err, c.want)
			}
		})
	}
}

// TestLineConnBatch: a batch is read message by message, and the answers
// to its calls are written back as one batch once all are in.
func TestLineConnBatch(t *testing.T) {
	c, srv, out := pipeConn(t, 0, nil)
	go io.WriteString(srv, `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/message","params":{}},{"jsonrpc":"2.0","id":2,"method":"roots/list"}]`+"\n")
	var ids []jsonrpc.ID
	for range 3 {
		msg, err := c.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if req := msg.(*jsonrpc.Request); req.IsCall() {
			ids = append(ids, req.ID)
		}
	}
	ctx := context.Background()
	if err := c.Write(ctx, &jsonrpc.Response{ID: ids[1], Result: json.RawMessage(`{"roots":[]}`)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, &jsonrpc.Response{ID: ids[0], Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	line, err := readLineFrom(out)
	if want := `[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"roots":[]}}]`; err != nil || line != want {
		t.Fatalf("wrote %q, %v; want %s", line, err, want)
	}
}

func readLineFrom(f *os.File) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		if _, err := f.Read(one); err != nil {
			return string(b), err
		}
		if one[0] == '\n' {
			return string(b), nil
		}
		b = append(b, one[0])
	}
}

// TestLineConnConcurrentWrites: concurrent writes come out whole, one a
// line.
func TestLineConnConcurrentWrites(t *testing.T) {
	c, _, out := pipeConn(t, 0, nil)
	const writers, each = 8, 50
	lines := make(chan string, writers*each)
	go func() {
		data, _ := io.ReadAll(out)
		for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
			lines <- l
		}
		close(lines)
	}()
	var wg sync.WaitGroup
	params := json.RawMessage(`{"name":"echo","arguments":{"message":"` + strings.Repeat("z", 10<<10) + `"}}`)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id, _ := jsonrpc.MakeID(float64(w*each + i))
				if err := c.Write(context.Background(), &jsonrpc.Request{ID: id, Method: "tools/call", Params: params}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	c.Close()
	seen := map[int64]bool{}
	for l := range lines {
		msg, err := jsonrpc.DecodeMessage([]byte(l))
		if err != nil {
			t.Fatalf("a line is no message (%v): %.100s", err, l)
		}
		seen[msg.(*jsonrpc.Request).ID.Raw().(int64)] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct messages, want %d", len(seen), writers*each)
	}
}

// TestLineConnClose: Close unblocks a Read waiting for input (io.EOF, as
// the SDK's), closes both pipes, and can be called again; a Read or
// Write on a done context fails.
func TestLineConnClose(t *testing.T) {
	c, srv, out := pipeConn(t, 0, nil)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let Read block (not a timed assertion)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != io.EOF {
		t.Fatalf("Read after Close: %v, want io.EOF", err)
	}
	_ = c.Close()
	if _, err := out.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the server's input is not closed: %v", err)
	}
	if _, err := srv.Write([]byte("{}\n")); err == nil {
		t.Errorf("the server's output is still read")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Read on a done context: %v", err)
	}
	if err := c.Write(ctx, &jsonrpc.Request{Method: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Write on a done context: %v", err)
	}
}

// TestLineConnWithSDK: the SDK's client and server talk through a
// lineConn on the client's side, tool calls and the server's requests
// within them.
func TestLineConnWithSDK(t *testing.T) {
	srvIn, cliOut, _ := os.Pipe()
	cliIn, srvOut, _ := os.Pipe()
	server := sdk.NewServer(&sdk.Implementation{Name: "s", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "echo"}, func(ctx context.Context, req *sdk.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*sdk.CallToolResult, any, error) {
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Message + " pong"}}}, nil, nil
	})
	ss, err := server.Connect(context.Background(), &sdk.IOTransport{Reader: srvIn, Writer: srvOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	client := sdk.NewClient(&sdk.Implementation{Name: "c", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), lineTransport{newLineConn(cliIn, cliOut, 1<<20, nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			msg := strings.Repeat("m", i*1000)
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
			if err != nil {
				t.Error(err)
				return
			}
			if got := res.Content[0].(*sdk.TextContent).Text; got != msg+" pong" {
				t.Errorf("echo %q", got)
			}
		})
	}
	wg.Wait()
	if err := cs.Close(); err != nil && !bytes.Contains([]byte(err.Error()), []byte("closed")) {
		t.Errorf("Close: %v", err)
	}
}

// TestDecodeCallToolResultMatchesSDK: the plain decode gives what the
// SDK's decoder gives, and takes the text-only results.
func TestDecodeCallToolResultMatchesSDK(t *testing.T) {
	for _, c := range []struct {
		raw   string
		plain bool
	}{
		{`{"content":[{"type":"text","text":"Echo: hi"}]}`, true},
		{`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b\n\u00e9"}],"isError":true}`, true},
		{`{"content":[],"isError":false}`, true},
		{`{"content":[{"type":"text","text":"a","annotations":{"priority":1}}]}`, false},
		{`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"structuredContent":{"x":1}}`, false},
		{`{"content":[{"type":"text","text":"a"}],"_meta":{"k":"v"}}`, false},
		{`{"isError":true}`, false},
		{`{"content":null}`, false},
		{`{"content":[{"type":"text","text":null}]}`, false},
		{` { "content" : [ { "text" : "x\"y\\z\u00e9" , "type" : "text" } , {"type":"text","text":""} ] , "isError" : false } `, true},
		{`{"content":[{"type":"text","text":"a","type":"image"}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"content":[]}`, false},
		{`{"content":[{"type":"text"}]}`, false},
		{`{"content":[{"type":"text","text":1}]}`, false},
		{`{"content":[1]}`, false},
		{`{"content":{}}`, false},
		{`{"content":[],"isError":"yes"}`, false},
		{`{"content":[],"isError":null}`, false},
		{`{"content":[]`, false},
		{`[]`, false},
	} {
		want := &sdk.CallToolResult{}
		wantErr := json.Unmarshal([]byte(c.raw), want)
		got, err := decodeCallToolResult(json.RawMessage(c.raw))
		if (err == nil) != (wantErr == nil) {
			t.Errorf("%s: error %v, the SDK's %v", c.raw, err, wantErr)
			continue
		}
		if err == nil {
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(sdk.CallToolResult{})); diff != "" {
				t.Errorf("%s (-SDK +plain):\n%s", c.raw, diff)
			}
		}
		if _, plain := plainToolResult(json.RawMessage(c.raw)); plain != c.plain {
			t.Errorf("%s: plain %v, want %v", c.raw, plain, c.plain)
		}
	}
}

// TestLineConnCall: the connection's own call writes a request with an
// id of its own, takes its answer off the stream (the SDK's reader never
// sees it), wraps an error answer as the SDK does, tells the server when
// the caller gives up, and ends with sdk.ErrConnectionClosed on Close.
func TestLineConnCall(t *testing.T) {
	c, srv, out := pipeConn(t, 0, nil)
	sdkSaw := make(chan jsonrpc.Message, 10)
	go func() {
		for {
			msg, err := c.Read(context.Background())
			if err != nil {
				return
			}
			sdkSaw <- msg
		}
	}()
	serve := func(answer func(id string) string) string {
		line, err := readLineFrom(out)
		if err != nil {
			t.Error(err)
			return ""
		}
		var req struct {
			ID     string          `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Errorf("%s: %v", line, err)
		}
		if a := answer(req.ID); a != "" {
			io.WriteString(srv, a+"\n")
		}
		return line
	}
	ctx := context.Background()
	wires := make(chan string, 1)
	go func() {
		wires <- serve(func(id string) string {
			return `{"jsonrpc":"2.0","id":7,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"` + id + `","result":{"content":[]}}`
		})
	}()
	res, err := c.call(ctx, "tools/call", &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"m": "<&>"}})
	if err != nil || string(res) != `{"content":[]}` {
		t.Fatalf("call = %s, %v", res, err)
	}
	if wire, want := <-wires, `{"jsonrpc":"2.0","id":"utcpd-1","method":"tools/call","params":{"name":"echo","arguments":{"m":"<&>"}}}`; wire != want {
		t.Errorf("wrote %s, want %s", wire, want)
	}
	if msg := <-sdkSaw; msg.(*jsonrpc.Response).ID.Raw() != int64(7) {
		t.Errorf("the SDK's reader got %v, want only the answer to its own request", msg)
	}

	go serve(func(id string) string {
		return `{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-32602,"message":"Unknown tool: nope"}}`
	})
	_, err = c.call(ctx, "tools/call", &sdk.CallToolParams{Name: "nope"})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32602 || err.Error() != `calling "tools/call": Unknown tool: nope` {
		t.Errorf("error answer: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan string, 1)
	go func() {
		serve(func(string) string { cancel(); return "" })
		cancelled <- serve(func(string) string { return "" })
	}()
	if _, err := c.call(cctx, "tools/call", &sdk.CallToolParams{Name: "slow"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if got, want := <-cancelled, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"context canceled","requestId":"utcpd-3"}}`; got != want {
		t.Errorf("wrote %s, want %s", got, want)
	}

	done := make(chan error, 1)
	go func() {
		_, err := c.call(ctx, "tools/call", &sdk.CallToolParams{Name: "slow"})
		done <- err
	}()
	serve(func(string) string { c.Close(); return "" })
	if err := <-done; !errors.Is(err, sdk.ErrConnectionClosed) {
		t.Errorf("call ended by Close: %v", err)
	}
	if _, err := c.call(ctx, "tools/call", &sdk.CallToolParams{Name: "late"}); !errors.Is(err, sdk.ErrConnectionClosed) {
		t.Errorf("call after Close: %v", err)
	}
}
