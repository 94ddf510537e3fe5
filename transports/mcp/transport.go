package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
	"github.com/utcpd/utcpd/transports/internal/procenv"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Info describes the mcp transport to a transports.Registry.
var Info = transports.Info{
	Type:          Type,
	ParseTemplate: ParseTemplate,
	New:           transports.Constructor(New),
	Template:      new(Template),
}

func init() { transports.MustRegister(Info) }

// Interface guards.
var (
	_ transports.Transport = (*Transport)(nil)
	_ transports.Keyer     = (*Transport)(nil)
	_ transports.Streamer  = (*Transport)(nil)
)

// Defaults of the mcp transport.
const (
	// DefaultCallTimeout bounds a tool call when the server sets no
	// timeout and the caller's context no sooner deadline.
	DefaultCallTimeout = 120 * time.Second
	// DefaultConnectTimeout bounds starting a server and its MCP
	// handshake, and discovery, when the server sets no timeout.
	DefaultConnectTimeout = 60 * time.Second
	// DefaultPingInterval is how often a live session is pinged.
	DefaultPingInterval = 15 * time.Second
	// DefaultPingTimeout bounds one ping.
	DefaultPingTimeout = 5 * time.Second
	// DefaultPingFailures consecutive failed pings mark a server as not
	// answering; it is then restarted (stdio) or reconnected (HTTP).
	DefaultPingFailures = 2
	// DefaultRestartBackoff is the delay before the first reconnection
	// after a session ended; it doubles with every consecutive failure.
	DefaultRestartBackoff = 100 * time.Millisecond
	// DefaultMaxRestartBackoff caps the reconnection delay.
	DefaultMaxRestartBackoff = 30 * time.Second
	// DefaultShutdownGrace is how long a stdio server gets to exit after
	// its standard input is closed, and again after SIGTERM, before its
	// process group is killed.
	DefaultShutdownGrace = 2 * time.Second
	// DefaultMaxMessageBytes caps one JSON-RPC message from a server.
	DefaultMaxMessageBytes = 64 << 20
	// DefaultMaxStderrLineBytes caps one logged line of a stdio server's
	// standard error; the rest of the line is dropped.
	DefaultMaxStderrLineBytes = 4 << 10
	// DefaultStderrLinesPerSecond is the rate at which a stdio server's
	// standard error lines are logged (with bursts of twice as many);
	// lines over the rate are counted and reported, not logged.
	DefaultStderrLinesPerSecond = 20
	// ToolsChangedDebounce coalesces bursts of tools/list_changed
	// notifications into one Options.OnToolsChanged call.
	ToolsChangedDebounce = 100 * time.Millisecond
)

// stableAfter is how long a session must live for the restart backoff to
// start again from DefaultRestartBackoff.
const stableAfter = 30 * time.Second

// pipeGrace bounds how long the pipes of a stdio server are read once
// its process group is gone (a descendant that left the group may keep
// them open).
const pipeGrace = 250 * time.Millisecond

// tapLimit is the longest message inspected for progress notifications.
const tapLimit = 64 << 10

// maxQueuedEvents bounds the progress events a stream buffers for a slow
// reader; past it, the newest progress replaces the one before it.
const maxQueuedEvents = 1024

// Config is the mcp section of the daemon configuration
// (transports.Options.Config). Every field is optional; zero means the
// default.
type Config struct {
	// PingIntervalMS is how often live sessions are pinged (default
	// DefaultPingInterval); negative disables pings.
	PingIntervalMS int64 `json:"ping_interval_ms,omitempty"`
	// PingTimeoutMS bounds one ping (default DefaultPingTimeout).
	PingTimeoutMS int64 `json:"ping_timeout_ms,omitempty"`
	// PingFailures is the number of consecutive failed pings after which
	// a server is restarted (default DefaultPingFailures).
	PingFailures int `json:"ping_failures,omitempty"`
	// RestartBackoffMS is the first reconnection delay (default
	// DefaultRestartBackoff).
	RestartBackoffMS int64 `json:"restart_backoff_ms,omitempty"`
	// MaxRestartBackoffMS caps the reconnection delay (default
	// DefaultMaxRestartBackoff).
	MaxRestartBackoffMS int64 `json:"max_restart_backoff_ms,omitempty"`
	// ShutdownGraceMS is the grace period of a stopping stdio server,
	// after closing its input and again after SIGTERM (default
	// DefaultShutdownGrace).
	ShutdownGraceMS int64 `json:"shutdown_grace_ms,omitempty"`
	// MaxMessageBytes caps one message from a server (default
	// DefaultMaxMessageBytes).
	MaxMessageBytes int `json:"max_message_bytes,omitempty"`
	// MaxStderrLineBytes caps one logged stderr line (default
	// DefaultMaxStderrLineBytes).
	MaxStderrLineBytes int `json:"max_stderr_line_bytes,omitempty"`
	// StderrLinesPerSecond is the stderr logging rate per server (default
	// DefaultStderrLinesPerSecond).
	StderrLinesPerSecond int `json:"stderr_lines_per_second,omitempty"`
	// ProtocolVersion is the MCP version offered first ("" is the SDK's
	// latest; servers negotiate down).
	ProtocolVersion string `json:"protocol_version,omitempty"`
}

// settings are the effective values of a Config.
type settings struct {
	pingInterval, pingTimeout time.Duration
	pingFailures              int
	backoff, maxBackoff       time.Duration
	grace                     time.Duration
	maxMessage                int
	maxStderrLine             int
	stderrRate                int
	protocol                  string
}

