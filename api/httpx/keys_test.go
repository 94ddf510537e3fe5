package httpx_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
)

// TestNamedKeyMiddleware: RequireKeys admits plain and named keys (by key
// or by SHA-256), records the named key's name as the principal with the
// key and its scope in the context, and a plain key's "key:<8 hex>" with
// no scope; a wrong key is 401. NewAPIKeys refuses a name used twice and
// a named key without a key.
func TestNamedKeyMiddleware(t *testing.T) {
	sc, err := gateway.NewScope([]string{"demo.*"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("by-digest"))
	keys, err := httpx.NewAPIKeys([]string{"plain"}, []gateway.APIKey{
		{Name: "math", Key: "math-key", Scope: sc},
		{Name: "ops", SHA256: hex.EncodeToString(sum[:])},
	})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		principal string
		key       *gateway.APIKey
		scope     *gateway.Scope
	}
	var got seen
	h := httpx.RequireKeys(keys, "utcpd")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{httpx.Principal(r.Context()), gateway.APIKeyFrom(r.Context()), gateway.ScopeFrom(r.Context())}
	}))
	do := func(tok string) int {
		got = seen{}
		r := httptest.NewRequest("GET", "/v1/tools", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if do("math-key") != 200 || got.principal != "math" || got.key == nil || got.key.Name != "math" || got.scope != sc {
		t.Errorf("math: %+v", got)
	}
	if do("by-digest") != 200 || got.principal != "ops" || got.scope != nil {
		t.Errorf("ops: %+v", got)
	}
	d := sha256.Sum256([]byte("plain"))
	if do("plain") != 200 || got.principal != "key:"+hex.EncodeToString(d[:4]) || got.scope != nil {
		t.Errorf("plain: %+v", got)
	}
	if do("nope") != http.StatusUnauthorized || got.principal != "" {
		t.Errorf("a wrong key: %+v", got)
	}
	if _, err := httpx.NewAPIKeys(nil, []gateway.APIKey{{Name: "a", Key: "1"}, {Name: "a", Key: "2"}}); err == nil {
		t.Error("a name used twice is accepted")
	}
	if _, err := httpx.NewAPIKeys(nil, []gateway.APIKey{{Name: "a", SHA256: "zz"}}); err == nil {
		t.Error("a key without a key is accepted")
	}
}
