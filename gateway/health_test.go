package gateway_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/utcpd/utcpd/examples/servers/http/httpserver"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/registry/memstore"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/transporttest/fixture"
	"github.com/utcpd/utcpd/utcp"
)

// TestBackoffSchedule: the nominal wait doubles from Initial to Max; the
// jittered wait lies in [nominal/2, nominal]; zero fields take the
// defaults and Max is never below Initial.
func TestBackoffSchedule(t *testing.T) {
	b := gateway.Backoff{Initial: time.Second, Max: 30 * time.Second}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want { // n = 0 (no failure yet) counts as the first
		if got := b.Nominal(n); got != w {
			t.Errorf("Nominal(%d) = %v, want %v", n, got, w)
		}
	}
	if got := b.Nominal(1000); got != 30*time.Second {
		t.Errorf("Nominal(1000) = %v, want the cap", got)
	}
	for _, n := range []int{1, 2, 5, 7, 60} {
		d := b.Nominal(n)
		if got := b.Delay(n, func() float64 { return 0 }); got != d/2 {
			t.Errorf("Delay(%d, 0) = %v, want %v", n, got, d/2)
		}
		if got := b.Delay(n, func() float64 { return 0.5 }); got != d/2+d/4 {
			t.Errorf("Delay(%d, 0.5) = %v, want %v", n, got, d/2+d/4)
		}
		for range 200 {
			if got := b.Delay(n, nil); got < d/2 || got > d {
				t.Fatalf("Delay(%d) = %v, outside [%v, %v]", n, got, d/2, d)
			}
		}
	}
	// Out-of-range draws are clamped.
	if got := b.Delay(3, func() float64 { return 7 }); got != 4*time.Second {
		t.Errorf("Delay with r = 7: %v", got)
	}
	if got := b.Delay(3, func() float64 { return -1 }); got != 2*time.Second {
		t.Errorf("Delay with r = -1: %v", got)
	}
	var zero gateway.Backoff
	if zero.Nominal(1) != gateway.DefaultBackoff.Initial || zero.Nominal(100) != gateway.DefaultBackoff.Max {
		t.Errorf("zero Backoff: %v .. %v", zero.Nominal(1), zero.Nominal(100))
	}
	if got := (gateway.Backoff{Initial: time.Minute, Max: time.Second}).Nominal(5); got != time.Minute {
		t.Errorf("Max below Initial: %v", got)
	}
}

// gatedBackend is the demo HTTP server whose manual (GET /utcp) answers
// 503 while it is down; its tools always answer.
type gatedBackend struct {
	url         string
	up          atomic.Bool
	discoveries atomic.Int64
	// While hold is set, discoveries wait for release to close (or
	// their client to go away).
	hold    atomic.Bool
	release chan struct{}
}

func startGated(t *testing.T, up bool) *gatedBackend {
	t.Helper()
	b := &gatedBackend{release: make(chan struct{})}
	b.up.Store(up)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.url = "http://" + ln.Addr().String()
	srv := httpserver.NewServer("", fixture.New(), httpserver.Options{})
	inner := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/utcp" {
			b.discoveries.Add(1)
			if b.hold.Load() {
				select {
				case <-b.release:
				case <-r.Context().Done():
					return
				}
			}
			if !b.up.Load() {
				http.Error(w, "backend starting", http.StatusServiceUnavailable)
				return
			}
		}
		inner.ServeHTTP(w, r)
	})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	t.Cleanup(func() { b.unblock() }) // before the server closes
	return b
}

func (b *gatedBackend) unblock() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// fastRetry retries every few milliseconds.
var fastRetry = gateway.RetryOptions{Backoff: gateway.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond}}

func status(t *testing.T, g *gateway.Gateway, name string) gateway.ManualStatus {
	t.Helper()
	s, ok := g.Status(name)
	if !ok {
		t.Fatalf("manual %q unknown to the gateway", name)
	}
	return s
}