func (c *Config) settings() settings {
	ms := func(v int64, def time.Duration) time.Duration {
		if v == 0 {
			return def
		}
		return time.Duration(v) * time.Millisecond
	}
	s := settings{
		pingInterval:  ms(c.PingIntervalMS, DefaultPingInterval),
		pingTimeout:   ms(c.PingTimeoutMS, DefaultPingTimeout),
		pingFailures:  c.PingFailures,
		backoff:       ms(c.RestartBackoffMS, DefaultRestartBackoff),
		maxBackoff:    ms(c.MaxRestartBackoffMS, DefaultMaxRestartBackoff),
		grace:         ms(c.ShutdownGraceMS, DefaultShutdownGrace),
		maxMessage:    c.MaxMessageBytes,
		maxStderrLine: c.MaxStderrLineBytes,
		stderrRate:    c.StderrLinesPerSecond,
		protocol:      c.ProtocolVersion,
	}
	if s.pingFailures <= 0 {
		s.pingFailures = DefaultPingFailures
	}
	if s.maxMessage <= 0 {
		s.maxMessage = DefaultMaxMessageBytes
	}
	if s.maxStderrLine <= 0 {
		s.maxStderrLine = DefaultMaxStderrLineBytes
	}
	if s.stderrRate <= 0 {
		s.stderrRate = DefaultStderrLinesPerSecond
	}
	if s.maxBackoff < s.backoff {
		s.maxBackoff = s.backoff
	}
	return s
}

// Transport is the mcp transport: utcpd as an MCP client. It keeps one
// long-lived session per server of every registered manual, shared by all
// calls. It is safe for concurrent use.
type Transport struct {
	log       *slog.Logger
	cfg       settings
	tokens    transports.TokenSource
	client    *http.Client // pooled connections shared by every HTTP server
	onChanged func(manual string)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	manuals map[string]*manual // by manual key
	seq     uint64
	cbs     sync.WaitGroup // OnToolsChanged timers and callbacks
}

// New creates an mcp Transport. Options.Config, when set, is a Config;
// Options.OnToolsChanged, when set, is called (debounced) with the manual
// name whenever a server of that manual reports that its tools changed
// or was restarted. It starts nothing: servers start when their manual
// is registered.
func New(opts transports.Options) (*Transport, error) {
	var cfg Config
	log, err := transports.DecodeConfig(opts, "mcp", &cfg)
	if err != nil {
		return nil, utcp.Errorf(utcp.CodeInvalidConfig, "mcp: transport configuration: %w", err)
	}
	if cfg.PingTimeoutMS < 0 || cfg.RestartBackoffMS < 0 || cfg.MaxRestartBackoffMS < 0 || cfg.ShutdownGraceMS < 0 {
		return nil, utcp.NewError(utcp.CodeInvalidConfig, "mcp: timeouts and backoffs must not be negative")
	}
	t := &Transport{
		log:       log,
		cfg:       cfg.settings(),
		tokens:    opts.Tokens,
		client:    httpclient.New(httpclient.Options{}),
		onChanged: opts.OnToolsChanged,
		manuals:   map[string]*manual{},
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(t.client)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// errClosed refuses work after Close.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "mcp: transport closed")

// keyOf identifies the manual state of a template: the manual name and a
// hash of the whole template as registered (variables substituted).
func keyOf(tmpl *utcp.CallTemplate) string {
	h := sha256.New()
	if len(tmpl.Raw) > 0 {
		h.Write(tmpl.Raw)
	} else {
		b, _ := json.Marshal(tmpl.Spec)
		h.Write(b)
		b, _ = json.Marshal(tmpl.Auth)
		h.Write(b)
	}
	return tmpl.Name + "#" + hex.EncodeToString(h.Sum(nil)[:12])
}

func discoveryError(name string, err error) error {
	if errors.Is(err, errClosed) {
		return err
	}
	return &utcp.Error{Code: utcp.CodeDiscoveryFailed, Message: fmt.Sprintf("mcp: discovery of manual %s: %v", name, err), Err: err}
}

// RegisterManual connects to every server of the template (starting stdio
// servers), lists all their tools (every page of tools/list, and their
// resources when register_resources_as_tools is set), and returns them
// named "<server>.<tool>". Discovered tools carry no call template: the
// manual's template reaches them. The sessions stay open, supervised,
// until Release.
//
// Registering a template identical to one already registered under the
// same name (a refresh, or a Replace with the same template) shares that
// manual's sessions and re-lists the tools over them; a changed template
// gets sessions of its own (see RegistrationKey). Any server failing to
// connect or list fails the whole registration (discovery_failed) and
// stops the others.
func (t *Transport) RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error) {
	spec, _, err := transports.SpecOf[Template](tmpl, Type, ParseTemplate)
	if err != nil {
		return nil, err
	}
	key := keyOf(tmpl)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	m := t.manuals[key]
	fresh := m == nil
	if fresh {
		t.seq++
		m = newManual(t, tmpl, spec, key, t.seq)
		t.manuals[key] = m
	}
	t.mu.Unlock()

	if fresh {
		m.err = m.start(ctx)
		close(m.ready)
		if m.err != nil {
			t.forget(m)
			m.shutdown()
			return nil, discoveryError(m.name, m.err)
		}
	} else {
		select {
		case <-m.ready:
		case <-ctx.Done():
			return nil, discoveryError(m.name, ctx.Err())
		}
		if m.err != nil {
			return nil, discoveryError(m.name, m.err)
		}
	}
	tools, err := m.list(ctx)
	if err != nil {
		return nil, discoveryError(m.name, err) // transports.Count releases m unless it is registered
	}
	return &utcp.Manual{UTCPVersion: utcp.Version, ManualVersion: "1.0.0", Tools: tools}, nil
}

// forget removes m from the map whatever its count.
func (t *Transport) forget(m *manual) {
	t.mu.Lock()
	if t.manuals[m.key] == m {
		delete(t.manuals, m.key)
	}
	t.mu.Unlock()
}

// RegistrationKey is what transports.Count counts registrations by: the
// manual name and a hash of the whole template, so that a changed
// template has sessions of its own and deregistering the old one ends the
// old sessions while the new ones run on.
func (t *Transport) RegistrationKey(tmpl *utcp.CallTemplate) string { return keyOf(tmpl) }

// Release closes every session of the template (transports.Count calls
// it when the last registration of that template ends): stdio servers get
// their standard input closed, then SIGTERM, then SIGKILL to their whole
// process group (DefaultShutdownGrace apart), and are reaped before it
// returns; HTTP sessions are ended with DELETE. Releasing a template that
// holds no sessions does nothing.
func (t *Transport) Release(ctx context.Context, tmpl *utcp.CallTemplate) error {
	if tmpl == nil {
		return utcp.Errorf(utcp.CodeInvalidTemplate, "mcp: no call template: %w", transports.ErrInvalidTemplate)
	}
	key := keyOf(tmpl)
	t.mu.Lock()
	m := t.manuals[key]
	t.mu.Unlock()
	if m == nil {
		return nil
	}
	<-m.ready
	t.mu.Lock()
	mine := t.manuals[key] == m
	if mine {
		delete(t.manuals, key)
	}
	t.mu.Unlock()
	if mine {
		m.shutdown()
	}
	return nil
}

// lookup finds the manual state a call's template belongs to: the one
// registered with that exact template, else (the template's variables
// were resolved anew since registration) the newest registration of that
// manual name.
func (t *Transport) lookup(tmpl *utcp.CallTemplate, name string) *manual {
	key := keyOf(tmpl)
	t.mu.Lock()
	defer t.mu.Unlock()
	if m := t.manuals[key]; m != nil && m.started() {
		return m
	}
	var best *manual
	for _, m := range t.manuals {
		if m.name == name && m.started() && (best == nil || m.seq > best.seq) {
			best = m
		}
	}
	return best
}

// route finds the server and the server-side tool name of a call.
func (t *Transport) route(call *utcp.Call) (*server, string, error) {
	if call == nil || call.Template == nil {
		return nil, "", utcp.Errorf(utcp.CodeInvalidTemplate, "mcp: call without a call template: %w", transports.ErrInvalidTemplate)
	}
	if _, _, err := transports.SpecOf[Template](call.Template, Type, ParseTemplate); err != nil {
		return nil, "", err
	}
	name := call.Template.Name
	if name == "" {
		name = call.Manual
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return nil, "", errClosed
	}
	m := t.lookup(call.Template, name)
	if m == nil {
		return nil, "", utcp.Errorf(utcp.CodeManualNotFound, "mcp: manual %q is not registered: %w", name, transports.ErrNotRegistered)
	}
	for _, sn := range m.prefixes {
		if tool, ok := strings.CutPrefix(call.Name, sn+"."); ok && tool != "" {
			return m.servers[sn], tool, nil
		}
	}
	return nil, "", utcp.Errorf(utcp.CodeToolNotFound, "mcp: manual %q has no server for tool %q (tools are named <server>.<tool>; servers: %s): %w",
		m.name, call.Name, strings.Join(m.names(), ", "), transports.ErrToolNotFound).WithDetail("tool", call.Name)
}

// CallTool calls the tool on its server's session and waits for the
// result. The value is structuredContent when the server sent it (and
// only text besides), the text of a single text block (JSON-decoded when
// it is a JSON object or array), or {"content": [...], "structured": ...}
// otherwise; see the package documentation. An isError result is a
// *utcp.ToolError carrying the joined text. An unknown tool (either way a
// server reports it) is transports.ErrToolNotFound.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, tool, err := t.route(call)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	v, err := s.call(ctx, tool, call.Arguments, nil)
	if err != nil {
		return nil, err
	}
	return &utcp.Result{Value: v}, nil
}

