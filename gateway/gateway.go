// Package gateway is the UTCP client API as a service: it ties the tool
// registry, the transports, the guard chain, variables and auth together.
//
// Every front (REST, MCP, LLM adapters) calls tools through one Gateway, so
// the same guard, protocol check, argument validation and post-processing
// apply whichever front a call arrives through. A Gateway is safe for
// concurrent use; registering or removing a manual never blocks calls in
// flight.
//
// Every manual has a health (Health, Statuses): ready, discovering, failed
// or degraded, with its last error and next retry. A registration with
// RegisterOptions.KeepFailed that fails is kept as a failed manual, and
// failed and degraded manuals are retried in the background with a capped
// exponential backoff (Options.Retry) until Close.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/gateway/audit"
	"github.com/utcpd/utcpd/gateway/ratelimit"
	"github.com/utcpd/utcpd/guard"
	"github.com/utcpd/utcpd/guard/review"
	"github.com/utcpd/utcpd/manuals"
	"github.com/utcpd/utcpd/registry"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/transports/oauth2"
	"github.com/utcpd/utcpd/utcp"
)

// Options configure a Gateway. Transports is required; every other field
// has a default: an allow-all guard, variables from the environment.
type Options struct {
	// Transports maps call_template_type to transport. Required: New
	// fails without it (a daemon passes transports.Default, a test a
	// registry of its own), so no gateway reaches a global by accident.
	Transports *transports.Registry
	// TransportConfig holds per-type configuration handed to Info.New.
	TransportConfig map[string]json.RawMessage
	// Guard decides every call before dispatch; default guard.AllowAll.
	Guard guard.Guard
	// Variables resolves ${VAR} references; default: the environment only.
	Variables *manuals.Resolver
	// PostProcessors are applied, in order, to every result and event.
	PostProcessors []manuals.PostProcessor
	// TagWeight and DescriptionWeight tune search_tools (defaults 3 and 1).
	TagWeight, DescriptionWeight float64
	// SearchStrategy is the tool_search_strategy_type search_tools ranks
	// with: registry.StrategyBM25 ("bm25"), or the default
	// tag_and_description_word_match for "" and any type the registry
	// does not implement (the configuration warned about it).
	SearchStrategy string
	// Tokens caches oauth2 tokens for every transport; default a cache
	// over a pooled HTTP client (oauth2.NewTokenCache(nil)).
	Tokens transports.TokenSource
	// OnCall, when set, is called once after every call with its record
	// (metrics, audit). It must be fast and must not block.
	OnCall func(*CallRecord)
	// Audit, when set, receives the audit record of every call, whichever
	// front it came through. Append must not block (an *audit.Writer
	// queues it for a background writer).
	Audit Auditor
	// Reviews, when set, is the review queue that Guard's chain uses as
	// its approver (guard.WithApprover): each call then carries a
	// review.Ticket (front, whether to wait, dispatch deadline), a call
	// that claimed an approved review records its outcome there, and a
	// review's fate maps to its error (guard_review_timeout,
	// review_pending with the review_id, a *review.ParkedError).
	Reviews *review.Queue
	// Store persists manuals registered with Source "api"; nil persists
	// nothing. Restore registers what it holds.
	Store registry.Store
	// Logger receives registration warnings and transport logs.
	Logger *slog.Logger
	// MaxToolsPerManual caps the tools one manual may list (setting
	// max_tools_per_manual); 0 means transports.DefaultMaxToolsPerManual,
	// < 0 no cap. A manual over it is not registered.
	MaxToolsPerManual int
	// MaxManualBytes caps the bytes of a manual (or OpenAPI document, or
	// discovery output) read for a discovery (setting max_manual_bytes);
	// 0 means transports.DefaultMaxManualBytes, < 0 no cap beyond each
	// transport's own.
	MaxManualBytes int64
	// Pins keeps the pinned tool definitions and their changes (pin.go);
	// nil uses Store when it is a registry.PinStore, else memory.
	Pins registry.PinStore
	// PinDefault is the pin mode of a manual whose template sets none
	// ("off", "warn" or "hold"; setting gateway.pin_default); "" means
	// hold for manuals fetched over the network and warn for the local
	// types (cli, text, file). Another value fails New.
	PinDefault string
	// Retry tunes the background retries of failed and degraded manuals
	// (health.go); the zero value retries with DefaultBackoff.
	Retry RetryOptions
	// RateLimits, when set, admits or refuses each tool call, resource
	// read and prompt get after its checks and before dispatch
	// (gateway.rate_limits): a refused call fails with rate_limited, is
	// audited with that outcome and never reaches its backend. nil limits
	// nothing.
	RateLimits *ratelimit.Limiter
	// PrincipalScope, when set, returns the scope of a principal (the
	// daemon's: its API key's), for the calls the gateway makes on a
	// caller's behalf without the caller's context: an approved review
	// dispatched by the daemon (DispatchApproved) is resolved within the
	// scope of the principal who asked for it. nil: such calls are not
	// scoped. It must be fast and safe for concurrent use.
	PrincipalScope func(principal string) *Scope
}

