package api

import (
	"errors"
	"testing"

	"github.com/utcpd/utcpd/utcp"
)

// TestReadyDegraded: a started daemon whose shared store is away answers
// /readyz 200 degraded with the reason (a load balancer keeps routing);
// not ready still wins.
func TestReadyDegraded(t *testing.T) {
	var notReady, degraded error
	e := newEnv(t, envOptions{api: Options{Ready: func() error { return notReady }, Degraded: func() error { return degraded }}})
	if r := e.do(req{method: "GET", path: "/readyz"}); r.status != 200 || r.json(t)["status"] != "ready" {
		t.Errorf("readyz: %s", r)
	}
	degraded = errors.New("postgres: db:5432/utcpd: database unavailable")
	r := e.do(req{method: "GET", path: "/readyz"})
	if v := r.json(t); r.status != 200 || v["status"] != "degraded" || v["reason"] != degraded.Error() {
		t.Errorf("readyz while degraded: %s", r)
	}
	notReady = errors.New("waiting for the database")
	expectError(t, e.do(req{method: "GET", path: "/readyz"}), 503, utcp.CodeUnavailable)
}