// CallToolStream calls the tool with a progress token. Each
// notifications/progress of the call is an event {Type: "progress", Data:
// {"progress", "total", "message"}} (total and message when the server
// sent them), in the order the server sent them; the result is the last
// event, {Type: "result", Data: <value as CallTool returns it>}, followed
// by io.EOF. A failure ends the stream with CallTool's error. Closing the
// stream cancels the call (notifications/cancelled).
func (t *Transport) CallToolStream(ctx context.Context, call *utcp.Call) (transports.Stream, error) {
	s, tool, err := t.route(call)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	st := &stream{cancel: cancel, signal: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		defer cancel()
		v, err := s.call(ctx, tool, call.Arguments, st.push)
		if err == nil {
			st.push(&utcp.Event{Type: "result", Data: v})
			err = io.EOF
		}
		st.finish(err)
	}()
	return st, nil
}

// Close stops every server of every manual (as Release does),
// waits until their processes are reaped, and refuses new work. It is
// idempotent.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	ms := make([]*manual, 0, len(t.manuals))
	for _, m := range t.manuals {
		ms = append(ms, m)
	}
	clear(t.manuals)
	t.mu.Unlock()
	t.cancel() // aborts connections in progress; stopping stays graceful
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			<-m.ready
			m.shutdown()
		})
	}
	wg.Wait()
	t.cbs.Wait()
	t.client.CloseIdleConnections()
	return nil
}

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
	return sess, nil
}

// newClient returns the go-sdk client of one session.
func (s *server) newClient() *sdk.Client {
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
	return sdk.NewClient(&sdk.Implementation{Name: "utcpd", Version: utcp.Version}, opts)
}

func (s *server) sessionOptions() *sdk.ClientSessionOptions {
	return &sdk.ClientSessionOptions{ProtocolVersion: s.t.cfg.protocol}
}

