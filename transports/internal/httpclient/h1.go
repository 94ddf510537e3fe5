package httpclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/utcpd/utcpd/transports/internal/peek"
)

// h1Pool is the clients' own HTTP/1.1 path for the requests that allow it
// (plain http, no proxy, no upgrade, no Expect: 100-continue; see
// eligible): the request is written and its response read on the calling
// goroutine, over a pooled keep-alive connection. net/http.Transport runs
// two goroutines per connection (a write loop and a read loop) and hands
// every request and response between them and the caller: four or five
// goroutine wakeups a call, which on a gateway's hot path to a backend on
// the same machine or network cost more than the exchange itself
// (docs/benchmarks.md). Everything else goes to the standard transport.
//
// What it keeps of net/http.Transport's behaviour: the request is written
// by http.Request.Write and the response parsed by http.ReadResponse (the
// same code the Transport uses), 1xx responses are skipped, response
// headers are bounded (maxResponseHeaderBytes, the Transport's default),
// a connection is reused only after its response body was read to the
// end and neither side asked to close it, an idle connection the server
// has closed is noticed before it is reused (peek.Alive), and a request
// that fails on a reused connection before any byte of its response
// arrived is retried once on a new one when it is idempotent (as the
// Transport does). What it does not do: ask for gzip and decompress
// transparently (no Accept-Encoding is added), HTTP/2 (never used for
// plain http by the Transport either), proxies and TLS (those requests
// take the Transport).
//
// The context of a request bounds the whole exchange, body included:
// when it ends, the connection's deadline is set in the past, which
// unblocks a pending read or write, and the error is the context's.
type h1Pool struct {
	dial        func(ctx context.Context, network, address string) (net.Conn, error)
	proxy       func(*http.Request) (*url.URL, error)
	perHost     int
	maxIdle     int
	idleTimeout time.Duration

	mu    sync.Mutex
	idle  map[string][]*h1Conn // by host:port; the most recently used last
	nidle int
	sweep *time.Timer // closes connections idle longer than idleTimeout
}

// maxResponseHeaderBytes bounds a response's status line and headers, as
// net/http.Transport's default MaxResponseHeaderBytes does.
const maxResponseHeaderBytes = 10 << 20

// maxInformational is how many 1xx responses one request may get before
// its final response.
const maxInformational = 5

// aLongTimeAgo is a deadline in the past: it fails pending and later I/O
// on a connection at once.
var aLongTimeAgo = time.Unix(1, 0)

// eligible reports whether req may take the pool instead of the
// Transport.
func (p *h1Pool) eligible(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" || req.URL.User != nil {
		return false
	}
	if req.Header.Get("Expect") != "" || req.Header.Get("Upgrade") != "" {
		return false
	}
	if p.proxy != nil {
		if u, err := p.proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// h1Conn is one pooled connection. lim counts what is read from the
// socket and, while a response's headers are read, bounds it.
type h1Conn struct {
	nc     net.Conn
	lim    limitedConn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	reused bool
}

// limitedConn reads from nc, failing once more than max bytes were read
// since the last arm (max < 0: no bound).
type limitedConn struct {
	nc   net.Conn
	max  int64
	read int64
}

var errHeaderTooLarge = fmt.Errorf("httpclient: the response's headers are over %d bytes", maxResponseHeaderBytes)

func (l *limitedConn) Read(b []byte) (int, error) {
	if l.max >= 0 {
		if l.read >= l.max {
			return 0, errHeaderTooLarge
		}
		if rest := l.max - l.read; int64(len(b)) > rest {
			b = b[:rest]
		}
	}
	n, err := l.nc.Read(b)
	l.read += int64(n)
	return n, err
}

func (l *limitedConn) arm(max int64) { l.max, l.read = max, 0 }

func hostPort(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(host, port)
}

// roundTrip sends req over a pooled (or new) connection and returns its
// response; the response's body gives the connection back when it is
// read to its end or closed.
func (p *h1Pool) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := hostPort(req.URL)
	for attempt := 0; ; attempt++ {
		c, err := p.get(ctx, addr)
		if err != nil {
			closeRequestBody(req)
			return nil, err
		}
		resp, retry, err := p.exchange(ctx, addr, c, req)
		if err == nil {
			return resp, nil
		}
		if !retry || !c.reused || attempt > 0 {
			return nil, err
		}
		// The server closed the reused connection before answering
		// (it timed out idle between our check and the request): send
		// the request again on a new connection, with its body again.
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			r := *req
			r.Body = body
			req = &r
		}
	}
}

