package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// stableAfter is how long a session must live for the restart backoff to
// start again from DefaultRestartBackoff.
const stableAfter = 30 * time.Second

// manual is the state of one registered manual template.
type manual struct {
	t        *Transport
	key      string
	name     string
	seq      uint64
	spec     *Template
	servers  map[string]*server
	prefixes []string // server names, longest first

	ready chan struct{} // closed once start returned
	err   error         // start's error, set before ready is closed

	mu     sync.Mutex
	timer  *time.Timer // pending OnToolsChanged
	closed bool
}

func newManual(t *Transport, tmpl *utcp.CallTemplate, spec *Template, key string, seq uint64) *manual {
	m := &manual{t: t, key: key, name: tmpl.Name, seq: seq, spec: spec, servers: map[string]*server{}, ready: make(chan struct{})}
	for _, name := range spec.ServerNames() {
		cfg := spec.Config.MCPServers[name]
		if cfg.Disabled {
			continue
		}
		m.servers[name] = newServer(m, name, cfg, tmpl.Auth)
		m.prefixes = append(m.prefixes, name)
	}
	sort.SliceStable(m.prefixes, func(i, j int) bool { return len(m.prefixes[i]) > len(m.prefixes[j]) })
	return m
}

func (m *manual) started() bool {
	select {
	case <-m.ready:
		return m.err == nil
	default:
		return false
	}
}

func (m *manual) names() []string {
	names := slices.Clone(m.prefixes)
	sort.Strings(names)
	return names
}

// start connects every server in parallel and starts their supervisors.
// On any failure it closes the sessions that did connect.
func (m *manual) start(ctx context.Context) error {
	names := m.names()
	sessions := make([]*session, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { sessions[i], errs[i] = m.servers[name].connect(ctx) })
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("server %s: %w", names[i], err))
		}
	}
	if len(failed) > 0 {
		for _, sess := range sessions {
			if sess != nil {
				sess.close(reasonStopped)
			}
		}
		return errors.Join(failed...)
	}
	for i, name := range names {
		m.servers[name].startSupervisor(sessions[i])
	}
	return nil
}

// list lists the tools of every server, in server-name order.
func (m *manual) list(ctx context.Context) ([]utcp.Tool, error) {
	names := m.names()
	lists := make([][]utcp.Tool, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, m.servers[name].connectTimeout())
			defer cancel()
			lists[i], errs[i] = m.servers[name].listTools(ctx)
		})
	}
	wg.Wait()
	var tools []utcp.Tool
	seen := map[string]bool{}
	for i, name := range names {
		if errs[i] != nil {
			return nil, fmt.Errorf("server %s: %w", name, errs[i])
		}
		for _, tool := range lists[i] {
			if seen[tool.Name] {
				m.t.log.Warn("mcp: tool listed twice; the first one is kept", "manual", m.name, "tool", tool.Name)
				continue
			}
			seen[tool.Name] = true
			tools = append(tools, tool)
		}
		m.servers[name].listed.Store(true)
	}
	if len(tools) > listLimit(ctx) {
		return nil, transports.TooManyTools(listLimit(ctx))
	}
	if tools == nil {
		tools = []utcp.Tool{}
	}
	return tools, nil
}

// shutdown stops every server and waits for them.
func (m *manual) shutdown() {
	m.mu.Lock()
	m.closed = true
	if m.timer != nil && m.timer.Stop() {
		m.t.cbs.Done()
	}
	m.timer = nil
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Go(s.stop)
	}
	wg.Wait()
}

// toolsChanged schedules one Options.OnToolsChanged call for the manual.
func (m *manual) toolsChanged() {
	if m.t.onChanged == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.timer != nil {
		return
	}
	m.t.cbs.Add(1)
	m.timer = time.AfterFunc(ToolsChangedDebounce, func() {
		defer m.t.cbs.Done()
		m.mu.Lock()
		m.timer = nil
		closed := m.closed
		m.mu.Unlock()
		if !closed {
			m.t.onChanged(m.name)
		}
	})
}

// Reasons a session ends.
type endReason string