// session is one MCP session with a server.
type session struct {
	s       *server
	kind    string // "stdio", "streamable_http" or "sse"
	cs      *sdk.ClientSession
	proc    *proc // stdio only
	ctx     context.Context
	cancel  context.CancelFunc
	ended   chan struct{} // closed once the SDK session is done
	expire  chan struct{} // closed to ask the supervisor for a new session
	once    sync.Once
	started time.Time

	pmu      sync.Mutex
	progress map[string]func(*utcp.Event) // by progress token
	seq      atomic.Uint64
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

// writeFailed marks an error writing to a stdio server's standard input.
type writeFailed struct{ err error }

func (w *writeFailed) Error() string { return "writing to the server: " + w.err.Error() }
func (w *writeFailed) Unwrap() error { return w.err }

// stdinWriter is a stdio server's standard input as the SDK writes it.
type stdinWriter struct{ f *os.File }

func (w stdinWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if err != nil {
		err = &writeFailed{err}
	}
	return n, err
}

func (w stdinWriter) Close() error { return w.f.Close() }

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
func (s *server) call(ctx context.Context, tool string, args map[string]any, onProgress func(*utcp.Event)) (any, error) {
	if uri, ok := s.resourceURI(tool); ok {
		return s.readResource(ctx, tool, uri)
	}
	if args == nil {
		args = map[string]any{}
	}
	var res *sdk.CallToolResult
	sess, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		params := &sdk.CallToolParams{Name: tool, Arguments: args}
		if onProgress != nil {
			tok := sess.watchProgress(onProgress)
			defer sess.unwatchProgress(tok)
			params.SetProgressToken(tok)
		}
		var err error
		res, err = sess.cs.CallTool(ctx, params)
		return err
	})
	if err != nil {
		return nil, s.callError(ctx, sess, tool, err)
	}
	return toolResult(s, tool, res)
}

func (s *server) readResource(ctx context.Context, tool, uri string) (any, error) {
	var res *sdk.ReadResourceResult
	sess, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		var err error
		res, err = sess.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		return err
	})
	if err != nil {
		return nil, s.callError(ctx, sess, tool, err)
	}
	return resourceValue(res), nil
}

// callError maps a failed request to utcpd's errors.
func (s *server) callError(ctx context.Context, sess *session, tool string, err error) error {
	what := fmt.Sprintf("mcp: %s: tool %s", s.what(), tool)
	var we *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, ctx.Err())
	case s.ctx.Err() != nil:
		return s.errStopped()
	case sess != nil && sess.ctx.Err() != nil:
		return &utcp.TransportError{Err: fmt.Errorf("%s: the server's session ended during the call (%v)", what, err)}
	case errors.As(err, &we):
		return rpcError(what, tool, we)
	}
	var ue *utcp.Error
	if errors.As(err, &ue) {
		return err
	}
	return &utcp.TransportError{Err: fmt.Errorf("%s: %w", what, err)}
}

// rpcError maps a JSON-RPC error answer: method not found and an
// invalid-params error about the tool's name are tool_not_found, other
// invalid params invalid_arguments, protocol-level codes transport
// errors, and everything else the tool's failure.
func rpcError(what, tool string, we *jsonrpc.Error) error {
	switch {
	case we.Code == jsonrpc.CodeMethodNotFound:
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", what, we.Message, transports.ErrToolNotFound).WithDetail("tool", tool)
	case we.Code == jsonrpc.CodeInvalidParams && unknownTool(we.Message, tool):
		return utcp.Errorf(utcp.CodeToolNotFound, "%s: %s: %w", what, we.Message, transports.ErrToolNotFound).WithDetail("tool", tool)
	case we.Code == jsonrpc.CodeInvalidParams:
		return utcp.NewError(utcp.CodeInvalidArguments, "%s: %s", what, we.Message).WithDetail("rpc_code", we.Code)
	case we.Code == jsonrpc.CodeParseError || we.Code == jsonrpc.CodeInvalidRequest || (we.Code <= -32000 && we.Code >= -32099):
		return &utcp.TransportError{Err: fmt.Errorf("%s: %s (JSON-RPC error %d)", what, we.Message, we.Code)}
	}
	v := map[string]any{"code": we.Code, "message": we.Message}
	if len(we.Data) > 0 {
		v["data"] = decodeJSON(we.Data, string(we.Data))
	}
	return &utcp.ToolError{Message: fmt.Sprintf("%s (JSON-RPC error %d)", we.Message, we.Code), Value: v}
}

// unknownTool reports whether msg is a server saying it does not know
// tool: "unknown tool "x"" (go-sdk), "Tool x not found" (TypeScript SDK),
// "no such tool".
func unknownTool(msg, tool string) bool {
	if !strings.Contains(msg, tool) {
		return false
	}
	l := strings.ToLower(msg)
	return strings.Contains(l, "unknown tool") || strings.Contains(l, "no such tool") ||
		(strings.Contains(l, "tool") && strings.Contains(l, "not found"))
}

