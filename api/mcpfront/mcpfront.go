// Package mcpfront is utcpd's MCP front: it serves every registered tool
// to Model Context Protocol clients, over Streamable HTTP (Handler, the
// daemon mounts it at /mcp) and over stdio (RunIO on standard input and
// output, "utcpd mcp"; Run serves any other mcp.Transport, without the
// lean path).
//
// Every call goes through the same path as the REST front: the Backend's
// CallTool (gateway.CallTool for an in-process gateway), so the same guard
// chain, allowed_communication_protocols check, argument validation, audit
// record and metrics apply. Calls carry CallOptions{Front: "mcp"} and the
// principal of the API key that authenticated the request.
//
// # Protocol versions
//
// The front speaks what github.com/modelcontextprotocol/go-sdk v1.8.0
// speaks: the initialize-handshake revisions (2024-11-05, 2025-03-26,
// 2025-06-18, 2025-11-25) with sessions (Mcp-Session-Id, a GET stream for
// notifications, DELETE to end a session), and the stateless 2026-07-28
// revision (server/discover, per-request _meta, subscriptions/listen). A
// request whose MCP-Protocol-Version header is 2026-07-28 or later is
// served statelessly; every other request by the session handler. A
// backend's sampling, elicitation and roots requests reach a client on
// 2026-07-28 as input-required results (SEP-2322, inputs.go), a client
// on an earlier revision as the requests themselves (peer.go).
//
// A session whose client declares neither sampling nor elicitation (it
// cannot be asked anything in the middle of a call) gets its answers to
// POSTs as application/json, one write each; any other session gets an
// SSE stream per POST, on which a call's server requests (sampling,
// elicitation, roots) and notifications (progress, logs) arrive before
// its result. In a JSON session, those notifications, and roots
// requests, go to the session's GET stream.
//
// # Tools
//
// tools/list pages (Options.PageSize) through every tool of the Backend.
// A tool's MCP name is its qualified name (manual.tool), which fits the
// MCP name rule [A-Za-z0-9_.-]{1,128}; a name that does not fit is
// sanitised (each other character becomes '_') and suffixed with '_' and 8
// hex digits of the qualified name's SHA-256, so distinct tools never
// share a name; the front keeps the map back to the qualified name, which
// every tool also carries in _meta["utcpd/qualified_name"]. With
// Options.ShortNames a tool is listed under its name without the manual
// prefix while no other tool has that name; with Options.NativeNames the
// tools of the MCP servers named there are listed exactly as their server
// names them. The input schema is the tool's (an object schema; a schema
// without "type" gets "type": "object"), the output schema is listed when
// it is an object schema that compiles, and an empty description is
// replaced by one naming the tool. A tool an MCP server listed keeps that
// server's title, annotations, icons and _meta (utcp.Tool.MCP, utcpd's
// _meta keys added); for every other tool the tags read_only,
// destructive, idempotent and open_world become the matching
// annotations, and an http tool's method adds readOnlyHint (GET, HEAD)
// or destructiveHint (DELETE). notifications/tools/list_changed is sent when the tool set
// changes (Backend.Subscribe). With Options.CodeMode the front also lists
// codemode.run, which runs a Lua program through CodeMode (package
// api/codemode); a Backend tool whose MCP name would be codemode.run is
// left out.
//
// # Calls and errors
//
// A result an MCP server sent (utcp.Result.MCP) is answered as the server
// sent it: every content block (text, image, audio, embedded resource,
// resource link, with annotations and _meta), the result's _meta, and
// structuredContent as the exact JSON received. Any other result value:
// a JSON object is structuredContent plus a text block holding its JSON;
// a string is a text block; any other value is a text block holding its
// JSON; null is no content. A tool listed with an output schema answers
// a value that is not an object, or an object the schema refuses, as an
// isError result saying what does not match, followed by the value's
// text: a success always carries structuredContent that validates.
//
// A request with a progressToken is called through CallToolStreaming. A
// progress event (an MCP server's notifications/progress) is sent on with
// its progress, total and message as the server sent them, and is no
// part of the result. Every other event is a piece of the result: the
// MCP server's result event, or a streaming transport's pieces, each of
// which is also a notifications/progress (progress 1, 2, 3, ...; the
// event's data, cut to 200 bytes, as the message). The result collects
// the pieces (one: as above; several: one text block each).
//
// A failure the tool reports (*utcp.ToolError) is an isError result: the
// MCP server's own result when it sent one, else the tool's message.
// Gateway failures follow the MCP rule that errors a model can act on are
// results and protocol problems are JSON-RPC errors:
//
//	JSON-RPC -32602  unknown tool (the SDK's; also for a tool outside the
//	                 session key's scope, see scope.go), tool_not_found, ambiguous_tool,
//	                 invalid_request, arguments that are not a JSON object,
//	                 invalid_arguments for clients on 2025-06-18 or older
//	JSON-RPC -32603  internal (message hidden, logged), canceled
//	isError result   tool_error (the tool's message), invalid_arguments
//	                 (2025-11-25 and later, SEP-1303), guard_denied,
//	                 guard_error, review_pending, guard_review_timeout,
//	                 protocol_not_allowed, timeout, transport_error and
//	                 every other code, as "<code>: <message>"
//
// A JSON-RPC error's data is {"code": "<utcpd code>", "details": {...}}.
//
// # HTTP security
//
// Requests with an Origin header are refused with 403 unless the origin
// is a loopback origin (http or https on localhost, 127.0.0.0/8 or [::1],
// any port) or listed in Options.AllowedOrigins ("*" allows every origin);
// allowed origins get CORS headers and OPTIONS preflights are answered.
// The SDK's DNS-rebinding check refuses a non-loopback Host header on a
// loopback listener (403). With Options.APIKeys every request needs
// "Authorization: Bearer <key>" (401 otherwise, with a WWW-Authenticate
// challenge), a session is bound to the key that opened it, and the key's
// principal is the calls' principal. At most Options.MaxSessions sessions
// (and 2026-07-28 subscriptions/listen streams) are open at once: a new one
// beyond that is refused with 503; a session without a request for
// Options.SessionIdleTimeout is closed. HTTP errors of the front are
// JSON-RPC error objects without an id, data.code naming the utcpd code.
package mcpfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/api/codemode"
	"github.com/utcpd/utcpd/api/httpx"
	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Defaults and names of the MCP front.
