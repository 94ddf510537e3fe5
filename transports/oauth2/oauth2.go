// Package oauth2 is the token cache of auth_type oauth2 (client
// credentials): the transports.TokenSource the gateway shares across its
// transports, and that a transport uses on its own when
// transports.Options.Tokens is nil. It is not under transports/internal
// because the gateway builds the shared cache.
package oauth2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults of the oauth2 client-credentials token cache.
const (
	// DefaultTokenLifetime is assumed when a token response has no
	// expires_in.
	DefaultTokenLifetime = time.Hour
	// tokenFetchTimeout bounds one token fetch (both attempts together).
	tokenFetchTimeout = 30 * time.Second
	// maxTokenResponse caps a token endpoint's answer.
	maxTokenResponse = 1 << 20
)

// TokenCache is the transports.TokenSource for auth_type oauth2 (client credentials).
//
// Token POSTs the form grant_type=client_credentials, client_id,
// client_secret (and scope when set) to token_url; if that attempt fails it
// retries once with the client id and secret as HTTP Basic credentials
// instead. token_url must pass httpclient.CheckURL (https, or http to loopback).
//
// Tokens are cached per (token_url, client_id, scope, hash of
// client_secret) until expires_in (DefaultTokenLifetime when absent) minus
// a margin of a tenth of the lifetime, at most one minute; a response with
// expires_in <= 0 is used once and not cached. Concurrent callers asking for
// the same key share one fetch; a caller whose context ends stops waiting,
// while the fetch itself runs on (bounded by 30 s) for the others.
//
// A token endpoint that rejects the credentials (4xx on both attempts, or
// no access_token) yields a *utcp.Error with code unauthorized; one that
// cannot be reached or answers 5xx yields a *utcp.TransportError. Error
// messages never contain the client secret or a token.
//
// A TokenCache is safe for concurrent use. The zero value is not usable;
// call NewTokenCache.
type TokenCache struct {
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	tokens   map[tokenKey]cachedToken
	inflight map[tokenKey]*tokenFetch
}

type tokenKey struct {
	url, clientID, scope string
	secret               [sha256.Size]byte
}

type cachedToken struct {
	token   string
	expires time.Time
}

type tokenFetch struct {
	done    chan struct{}
	token   string
	expires time.Time // zero: do not cache
	err     error
}

var _ transports.TokenSource = (*TokenCache)(nil)

// NewTokenCache returns an empty TokenCache that fetches tokens with client
// (httpclient.New's when client is nil).
func NewTokenCache(client *http.Client) *TokenCache {
	if client == nil {
		client = httpclient.New(httpclient.Options{})
	}
	return &TokenCache{
		client:   client,
		now:      time.Now,
		tokens:   map[tokenKey]cachedToken{},
		inflight: map[tokenKey]*tokenFetch{},
	}
}

func keyOf(a *utcp.Auth) tokenKey {
	return tokenKey{url: a.TokenURL, clientID: a.ClientID, scope: a.Scope, secret: sha256.Sum256([]byte(a.ClientSecret))}
}