// listTools lists the server's tools (every page) and, when the template
// asks for it, its resources as tools.
func (s *server) listTools(ctx context.Context) ([]utcp.Tool, error) {
	var tools []utcp.Tool
	resources := map[string]string{}
	_, err := s.invoke(ctx, func(ctx context.Context, sess *session) error {
		tools = tools[:0]
		clear(resources)
		var caps *sdk.ServerCapabilities
		if ir := sess.cs.InitializeResult(); ir != nil {
			caps = ir.Capabilities
		}
		maxTools := listLimit(ctx)
		if caps == nil || caps.Tools != nil {
			err := pages(ctx, s.name, "tools/list", maxTools, func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				for _, tool := range res.Tools {
					tools = append(tools, convertTool(s.name, tool))
				}
				return res.NextCursor, len(tools), nil
			})
			if err != nil {
				return err
			}
		}
		if s.m.spec.RegisterResourcesAsTools && (caps == nil || caps.Resources != nil) {
			var list []*sdk.Resource
			err := pages(ctx, s.name, "resources/list", maxTools-len(tools), func(ctx context.Context, cursor string) (string, int, error) {
				res, err := sess.cs.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
				if err != nil {
					return "", 0, err
				}
				list = append(list, res.Resources...)
				return res.NextCursor, len(list), nil
			})
			if err != nil {
				return err
			}
			for _, r := range list {
				tool := resourceTool(s.name, r)
				local := strings.TrimPrefix(tool.Name, s.name+".")
				if _, dup := resources[local]; dup {
					continue
				}
				resources[local] = r.URI
				tools = append(tools, tool)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.resMu.Lock()
	s.resources = maps.Clone(resources)
	s.resMu.Unlock()
	return tools, nil
}

// PrefixedToolNames reports that the transport names its tools
// "<server>.<tool>", the server name from the admin's manual template
// (transports.PrefixedNames).
func (t *Transport) PrefixedToolNames() bool { return true }

var _ transports.PrefixedNames = (*Transport)(nil)

// MaxListPages caps the pages of one server's tools/list (and
// resources/list): a server that answers a nextCursor forever is refused
// after that many pages instead of being paged without end.
const MaxListPages = 100

// listLimit is the most tools one manual may list: the context's
// transports.DiscoveryLimits.MaxTools, or the default.
func listLimit(ctx context.Context) int {
	if n := transports.DiscoveryLimitsFrom(ctx).MaxTools; n > 0 {
		return n
	}
	return transports.DefaultMaxToolsPerManual
}

// pages runs one paginated list: page fetches the page at cursor and
// returns the next cursor and the number of items gathered so far. A
// server without the method (method not found) lists nothing. Past
// MaxListPages pages, or past max items, the listing is refused with a
// discovery_failed error naming the limit; nothing of it is kept.
func pages(ctx context.Context, server, method string, max int, page func(ctx context.Context, cursor string) (string, int, error)) error {
	cursor := ""
	for n := 1; ; n++ {
		next, items, err := page(ctx, cursor)
		if err != nil {
			var we *jsonrpc.Error
			if errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound {
				return nil
			}
			return err
		}
		if items > max {
			return transports.TooManyTools(listLimit(ctx))
		}
		if next == "" {
			return nil
		}
		if n >= MaxListPages {
			return utcp.NewError(utcp.CodeDiscoveryFailed,
				"mcp: server %s: %s still answers a nextCursor after %d pages (the limit of pages per listing); refusing the listing", server, method, MaxListPages).
				WithDetail("limit_pages", MaxListPages).WithDetail("limit", "mcp_list_pages")
		}
		cursor = next
	}
}

// resourceURI returns the URI behind a resource tool name.
func (s *server) resourceURI(tool string) (string, bool) {
	s.resMu.Lock()
	defer s.resMu.Unlock()
	uri, ok := s.resources[tool]
	return uri, ok
}

// convertTool turns an MCP tool into a UTCP tool named "<server>.<tool>":
// inputSchema becomes inputs, outputSchema outputs, the title stands in
// for a missing description, and the annotations become tags.
func convertTool(server string, tool *sdk.Tool) utcp.Tool {
	out := utcp.Tool{Name: server + "." + tool.Name, Description: tool.Description}
	if out.Description == "" {
		out.Description = tool.Title
	}
	if out.Description == "" && tool.Annotations != nil {
		out.Description = tool.Annotations.Title
	}
	out.Inputs = rawSchema(tool.InputSchema)
	if out.Inputs == nil {
		out.Inputs = json.RawMessage(`{"type":"object"}`)
	}
	out.Outputs = rawSchema(tool.OutputSchema)
	out.Tags = []string{"mcp", server}
	if a := tool.Annotations; a != nil {
		if a.ReadOnlyHint {
			out.Tags = append(out.Tags, "read_only")
		}
		if a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint {
			out.Tags = append(out.Tags, "destructive")
		}
		if a.IdempotentHint {
			out.Tags = append(out.Tags, "idempotent")
		}
		if a.OpenWorldHint != nil && *a.OpenWorldHint {
			out.Tags = append(out.Tags, "open_world")
		}
	}
	return out
}

func rawSchema(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// resourceTool is the tool that reads resource r: "<server>.resource_<name>"
// with the name's characters outside [A-Za-z0-9_-] replaced by '_'.
func resourceTool(server string, r *sdk.Resource) utcp.Tool {
	name := r.Name
	if name == "" {
		name = r.URI
	}
	var b strings.Builder
	for _, c := range name {
		if c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	desc := r.Description
	if desc == "" {
		desc = r.Title
	}
	if desc == "" {
		desc = "Reads the resource " + r.URI
	}
	return utcp.Tool{
		Name:        server + ".resource_" + b.String(),
		Description: desc,
		Inputs:      json.RawMessage(`{"type":"object","properties":{}}`),
		Tags:        []string{"mcp", server, "resource"},
	}
}

// toolResult turns a tools/call result into a value, or the tool's error.
func toolResult(s *server, tool string, res *sdk.CallToolResult) (any, error) {
	if res == nil {
		return nil, nil
	}
	v := resultValue(res)
	if !res.IsError {
		return v, nil
	}
	msg := joinedText(res.Content)
	if unknownTool(msg, tool) {
		return nil, utcp.Errorf(utcp.CodeToolNotFound, "mcp: %s: %s: %w", s.what(), msg, transports.ErrToolNotFound).WithDetail("tool", tool)
	}
	if msg == "" {
		msg = fmt.Sprintf("mcp: %s: tool %s reported an error", s.what(), tool)
	}
	return nil, &utcp.ToolError{Message: msg, Value: v}
}

// joinedText joins the text blocks of content with newlines.
func joinedText(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// resultValue is the JSON shape of a tools/call result:
//
//   - structuredContent, when present and every content block is text
//     (the text then repeats it);
//   - the text of a single text block, JSON-decoded when it is a JSON
//     object or array;
//   - nil for no content at all;
//   - otherwise {"content": [blocks as MCP JSON], "structured": ...}
//     (structured only when present).
func resultValue(res *sdk.CallToolResult) any {
	allText := true
	for _, c := range res.Content {
		if _, ok := c.(*sdk.TextContent); !ok {
			allText = false
		}
	}
	var structured any
	if res.StructuredContent != nil {
		structured = renumber(res.StructuredContent)
	}
	switch {
	case structured != nil && allText:
		return structured
	case structured == nil && len(res.Content) == 0:
		return nil
	case structured == nil && len(res.Content) == 1 && allText:
		return textValue(res.Content[0].(*sdk.TextContent).Text)
	}
	blocks := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		blocks = append(blocks, renumber(c))
	}
	out := map[string]any{"content": blocks}
	if structured != nil {
		out["structured"] = structured
	}
	return out
}

// resourceValue is the JSON shape of a resources/read result: the text
// of a single text content (JSON-decoded when it is an object or array),
// else {"contents": [contents as MCP JSON]}.
func resourceValue(res *sdk.ReadResourceResult) any {
	if res == nil {
		return nil
	}
	if len(res.Contents) == 1 && res.Contents[0] != nil && res.Contents[0].Blob == nil {
		return textValue(res.Contents[0].Text)
	}
	contents := make([]any, 0, len(res.Contents))
	for _, c := range res.Contents {
		contents = append(contents, renumber(c))
	}
	return map[string]any{"contents": contents}
}

// textValue decodes text when it is a JSON object or array.
func textValue(text string) any {
	trimmed := bytes.TrimSpace([]byte(text))
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return decodeJSON(trimmed, text)
	}
	return text
}

// decodeJSON decodes b (numbers as json.Number), or returns fallback when
// b is not one JSON value.
func decodeJSON(b []byte, fallback any) any {
	if !json.Valid(b) {
		return fallback
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fallback
	}
	return v
}

// renumber re-encodes v as JSON and decodes it with numbers as
// json.Number, the representation of every other value utcpd returns.
func renumber(v any) any {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return v
	}
	return decodeJSON(buf.Bytes(), v)
}

// stream is the transports.Stream of one CallToolStream.
type stream struct {
	cancel context.CancelFunc
	signal chan struct{} // one pending wake-up for Recv
	done   chan struct{} // closed when the call's goroutine returned

	mu       sync.Mutex
	queue    []*utcp.Event
	finished bool
	final    error
	closed   bool
	once     sync.Once
}

// errStreamClosed ends a stream the caller closed.
var errStreamClosed = utcp.NewError(utcp.CodeCanceled, "mcp: stream closed")

// push queues one event. It never blocks: past maxQueuedEvents the newest
// progress event replaces the one queued before it.
func (st *stream) push(ev *utcp.Event) {
	st.mu.Lock()
	switch {
	case st.closed || st.finished:
	case len(st.queue) >= maxQueuedEvents && ev.Type == "progress" && st.queue[len(st.queue)-1].Type == "progress":
		st.queue[len(st.queue)-1] = ev
	default:
		st.queue = append(st.queue, ev)
	}
	st.mu.Unlock()
	st.wake()
}

func (st *stream) wake() {
	select {
	case st.signal <- struct{}{}:
	default:
	}
}

// finish records the stream's end (io.EOF or the call's error).
func (st *stream) finish(err error) {
	st.mu.Lock()
	if !st.finished {
		st.finished, st.final = true, err
	}
	st.mu.Unlock()
	st.wake()
}

// Recv returns the next event, io.EOF after the result, or the call's
// error.
func (st *stream) Recv() (*utcp.Event, error) {
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return nil, errStreamClosed
		}
		if len(st.queue) > 0 {
			ev := st.queue[0]
			st.queue[0] = nil
			st.queue = st.queue[1:]
			st.mu.Unlock()
			return ev, nil
		}
		if st.finished {
			err := st.final
			st.mu.Unlock()
			return nil, err
		}
		st.mu.Unlock()
		<-st.signal
	}
}

// Close cancels the call if it still runs (the server is sent
// notifications/cancelled) and waits for it to return. It is idempotent.
func (st *stream) Close() error {
	st.once.Do(func() {
		st.mu.Lock()
		st.closed = true
		st.queue = nil
		st.mu.Unlock()
		st.cancel()
		st.wake()
	})
	<-st.done
	return nil
}

// ---- stdio servers ----

// connectStdio starts the server process and runs the MCP handshake over
// its standard input and output.
func (s *server) connectStdio(ctx context.Context, sess *session) error {
	sess.kind = "stdio"
	p, err := s.startProc()
	if err != nil {
		return err
	}
	sess.proc = p
	tr := &sdk.IOTransport{
		Reader:        &lineTap{r: p.stdout, fn: sess.onMessage},
		Writer:        stdinWriter{p.stdin},
		MaxLineLength: s.t.cfg.maxMessage,
	}
	cs, err := s.newClient().Connect(ctx, tr, s.sessionOptions())
	if err != nil {
		return fmt.Errorf("mcp: %s: MCP handshake with %s: %w", s.what(), s.cfg.Command, err)
	}
	sess.cs = cs
	return nil
}

// proc is one stdio server process, leader of its own process group.
type proc struct {
	s      *server
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // write end
	stdout *os.File // read end
	stderr *os.File // read end
	exited chan struct{}

	mu      sync.Mutex
	pgid    int // 0 once reaped and the group killed
	helpers sync.WaitGroup
	tail    []byte // the end of standard error, for error messages
}

// startProc starts the server's command in its own process group.
func (s *server) startProc() (*proc, error) {
	path := s.cfg.Command
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: command %q: %w", s.what(), path, err)}
		}
		path = lp
	}
	if s.cfg.Cwd != "" {
		if fi, err := os.Stat(s.cfg.Cwd); err != nil || !fi.IsDir() {
			return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: cwd %q is not a directory", s.what(), s.cfg.Cwd)}
		}
	}
	p := &proc{s: s, exited: make(chan struct{})}
	var rIn, wOut, wErr *os.File
	var err error
	closeAll := func() {
		for _, f := range []*os.File{rIn, p.stdin, p.stdout, wOut, p.stderr, wErr} {
			if f != nil {
				f.Close()
			}
		}
	}
	if rIn, p.stdin, err = os.Pipe(); err == nil {
		if p.stdout, wOut, err = os.Pipe(); err == nil {
			p.stderr, wErr, err = os.Pipe()
		}
	}
	if err != nil {
		closeAll()
		return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: %w", s.what(), err)}
	}
	p.cmd = &exec.Cmd{
		Path:        path,
		Args:        append([]string{s.cfg.Command}, s.cfg.Args...),
		Env:         environment(s.cfg),
		Dir:         s.cfg.Cwd,
		Stdin:       rIn,
		Stdout:      wOut,
		Stderr:      wErr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := p.cmd.Start(); err != nil {
		closeAll()
		return nil, &utcp.TransportError{Err: fmt.Errorf("mcp: %s: starting %s: %w", s.what(), s.cfg.Command, err)}
	}
	rIn.Close()
	wOut.Close()
	wErr.Close()
	s.spawns.Add(1)
	p.pid = p.cmd.Process.Pid
	p.pgid = p.pid
	s.log.Info("mcp: server process started", "pid", p.pid, "command", s.cfg.Command)
	p.helpers.Add(1)
	go p.readStderr()
	go p.wait()
	return p, nil
}