const (
	// Path is where the daemon mounts the Streamable HTTP endpoint.
	Path = "/mcp"
	// FrontName is the CallOptions.Front of every call made through the
	// front (audit records, reviews).
	FrontName = "mcp"
	// DefaultCallTimeout is a call's deadline when Options.CallTimeout is
	// zero (MCP requests carry no deadline of their own).
	DefaultCallTimeout = 30 * time.Second
	// DefaultPageSize is the number of tools per tools/list page.
	DefaultPageSize = 100
	// DefaultMaxSessions caps open sessions when Options.MaxSessions is 0.
	DefaultMaxSessions = 256
	// DefaultSessionIdleTimeout closes a session without requests for
	// this long when Options.SessionIdleTimeout is 0.
	DefaultSessionIdleTimeout = 30 * time.Minute
	// DefaultServerName is the serverInfo name when Options.Name is empty.
	DefaultServerName = "utcpd"
)

// Backend is what the front serves: the tool set and the calls. A
// *gateway.Gateway is one through GatewayBackend; "utcpd mcp --connect"
// implements it over a daemon's REST front. Its methods must be safe for
// concurrent use.
type Backend interface {
	// Tools returns every tool, names qualified (manual.tool).
	Tools(ctx context.Context) ([]*utcp.Tool, error)
	// CallTool calls a tool once, as gateway.Gateway.CallTool: a failure
	// the tool reports is a *utcp.ToolError, every other failure carries
	// a utcp.Code.
	CallTool(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error)
	// CallToolStreaming calls a tool once as a stream, as
	// gateway.Gateway.CallToolStreaming.
	CallToolStreaming(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (transports.Stream, error)
	// Subscribe calls fn after the tool set may have changed, until
	// cancel is called; fn must not block.
	Subscribe(fn func()) (cancel func())
}

// GatewayBackend returns g as a Backend.
func GatewayBackend(g *gateway.Gateway) Backend { return gatewayBackend{g} }

type gatewayBackend struct{ *gateway.Gateway }

// Tools lists every tool: the front publishes them all once and filters
// each session's view by its key's scope (scope.go).
func (b gatewayBackend) Tools(context.Context) ([]*utcp.Tool, error) {
	return b.ListTools(context.Background()), nil
}

// CallTracker is told when a call starts and ends (the in-flight gauge;
// api.Observer is one). Its methods must be fast and safe for concurrent
// use.
type CallTracker interface {
	// CallStarted is called when a call starts.
	CallStarted()
	// CallFinished is called when that call has ended.
	CallFinished()
}

// Options configure New. Gateway or Backend is required; every other
// field has a default.
type Options struct {
	// Gateway serves the tools (shorthand for Backend:
	// GatewayBackend(Gateway)).
	Gateway *gateway.Gateway
	// Backend serves the tools when Gateway is nil.
	Backend Backend
	// Name and Version are the serverInfo (default DefaultServerName and
	// "").
	Name, Version string
	// Instructions are sent to clients at initialization.
	Instructions string
	// CallTimeout is every call's deadline (default DefaultCallTimeout),
	// counted as the REST front counts ?timeout=.
	CallTimeout time.Duration
	// PageSize is the number of tools per tools/list page (default
	// DefaultPageSize).
	PageSize int
	// ShortNames lists a tool under its name without the manual prefix
	// while no other tool has that name (and the name fits the MCP rule),
	// else under its qualified name. A tool may then be renamed when
	// another manual adds a tool of the same name (clients are sent
	// list_changed).
	ShortNames bool
	// NativeNames are MCP servers, each named "manual.server" (the
	// manual's name and the server's name in its mcpServers), whose tools
	// are listed exactly as their server names them ("echo", not
	// "manual.server.echo"), so that a client written for that server
	// works unchanged. Native names are given before every other name.
	// New refuses prefixes that overlap, and a tool set in which a
	// native name is not free (two servers with a tool of the same name,
	// or a native name that is another tool's name); a collision that
	// appears later (a refresh) keeps the first server's tool under the
	// name, the other under its qualified name, and is logged.
	NativeNames []string
	// Principal is the principal of calls that no API key authenticated
	// (stdio, or HTTP without APIKeys); "" is anonymous.
	Principal string

	// APIKeys, when non-empty, are the bearer tokens HTTP requests need
	// (the REST front's keys). An empty key is an error.
	APIKeys []string
	// Keys are named API keys accepted beside APIKeys: a session opened
	// with one lists and calls only what its scope allows (scope.go);
	// the rest is answered as what does not exist.
	Keys []gateway.APIKey
	// AllowedOrigins are the Origin header values accepted besides the
	// loopback origins, compared case-insensitively without a trailing
	// slash ("https://app.example.com"); "*" accepts every origin.
	AllowedOrigins []string
	// MaxSessions caps the HTTP sessions open at once (default
	// DefaultMaxSessions; negative: no cap).
	MaxSessions int
	// SessionIdleTimeout closes an HTTP session without requests for
	// this long (default DefaultSessionIdleTimeout; negative: never).
	SessionIdleTimeout time.Duration
	// MaxBodyBytes caps HTTP request bodies (default
	// httpx.DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// InputTimeout is how long a call of a 2026-07-28 client parked on
	// an input-required result waits for the client's retry before it is
	// cancelled (default DefaultInputTimeout); the call's CallTimeout
	// bounds it too.
	InputTimeout time.Duration
	// MaxInputCalls caps the calls of one principal parked on
	// input-required results at once (default DefaultMaxInputCalls); a
	// server request that would park one more is declined.
	MaxInputCalls int
	// Tracker, when set, counts calls in flight.
	Tracker CallTracker
	// CodeMode, when set, is offered as the tool codemode.run (package
	// api/codemode): {code, timeout_ms, max_tool_calls} in, the run's
	// JSON answer out (isError when the program failed). It takes
	// precedence over a Backend tool listed under that name, which is
	// then left out of tools/list.
	CodeMode *codemode.Runner
	// Logger receives sync failures and internal errors; nil discards
	// them.
	Logger *slog.Logger
}

// Server is the MCP front. Create it with New, serve it with Handler or
// Run, and Close it when done.
type Server struct {
	opts    Options
	backend Backend
	log     *slog.Logger
	mcp     *mcp.Server
	keys    *httpx.Keys
	origins map[string]bool
	anyOrig bool

	// The tool set as published to the SDK server.
	syncMu sync.Mutex
	tools  map[string]published // MCP name → tool

	// Following the Backend: a change starts one syncing goroutine,
	// which runs until no change is pending, so nothing runs between
	// changes.
	life        context.Context
	endLife     context.CancelFunc
	followMu    sync.Mutex
	pending     bool // a change arrived since the last sync started
	syncing     bool // a syncing goroutine runs
	closed      bool
	syncers     sync.WaitGroup
	cancelWatch func()
	closeOnce   sync.Once

	stateful, stateless http.Handler
	// jsonful is the session handler that answers POSTs with
	// application/json (http.go, jsonSession); jsonIDs holds the IDs of
	// the sessions it created (string -> *jsonSessionInfo, lean.go).
	jsonful http.Handler
	jsonIDs sync.Map
	// leanOff sends every request to the SDK (tests compare both paths);
	// leanServed counts the calls the lean path answered.
	leanOff    atomic.Bool
	leanServed atomic.Int64
	authed     func(http.Handler) http.Handler

	res *resources // backends' resources and prompts (resources.go), nil if none

	inputs inputCalls // calls parked on input-required results (inputs.go)

	sessMu    sync.Mutex
	admitting int // new sessions being created now
	listens   int // open subscriptions/listen streams
}

// published is one tool as the SDK server has it.
type published struct {
	qualified   string
	fingerprint string
	def         *utcp.Tool   // as the backend lists it (scopes decide by it)
	check       *outputCheck // the listed output schema, nil if none
}

// New returns the MCP front for opts: it reads the Backend's tools once
// (an error there is returned) and then follows its changes.
func New(ctx context.Context, opts Options) (*Server, error) {
	backend := opts.Backend
	if opts.Gateway != nil {
		backend = GatewayBackend(opts.Gateway)
	}
	if backend == nil {
		return nil, errors.New("mcpfront: Options.Gateway or Options.Backend is required")
	}
	for _, k := range opts.APIKeys {
		if k == "" {
			return nil, errors.New("mcpfront: an API key is empty")
		}
	}
	if err := checkNative(opts.NativeNames); err != nil {
		return nil, err
	}
	if opts.PageSize < 0 || opts.CallTimeout < 0 || opts.MaxBodyBytes < 0 {
		return nil, errors.New("mcpfront: page size, call timeout and body limit must not be negative")
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.SessionIdleTimeout == 0 {
		opts.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = httpx.DefaultMaxBodyBytes
	}
	if opts.Name == "" {
		opts.Name = DefaultServerName
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys, err := httpx.NewAPIKeys(opts.APIKeys, opts.Keys)
	if err != nil {
		return nil, fmt.Errorf("mcpfront: %w", err)
	}
	s := &Server{
		opts: opts, backend: backend, log: log,
		keys:    keys,
		origins: map[string]bool{},
		tools:   map[string]published{},
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	for _, o := range opts.AllowedOrigins {
		o = normalOrigin(o)
		if o == "*" {
			s.anyOrig = true
		}
		if o != "" {
			s.origins[o] = true
		}
	}
	serverOpts := &mcp.ServerOptions{
		Instructions: opts.Instructions,
		PageSize:     opts.PageSize,
		//lint:ignore SA1019 log messages of servers behind utcpd reach clients on revisions before 2026-07-28 (peer.go)
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
		Logger:       log.With("component", "mcp-sdk"),
	}
	s.resourceOptions(serverOpts)
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, serverOpts)
	s.mcp.AddReceivingMiddleware(s.scopeMiddleware)
	if opts.CodeMode != nil {
		if err := s.addCodeMode(); err != nil {
			s.endLife()
			return nil, err
		}
	}
	if len(opts.NativeNames) > 0 {
		tools, err := backend.Tools(ctx)
		if err != nil {
			s.endLife()
			return nil, fmt.Errorf("mcpfront: listing the tools: %w", err)
		}
		if c := nativeCollisions(opts.NativeNames, tools, s.naming().Names(tools)); len(c) > 0 {
			s.endLife()
			return nil, fmt.Errorf("mcpfront: native names collide: %s", strings.Join(c, "; "))
		}
	}
	if err := s.sync(ctx); err != nil {
		s.endLife()
		return nil, err
	}
	s.initResources(ctx)
	s.cancelWatch = backend.Subscribe(s.markDirty)
	s.initHTTP()
	return s, nil
}

// markDirty notes a change of the tool set and starts a syncing
// goroutine unless one runs; it never blocks.
func (s *Server) markDirty() {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.closed {
		return
	}
	s.pending = true
	if s.syncing {
		return
	}
	s.syncing = true
	s.syncers.Add(1)
	go s.follow()
}

// follow syncs the tool set until no change is pending.
func (s *Server) follow() {
	defer s.syncers.Done()
	for {
		s.followMu.Lock()
		if !s.pending || s.closed {
			s.syncing = false
			s.followMu.Unlock()
			return
		}
		s.pending = false
		s.followMu.Unlock()
		ctx, cancel := context.WithTimeout(s.life, time.Minute)
		if err := s.sync(ctx); err != nil && s.life.Err() == nil {
			s.log.Warn("MCP front: reading the tool set failed; the last one keeps serving", "err", err)
		}
		s.syncCatalog(ctx)
		cancel()
	}
}

// Run serves one MCP session over t until the client disconnects or ctx
// ends. Every request goes to the SDK; "utcpd mcp" uses RunIO.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops following the Backend and closes every open session. It is
// idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancelWatch()
		s.closeResources()
		s.followMu.Lock()
		s.closed = true
		s.followMu.Unlock()
		s.endLife()
		s.syncers.Wait()
		s.inputs.closeAll()
		for ss := range s.mcp.Sessions() {
			_ = ss.Close()
		}
	})
	return nil
}

// normalOrigin lower-cases an origin and drops a trailing slash.
func normalOrigin(o string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(o)), "/")
}