// CallRecord describes one finished call, for metrics and audit.
type CallRecord struct {
	Tool      string // as requested
	Qualified string // resolved name, "" when unresolved
	Protocol  string
	Principal string
	Verdict   guard.Verdict
	Code      utcp.Code // "" on success
	Err       error
	Start     time.Time
	Duration  time.Duration
	Stream    bool
	// Front is where the call came in (CallOptions.Front).
	Front string
	// Toolset is the toolset the call came through (CallOptions.Toolset).
	Toolset string
	// Steps are the guard chain's decisions (recorded when Audit is set).
	Steps []guard.Step
	// Dispatched reports that the call reached its tool's transport.
	Dispatched bool
	// ReviewID names the call's review, "" if none.
	ReviewID string
	// Kind is guard.ActionResource or guard.ActionPrompt for an MCP
	// resources/read or prompts/get (Tool and Qualified are then the
	// resource's URI or the prompt's name), "" for a tool call.
	Kind string

	trace guard.Trace
	// span is the call's execute_tool span and dispatch its transport
	// call's, nil while tracing is off (finish ends them).
	span, dispatch trace.Span
}

// Auditor receives audit records. *audit.Writer is one.
type Auditor interface {
	// Append takes one record; it must return at once.
	Append(audit.Record)
}

// Gateway is the UTCP client as a service. Create it with New.
type Gateway struct {
	opts    Options
	log     *slog.Logger
	types   *transports.Registry
	reg     *registry.Registry
	guard   guard.Guard
	vars    atomic.Pointer[manuals.Resolver]
	varsGen atomic.Uint64
	post    []manuals.PostProcessor
	tokens  transports.TokenSource
	store   registry.Store
	pins    registry.PinStore
	pinMu   sync.Mutex // serialises pin checks and decisions (pin.go)

	// life is cancelled by Close; background work (rediscovery) runs on
	// it and is waited for by Close.
	life       context.Context
	stop       context.CancelFunc
	background sync.WaitGroup

	mu         sync.Mutex
	transports map[string]transports.Counted
	closed     bool
	regLock    sync.Mutex         // serialises name checks and registry updates
	watch      watchers[struct{}] // Subscribe's functions (watch.go)
	resWatch   resWatchers        // WatchResources's functions (resources.go)
	followOnce sync.Once          // Restore starts following the store once (follow.go)
	health     healthTable
	sets       toolsetTable // toolsets (toolsets.go)
}