// wait reaps the process, kills what is left of its group, and lets the
// pipe readers finish.
func (p *proc) wait() {
	err := p.cmd.Wait()
	p.mu.Lock()
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		p.pgid = 0
	}
	p.mu.Unlock()
	deadline := time.Now().Add(pipeGrace)
	_ = p.stdout.SetReadDeadline(deadline)
	_ = p.stderr.SetReadDeadline(deadline)
	p.s.log.Info("mcp: server process exited", "pid", p.pid, "status", exitStatus(p.cmd.ProcessState, err))
	close(p.exited)
}

func exitStatus(st *os.ProcessState, err error) string {
	if st == nil {
		return fmt.Sprint(err)
	}
	return st.String()
}

// signal sends sig to the process group while it exists.
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, sig)
	}
}

// stop shuts the server down the way the MCP spec asks: close its input,
// wait, SIGTERM, wait, SIGKILL (to the whole process group).
func (p *proc) stop(grace time.Duration) {
	_ = p.stdin.Close()
	if waitFor(p.exited, grace) {
		return
	}
	p.signal(syscall.SIGTERM)
	if waitFor(p.exited, grace) {
		return
	}
	p.kill()
}

// kill sends SIGKILL to the process group and waits for the reaping.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exited
}

// finish waits until the process is reaped and its pipes are drained.
func (p *proc) finish() {
	<-p.exited
	p.helpers.Wait()
	_ = p.stdin.Close()
	_ = p.stderr.Close()
}

