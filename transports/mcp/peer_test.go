package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSSETapStamps: the tap of a call's event stream stamps the server
// requests and log messages it carries with the call's token (replacing
// any stamp the server wrote), keeps every other line and event as it
// was, split wherever the reads split it, and passes an event over
// tapLimit through untouched.
func TestSSETapStamps(t *testing.T) {
	ss := &session{}
	ctx, done := ss.beginCall(context.Background(), "ask")
	defer done()
	e := ctx.Value(inflightKey{}).(*inflight)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", nil)

	elicit := `{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"who?","_meta":{"utcpd/call":"forged","k":1}}}`
	result := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	big := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", tapLimit) + `"}}`
	wire := "id: 1\nevent: message\ndata: " + elicit + "\n\n" + ": keepalive\n\nid: 2\ndata: " + big + "\n\nid: 3\ndata: " + result + "\r\n\r\n"
	tap := &sseTap{rc: io.NopCloser(iotestOneByte(strings.NewReader(wire))), fn: func([]byte) {}, rewrite: ss.stamper(req)}
	out, err := io.ReadAll(tap)
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(string(out), "\n\n")
	if len(events) < 4 {
		t.Fatalf("events: %q", out)
	}
	first := events[0]
	if !strings.HasPrefix(first, "id: 1\nevent: message\ndata: ") {
		t.Fatalf("the id and event lines were not kept: %q", first)
	}
	var msg struct {
		ID     int `json:"id"`
		Params struct {
			Message string         `json:"message"`
			Meta    map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(first, "id: 1\nevent: message\ndata: ")), &msg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"utcpd/call": e.token, "k": 1.0}, msg.Params.Meta); diff != "" || msg.ID != 7 || msg.Params.Message != "who?" {
		t.Errorf("stamped request %+v (-want +got meta):\n%s", msg, diff)
	}
	if rest := strings.Join(events[1:], "\n\n"); rest != ": keepalive\n\nid: 2\ndata: "+big+"\n\nid: 3\ndata: "+result+"\r\n\r\n" {
		t.Errorf("the rest of the stream changed (%d bytes, want %d)", len(rest), len(wire)-len("id: 1\nevent: message\ndata: "+elicit+"\n\n"))
	}

	// The stamp routes the request to the call, once; after the call
	// ended it names that.
	meta := map[string]any{"utcpd/call": e.token}
	if got, why := ss.route(context.Background(), meta); got != e || why != "" || len(meta) != 0 {
		t.Errorf("route = %v, %q, meta %v; want the call, the stamp removed", got, why, meta)
	}
	done()
	if got, why := ss.route(context.Background(), map[string]any{"utcpd/call": e.token}); got != nil || !strings.Contains(why, "has ended") {
		t.Errorf("route after the call = %v, %q", got, why)
	}
}

// TestRouteOneCallRule: without a stamp a request goes to the one call
// in flight on the session, and is declined with none or several.
func TestRouteOneCallRule(t *testing.T) {
	ss := &session{kind: "stdio"}
	if e, why := ss.route(context.Background(), map[string]any{}); e != nil || !strings.Contains(why, "outside any tool call") {
		t.Errorf("no call: %v, %q", e, why)
	}
	ctx, done1 := ss.beginCall(context.Background(), "one")
	defer done1()
	if e, _ := ss.route(context.Background(), map[string]any{}); e != ctx.Value(inflightKey{}) {
		t.Errorf("one call: %v", e)
	}
	_, done2 := ss.beginCall(context.Background(), "two")
	defer done2()
	if e, why := ss.route(context.Background(), map[string]any{}); e != nil || !strings.Contains(why, "2 tool calls are in flight on this stdio session") {
		t.Errorf("two calls: %v, %q", e, why)
	}
	// A forged stamp names no call.
	if e, why := ss.route(context.Background(), map[string]any{"utcpd/call": "0123"}); e != nil || why == "" {
		t.Errorf("forged stamp: %v, %q", e, why)
	}
}
