package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

// remoteError is an error answer of a running daemon: its envelope's code,
// message and details, and the HTTP status.
type remoteError struct {
	Status  int
	Code    utcp.Code
	Message string
	Details map[string]any
}

func (e *remoteError) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Code, e.Message)
	if list, _ := e.Details["did_you_mean"].([]any); len(list) > 0 {
		names := make([]string, len(list))
		for i, n := range list {
			names[i] = fmt.Sprint(n)
		}
		msg += " (did you mean " + strings.Join(names, ", ") + "?)"
	}
	return msg
}

// client talks to a running daemon.
type client struct {
	base  *url.URL
	token string // bearer token: an API key or the admin token
	http  *http.Client
}

// newClient returns a client for the daemon at server (a base URL; a bare
// host:port means http).
func newClient(server, token string) (*client, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, &exitError{code: exitUsage, err: fmt.Errorf("--server %q: want a URL such as http://127.0.0.1:8787", server)}
	}
	return &client{base: u, token: token, http: &http.Client{}}, nil
}

// do sends one request and decodes a 2xx JSON answer into out (nil: no
// decoding). A non-2xx answer is a *remoteError from its envelope.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, path, err)
	}
	return nil
}

// send sends one request asking for accept and returns a 2xx answer for
// the caller to read and close. A non-2xx answer is a *remoteError from
// its envelope.
func (c *client) send(ctx context.Context, method, path string, query url.Values, body any, accept string) (*http.Response, error) {
	target := strings.TrimRight(c.base.String(), "/") + path
	if q := query.Encode(); q != "" {
		target += "?" + q
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut {
		// Every POST and PUT is JSON, empty ones included (the daemon's
		// perimeter refuses others).
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "utcpd/"+versionString())
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	tracing.InjectHeader(ctx, req.Header)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("cannot reach utcpd at %s (is `utcpd serve` running?): %w", c.base, errors.Unwrap(err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
		}
		return nil, decodeRemoteError(resp.StatusCode, data)
	}
	return resp, nil
}

// decodeRemoteError reads an error envelope; a body that is not one is
// reported with its status and start.
func decodeRemoteError(status int, data []byte) error {
	var env struct {
		Error *struct {
			Code    utcp.Code      `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil && env.Error.Code != "" {
		return &remoteError{Status: status, Code: env.Error.Code, Message: env.Error.Message, Details: env.Error.Details}
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return &remoteError{Status: status, Code: utcp.CodeInternal, Message: fmt.Sprintf("HTTP %d: %s", status, text)}
}

// serverFromEnv returns $UTCPD_SERVER, or "".
func serverFromEnv() string { return os.Getenv(envServer) }

// withTimeout bounds a client command.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// pathEscape escapes one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }
