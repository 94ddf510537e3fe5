package http_test

import (
	"context"
	"encoding/json"
	"net"
	nethttp "net/http"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// BenchmarkCallTool measures one http tool call (GET /tools/add?a=1&b=2
// to the demo server on loopback, keep-alive) through the transport:
// building the request, sending it, reading and decoding the answer. The
// time and allocations include the demo server's own, which runs in the
// same process. Run with
//
//	go test -run '^$' -bench CallTool -benchmem ./transports/http/
func BenchmarkCallTool(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &nethttp.Server{Handler: httpserver.Handler(fixture.New()), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	tr, err := utcphttp.New(transports.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Close() })
	raw, _ := json.Marshal(map[string]any{"name": "demo", "call_template_type": "http", "url": "http://" + ln.Addr().String() + "/tools/add"})
	ct, err := utcphttp.ParseTemplate(raw)
	if err != nil {
		b.Fatal(err)
	}
	call := &utcp.Call{Tool: "demo.add", Manual: "demo", Name: "add", Template: &ct,
		Arguments: map[string]any{"a": json.Number("1"), "b": json.Number("2")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.CallTool(ctx, call); err != nil {
			b.Fatal(err)
		}
	}
}
