package postgres_test

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/store/postgres"
	"github.com/utcpd/utcpd/transports"
	_ "github.com/utcpd/utcpd/transports/http" // the http transport the demo manual uses
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
)

// serveFixture starts the demo HTTP tool server on 127.0.0.1:0 and returns
// its manual URL.
func serveFixture(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.NewServer("", fixture.New(), httpserver.Options{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/utcp"
}

func manual(name, url string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"name":%q,"call_template_type":"http","http_method":"GET","url":%q}`, name, url))
}

// replica is a gateway over its own Store on a shared database, following
// the other replicas' changes (Restore).
func replica(t testing.TB, dsn string) (*gateway.Gateway, *postgres.Store) {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Options{Transports: transports.Default, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close(); _ = st.Close() })
	if _, _, err := g.Restore(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	return g, st
}

// TestCallsSendNoQueries checks the call path never touches the database:
// a manual registered through one replica is called 200 times through
// another, and neither Store sends a query meanwhile.
func TestCallsSendNoQueries(t *testing.T) {
	dsn := newDB(t)
	url := serveFixture(t)
	ga, sa := replica(t, dsn)
	gb, sb := replica(t, dsn)
	if _, err := ga.RegisterManual(t.Context(), manual("demo", url), gateway.RegisterOptions{Source: registry.SourceAPI}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := gb.Manual("demo"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the manual did not reach B within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // B's apply finished its reads
	qa, qb := sa.Queries(), sb.Queries()
	for i := range 200 {
		g := []*gateway.Gateway{ga, gb}[i%2]
		if _, err := g.CallTool(t.Context(), "demo.add", map[string]any{"a": i, "b": 1}, gateway.CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if da, db := sa.Queries()-qa, sb.Queries()-qb; da != 0 || db != 0 {
		t.Errorf("200 calls sent %d and %d queries, want none", da, db)
	}
}

// BenchmarkPropagation measures how long a registration through replica A
// takes to be live on replica B: from RegisterManual returning on A (the
// write committed) to B's registry serving it (B's Subscribe callback).
// It reports the median and the 99th percentile over b.N registrations.
//
//	go test -run '^$' -bench Propagation -benchtime 200x ./store/postgres/
func BenchmarkPropagation(b *testing.B) {
	dsn := pgtestDB(b)
	url := serveFixture(b)
	ga, _ := replica(b, dsn)
	gb, _ := replica(b, dsn)
	seen := make(chan time.Time, 16)
	cancel := gb.Subscribe(func() { seen <- time.Now() })
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("m%d", i)
		if _, err := ga.RegisterManual(b.Context(), manual(name, url), gateway.RegisterOptions{Source: registry.SourceAPI}); err != nil {
			b.Fatal(err)
		}
		done := time.Now()
		for {
			at := <-seen
			if _, ok := gb.Manual(name); ok {
				lat = append(lat, at.Sub(done))
				break
			}
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(.5), "p50-ms")
	b.ReportMetric(pct(.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
