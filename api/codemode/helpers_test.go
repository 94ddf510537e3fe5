package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/transports"
	utcphttp "github.com/utcpd/utcpd/transports/http"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// testEnv is a gateway in front of the demo HTTP tool server (manual
// "demo": demo.echo, demo.add, demo.fail, demo.sleep, demo.count) and a
// Runner over it.
type testEnv struct {
	g       *gateway.Gateway
	f       *fixture.Fixture
	r       *Runner
	records chan *gateway.CallRecord
}

func newTestEnv(t testing.TB, opts Options) *testEnv {
	t.Helper()
	return newGuardedEnv(t, opts, nil)
}

// newGuardedEnv is newTestEnv with a guard chain in the gateway.
func newGuardedEnv(t testing.TB, opts Options, gd guard.Guard) *testEnv {
	t.Helper()
	f := fixture.New()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", f, httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	types := transports.NewRegistry()
	if err := types.Register(utcphttp.Info); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{f: f, records: make(chan *gateway.CallRecord, 1000)}
	g, err := gateway.New(gateway.Options{Transports: types, Guard: gd, OnCall: func(rec *gateway.CallRecord) {
		c := *rec
		select {
		case e.records <- &c:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	manual := fmt.Sprintf(`{"name":"demo","call_template_type":"http","url":%q}`, "http://"+ln.Addr().String()+"/utcp")
	if _, err := g.RegisterManual(context.Background(), json.RawMessage(manual), gateway.RegisterOptions{Source: "test"}); err != nil {
		t.Fatal(err)
	}
	e.g = g
	opts.Tools = g
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.r = r
	return e
}

// run runs code and fails the test on a request error.
func (e *testEnv) run(t testing.TB, code string) *Response {
	t.Helper()
	return e.runReq(t, Request{Code: code})
}

func (e *testEnv) runReq(t testing.TB, req Request) *Response {
	t.Helper()
	ctx := context.Background()
	if tt, ok := t.(interface{ Context() context.Context }); ok {
		ctx = tt.Context()
	}
	res, err := e.r.Run(ctx, Caller{Principal: "tester"}, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// jsonOf renders v as JSON for comparisons.
func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// denyGuard denies one tool for one principal and allows everything else.
type denyGuard struct{ tool, principal string }

func (d denyGuard) Evaluate(_ context.Context, c *guard.Call) (guard.Verdict, error) {
	if c.Qualified == d.tool && c.Principal == d.principal {
		return guard.Verdict{Decision: guard.Deny, Reason: "not for " + d.principal}, nil
	}
	return guard.Verdict{Decision: guard.Allow}, nil
}
