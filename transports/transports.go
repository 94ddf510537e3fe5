// Package transports defines how utcpd reaches tools: the Transport
// interface every call_template_type implements, the Info a transport
// package registers, and the Registry that maps call_template_type to Info.
//
// This package is the contract and nothing else: the interfaces (Transport,
// Streamer, Stream and the optional Keyer, PrefixedNames, Endpointer, Checker,
// Resourcer), Info
// and Registry, template and configuration decoding (DecodeTemplate,
// DecodeTemplateOf, SpecOf, DecodeConfig), the registration counter Count,
// the sentinel errors and the discovery limits.
//
// Each transport lives in its own package under transports/ (http, cli,
// text, ...), registers itself from init with MustRegister, and passes the
// conformance suite in transports/transporttest. What transports share
// besides the contract is in transports/internal/ (httpclient, httpcall,
// envelope, socket, session, procenv), transports/oauth2 (the token cache
// the gateway shares), internal/jsonx and internal/eventstream.
package transports

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/utcpd/utcpd/utcp"
)

// Transport carries tool calls for one call_template_type. utcpd creates
// one per type and shares it across manuals, so it must be safe for
// concurrent use. Long-lived resources (sessions, subprocesses, pooled
// connections) belong to the Transport: Release lets go of one manual's,
// Close of all. A Transport does not count registrations: the gateway
// (and the conformance suite) use it wrapped by Count, which does, and
// which refuses the calls of a manual whose last registration ended.
type Transport interface {
	// RegisterManual fetches and returns the manual tmpl points at. tmpl
	// is parsed (Spec set) and its variables are substituted. Transports
	// whose templates cannot carry a manual return ErrUnsupported.
	RegisterManual(ctx context.Context, tmpl *utcp.CallTemplate) (*utcp.Manual, error)
	// CallTool invokes one tool once and waits for its whole result. A
	// failure the tool itself reports is a *utcp.ToolError; any other
	// error means the call could not be carried.
	CallTool(ctx context.Context, call *utcp.Call) (*utcp.Result, error)
	// Release lets go of what the transport keeps for tmpl's manual
	// (sessions, connections, subprocesses, cached descriptions). Count
	// calls it once when the manual's last registration ends (the
	// DeregisterManual balancing it), and after a RegisterManual that
	// failed while the manual held no registration and none other was
	// under way, to drop what the failed attempt left behind. It is never
	// called after Close and must be harmless for a manual the transport
	// holds nothing for. Calls in flight on the manual may fail.
	// Transports without per-manual state return nil.
	Release(ctx context.Context, tmpl *utcp.CallTemplate) error
	// Close releases everything the Transport holds. It is idempotent.
	Close() error
}

// Streamer is implemented by transports that deliver partial results.
type Streamer interface {
	// CallToolStream starts one call. Events arrive through the Stream as
	// the backend produces them. Cancelling ctx ends the call.
	CallToolStream(ctx context.Context, call *utcp.Call) (Stream, error)
}

// Stream yields the events of one streamed call.
type Stream interface {
	// Recv returns the next event, io.EOF after the last one, or the
	// error that ended the stream (a *utcp.ToolError for a tool failure).
	Recv() (*utcp.Event, error)
	// Close ends the call early if it is still running. It is idempotent.
	Close() error
}

// Options configure a new Transport.
type Options struct {
	// Config is this type's section of the daemon configuration, if any.
	Config json.RawMessage
	// Logger is already tagged with transport=<type>. Never nil.
	Logger *slog.Logger
	// Tokens obtains and caches oauth2 access tokens. Transports that
	// apply auth use it for auth_type oauth2; nil means a default cache
	// private to the transport.
	Tokens TokenSource
	// OnToolsChanged, when set, is called by transports whose backends
	// announce changes to their tool lists (MCP
	// notifications/tools/list_changed, a restarted MCP server) with the
	// name of the manual whose tools changed. The receiver should
	// re-register that manual (RegisterManual with its current template)
	// to pick up the new list. Calls are debounced per manual, come from
	// the transport's own goroutines (never while it holds a lock, so
	// the callback may call back into the transport), and stop before
	// Close returns. Nil means nobody listens; transports that cannot
	// detect changes never call it.
	OnToolsChanged func(manual string)
	// OnResourceEvent, when set, is called by transports that are a
	// Resourcer with each notification a backend sends about its
	// resources and prompts (list changes, updates of subscribed
	// resources), from the transport's own goroutines, never while it
	// holds a lock. It must not block. Nil means nobody listens.
	OnResourceEvent func(ev ResourceEvent)
}

// TokenSource hands out oauth2 client-credentials access tokens. It is
// safe for concurrent use.
type TokenSource interface {
	// Token returns a bearer token for auth (auth_type oauth2), from the
	// cache while it is valid, fetching a new one otherwise.
	Token(ctx context.Context, auth *utcp.Auth) (string, error)
	// Invalidate drops the cached token for auth, after the backend
	// answered 401 with it.
	Invalidate(auth *utcp.Auth)
}

// Info describes one transport type to a Registry.
type Info struct {
	// Type is the call_template_type, lower case, e.g. "http".
	Type string
	// ParseTemplate decodes and validates one call template of this type
	// and returns it with Spec set. Fields it does not know are listed in
	// Unknown, never fatal. Failures wrap ErrInvalidTemplate. Most
	// transports implement it with DecodeTemplate.
	ParseTemplate func(raw json.RawMessage) (utcp.CallTemplate, error)
	// New creates the Transport. It must not start work that outlives Close.
	New func(opts Options) (Transport, error)
	// Template is a zero value of the transport's template spec (a pointer
	// to its Template struct). It lists the type's fields for "did you
	// mean" hints and documentation checks, and describes them in the
	// configuration's JSON Schema (utcpd config schema): each field's
	// JSON type is its Go type's, its description its doc comment, and a
	// field tagged jsonschema:"required" must be present and not empty
	// ("", [] or {}) or ParseTemplate fails.
	Template any
}

// Sentinel errors transports wrap with %w. Each is a *utcp.Error, so
// utcp.CodeOf reports its code.
var (
	// ErrInvalidTemplate: a call template cannot be used.
	ErrInvalidTemplate = &utcp.Error{Code: utcp.CodeInvalidTemplate, Message: "invalid call template"}
	// ErrToolNotFound: the backend does not know the tool.
	ErrToolNotFound = &utcp.Error{Code: utcp.CodeToolNotFound, Message: "tool not found"}
	// ErrUnsupported: the transport cannot do this (discovery, streaming).
	ErrUnsupported = &utcp.Error{Code: utcp.CodeUnsupported, Message: "not supported by this transport"}
	// ErrNotRegistered: the call names a manual the transport does not hold.
	ErrNotRegistered = &utcp.Error{Code: utcp.CodeManualNotFound, Message: "manual not registered with this transport"}
	// ErrTooLarge: a response or output exceeded its cap.
	ErrTooLarge = &utcp.Error{Code: utcp.CodePayloadTooLarge, Message: "response too large"}
)

// SingleEvent returns a Stream that yields ev once and then io.EOF. It
// turns a non-streaming result into a stream.
func SingleEvent(ev *utcp.Event) Stream { return &single{ev: ev} }

type single struct {
	ev   *utcp.Event
	done bool
}

func (s *single) Recv() (*utcp.Event, error) {
	if s.done {
		return nil, io.EOF
	}
	s.done = true
	return s.ev, nil
}

func (s *single) Close() error { s.done = true; return nil }