func waitState(t *testing.T, g *gateway.Gateway, name string, want gateway.ManualState) gateway.ManualStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, ok := g.Status(name)
		if ok && s.Health.State == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("manual %q: state %+v, never %s", name, s.Health, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFailedManualKeptAndRetried: a manual whose backend is down is kept
// as failed (no tools, listed with its error and next retry) and becomes
// ready by itself once the backend comes up.
func TestFailedManualKeptAndRetried(t *testing.T) {
	b := startGated(t, false)
	g := newGateway(t, gateway.Options{Retry: fastRetry})
	_, err := g.RegisterManual(t.Context(), httpManual("late", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	s := status(t, g, "late")
	h := s.Health
	if s.Manual == nil || s.Source != registry.SourceConfig || s.Type != "http" || h.ToolCount != 0 {
		t.Fatalf("failed manual: %+v", s)
	}
	if h.State != gateway.StateFailed && h.State != gateway.StateDiscovering {
		t.Errorf("state %q", h.State)
	}
	if h.LastError == nil || h.LastError.Code != utcp.CodeDiscoveryFailed || strings.Contains(h.LastError.Message, `"late"`) ||
		strings.Contains(h.LastError.Message, "\n") || h.LastError.At.IsZero() {
		t.Errorf("last error %+v", h.LastError)
	}
	if h.Failures < 1 || !h.LastSuccess.IsZero() {
		t.Errorf("failures %d, last success %v", h.Failures, h.LastSuccess)
	}
	if _, err := g.CallTool(t.Context(), "late.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); utcp.CodeOf(err) != utcp.CodeToolNotFound {
		t.Errorf("a failed manual's tool: %v", err)
	}
	if len(g.Registry().Tools()) != 0 {
		t.Errorf("a failed manual contributes tools: %d", len(g.Registry().Tools()))
	}
	// Still failing: retried in the background, counted.
	for b.discoveries.Load() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	if c := g.Counts(); c.Failed != 1 || c.Total != 1 {
		t.Errorf("counts %+v", c)
	}
	b.up.Store(true)
	s = waitState(t, g, "late", gateway.StateReady)
	if s.Health.ToolCount != 5 || s.Health.LastError != nil || s.Health.Failures != 0 || !s.Health.NextRetry.IsZero() || s.Health.LastSuccess.IsZero() {
		t.Errorf("recovered: %+v", s.Health)
	}
	m, _ := g.Manual("late")
	if m.Source != registry.SourceConfig {
		t.Errorf("source after recovery %q", m.Source)
	}
	if _, err := g.CallTool(t.Context(), "late.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
		t.Errorf("call after recovery: %v", err)
	}
}

// TestRefreshRetriesAtOnce: with background retries off, a failed
// manual stays failed (no retry scheduled) until RefreshManual, which
// tries at once.
func TestRefreshRetriesAtOnce(t *testing.T) {
	b := startGated(t, false)
	g := newGateway(t, gateway.Options{Retry: gateway.RetryOptions{Disabled: true}})
	_, err := g.RegisterManual(t.Context(), httpManual("m", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceDir, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if h := status(t, g, "m").Health; h.State != gateway.StateFailed || !h.NextRetry.IsZero() {
		t.Fatalf("health %+v", h)
	}
	_, err = g.RefreshManual(t.Context(), "m")
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if h := status(t, g, "m").Health; h.State != gateway.StateFailed || h.Failures != 2 {
		t.Errorf("after a failed refresh: %+v", h)
	}
	b.up.Store(true)
	res, err := g.RefreshManual(t.Context(), "m")
	if err != nil || len(res.Tools) != 5 {
		t.Fatalf("refresh: %v %v", res, err)
	}
	if h := status(t, g, "m").Health; h.State != gateway.StateReady || h.ToolCount != 5 {
		t.Errorf("after refresh: %+v", h)
	}
}

// TestDegradedKeepsServing: a refresh that fails leaves the tools serving
// (degraded) until a background retry succeeds; a replacement with
// KeepFailed that fails keeps the old version serving and is retried with
// the new template.
func TestDegradedKeepsServing(t *testing.T) {
	b := startGated(t, true)
	g := newGateway(t, gateway.Options{Retry: fastRetry})
	if _, err := g.RegisterManual(t.Context(), httpManual("m", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true}); err != nil {
		t.Fatal(err)
	}
	b.up.Store(false)
	_, err := g.RefreshManual(t.Context(), "m")
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	h := status(t, g, "m").Health
	if (h.State != gateway.StateDegraded && h.State != gateway.StateReady) || h.ToolCount != 5 {
		t.Fatalf("after a failed refresh: %+v", h)
	}
	if h.State == gateway.StateDegraded && (h.LastError == nil || h.LastSuccess.IsZero()) {
		t.Errorf("degraded: %+v", h)
	}
	if _, err := g.CallTool(t.Context(), "m.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
		t.Errorf("a degraded manual's tool: %v", err)
	}
	b.up.Store(true)
	waitState(t, g, "m", gateway.StateReady)

	// A replacement pointing at a backend that is down.
	b2 := startGated(t, false)
	raw := httpManual("m", b2.url+"/utcp")
	_, err = g.RegisterManual(t.Context(), raw, gateway.RegisterOptions{Source: registry.SourceConfig, Replace: true, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if m, _ := g.Manual("m"); !strings.Contains(string(m.Template.Raw), b.url) || len(m.Tools) != 5 {
		t.Fatalf("the old version does not serve: %s", m.Template.Raw)
	}
	b2.up.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := g.Manual("m")
		if strings.Contains(string(m.Template.Raw), b2.url) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the wanted template was never registered: %+v", status(t, g, "m").Health)
		}
		time.Sleep(5 * time.Millisecond)
	}
	waitState(t, g, "m", gateway.StateReady)
}

// TestFailedManualRemovedStaysRemoved: a failed manual can be removed;
// its retries stop and do not bring it back.
func TestFailedManualRemovedStaysRemoved(t *testing.T) {
	b := startGated(t, false)
	g := newGateway(t, gateway.Options{Retry: fastRetry})
	_, err := g.RegisterManual(t.Context(), httpManual("gone", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	for b.discoveries.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := g.DeregisterManual(t.Context(), "gone"); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Status("gone"); ok {
		t.Fatal("removed manual still listed")
	}
	b.up.Store(true)
	time.Sleep(100 * time.Millisecond) // many backoff periods
	if _, ok := g.Status("gone"); ok || len(g.Statuses()) != 0 {
		t.Errorf("a retry brought the removed manual back: %+v", g.Statuses())
	}
}

// TestFailuresThatNeedAChange: an unknown call_template_type and a
// missing variable keep a failed manual with no retry scheduled; new
// variables retry the latter at once.
func TestFailuresThatNeedAChange(t *testing.T) {
	b := startGated(t, true)
	vars, err := manuals.NewResolver(nil, manuals.ResolverOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	g := newGateway(t, gateway.Options{Retry: fastRetry, Variables: vars})
	_, err = g.RegisterManual(t.Context(), json.RawMessage(`{"name":"typo","call_template_type":"htp","url":"http://127.0.0.1:1/x"}`),
		gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeInvalidTemplate)
	s := status(t, g, "typo")
	if s.Health.State != gateway.StateFailed || !s.Health.NextRetry.IsZero() || s.Type != "htp" || s.Health.LastError.Code != utcp.CodeInvalidTemplate {
		t.Errorf("typo: %+v %+v", s, s.Health)
	}
	_, err = g.RegisterManual(t.Context(), httpManual("needsvar", b.url+"/utcp", `"headers":{"X-Key":"${KEY_XYZ}"}`),
		gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeVariableNotFound)
	if h := status(t, g, "needsvar").Health; h.State != gateway.StateFailed || !h.NextRetry.IsZero() {
		t.Errorf("needsvar: %+v", h)
	}
	if vs, err := g.RequiredVariables("needsvar"); err != nil || len(vs) != 1 || vs[0].Resolves {
		t.Errorf("required variables of a failed manual: %v %v", vs, err)
	}
	withVar, err := manuals.NewResolver(&manuals.Config{Variables: map[string]string{"needsvar_KEY_XYZ": "v"}}, manuals.ResolverOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	g.SetVariables(withVar)
	waitState(t, g, "needsvar", gateway.StateReady)
	if h := status(t, g, "typo").Health; h.State != gateway.StateFailed {
		t.Errorf("typo after new variables: %+v", h)
	}
}

// TestFirstDiscoveryIsListed: while a first discovery is under way the
// manual is listed as discovering, with no registry entry.
func TestFirstDiscoveryIsListed(t *testing.T) {
	b := startGated(t, true)
	b.hold.Store(true)
	g := newGateway(t, gateway.Options{})
	done := make(chan error, 1)
	go func() {
		_, err := g.RegisterManual(t.Context(), httpManual("slow", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceAPI})
		done <- err
	}()
	for b.discoveries.Load() == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	s := status(t, g, "slow")
	if s.Manual != nil || s.Health.State != gateway.StateDiscovering || s.Source != registry.SourceAPI || s.Type != "http" {
		t.Errorf("during discovery: %+v", s)
	}
	if c := g.Counts(); c.Discovering != 1 {
		t.Errorf("counts %+v", c)
	}
	b.unblock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := status(t, g, "slow"); s.Health.State != gateway.StateReady || s.Manual == nil {
		t.Errorf("after discovery: %+v", s)
	}
	if err := g.DeregisterManual(t.Context(), "slow"); err != nil {
		t.Fatal(err)
	}
	if s, ok := g.Status("slow"); ok {
		t.Errorf("removed manual still known: %+v", s)
	}

	// Without KeepFailed (the admin API) a failure leaves nothing behind.
	b.up.Store(false)
	_, err := g.RegisterManual(t.Context(), httpManual("nope", b.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceAPI})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if _, ok := g.Status("nope"); ok {
		t.Error("a failed admin registration is listed")
	}
}

// TestRestoreHealth: stored copies serve at once as discovering; a
// rediscovery that fails leaves them degraded, and they become ready once
// the backend answers. A stored manual whose template no longer
// registers is kept as failed.
func TestRestoreHealth(t *testing.T) {
	b := startGated(t, true)
	store := memstore.New()
	g := newGateway(t, gateway.Options{Store: store})
	register(t, g, httpManual("kept", b.url+"/utcp"))
	if err := store.Put(t.Context(), &registry.Record{Name: "broken", Source: registry.SourceAPI,
		Template: json.RawMessage(`{"name":"broken","call_template_type":"http","url":"${BROKEN_URL}"}`)}); err != nil {
		t.Fatal(err)
	}
	b.up.Store(false)
	g2 := newGateway(t, gateway.Options{Store: store, Retry: fastRetry})
	n, failed, err := g2.Restore(t.Context(), true)
	if err != nil || n != 1 || len(failed) != 1 || failed[0].Name != "broken" {
		t.Fatalf("Restore = %d %v %v", n, failed, err)
	}
	if s := status(t, g2, "broken"); s.Health.State != gateway.StateFailed || s.Health.LastError.Code != utcp.CodeVariableNotFound {
		t.Errorf("broken: %+v", s.Health)
	}
	s := waitState(t, g2, "kept", gateway.StateDegraded)
	if s.Health.ToolCount != 5 || s.Health.LastSuccess.IsZero() || s.Health.LastError == nil {
		t.Errorf("degraded stored copy: %+v", s.Health)
	}
	if _, err := g2.CallTool(t.Context(), "kept.add", map[string]any{"a": 1, "b": 2}, gateway.CallOptions{}); err != nil {
		t.Errorf("call on the stored copy: %v", err)
	}
	b.up.Store(true)
	waitState(t, g2, "kept", gateway.StateReady)
	// Removing the failed stored manual removes its record.
	if err := g2.DeregisterManual(t.Context(), "broken"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(t.Context(), "broken"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("stored record of the removed failed manual: %v", err)
	}
}

// TestCloseEndsRetries: Close returns while a retry is scheduled far
// ahead, and while one is under way, blocked in its backend (goleak, in
// TestMain, checks that their goroutines end).
func TestCloseEndsRetries(t *testing.T) {
	far := startGated(t, false)
	g1, err := gateway.New(gateway.Options{Transports: transports.Default,
		Retry: gateway.RetryOptions{Backoff: gateway.Backoff{Initial: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g1.RegisterManual(t.Context(), httpManual("far", far.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	if h := status(t, g1, "far").Health; time.Until(h.NextRetry) < 20*time.Minute {
		t.Errorf("next retry %v, want about an hour ahead", h.NextRetry)
	}
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}

	stuck := startGated(t, false)
	g2, err := gateway.New(gateway.Options{Transports: transports.Default, Retry: fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g2.RegisterManual(t.Context(), httpManual("stuck", stuck.url+"/utcp"), gateway.RegisterOptions{Source: registry.SourceConfig, KeepFailed: true})
	codeOf(t, err, utcp.CodeDiscoveryFailed)
	stuck.hold.Store(true) // the next attempt, a background retry, blocks
	n := stuck.discoveries.Load()
	for stuck.discoveries.Load() <= n {
		time.Sleep(2 * time.Millisecond)
	}
	if err := g2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := g2.Status("stuck"); !ok {
		t.Error("the failed manual is gone after Close")
	}
}

func TestFailureMessage(t *testing.T) {
	err := utcp.Errorf(utcp.CodeDiscoveryFailed, "discovering manual %q: %w", "weather",
		errors.New(`http discovery of manual "weather" from http://weather.example/utcp:`+"\n  dial tcp: connection refused"))
	got := gateway.FailureMessage("weather", err)
	if got != "http discovery from http://weather.example/utcp: dial tcp: connection refused" {
		t.Errorf("message %q", got)
	}
	for _, c := range []struct{ name, in, want string }{
		{"figma", `discovering manual "figma": http discovery of manual "figma" from https://h.example/figma/openapi.yaml: transport error: GET https://h.example/figma/openapi.yaml: dial tcp: lookup h.example: no such host`,
			"http discovery: transport error: GET https://h.example/figma/openapi.yaml: dial tcp: lookup h.example: no such host"},
		{"newsapi", `discovering manual "newsapi": file: manual newsapi: /srv/newsapi_manual.json: open /srv/newsapi_manual.json: no such file or directory`,
			"file: open /srv/newsapi_manual.json: no such file or directory"},
		{"x", `discovering manual "x": tcp discovery of manual "x" from 127.0.0.1:9: connection refused`,
			"tcp discovery from 127.0.0.1:9: connection refused"},
		{"s", `http: field url: parse "http://bob:USERPASS789up@127.0.0.1:9x/utcp?api_key=SECRET123qv": invalid port`,
			`http: field url: parse "http://bob:[redacted]@127.0.0.1:9x/utcp?api_key=[redacted]": invalid port`},
	} {
		if got := gateway.FailureMessage(c.name, errors.New(c.in)); got != c.want {
			t.Errorf("FailureMessage(%s):\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	long := gateway.FailureMessage("x", errors.New(strings.Repeat("é", 1000)))
	if len(long) > 1004 || !strings.HasSuffix(long, "…") || !utf8.ValidString(long) {
		t.Errorf("long message %d bytes: %q", len(long), long)
	}
}
