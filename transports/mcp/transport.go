package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/internal/httpclient"
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
	// onResource relays the servers' notifications about resources and
	// prompts (resources.go).
	onResource func(transports.ResourceEvent)

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
		log:        log,
		cfg:        cfg.settings(),
		tokens:     opts.Tokens,
		client:     httpclient.New(httpclient.Options{}),
		onChanged:  opts.OnToolsChanged,
		onResource: opts.OnResourceEvent,
		manuals:    map[string]*manual{},
	}
	if t.tokens == nil {
		t.tokens = oauth2.NewTokenCache(t.client)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t, nil
}

// errClosed refuses work after Close.
var errClosed = utcp.NewError(utcp.CodeUnavailable, "mcp: transport closed")

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

// RegistrationKey is what transports.Count counts registrations by: the
// manual name and a hash of the whole template, so that a changed
// template has sessions of its own and deregistering the old one ends the
// old sessions while the new ones run on.
func (t *Transport) RegistrationKey(tmpl *utcp.CallTemplate) string { return keyOf(tmpl) }

// CallTool calls the tool on its server's session and waits for the
// result. The value is structuredContent when the server sent it (and
// only text besides), the text of a single text block (JSON-decoded when
// it is a JSON object or array), or {"content": [...], "structured": ...}
// otherwise; see the package documentation. Result.MCP holds the result
// as the server sent it (for the MCP front). An isError result is a
// *utcp.ToolError carrying the joined text (and the result in MCP). An
// unknown tool (either way a server reports it) is
// transports.ErrToolNotFound.
func (t *Transport) CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error) {
	s, tool, err := t.route(call)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.callContext(ctx)
	defer cancel()
	return s.call(ctx, tool, call.Arguments, nil)
}

// CallToolStream calls the tool with a progress token. Each
// notifications/progress of the call is an event {Type: "progress", Data:
// {"progress", "total", "message"}} (total and message when the server
// sent them), in the order the server sent them; the result is the last
// event, {Type: "result", Data: <value as CallTool returns it>, MCP:
// <the result as the server sent it>}, followed by io.EOF. A failure ends the stream with CallTool's error. Closing the
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
		res, err := s.call(ctx, tool, call.Arguments, st.push)
		if err == nil {
			st.push(&utcp.Event{Type: "result", Data: res.Value, MCP: res.MCP})
			err = io.EOF
		}
		st.finish(err)
	}()
	return st, nil
}

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

// PrefixedToolNames reports that the transport names its tools
// "<server>.<tool>", the server name from the admin's manual template
// (transports.PrefixedNames).
func (t *Transport) PrefixedToolNames() bool { return true }

var _ transports.PrefixedNames = (*Transport)(nil)

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

// forget removes m from the map whatever its count.
func (t *Transport) forget(m *manual) {
	t.mu.Lock()
	if t.manuals[m.key] == m {
		delete(t.manuals, m.key)
	}
	t.mu.Unlock()
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