func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stderrTail returns ": stderr: " and the end of standard error, or "".
func (p *proc) stderrTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	tail := strings.TrimSpace(string(p.tail))
	if tail == "" {
		return ""
	}
	return " (stderr: " + tail + ")"
}

const stderrTailBytes = 1 << 10

// readStderr logs standard error line by line: each line capped, at most
// the configured rate (bursts of twice that), with a count of the lines
// dropped.
func (p *proc) readStderr() {
	defer p.helpers.Done()
	cfg := p.s.t.cfg
	log := p.s.log.With("pid", p.pid)
	br := bufio.NewReaderSize(deadlineEOF{p.stderr}, 4<<10)
	rate := float64(cfg.stderrRate)
	tokens, last := 2*rate, time.Now()
	dropped := 0
	for {
		line, truncated, err := readLine(br, cfg.maxStderrLine)
		if len(line) > 0 || truncated {
			p.mu.Lock()
			p.tail = append(p.tail, line...)
			p.tail = append(p.tail, '\n')
			if len(p.tail) > 2*stderrTailBytes {
				p.tail = append(p.tail[:0], p.tail[len(p.tail)-stderrTailBytes:]...)
			}
			p.mu.Unlock()
			now := time.Now()
			tokens = min(2*rate, tokens+now.Sub(last).Seconds()*rate)
			last = now
			if tokens >= 1 {
				tokens--
				if dropped > 0 {
					log.Warn("mcp: server stderr lines dropped (rate limit)", "dropped", dropped)
					dropped = 0
				}
				text := string(line)
				if truncated {
					text += " …[truncated]"
				}
				log.Info("mcp: server stderr", "line", text)
			} else {
				dropped++
			}
		}
		if err != nil {
			break
		}
	}
	if dropped > 0 {
		log.Warn("mcp: server stderr lines dropped (rate limit)", "dropped", dropped)
	}
}

// readLine reads one line, keeping at most max bytes of it (without the
// newline); truncated says bytes were dropped.
func readLine(br *bufio.Reader, max int) (line []byte, truncated bool, err error) {
	keep := func(b []byte) {
		room := min(max-len(line), len(b))
		if room > 0 {
			line = append(line, b[:room]...)
		}
		if room < len(b) {
			truncated = true
		}
	}
	for {
		frag, e := br.ReadSlice('\n')
		if errors.Is(e, bufio.ErrBufferFull) {
			keep(frag)
			continue
		}
		keep(bytes.TrimRight(frag, "\r\n"))
		return line, truncated, e
	}
}

// deadlineEOF turns a read deadline (set once the process is gone) into
// the end of the output.
type deadlineEOF struct{ f *os.File }

func (d deadlineEOF) Read(b []byte) (int, error) {
	n, err := d.f.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	return n, err
}

// lineTap passes a stdio server's standard output through to the SDK and
// shows each complete line (message) to fn first.
type lineTap struct {
	r    *os.File
	fn   func([]byte)
	line []byte
	over bool
}