const (
	reasonStopped      endReason = "deregistered"
	reasonEnded        endReason = "connection closed"
	reasonExited       endReason = "process exited"
	reasonExpired      endReason = "session expired"
	reasonUnresponsive endReason = "not answering pings"
	reasonFailed       endReason = "handshake failed"
)

// server is one MCP server of a manual and its supervisor.
type server struct {
	t    *Transport
	m    *manual
	name string
	cfg  *Server
	auth *utcp.Auth
	log  *slog.Logger

	ctx    context.Context // cancelled by stop
	cancel context.CancelFunc

	mu      sync.Mutex
	cur     *session      // the live session, nil while (re)connecting
	changed chan struct{} // closed and replaced whenever cur or stopped change
	lastErr error
	stopped bool
	running bool          // a supervisor was started
	done    chan struct{} // closed when the supervisor returned

	listed    atomic.Bool  // the manual's tools were listed once
	spawns    atomic.Int64 // stdio processes started
	restarts  atomic.Int64 // sessions replaced after the first
	resMu     sync.Mutex
	resources map[string]string // resource tool name → URI
	rs        resState          // resources.go
}

func newServer(m *manual, name string, cfg *Server, auth *utcp.Auth) *server {
	s := &server{t: m.t, m: m, name: name, cfg: cfg, auth: auth, changed: make(chan struct{}), done: make(chan struct{})}
	s.log = m.t.log.With("manual", m.name, "server", name)
	s.ctx, s.cancel = context.WithCancel(m.t.ctx)
	return s
}

func (s *server) connectTimeout() time.Duration {
	if s.cfg.Timeout > 0 {
		return time.Duration(s.cfg.Timeout * float64(time.Second))
	}
	return DefaultConnectTimeout
}

// callContext applies the server's call timeout to ctx.
func (s *server) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := DefaultCallTimeout
	if s.cfg.Timeout > 0 {
		d = time.Duration(s.cfg.Timeout * float64(time.Second))
	}
	return context.WithTimeout(ctx, d)
}

func (s *server) what() string { return fmt.Sprintf("manual %s, server %s", s.m.name, s.name) }

// startSupervisor hands the first session to a new supervisor goroutine
// (or closes it when the server was stopped meanwhile).
func (s *server) startSupervisor(first *session) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		first.close(reasonStopped)
		return
	}
	s.running = true
	s.mu.Unlock()
	go s.supervise(first)
}

// stop ends the server: no new calls, the live session closed, the
// supervisor gone.
func (s *server) stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.changed)
		s.changed = make(chan struct{})
	}
	running := s.running
	s.mu.Unlock()
	s.cancel()
	if running {
		<-s.done
	}
}

// publish makes sess the live session.
func (s *server) publish(sess *session) {
	s.mu.Lock()
	s.cur, s.lastErr = sess, nil
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// unpublish removes sess (if it is live) and records why.
func (s *server) unpublish(sess *session, err error) {
	s.mu.Lock()
	if s.cur == sess {
		s.cur = nil
	}
	if err != nil {
		s.lastErr = err
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *server) errStopped() error {
	if s.t.ctx.Err() != nil {
		return errClosed
	}
	return utcp.Errorf(utcp.CodeManualNotFound, "mcp: %s: the manual was deregistered: %w", s.what(), transports.ErrNotRegistered)
}

// acquire returns the live session other than avoid, waiting while the
// server (re)connects, until ctx ends.
func (s *server) acquire(ctx context.Context, avoid *session) (*session, error) {
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return nil, s.errStopped()
		}
		if c := s.cur; c != nil && c != avoid {
			s.mu.Unlock()
			return c, nil
		}
		ch, last := s.changed, s.lastErr
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("mcp: %s is not connected (last error: %v): %w", s.what(), last, ctx.Err())
			}
			return nil, fmt.Errorf("mcp: %s is not connected: %w", s.what(), ctx.Err())
		}
	}
}

