package gateway_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/examples/servers/websocket/websocketserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

func TestPersistAndRestore(t *testing.T) {
	_, base := serveFixture(t)
	store := memstore.New()
	g := newGateway(t, gateway.Options{Store: store})
	register(t, g, httpManual("kept", base+"/utcp", `"headers":{"X-Key":"$$literal"}`))
	if _, err := g.RegisterManual(t.Context(), httpManual("fromconfig", base+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig}); err != nil {
		t.Fatal(err)
	}
	register(t, g, httpManual("gone", base+"/utcp"))
	if err := g.DeregisterManual(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	recs, err := store.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Name != "kept" || recs[0].Manual == nil || len(recs[0].Manual.Tools) != 5 {
		t.Fatalf("store holds %+v, want only the api manual with its 5 tools", recs)
	}
	if _, err := store.Get(t.Context(), "gone"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deregistered manual still stored: %v", err)
	}

	// A new gateway on the same store serves the stored manual at once.
	g2 := newGateway(t, gateway.Options{Store: store})
	n, failed, err := g2.Restore(t.Context(), true)
	if err != nil || n != 1 || len(failed) != 0 {
		t.Fatalf("Restore = %d, %v, %v", n, failed, err)
	}
	out, err := g2.CallTool(t.Context(), "kept.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{})
	if err != nil {
		t.Fatalf("call on a restored manual: %v", err)
	}
	if out.Value.(map[string]any)["sum"] == nil {
		t.Errorf("unexpected result %v", out.Value)
	}
	m, _ := g2.Manual("kept")
	if m.Source != registry.SourceAPI {
		t.Errorf("restored source = %q", m.Source)
	}
	// Background rediscovery refreshes it and updates the stored copy.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, err := store.Get(t.Context(), "kept")
		if err == nil && rec.Refreshed.After(recs[0].Refreshed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored copy was never refreshed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := g2.RefreshManual(t.Context(), "nope"); utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Errorf("refresh of an unknown manual: %v", err)
	}
}

// A manual deleted while it is being refreshed stays deleted.
func TestRefreshDoesNotResurrect(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			<-release
		}
		_ = json.NewEncoder(w).Encode(httpserver.Manual("http://"+r.Host, httpserver.Options{}))
	}))
	t.Cleanup(srv.Close)
	store := memstore.New()
	g := newGateway(t, gateway.Options{Store: store})
	register(t, g, httpManual("m", srv.URL+"/utcp"))
	done := make(chan error, 1)
	go func() { _, err := g.RefreshManual(t.Context(), "m"); done <- err }()
	for calls.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.DeregisterManual(t.Context(), "m"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; utcp.CodeOf(err) != utcp.CodeManualNotFound {
		t.Errorf("refresh of a deleted manual: err = %v, want manual_not_found", err)
	}
	if _, ok := g.Manual("m"); ok {
		t.Errorf("the deleted manual came back")
	}
	if _, err := store.Get(t.Context(), "m"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("the deleted manual is back in the store: %v", err)
	}
}

// A session transport keeps working after a restore and the background
// rediscovery that replaces the stored copy: retiring a stored copy must
// not release the live registration's connection.
func TestRestoreThenRediscoverKeepsSessions(t *testing.T) {
	hs := httptest.NewServer(websocketserver.New(fixture.New(), websocketserver.Options{}).Handler())
	t.Cleanup(hs.Close)
	store := memstore.New()
	g := newGateway(t, gateway.Options{Store: store})
	raw := json.RawMessage(`{"name":"ws","call_template_type":"websocket","url":"` + "ws" + strings.TrimPrefix(hs.URL, "http") + `/ws"}`)
	register(t, g, raw)
	rec, err := store.Get(t.Context(), "ws")
	if err != nil {
		t.Fatal(err)
	}
	g2 := newGateway(t, gateway.Options{Store: store})
	if _, _, err := g2.Restore(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m, ok := g2.Manual("ws"); ok && m.Refreshed.After(rec.Refreshed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored manual was never rediscovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the stored copy's retirement run
	for i := range 3 {
		if _, err := g2.CallTool(t.Context(), "ws.add", map[string]any{"a": i, "b": 1}, gateway.CallOptions{}); err != nil {
			t.Fatalf("call %d after restore and rediscovery: %v", i, err)
		}
	}
}