func (t *lineTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if !t.over {
			if len(t.line)+len(seg) > tapLimit {
				t.over = true
			} else {
				t.line = append(t.line, seg...)
			}
		}
		if i < 0 {
			break
		}
		if !t.over {
			t.fn(t.line)
		}
		t.line, t.over = t.line[:0], false
		b = b[i+1:]
	}
	return n, err
}

func (t *lineTap) Close() error { return t.r.Close() }

// environment builds a stdio server's environment: the inherited
// variables, then env.
func environment(cfg *Server) []string {
	inherit := cfg.InheritEnvVars
	if inherit == nil {
		inherit = DefaultInherit
	}
	env := procenv.Inherit(inherit)
	env.SetAll(cfg.Env)
	return env.List()
}

// ---- HTTP servers ----

// connectHTTP opens a Streamable HTTP session, falling back to the legacy
// HTTP+SSE transport when the server answers the handshake with a 4xx
// (KindHTTP), or a legacy session only (KindSSE).
func (s *server) connectHTTP(ctx context.Context, sess *session) error {
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return utcp.NewError(utcp.CodeInvalidTemplate, "mcp: %s: url: %v", s.what(), err)
	}
	if err := httpclient.CheckURL(u, s.cfg.AllowInsecure); err != nil {
		return err
	}
	rt := &roundTripper{base: s.t.client.Transport, s: s, sess: sess, origin: originOf(u)}
	redirect := s.t.client.CheckRedirect
	hc := &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		return redirect(req.WithContext(httpclient.WithAllowInsecure(req.Context(), s.cfg.AllowInsecure)), via)
	}}
	if s.cfg.Transport == KindHTTP {
		sess.kind = "streamable_http"
		cs, err := s.newClient().Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if err == nil {
			sess.cs = cs
			return nil
		}
		status := int(rt.handshake.Load())
		if ctx.Err() != nil || status < 400 || status >= 500 {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: Streamable HTTP handshake with %s: %w", s.what(), utcp.RedactURL(u), err)}
		}
		s.log.Info("mcp: Streamable HTTP handshake refused; trying the legacy HTTP+SSE transport", "status", status)
		cs, errSSE := s.newClient().Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
		if errSSE != nil {
			return &utcp.TransportError{Status: status, Err: fmt.Errorf("mcp: %s: %s: Streamable HTTP handshake: %v; legacy HTTP+SSE: %w", s.what(), utcp.RedactURL(u), err, errSSE)}
		}
		sess.kind, sess.cs = "sse", cs
		return nil
	}
	sess.kind = "sse"
	cs, err := s.newClient().Connect(ctx, &sdk.SSEClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxEventSize: s.t.cfg.maxMessage}, s.sessionOptions())
	if err != nil {
		return &utcp.TransportError{Err: fmt.Errorf("mcp: %s: legacy HTTP+SSE handshake with %s: %w", s.what(), utcp.RedactURL(u), err)}
	}
	sess.cs = cs
	return nil
}

// roundTripper adds the server's headers and the manual's auth to the
// requests sent to the server's origin, retries once after a 401 with a
// fresh oauth2 token, notices expired sessions (404, or 400, to a request
// carrying Mcp-Session-Id) and taps event streams for progress.
type roundTripper struct {
	base      http.RoundTripper
	s         *server
	sess      *session
	origin    string
	handshake atomic.Int64 // status of the last POST without a session id
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	send := func(again bool) (*http.Response, error) {
		r := req.Clone(req.Context())
		if again && req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		if originOf(r.URL) == rt.origin {
			for k, v := range rt.s.cfg.Headers {
				r.Header.Set(k, v)
			}
			if err := httpclient.ApplyAuth(r.Context(), r, rt.s.auth, rt.s.t.tokens); err != nil {
				return nil, err
			}
		}
		return rt.base.RoundTrip(r)
	}
	resp, err := send(false)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized && rt.s.auth != nil && rt.s.auth.Type == utcp.AuthOAuth2 &&
		(req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) {
		resp.Body.Close()
		rt.s.t.tokens.Invalidate(rt.s.auth)
		if resp, err = send(true); err != nil {
			return nil, err
		}
	}
	withSession := req.Header.Get("Mcp-Session-Id") != ""
	if req.Method == http.MethodPost && !withSession {
		rt.handshake.Store(int64(resp.StatusCode))
	}
	if withSession && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest) {
		if d, ok := req.Context().Value(deliveryKey{}).(*delivery); ok {
			d.rejected.Store(true)
		}
		rt.sess.markExpired()
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "text/event-stream") {
		resp.Body = &sseTap{rc: resp.Body, fn: rt.sess.onMessage}
	}
	return resp, nil
}

// originOf returns scheme://host:port of u, the default port explicit.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// sseTap passes a server-sent event stream through to the SDK and shows
// the data of each complete event to fn first.
type sseTap struct {
	rc       io.ReadCloser
	fn       func([]byte)
	line     []byte
	lineOver bool
	data     []byte
	dataOver bool
}

func (t *sseTap) Read(p []byte) (int, error) {
	n, err := t.rc.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if !t.lineOver {
			if len(t.line)+len(seg) > tapLimit {
				t.lineOver = true
			} else {
				t.line = append(t.line, seg...)
			}
		}
		if i < 0 {
			break
		}
		t.endLine()
		b = b[i+1:]
	}
	return n, err
}

func (t *sseTap) endLine() {
	line := bytes.TrimSuffix(t.line, []byte("\r"))
	switch {
	case len(line) == 0 && !t.lineOver:
		if len(t.data) > 0 && !t.dataOver {
			t.fn(t.data)
		}
		t.data, t.dataOver = t.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		if t.lineOver || len(t.data)+len(line) > tapLimit {
			t.dataOver = true
			break
		}
		v := bytes.TrimPrefix(line[5:], []byte(" "))
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, v...)
	}
	t.line, t.lineOver = t.line[:0], false
}

func (t *sseTap) Close() error { return t.rc.Close() }