// supervise keeps a session alive: it watches the live one and, when it
// ends, closes it and connects a new one, with exponential backoff
// between failures, until stop.
func (s *server) supervise(sess *session) {
	defer close(s.done)
	attempt := 0
	first := true
	for {
		delay := true
		if sess != nil {
			s.publish(sess)
			if !first {
				s.restarts.Add(1)
				s.log.Info("mcp: server session re-established", "transport", sess.kind)
				s.resubscribe(sess)
				if s.listed.Load() {
					s.m.toolsChanged() // a new session may have other tools
				}
			}
			first = false
			reason := s.watch(sess)
			s.unpublish(sess, fmt.Errorf("session ended: %s", reason))
			sess.close(reason)
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("mcp: server session ended; reconnecting", "reason", string(reason))
			if time.Since(sess.started) >= stableAfter {
				attempt = 0
			}
			delay = reason != reasonExpired
		}
		if delay {
			d := min(s.t.cfg.backoff<<min(attempt, 20), s.t.cfg.maxBackoff)
			attempt++
			timer := time.NewTimer(d)
			select {
			case <-timer.C:
			case <-s.ctx.Done():
				timer.Stop()
				return
			}
		}
		var err error
		sess, err = s.connect(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("mcp: reconnecting failed", "err", err, "attempt", attempt)
			s.unpublish(nil, err)
			sess = nil
		}
	}
}

// watch blocks until sess must be replaced, and says why.
func (s *server) watch(sess *session) endReason {
	var exited <-chan struct{}
	if sess.proc != nil {
		exited = sess.proc.exited
	}
	var tick <-chan time.Time
	if s.t.cfg.pingInterval > 0 {
		ticker := time.NewTicker(s.t.cfg.pingInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	misses := 0
	for {
		select {
		case <-s.ctx.Done():
			return reasonStopped
		case <-sess.ended:
			select {
			case <-sess.expire:
				return reasonExpired
			default:
				return reasonEnded
			}
		case <-exited:
			return reasonExited
		case <-sess.expire:
			return reasonExpired
		case <-tick:
			if sess.ping(s.t.cfg.pingTimeout) {
				misses = 0
				continue
			}
			misses++
			s.log.Warn("mcp: server did not answer a ping", "misses", misses)
			if misses >= s.t.cfg.pingFailures {
				return reasonUnresponsive
			}
		}
	}
}

// connect opens a new session (starting the process of a stdio server)
// within the server's connect timeout and ctx.
func (s *server) connect(ctx context.Context) (*session, error) {
	sctx, scancel := context.WithCancel(s.ctx)
	stopAfter := context.AfterFunc(ctx, scancel)
	timedOut := atomic.Bool{}
	timer := time.AfterFunc(s.connectTimeout(), func() { timedOut.Store(true); scancel() })
	sess := &session{s: s, ctx: sctx, cancel: scancel, ended: make(chan struct{}), expire: make(chan struct{}),
		started: time.Now(), progress: map[string]func(*utcp.Event){}}
	var err error
	switch s.cfg.Transport {
	case KindStdio:
		err = s.connectStdio(sctx, sess)
	default:
		err = s.connectHTTP(sctx, sess)
	}
	timer.Stop()
	stopAfter()
	if sess.cs != nil {
		go func() {
			_ = sess.cs.Wait()
			close(sess.ended)
		}()
	}
	if err == nil && sctx.Err() != nil {
		err = sctx.Err()
	}
	if err != nil {
		sess.close(reasonFailed)
		switch {
		case timedOut.Load():
			err = utcp.Errorf(utcp.CodeTimeout, "mcp: %s: connecting took longer than %v: %w", s.what(), s.connectTimeout(), context.DeadlineExceeded)
		case ctx.Err() != nil:
			err = fmt.Errorf("mcp: %s: connecting: %w", s.what(), ctx.Err())
		case s.ctx.Err() != nil:
			err = s.errStopped()
		}
		if sess.proc != nil {
			err = fmt.Errorf("%w%s", err, sess.proc.stderrTail())
		}
		return nil, err
	}
	lctx, lcancel := context.WithTimeout(sess.ctx, s.connectTimeout())
	s.enableLogging(lctx, sess)
	lcancel()
	return sess, nil
}

// newClient returns the go-sdk client of one session.
func (s *server) newClient(sess *session) *sdk.Client {
	opts := &sdk.ClientOptions{
		Logger:       s.log,
		Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			if s.listed.Load() {
				s.m.toolsChanged()
			}
		},
	}
	if s.m.spec.RegisterResourcesAsTools {
		opts.ResourceListChangedHandler = func(context.Context, *sdk.ResourceListChangedRequest) {
			if s.listed.Load() {
				s.m.toolsChanged()
			}
		}
	}
	s.resourceHandlers(opts)
	s.peerOptions(opts, sess)
	c := sdk.NewClient(&sdk.Implementation{Name: "utcpd", Version: utcp.Version}, opts)
	c.AddReceivingMiddleware(sess.rootsMiddleware)
	return c
}

func (s *server) sessionOptions() *sdk.ClientSessionOptions {
	return &sdk.ClientSessionOptions{ProtocolVersion: s.t.cfg.protocol}
}

// session is one MCP session with a server.
type session struct {
	s       *server
	kind    string // "stdio", "streamable_http" or "sse"
	cs      *sdk.ClientSession
	proc    *proc     // stdio only
	line    *lineConn // stdio only
	ctx     context.Context
	cancel  context.CancelFunc
	ended   chan struct{} // closed once the SDK session is done
	expire  chan struct{} // closed to ask the supervisor for a new session
	once    sync.Once
	started time.Time

	pmu      sync.Mutex
	progress map[string]func(*utcp.Event) // by progress token
	seq      atomic.Uint64

	peers peerState // calls in flight and their callers (peer.go)
}

// markExpired asks the supervisor to replace the session at once.
func (ss *session) markExpired() { ss.once.Do(func() { close(ss.expire) }) }

// ping reports whether the server answered a ping within d. An error
// answer counts as an answer.
func (ss *session) ping(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ss.ctx, d)
	defer cancel()
	err := ss.cs.Ping(ctx, nil)
	var we *jsonrpc.Error
	return err == nil || errors.As(err, &we)
}