// New returns a Gateway. It fails when opts.Transports is nil.
func New(opts Options) (*Gateway, error) {
	if opts.Transports == nil {
		return nil, errors.New("gateway.New: Options.Transports is required (pass transports.Default or a registry of your own)")
	}
	if opts.PinDefault != "" && !registry.ValidPinMode(opts.PinDefault) {
		return nil, fmt.Errorf("gateway.New: pin default %q: use \"off\", \"warn\" or \"hold\"", opts.PinDefault)
	}
	g := &Gateway{opts: opts, transports: map[string]transports.Counted{}}
	g.life, g.stop = context.WithCancel(context.Background())
	g.log = opts.Logger
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	g.types = opts.Transports
	g.guard = opts.Guard
	if g.guard == nil {
		g.guard = guard.AllowAll
	}
	var regOpts []registry.Option
	if opts.TagWeight != 0 || opts.DescriptionWeight != 0 {
		regOpts = append(regOpts, registry.WithSearchWeights(opts.TagWeight, opts.DescriptionWeight))
	}
	if opts.SearchStrategy != "" && registry.KnownStrategy(opts.SearchStrategy) {
		regOpts = append(regOpts, registry.WithSearchStrategy(opts.SearchStrategy))
	}
	g.reg = registry.New(regOpts...)
	vars := opts.Variables
	if vars == nil {
		var err error
		if vars, err = manuals.NewResolver(nil, manuals.ResolverOptions{}); err != nil {
			return nil, err
		}
	}
	g.vars.Store(vars)
	g.post = opts.PostProcessors
	g.store = opts.Store
	g.pins = opts.Pins
	if g.pins == nil {
		if ps, ok := opts.Store.(registry.PinStore); ok {
			g.pins = ps
		} else {
			g.pins = &registry.MemPins{}
		}
	}
	g.tokens = opts.Tokens
	if g.tokens == nil {
		g.tokens = oauth2.NewTokenCache(nil)
	}
	return g, nil
}

// Registry returns the tool registry (read-only use).
func (g *Gateway) Registry() *registry.Registry { return g.reg }

// SetVariables replaces the variable resolver (on config reload). Tool
// templates are substituted again on their next call, and the failed
// manuals whose last failure was variable_not_found are retried at once.
func (g *Gateway) SetVariables(r *manuals.Resolver) {
	g.vars.Store(r)
	g.varsGen.Add(1)
	g.retryVariables()
}

// transport returns the shared Transport of type typ, wrapped by
// transports.Count (which counts the manuals' registrations), creating it
// on first use.
func (g *Gateway) transport(typ string) (transports.Counted, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, utcp.NewError(utcp.CodeUnavailable, "gateway is closed")
	}
	if tr, ok := g.transports[typ]; ok {
		return tr, nil
	}
	info, ok := g.types.Lookup(typ)
	if !ok {
		return nil, utcp.NewError(utcp.CodeInvalidTemplate, "unknown call_template_type %q", typ)
	}
	tr, err := info.New(transports.Options{
		Config:          g.opts.TransportConfig[typ],
		Logger:          g.log.With("transport", typ),
		Tokens:          g.tokens,
		OnToolsChanged:  g.toolsChanged,
		OnResourceEvent: g.resourceEvent,
	})
	if err != nil {
		return nil, fmt.Errorf("starting %s transport: %w", typ, err)
	}
	counted := transports.Count(typ, tr)
	g.transports[typ] = counted
	return counted, nil
}

// toolsChanged is the transports' OnToolsChanged callback: a backend
// announced a new tool list, so the manual is discovered again in the
// background (calls in flight finish on the old tools).
func (g *Gateway) toolsChanged(manual string) {
	g.goBackground(func() {
		ctx, cancel := context.WithTimeout(g.life, time.Minute)
		defer cancel()
		if _, err := g.RefreshManual(ctx, manual); err != nil {
			g.log.Warn("refreshing manual after its tools changed", "manual", manual, "err", err)
		}
	})
}

// goBackground runs fn in a goroutine that Close waits for, unless the
// gateway is already closed.
func (g *Gateway) goBackground(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return
	}
	g.background.Add(1)
	go func() {
		defer g.background.Done()
		fn()
	}()
}

// Close deregisters every manual and closes every transport. It ends and
// waits for the gateway's background work (rediscovery, refreshes,
// retirements of replaced or removed manuals). Calls in flight are not
// waited for; cancel them first for a graceful stop.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	g.stop()
	g.background.Wait() // no Add after closed is set
	g.mu.Lock()
	trs := g.transports
	g.transports = map[string]transports.Counted{}
	g.mu.Unlock()
	var errs []error
	for _, tr := range trs {
		errs = append(errs, tr.Close())
	}
	return errors.Join(errs...)
}
