package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RunIO serves one MCP session over newline-delimited JSON-RPC on r and
// w ("utcpd mcp": standard input and output) until r ends or ctx does.
// The session is the SDK's (mcp.IOTransport: its framing, batches,
// limits and protocol rules), with the lean path in front of it: a
// line that is exactly one tools/call the lean path can serve (see
// leanParams) is answered here and never reaches the SDK; every other
// line goes to the SDK unchanged and in order. A notifications/cancelled
// naming a call served here cancels it.
func (s *Server) RunIO(ctx context.Context, r io.Reader, w io.Writer) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &lockedWriter{w: w}
	in := &leanStdin{s: s, br: bufio.NewReaderSize(r, leanStdinBuffer), out: out, ctx: runCtx}
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
	ss, err := s.mcp.Connect(runCtx, t, nil)
	if err != nil {
		return err
	}
	in.ss.Store(ss)
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-closed
		err = nil
	case err = <-closed:
	}
	cancel() // the lean calls still running
	in.wg.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// leanStdinBuffer is the longest line the lean path looks at; longer
// ones go to the SDK.
const leanStdinBuffer = 64 << 10

// lockedWriter writes each message (one Write: the SDK's stdio connection
// writes a message, or a batch, at once) whole, between the SDK's
// answers and the lean path's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// nopWriteCloser is a Writer whose Close does nothing: the session must
// not close the command's standard output.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// leanStdin is the SDK's standard input: the client's lines, less those
// the lean path answers. It reads a line at a time; pass holds what the
// SDK has yet to read. Read is called by the SDK's one reading goroutine.
type leanStdin struct {
	s   *Server
	br  *bufio.Reader
	out *lockedWriter
	ctx context.Context
	ss  atomic.Pointer[mcp.ServerSession]

	pass     []byte
	err      error
	boundary valueScanner // over what went to the SDK: is it between values?
	long     bool         // inside a line longer than the buffer

	calls leanCalls
	wg    sync.WaitGroup
}

func (l *leanStdin) Read(p []byte) (int, error) {
	for len(l.pass) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, err := l.br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			l.long, err = true, nil
		case len(line) > 0 && !l.long && l.boundary.between() && l.serve(line):
			line = nil
		default:
			l.long = false
		}
		if err != nil {
			l.err = err
		}
		l.boundary.scan(line)
		l.pass = append(l.pass[:0], line...)
	}
	n := copy(p, l.pass)
	l.pass = l.pass[n:]
	return n, nil
}

// serve answers line when it is one message the lean path takes: a
// tools/call it can serve, or the cancellation of one of its calls.
func (l *leanStdin) serve(line []byte) bool {
	s := l.s
	ss := l.ss.Load()
	if ss == nil || s.leanOff.Load() || ss.InitializeParams() == nil {
		return false
	}
	t := bytes.TrimSpace(line)
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(`"tools/call"`)) && !bytes.Contains(t, []byte(`"notifications/cancelled"`)) {
		return false
	}
	msg, ok := decodeLeanCall(t)
	if !ok {
		return false
	}
	switch msg.Method {
	case "notifications/cancelled":
		return l.cancel(msg)
	case "tools/call":
	default:
		return false
	}
	key, ok := compactID(msg.ID)
	if !ok {
		return false
	}
	params, p, ok := s.leanParams(msg)
	if !ok {
		return false
	}
	ctx, cancel := context.WithCancel(l.ctx)
	if !l.calls.add(key, cancel) {
		cancel()
		return false // the SDK's: it refuses a duplicate in-flight id
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer cancel()
		defer l.calls.done(key)
		data := s.leanRun(ctx, ss, msg, params, p, &mcp.RequestExtra{})
		if l.ctx.Err() != nil {
			return // the session ended: no one reads the answer
		}
		_, _ = l.out.Write(append(data, '\n'))
	}()
	return true
}

// cancel cancels the lean call a notifications/cancelled names; false
// for any other notification.
func (l *leanStdin) cancel(msg leanCall) bool {
	key, ok := cancelledKey(msg)
	return ok && l.calls.cancel(key)
}

// valueScanner follows a stream of JSON text far enough to tell whether
// it stands between two top-level values (not inside an object, array or
// string): a line that completes a message on its own may only be taken
// from the stream there, never from the middle of a batch or of a value
// that spans lines.
type valueScanner struct {
	depth    int
	inString bool
	escaped  bool
}

func (v *valueScanner) between() bool { return v.depth == 0 && !v.inString }

func (v *valueScanner) scan(b []byte) {
	for _, c := range b {
		switch {
		case v.inString:
			switch {
			case v.escaped:
				v.escaped = false
			case c == '\\':
				v.escaped = true
			case c == '"':
				v.inString = false
			}
		case c == '"':
			v.inString = true
		case c == '{' || c == '[':
			v.depth++
		case c == '}' || c == ']':
			if v.depth > 0 {
				v.depth--
			}
		}
	}
}