// close ends the session: the process of a stdio server is stopped (for
// reason stopped or expired gracefully, killed if it stopped answering)
// and reaped, calls in flight are cancelled, and the SDK session closed.
func (ss *session) close(reason endReason) {
	if ss.proc != nil {
		switch reason {
		case reasonUnresponsive, reasonFailed:
			ss.proc.kill()
		case reasonExited:
		default:
			ss.proc.stop(ss.s.t.cfg.grace)
		}
		ss.proc.finish()
	}
	ss.cancel()
	if ss.cs != nil {
		_ = ss.cs.Close()
		<-ss.ended
	}
}

// tapLimit is the longest message inspected for progress notifications.
const tapLimit = 64 << 10

// watchProgress registers fn for the progress notifications of one call
// and returns the call's progress token.
func (ss *session) watchProgress(fn func(*utcp.Event)) string {
	tok := fmt.Sprintf("utcpd-%d", ss.seq.Add(1))
	ss.pmu.Lock()
	ss.progress[tok] = fn
	ss.pmu.Unlock()
	return tok
}

func (ss *session) unwatchProgress(tok string) {
	ss.pmu.Lock()
	delete(ss.progress, tok)
	ss.pmu.Unlock()
}

// onMessage inspects one message from the server, in wire order and
// before the SDK handles it, and turns progress notifications into
// events. Doing it here, rather than in the SDK's notification handler,
// keeps every progress event ahead of the result it precedes.
func (ss *session) onMessage(msg []byte) {
	if !bytes.Contains(msg, []byte("progressToken")) {
		return
	}
	var n struct {
		Method string `json:"method"`
		Params struct {
			Token    any          `json:"progressToken"`
			Progress json.Number  `json:"progress"`
			Total    *json.Number `json:"total"`
			Message  *string      `json:"message"`
		} `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.UseNumber()
	if dec.Decode(&n) != nil || n.Method != "notifications/progress" {
		return
	}
	tok, ok := n.Params.Token.(string)
	if !ok {
		return
	}
	ss.pmu.Lock()
	fn := ss.progress[tok]
	ss.pmu.Unlock()
	if fn == nil {
		return
	}
	data := map[string]any{"progress": n.Params.Progress}
	if n.Params.Total != nil {
		data["total"] = *n.Params.Total
	}
	if n.Params.Message != nil {
		data["message"] = *n.Params.Message
	}
	fn(&utcp.Event{Type: "progress", Data: data})
}

// delivery records, through a call's context, that the server refused
// the call's request without handling it (HTTP 404/400 for its session).
type delivery struct{ rejected atomic.Bool }

type deliveryKey struct{}

// undelivered reports whether err proves the request never reached the
// server, so that retrying it on a new session cannot run it twice: the
// server refused it for its session, the connection was already closed
// when it was sent, or writing it to a stdio server failed.
func undelivered(err error, d *delivery) bool {
	var wf *writeFailed
	return d.rejected.Load() || errors.Is(err, sdk.ErrConnectionClosed) || errors.As(err, &wf)
}

// invoke runs fn on a live session. A request the server provably never
// received (an expired HTTP session, a stdio server that just died) is
// retried once on the next session, which invoke waits for up to ctx's
// deadline.
func (s *server) invoke(ctx context.Context, fn func(ctx context.Context, sess *session) error) (*session, error) {
	var avoid *session
	for attempt := 0; ; attempt++ {
		sess, err := s.acquire(ctx, avoid)
		if err != nil {
			return nil, err
		}
		d := &delivery{}
		cctx, cancel := context.WithCancel(context.WithValue(ctx, deliveryKey{}, d))
		stop := context.AfterFunc(sess.ctx, cancel)
		err = fn(cctx, sess)
		stop()
		cancel()
		if err == nil {
			return sess, nil
		}
		if attempt == 0 && ctx.Err() == nil && undelivered(err, d) {
			if d.rejected.Load() {
				sess.markExpired()
			}
			s.log.Info("mcp: request not delivered; retrying on a new session", "err", err)
			avoid = sess
			continue
		}
		return sess, err
	}
}

// call runs one tool call; onProgress, when set, receives its progress
// events.
func (s *server) call(ctx context.Context, tool string, args map[string]any, onProgress func(*utcp.Event)) (*utcp.Result, error) {
	if uri, ok := s.resourceURI(tool); ok {
		return s.readResource(ctx, tool, uri)
	}
	if args == nil {
		args = map[string]any{}
	}
	var res *sdk.CallToolResult
	sess, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		ctx, done := sess.beginCall(ctx, tool)
		defer done()
		defer sess.drainLogs(ctx)
		params := &sdk.CallToolParams{Name: tool, Arguments: args}
		if tracing.HasContext(ctx) {
			if params.Meta == nil {
				params.Meta = sdk.Meta{}
			}
			tracing.InjectMeta(ctx, params.Meta)
		}
		sess.logLevelMeta(params)
		if onProgress != nil {
			tok := sess.watchProgress(onProgress)
			defer sess.unwatchProgress(tok)
			params.SetProgressToken(tok)
		}
		var err error
		res, err = sess.callTool(ctx, params)
		return err
	})
	if err != nil {
		return nil, s.callError(ctx, sess, tool, err)
	}
	return toolResult(s, tool, res)
}

// callTool is sess.cs.CallTool. Over stdio, at a protocol version before
// 2026-07-28 (whose calls the SDK's multi-round-trip middleware handles),
// the connection runs the call itself and the result is decoded here,
// without the SDK's decoder when it is text blocks alone: the same
// request, errors and cancellation, a fraction of the allocations.
func (sess *session) callTool(ctx context.Context, params *sdk.CallToolParams) (*sdk.CallToolResult, error) {
	if sess.line == nil {
		return sess.cs.CallTool(ctx, params)
	}
	if init := sess.cs.InitializeResult(); init == nil || init.ProtocolVersion >= "2026-07-28" {
		return sess.cs.CallTool(ctx, params)
	}
	raw, err := sess.line.call(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	return decodeCallToolResult(raw)
}

func (s *server) readResource(ctx context.Context, tool, uri string) (*utcp.Result, error) {
	var res *sdk.ReadResourceResult
	sess, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		var err error
		res, err = sess.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		return err
	})
	if err != nil {
		return nil, s.callError(ctx, sess, tool, err)
	}
	return &utcp.Result{Value: resourceValue(res)}, nil
}
