package httpx

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/utcp"
)

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (the scheme compared case-insensitively), and whether there was
// one.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "bearer ") {
		return "", false
	}
	tok := strings.TrimSpace(h[7:])
	return tok, tok != ""
}

// Keys is a set of accepted bearer tokens, each with its principal name
// and scope (gateway.APIKey). Matching compares SHA-256 digests in
// constant time against every key, so neither a key's content nor which
// key matched shows in the timing. The zero value accepts nothing.
type Keys struct {
	digests [][sha256.Size]byte
	keys    []gateway.APIKey
}

// NewKeys returns the set of plain keys, ignoring empty strings. Each
// key's principal name is "key:" and the first 8 hex digits of its
// SHA-256 (gateway.PlainKey): it identifies the key in logs and audit
// without revealing it; its scope is every tool.
func NewKeys(keys []string) *Keys {
	k := &Keys{}
	for _, key := range keys {
		if key != "" {
			k.add(gateway.PlainKey(key))
		}
	}
	return k
}

// NewAPIKeys returns the set of plain keys (as NewKeys) and named keys
// (their names as principals, their scopes). A named key whose digest is
// unknown (no Key, no valid SHA256) is an error, as is a name used twice.
func NewAPIKeys(plain []string, named []gateway.APIKey) (*Keys, error) {
	k := NewKeys(plain)
	seen := map[string]bool{}
	for _, key := range named {
		if seen[key.Name] {
			return nil, fmt.Errorf("API key %q is named twice", key.Name)
		}
		seen[key.Name] = true
		if !k.add(key) {
			return nil, fmt.Errorf("API key %q has neither a key nor a valid key_sha256", key.Name)
		}
	}
	return k, nil
}

func (k *Keys) add(key gateway.APIKey) bool {
	d, ok := key.Digest()
	if !ok {
		return false
	}
	k.digests = append(k.digests, d)
	k.keys = append(k.keys, key)
	return true
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.digests) }

// Match reports whether token is one of the keys, and that key's
// principal name.
func (k *Keys) Match(token string) (string, bool) {
	key, ok := k.MatchKey(token)
	if !ok {
		return "", false
	}
	return key.Name, true
}

// MatchKey reports whether token is one of the keys, and which. Every
// key is compared, in constant time.
func (k *Keys) MatchKey(token string) (*gateway.APIKey, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range k.digests {
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &k.keys[found], true
}

// Scope returns the scope of the key whose principal is name: nil (every
// tool) for a plain key or a name no key has. The daemon gives it to the
// gateway (gateway.Options.PrincipalScope).
func (k *Keys) Scope(name string) *gateway.Scope {
	if k == nil {
		return nil
	}
	for i := range k.keys {
		if k.keys[i].Name == name {
			return k.keys[i].Scope
		}
	}
	return nil
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx naming the authenticated caller.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal returns the caller RequireKeys authenticated, "" if none.
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// RequireKeys returns a middleware that admits a request only with
// "Authorization: Bearer <key>" for one of keys, and records the key's
// principal name (see Principal), the key itself and its scope
// (gateway.WithAPIKey) in the request context. A missing or
// wrong token is 401 unauthorized with a WWW-Authenticate challenge for
// realm. With no keys every request is admitted unchanged.
func RequireKeys(keys *Keys, realm string) func(http.Handler) http.Handler {
	challenge := `Bearer realm="` + realm + `"`
	return func(next http.Handler) http.Handler {
		if keys == nil || keys.Len() == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok := BearerToken(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", challenge)
				WriteError(w, Errorf(utcp.CodeUnauthorized, "this endpoint needs \"Authorization: Bearer <token>\""))
				return
			}
			key, ok := keys.MatchKey(tok)
			if !ok {
				w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token"`)
				WriteError(w, Errorf(utcp.CodeUnauthorized, "the bearer token is not valid"))
				return
			}
			ctx := gateway.WithAPIKey(WithPrincipal(r.Context(), key.Name), key)
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// RequireToken returns a middleware that admits a request only with
// "Authorization: Bearer <token>", compared in constant time; others are
// 401 unauthorized with a challenge for realm. The principal recorded is
// realm itself.
func RequireToken(token, realm string) func(http.Handler) http.Handler {
	keys := &Keys{digests: [][sha256.Size]byte{sha256.Sum256([]byte(token))}, keys: []gateway.APIKey{{Name: realm, Key: token}}}
	return RequireKeys(keys, realm)
}

// RefuseAll returns a middleware that answers every request with an
// error of code and message, calling nothing behind it.
func RefuseAll(code utcp.Code, message string) func(http.Handler) http.Handler {
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			WriteError(w, Errorf(code, "%s", message))
		})
	}
}