// Token returns a cached, unexpired access token for auth, or fetches one.
// auth must be of type oauth2 with token_url and client_id set.
func (c *TokenCache) Token(ctx context.Context, auth *utcp.Auth) (string, error) {
	if auth == nil || auth.Type != utcp.AuthOAuth2 {
		return "", utcp.NewError(utcp.CodeInvalidTemplate, "token cache: auth is not of type oauth2")
	}
	if auth.TokenURL == "" || auth.ClientID == "" {
		return "", utcp.NewError(utcp.CodeInvalidTemplate, "oauth2 auth: fields token_url and client_id are required")
	}
	key := keyOf(auth)
	c.mu.Lock()
	if t, ok := c.tokens[key]; ok && c.now().Before(t.expires) {
		c.mu.Unlock()
		return t.token, nil
	}
	f, ok := c.inflight[key]
	if !ok {
		f = &tokenFetch{done: make(chan struct{})}
		c.inflight[key] = f
		a := *auth
		// The fetch outlives this caller if need be; token_url and its
		// redirects never get the template's allow_insecure.
		fctx, cancel := context.WithTimeout(httpclient.WithAllowInsecure(context.WithoutCancel(ctx), false), tokenFetchTimeout)
		go func() {
			defer cancel()
			c.fetch(fctx, key, &a, f)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Invalidate drops the cached token for auth, so that the next Token
// fetches a new one. A fetch already under way is not affected.
func (c *TokenCache) Invalidate(auth *utcp.Auth) {
	if auth == nil {
		return
	}
	c.mu.Lock()
	delete(c.tokens, keyOf(auth))
	c.mu.Unlock()
}

func (c *TokenCache) fetch(ctx context.Context, key tokenKey, auth *utcp.Auth, f *tokenFetch) {
	start := c.now()
	tok, lifetime, err := c.request(ctx, auth)
	c.mu.Lock()
	delete(c.inflight, key)
	if err == nil {
		f.token = tok
		if lifetime > 0 {
			margin := min(lifetime/10, time.Minute)
			f.expires = start.Add(lifetime - margin)
			now := c.now()
			for k, t := range c.tokens { // prune what has expired
				if !now.Before(t.expires) {
					delete(c.tokens, k)
				}
			}
			c.tokens[key] = cachedToken{token: tok, expires: f.expires}
		}
	}
	f.err = err
	c.mu.Unlock()
	close(f.done)
}

// tokenAttemptError is the outcome of one failed attempt.
type tokenAttemptError struct {
	status   int   // HTTP status, 0 if none came
	rejected bool  // the endpoint answered but refused (4xx, or no token)
	err      error // description, never holding secrets
}

// request runs the form attempt and, if it fails, the Basic attempt.
func (c *TokenCache) request(ctx context.Context, auth *utcp.Auth) (string, time.Duration, error) {
	u, err := url.Parse(auth.TokenURL)
	if err != nil {
		return "", 0, utcp.Errorf(utcp.CodeInvalidTemplate, "oauth2 auth: token_url is not a URL: %w", err)
	}
	if err := httpclient.CheckURL(u, false); err != nil {
		return "", 0, utcp.Errorf(utcp.CodeInvalidTemplate, "oauth2 token_url: %w", err)
	}
	tok, life, err1 := c.attempt(ctx, auth, false)
	if err1 == nil {
		return tok, life, nil
	}
	if ctx.Err() != nil {
		return "", 0, ctx.Err()
	}
	tok, life, err2 := c.attempt(ctx, auth, true)
	if err2 == nil {
		return tok, life, nil
	}
	if ctx.Err() != nil {
		return "", 0, ctx.Err()
	}
	msg := fmt.Sprintf("oauth2 token request to %s failed: with form credentials: %v; with basic credentials: %v", utcp.RedactURL(u), err1.err, err2.err)
	if err1.rejected || err2.rejected {
		e := utcp.NewError(utcp.CodeUnauthorized, "%s", msg).WithDetail("token_url", utcp.RedactURL(u))
		if s := max(err1.status, err2.status); s != 0 {
			e = e.WithDetail("status", s)
		}
		return "", 0, e
	}
	return "", 0, &utcp.TransportError{Status: max(err1.status, err2.status), Err: errors.New(msg)}
}

func (c *TokenCache) attempt(ctx context.Context, auth *utcp.Auth, basic bool) (string, time.Duration, *tokenAttemptError) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if auth.Scope != "" {
		form.Set("scope", auth.Scope)
	}
	if !basic {
		form.Set("client_id", auth.ClientID)
		form.Set("client_secret", auth.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, auth.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, &tokenAttemptError{err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(auth.ClientID, auth.ClientSecret)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named once, by the caller
		}
		return "", 0, &tokenAttemptError{err: err}
	}
	body, err := httpclient.ReadResponseBody(resp, maxTokenResponse)
	if err != nil {
		return "", 0, &tokenAttemptError{status: resp.StatusCode, err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", 0, &tokenAttemptError{
			status:   resp.StatusCode,
			rejected: resp.StatusCode < 500,
			err:      fmt.Errorf("status %d%s", resp.StatusCode, oauthErrorText(body)),
		}
	}
	tok, life, err := parseTokenResponse(resp.Header.Get("Content-Type"), body)
	if err != nil {
		return "", 0, &tokenAttemptError{status: resp.StatusCode, rejected: true, err: err}
	}
	return tok, life, nil
}

// parseTokenResponse reads access_token and expires_in from a JSON (or,
// as some providers answer, form-encoded) token response.
func parseTokenResponse(contentType string, body []byte) (string, time.Duration, error) {
	var tok string
	var expires any
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" || mt == "text/plain" && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return "", 0, errors.New("token response is neither JSON nor form-encoded")
		}
		tok = v.Get("access_token")
		if e := v.Get("expires_in"); e != "" {
			expires = e
		}
	} else {
		var v struct {
			AccessToken string `json:"access_token"`
			ExpiresIn   any    `json:"expires_in"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return "", 0, errors.New("token response is not a JSON object")
		}
		tok, expires = v.AccessToken, v.ExpiresIn
	}
	if tok == "" {
		return "", 0, errors.New("token response has no access_token")
	}
	life := DefaultTokenLifetime
	if expires != nil {
		var secs float64
		var err error
		switch e := expires.(type) {
		case json.Number:
			secs, err = e.Float64()
		case string:
			secs, err = strconv.ParseFloat(e, 64)
		default:
			err = fmt.Errorf("%T", e)
		}
		if err != nil {
			return "", 0, fmt.Errorf("token response: expires_in is not a number")
		}
		life = time.Duration(secs * float64(time.Second))
		if secs <= 0 {
			life = 0
		}
	}
	return tok, life, nil
}

// oauthErrorText renders the RFC 6749 error fields of a failed token
// response, if it has them.
func oauthErrorText(body []byte) string {
	var v struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &v) != nil || v.Error == "" {
		return ""
	}
	s := ": " + v.Error
	if v.Description != "" {
		s += " (" + v.Description + ")"
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
