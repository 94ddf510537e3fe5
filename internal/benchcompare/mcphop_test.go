package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPHopGoSDK runs the bare MCP hop between the go-sdk's Streamable
// HTTP client at protocol 2025-11-25 and a go-sdk server on the hop's
// stdio pipes: the session initializes (session id, 202 for the
// initialized notification, 405 for the standalone stream), concurrent
// calls each get their own answer, and closing the session succeeds.
func TestMCPHopGoSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inR, inW := io.Pipe()   // hop -> server
	outR, outW := io.Pipe() // server -> hop
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Echo: " + in.Message}}}, nil, nil
	})
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	hs := httptest.NewServer(newMCPHop(inW, outR, func() {}))
	defer hs.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	if cs.ID() != hopSessionID {
		t.Errorf("session id %q, want %q", cs.ID(), hopSessionID)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				msg := fmt.Sprintf("%d-%d", g, i)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
				if err != nil {
					t.Error(err)
					return
				}
				if got := textOf(res); got != "Echo: "+msg {
					t.Errorf("call %s answered %q", msg, got)
				}
			}
		})
	}
	wg.Wait()
	if err := cs.Close(); err != nil {
		t.Errorf("closing the session: %v", err)
	}
	for method, want := range map[string]int{http.MethodGet: http.StatusMethodNotAllowed, http.MethodDelete: http.StatusNoContent} {
		req, _ := http.NewRequest(method, hs.URL+"/mcp", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s /mcp: %d, want %d", method, resp.StatusCode, want)
		}
	}
}

// TestMCPHopRouting checks the hop's routing against a scripted child: a
// request or notification of the child's own, even one carrying a pending
// id, is not taken for an answer; answers out of order reach their own
// callers; a notification from the client gets 202 and is forwarded; a
// body over the bound is refused without reaching the child.
func TestMCPHopRouting(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	hs := httptest.NewServer(newMCPHop(inW, outR, func() {}))
	defer hs.Close()
	defer outW.Close()

	post := func(body string) (int, string) {
		resp, err := http.Post(hs.URL+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	type answer struct {
		code     int
		body, id string
	}
	answers := make(chan answer, 2)
	for _, id := range []string{`7`, `"seven"`} {
		go func() {
			c, b := post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call"}`)
			answers <- answer{c, b, id}
		}()
	}
	lines := bufio.NewScanner(inR)
	var got []string
	for range 2 {
		if !lines.Scan() {
			t.Fatal("the hop wrote no line")
		}
		got = append(got, lines.Text())
	}
	if !slicesHave(got, `"id":7`) || !slicesHave(got, `"id":"seven"`) {
		t.Fatalf("the child got %q", got)
	}
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"id":7}}`,
		`{"jsonrpc":"2.0","id":"seven","result":{"n":2}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"n":1}}`,
	} {
		if _, err := io.WriteString(outW, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		a := <-answers
		want := map[string]string{`7`: `{"jsonrpc":"2.0","id":7,"result":{"n":1}}`, `"seven"`: `{"jsonrpc":"2.0","id":"seven","result":{"n":2}}`}[a.id]
		if a.code != http.StatusOK || a.body != want {
			t.Errorf("request %s answered %d %s, want 200 %s", a.id, a.code, a.body, want)
		}
	}

	done := make(chan answer, 1)
	go func() {
		c, b := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		done <- answer{c, b, ""}
	}()
	if !lines.Scan() || !strings.Contains(lines.Text(), "notifications/initialized") {
		t.Errorf("the notification was not forwarded: %q", lines.Text())
	}
	if a := <-done; a.code != http.StatusAccepted || a.body != "" {
		t.Errorf("notification answered %d %q, want 202 and no body", a.code, a.body)
	}
	if c, _ := post(`{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("a", maxMessage) + `"}`); c != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body answered %d", c)
	}
}

func slicesHave(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
