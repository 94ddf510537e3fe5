package httpx

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"

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

// Keys is a set of accepted bearer tokens. Matching compares SHA-256
// digests in constant time against every key, so neither a key's content
// nor which key matched shows in the timing. The zero value accepts
// nothing.
type Keys struct {
	digests [][sha256.Size]byte
	names   []string
}

// NewKeys returns the set of keys, ignoring empty strings. Each key's
// principal name is "key:" and the first 8 hex digits of its SHA-256: it
// identifies the key in logs and audit without revealing it.
func NewKeys(keys []string) *Keys {
	k := &Keys{}
	for _, key := range keys {
		if key == "" {
			continue
		}
		d := sha256.Sum256([]byte(key))
		k.digests = append(k.digests, d)
		k.names = append(k.names, "key:"+hex.EncodeToString(d[:4]))
	}
	return k
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.digests) }

// Match reports whether token is one of the keys, and that key's
// principal name.
func (k *Keys) Match(token string) (string, bool) {
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range k.digests {
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return k.names[found], true
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
// principal name in the request context (see Principal). A missing or
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
			principal, ok := keys.Match(tok)
			if !ok {
				w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token"`)
				WriteError(w, Errorf(utcp.CodeUnauthorized, "the bearer token is not valid"))
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), principal)))
		})
	}
}

// LoopbackOnly returns a middleware that admits only requests from a
// loopback address (by r.RemoteAddr) that also address the server by a
// loopback host (the Host header: localhost, 127.0.0.0/8, [::1]), which
// defeats DNS-rebinding pages in a local browser. Others are 403
// forbidden; why names the setting that would open the surface.
func LoopbackOnly(why string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !IsLoopbackAddr(r.RemoteAddr) {
				WriteError(w, Errorf(utcp.CodeForbidden, "%s answers loopback clients only", why).
					WithDetail("reason", "not_loopback"))
				return
			}
			if !isLoopbackHostHeader(r.Host) {
				WriteError(w, Errorf(utcp.CodeForbidden, "%s answers requests addressed to a loopback host only (got Host %q)", why, r.Host).
					WithDetail("reason", "host_not_loopback"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// IsLoopbackAddr reports whether addr ("host:port" or a bare IP, as in
// http.Request.RemoteAddr) is a loopback IP address. Names are never
// resolved; anything unparsable is not loopback.
func IsLoopbackAddr(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isLoopbackHostHeader reports whether a Host header names a loopback
// host: "localhost" (with or without a trailing dot) or a loopback IP,
// with or without a port. An empty Host (HTTP/1.0) is accepted.
func isLoopbackHostHeader(host string) bool {
	if host == "" {
		return true
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" {
		return true
	}
	return IsLoopbackAddr(h)
}

// RequireToken returns a middleware that admits a request only with
// "Authorization: Bearer <token>", compared in constant time; others are
// 401 unauthorized with a challenge for realm. The principal recorded is
// realm itself.
func RequireToken(token, realm string) func(http.Handler) http.Handler {
	keys := &Keys{digests: [][sha256.Size]byte{sha256.Sum256([]byte(token))}, names: []string{realm}}
	return RequireKeys(keys, realm)
}
