package httpcall

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Call is the lifetime of one streaming HTTP call: its context, its
// open response body and the error that ended it. The streams of the sse
// and streamable_http transports embed it. Set it up with Start; Mu must
// be held for Finish (Recv holds it while reading), not for Close.
type Call struct {
	// Ctx is the call's context (see Start).
	Ctx context.Context
	// Mu guards Body and Err.
	Mu sync.Mutex
	// Body is the open response body; nil before it arrives and once the
	// call is finished.
	Body io.ReadCloser
	// Err is sticky: io.EOF or what ended the stream, nil while it runs.
	Err error
	// LastBytes is the size of the last value Recv returned, set by Recv
	// and counted by Collect against its cap.
	LastBytes int

	cancel        context.CancelCauseFunc
	cancelTimeout context.CancelFunc
	stopAfter     func() bool
	streamClosed  error
	closeOnce     sync.Once
}

// Start derives c.Ctx from ctx: bounded by timeout when it is positive,
// ended with cause transportClosed when transportCtx ends (the transport
// closed) and with cause streamClosed by Finish and Close, and marked
// with httpclient.WithAllowInsecure(allowInsecure).
func (c *Call) Start(ctx, transportCtx context.Context, timeout time.Duration, allowInsecure bool, transportClosed, streamClosed error) {
	c.streamClosed = streamClosed
	var cctx context.Context
	cctx, c.cancel = context.WithCancelCause(ctx)
	c.Ctx, c.cancelTimeout = cctx, func() {}
	if timeout > 0 {
		c.Ctx, c.cancelTimeout = context.WithTimeout(cctx, timeout)
	}
	cancel := c.cancel
	c.stopAfter = context.AfterFunc(transportCtx, func() { cancel(transportClosed) })
	c.Ctx = httpclient.WithAllowInsecure(c.Ctx, allowInsecure)
}

// Finish ends the call with err (kept in Err unless Err is already set,
// and returned by later Recv calls), closes Body and releases the
// contexts. It returns Err. c.Mu must be held.
func (c *Call) Finish(err error) error {
	if c.Err == nil {
		c.Err = err
	}
	if c.Body != nil {
		c.Body.Close()
		c.Body = nil
	}
	c.stopAfter()
	c.cancelTimeout()
	c.cancel(c.streamClosed)
	return c.Err
}

// Close ends the call if it is still open (cancelling Ctx first, so that
// a Recv blocked on the body returns) and releases its connection; the
// server sees the connection close. It is idempotent and returns nil.
func (c *Call) Close() error {
	c.closeOnce.Do(func() { c.cancel(c.streamClosed) })
	c.Mu.Lock()
	defer c.Mu.Unlock()
	c.Finish(c.streamClosed)
	return nil
}

// Collect reads recv (a stream's Recv, which sets c.LastBytes) to io.EOF
// and returns the data of its events as a list ([]any, empty when there
// are none). An error of recv is returned as it is; data over max bytes
// in all is a payload_too_large error.
func (c *Call) Collect(recv func() (*utcp.Event, error), max int64) (*utcp.Result, error) {
	list := []any{}
	var total int64
	for {
		ev, err := recv()
		if errors.Is(err, io.EOF) {
			return &utcp.Result{Value: list}, nil
		}
		if err != nil {
			return nil, err
		}
		total += int64(c.LastBytes)
		if total > max {
			return nil, transports.TooLarge(max)
		}
		list = append(list, ev.Data)
	}
}

// ManualTarget parses and checks the URL of a discovery request of
// transport typ (a URL that does not parse is invalid_template "<typ>:
// url: ...", then httpclient.CheckURL applies) and returns it with the request's
// headers: headers, then an Accept preferring JSON, then YAML.
func ManualTarget(typ, rawURL string, headers map[string]string, allowInsecure bool) (*url.URL, http.Header, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, utcp.Errorf(utcp.CodeInvalidTemplate, "%s: url: %w", typ, err)
	}
	if err := httpclient.CheckURL(u, allowInsecure); err != nil {
		return nil, nil, err
	}
	header := http.Header{}
	for k, v := range headers {
		header.Set(k, v)
	}
	header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	return u, header, nil
}

// Base is the state an HTTP streaming transport (sse,
// streamable_http) holds besides its configuration: the pooled client,
// the token source and the context that Shutdown ends, which ends every
// open stream. Set it up with Init; it is safe for concurrent use after.
type Base struct {
	// Client sends the requests.
	Client *http.Client
	// Tokens supplies oauth2 tokens.
	Tokens transports.TokenSource
	// Ctx ends at Shutdown, with its cause.
	Ctx context.Context

	cancel context.CancelCauseFunc
	closed atomic.Bool
}

// Init makes the client (httpclient.New with maxIdleConnsPerHost) and uses
// tokens, or a token cache of its own when tokens is nil.
func (b *Base) Init(maxIdleConnsPerHost int, tokens transports.TokenSource) {
	b.Client = httpclient.New(httpclient.Options{MaxIdleConnsPerHost: maxIdleConnsPerHost})
	b.Tokens = tokens
	if b.Tokens == nil {
		b.Tokens = oauth2.NewTokenCache(b.Client)
	}
	b.Ctx, b.cancel = context.WithCancelCause(context.Background())
}

// Shutdown ends Ctx with cause and closes the idle pooled connections;
// Closed reports true from then on. Later calls do nothing.
func (b *Base) Shutdown(cause error) {
	if b.closed.Swap(true) {
		return
	}
	b.cancel(cause)
	b.Client.CloseIdleConnections()
}

// Closed reports whether Shutdown was called.
func (b *Base) Closed() bool { return b.closed.Load() }