// get returns an idle connection to addr that is still open, or dials a
// new one.
func (p *h1Pool) get(ctx context.Context, addr string) (*h1Conn, error) {
	for {
		p.mu.Lock()
		list := p.idle[addr]
		if len(list) == 0 {
			p.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		p.idle[addr] = list[:len(list)-1]
		p.nidle--
		p.mu.Unlock()
		if time.Since(c.idleAt) < p.idleTimeout && c.br.Buffered() == 0 && peek.Alive(c.nc) {
			c.reused = true
			return c, nil
		}
		_ = c.nc.Close()
	}
	nc, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &h1Conn{nc: nc}
	c.lim.nc = nc
	c.lim.max = -1
	c.br = bufio.NewReaderSize(&c.lim, 4<<10)
	c.bw = bufio.NewWriterSize(nc, 4<<10)
	return c, nil
}

// put pools c for the next request to addr, or closes it when the pool
// for addr (or the whole pool) is full.
func (p *h1Pool) put(addr string, c *h1Conn) {
	c.idleAt = time.Now()
	p.mu.Lock()
	if len(p.idle[addr]) >= p.perHost || p.nidle >= p.maxIdle {
		p.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	if p.idle == nil {
		p.idle = map[string][]*h1Conn{}
	}
	p.idle[addr] = append(p.idle[addr], c)
	p.nidle++
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.closeStale)
	}
	p.mu.Unlock()
}

// closeStale closes the connections idle for idleTimeout or more, and
// comes back while any are pooled.
func (p *h1Pool) closeStale() {
	var stale []*h1Conn
	p.mu.Lock()
	for addr, list := range p.idle {
		keep := list[:0]
		for _, c := range list {
			if time.Since(c.idleAt) >= p.idleTimeout {
				stale = append(stale, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(p.idle, addr)
		} else {
			p.idle[addr] = keep
		}
	}
	p.nidle -= len(stale)
	if p.nidle > 0 {
		p.sweep.Reset(p.idleTimeout / 2)
	} else {
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range stale {
		_ = c.nc.Close()
	}
}

// closeIdle closes every idle connection.
func (p *h1Pool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.nidle = nil, 0
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			_ = c.nc.Close()
		}
	}
}

// exchange writes req on c and reads its response's headers. retry says
// the request never reached a server that answered it: nothing of a
// response was read, and either the write failed or req is idempotent.
func (p *h1Pool) exchange(ctx context.Context, addr string, c *h1Conn, req *http.Request) (_ *http.Response, retry bool, _ error) {
	stop := func() bool { return true }
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			closeRequestBody(req)
			p.put(addr, c)
			return nil, false, err
		}
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	}
	fail := func(err error) error {
		stop()
		_ = c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		closeRequestBody(req)
		return nil, true, fail(err)
	}
	c.lim.arm(maxResponseHeaderBytes + int64(c.br.Size()))
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			return nil, c.lim.read == 0 && idempotent(req), fail(err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		if i == maxInformational {
			return nil, false, fail(fmt.Errorf("httpclient: more than %d informational (1xx) responses", maxInformational))
		}
	}
	c.lim.arm(-1)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
		return nil, false, fail(errors.New("httpclient: the server switched protocols on a request that asked for no upgrade"))
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody || resp.Body == nil {
		resp.Body = http.NoBody
		if keep && stop() {
			_ = c.nc.SetDeadline(time.Time{})
			p.put(addr, c)
		} else {
			_ = c.nc.Close()
		}
		return resp, false, nil
	}
	resp.Body = &h1Body{p: p, c: c, addr: addr, ctx: ctx, body: resp.Body, stop: stop, keep: keep}
	return resp, false, nil
}

func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// h1Body is a response body over a pooled connection: read to its end,
// it gives the connection back; closed before that, it closes it (it does
// not drain an unread rest, which may be endless). Close may be called
// while a Read is blocked, from another goroutine: the Read then fails.
type h1Body struct {
	p    *h1Pool
	c    *h1Conn
	addr string
	ctx  context.Context
	body io.ReadCloser // http.ReadResponse's, framing the body
	stop func() bool   // stops the context's deadline hook
	keep bool

	mu     sync.Mutex
	done   bool // at the end, failed or closed: the connection is settled
	eof    bool // read to the end: later Reads see io.EOF again
	closed bool
}

var errBodyClosed = errors.New("http: read on closed response body")

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return 0, errBodyClosed
	case b.eof:
		b.mu.Unlock()
		return 0, io.EOF
	}
	b.mu.Unlock()
	n, err := b.body.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done { // closed meanwhile
		if err != io.EOF {
			err = errBodyClosed
		}
		return n, err
	}
	b.done = true
	if err == io.EOF {
		b.eof = true
		b.release()
		return n, io.EOF
	}
	b.stop()
	_ = b.c.nc.Close()
	if cerr := b.ctx.Err(); cerr != nil {
		err = cerr
	}
	return n, err
}

// release gives the connection back after the body's end, unless either
// side asked to close it or the context's hook has fired.
func (b *h1Body) release() {
	if b.keep && b.stop() && b.c.br.Buffered() == 0 {
		_ = b.c.nc.SetDeadline(time.Time{})
		b.p.put(b.addr, b.c)
		return
	}
	_ = b.c.nc.Close()
}

func (b *h1Body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.done {
		return nil
	}
	b.done = true
	b.stop()
	_ = b.c.nc.Close()
	return nil
}
