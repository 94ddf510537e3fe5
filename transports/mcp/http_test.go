package mcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/examples/servers/mcp/mcpserver"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func TestHTTPSessionExpiry(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusBadRequest} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			f := fixture.New()
			hf := newHTTPFixture(t, f, mcpserver.Options{})
			tr := newTestTransport(t, transports.Options{})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"url": hf.url()}}}}))
			register(t, tr, tmpl)
			mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 1})
			hf.expire(status)
			got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 2, "b": 2})
			if diff := cmp.Diff(map[string]any{"sum": 4.0}, normalize(got)); diff != "" {
				t.Errorf("add after expiry (-want +got):\n%s", diff)
			}
			if n := f.Calls(); n != 2 {
				t.Errorf("the backend ran %d calls, want 2 (the refused one is retried, never run twice)", n)
			}
			s := serverOf(t, tr, tmpl, "demo")
			transporttest.WaitUntil(t, 5*time.Second, "the session count", func() bool { return s.restarts.Load() == 1 })
		})
	}
}

func TestHTTPHeadersAndAuth(t *testing.T) {
	hf := newHTTPFixture(t, fixture.New(), mcpserver.Options{})
	tr := counted(newTestTransport(t, transports.Options{}))
	tmpl := parse(t, transporttest.Template(t, Type, map[string]any{
		"config": map[string]any{"mcpServers": map[string]any{"demo": map[string]any{"url": hf.url(), "headers": map[string]string{"X-Tenant": "t1"}}}},
		"auth":   map[string]any{"auth_type": "api_key", "api_key": "sekret", "var_name": "X-Api-Key"},
	}))
	register(t, tr, tmpl)
	mustCall(t, tr, tmpl, "demo.echo", nil)
	if err := tr.DeregisterManual(t.Context(), tmpl); err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{}
	for _, r := range hf.requests() {
		methods[r.Method] = true
		if r.Header.Get("X-Tenant") != "t1" || r.Header.Get("X-Api-Key") != "sekret" {
			t.Errorf("%s request without the headers: %v", r.Method, r.Header)
		}
	}
	for _, m := range []string{"POST", "GET", "DELETE"} {
		if !methods[m] {
			t.Errorf("no %s request seen (%v)", m, methods)
		}
	}
}

func TestLegacySSE(t *testing.T) {
	srv := mcpserver.New(fixture.New(), mcpserver.Options{})
	ts := httptest.NewServer(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv.MCP() }, nil))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	for _, transport := range []string{"http", "sse"} { // http falls back after the 4xx
		t.Run(transport, func(t *testing.T) {
			tr := newTestTransport(t, transports.Options{})
			tmpl := parse(t, transporttest.Template(t, Type, map[string]any{"config": map[string]any{"mcpServers": map[string]any{
				"demo": map[string]any{"url": ts.URL, "transport": transport}}}}))
			register(t, tr, tmpl)
			if kind := serverOf(t, tr, tmpl, "demo").cur.kind; kind != "sse" {
				t.Errorf("session kind %s, want sse", kind)
			}
			got := mustCall(t, tr, tmpl, "demo.add", map[string]any{"a": 1, "b": 2})
			if diff := cmp.Diff(map[string]any{"sum": 3.0}, normalize(got)); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			st, err := tr.CallToolStream(ctx, &utcp.Call{Manual: "m", Name: "demo.count", Template: tmpl, Arguments: map[string]any{"n": 3}})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				ev, err := st.Recv()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("Recv: %v", err)
					}
					break
				}
				if ev.Type == "progress" {
					n++
				}
			}
			if n != 3 {
				t.Errorf("%d progress events over legacy SSE, want 3", n)
			}
		})
	}
}
