// Package codemode is utcpd's CodeMode: it runs a small Lua 5.1 program
// (github.com/yuin/gopher-lua) in a sandbox whose only bridges to the
// outside are the gateway's tools, so a model can chain several tool
// calls in one round trip.
//
// Runner is the engine, independent of HTTP: Run compiles and runs one
// program in a fresh Lua state and returns its result, its captured
// print lines and the tool calls it made, or a structured Error saying at
// which stage and why it failed. Handler mounts it on the REST front:
//
//	POST /v1/codemode             {"code", "timeout_ms", "max_tool_calls"} → {"result", "logs", "tool_calls"}
//	GET  /v1/codemode/interfaces  the Lua signatures and docs of the tools, for prompting (q, tags, limit)
//
// # The sandbox
//
// A program sees only: call_tool(name, args), search_tools(query, limit),
// list_tools(), json.encode / json.decode / json.null, print (captured),
// copies of the string, table and math libraries (string.dump removed;
// string.rep, byte, char, format, upper, lower, reverse and table.concat
// wrapped with size checks; find, match, gmatch and gsub reimplemented,
// see pattern.go; math.random
// with a per-run generator), and the safe base functions assert, error, ipairs, pairs,
// next, select, tonumber, tostring, type, unpack, pcall, xpcall,
// rawequal, rawget, rawset, getmetatable, setmetatable, _G and _VERSION.
// There is no os, io, debug, package, coroutine, channel, load,
// loadstring, loadfile, dofile, require, module, getfenv, setfenv,
// collectgarbage or newproxy. The string metatable is protected
// (getmetatable("") returns false). Every run gets a new Lua state that
// is closed afterwards, so nothing a program does (globals, changed
// library tables, metatables) is seen by another run.
//
// # Limits
//
// Each is checked by the package itself, not by the Lua runtime's
// goodwill; once a limit is hit the run is killed: every following Lua
// instruction raises again, so pcall cannot swallow it, and the run ends
// with that limit's error type whatever the program does.
//
//   - timeout: wall-clock deadline of the whole run, tool calls included
//     (the run's context; checked before every Lua instruction and passed
//     to every tool call).
//   - instruction_limit: the number of Lua VM instructions executed (a
//     true count: gopher-lua polls the state's context before each
//     instruction, and the run's context counts those polls). Time spent
//     inside one library function (a pattern match, table.sort) is one
//     instruction; the timeout bounds it.
//   - memory_limit: an estimate, not an allocator count (gopher-lua has
//     no allocator hook). Every string a library function or the ".."
//     operator would build is charged before it is built (".." is
//     compiled to a checked call); every tool result and json.decode
//     output is charged by its size; and the live data reachable from
//     the globals, the registry and every active frame's locals (with
//     the upvalues and metatables they reach) is measured by a walk with
//     a model calibrated against gopher-lua's real usage (tables are
//     costed from their real slice and map capacities). The walk runs
//     when charges would pass the limit and when the process's
//     allocation counter (read every 1024 instructions) says the run may
//     have grown past its headroom. The Lua registry (value stack) is
//     capped at MaxRegistrySlots and the call stack at MaxCallDepth
//     frames; a "stack overflow" is an ordinary, catchable
//     runtime_error, as in Lua, and a registry overflow that ends the run
//     is a memory_limit. Options.MaxTotalMemory caps all runs' estimates
//     together; a run that would pass it fails with memory_limit too.
//   - tool_call_limit: call_tool calls per run.
//
// Pattern matching (string.find, match, gmatch, gsub) uses the
// package's own Lua 5.1 matcher, which charges each step to the
// instruction budget and checks the deadline every 1024 steps, so a
// pathological pattern stops at the deadline. Another library function
// that runs long inside Go (table.sort without a comparator) cannot be
// interrupted: Run returns its timeout error at the deadline and the
// function finishes in the background, keeping its concurrency slot
// (Options.MaxConcurrent) until it does.
//
// # Tools inside a program
//
// call_tool("manual.tool", args) goes through gateway.CallTool with the
// caller's principal and front "codemode": the same guard chain,
// allowed_communication_protocols check, argument validation and audit
// record as every other front. It returns the tool's result converted to
// Lua; a failure raises a Lua error whose value is a table {code,
// message, tool, value} (value: the tool's own error value, if any) with
// a __tostring, so pcall can inspect it and an uncaught one reads
// "call_tool(manual.tool): code: message".
package codemode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/internal/tracing"
	"github.com/utcpd/utcpd/utcp"
)

// FrontName is the gateway.CallOptions.Front of every call a program
// makes (audit records and reviews show "codemode").
const FrontName = "codemode"

// ToolName is the name CodeMode is offered under as a tool (MCP front,
// LLM exports). It takes precedence over a registered tool of the same
// name on those fronts.
const ToolName = "codemode.run"

// Defaults and maxima of Options and Request.
const (
	// DefaultTimeout is a run's wall-clock deadline without timeout_ms.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxTimeout caps timeout_ms.
	DefaultMaxTimeout = 60 * time.Second
	// DefaultToolCalls is the call_tool budget without max_tool_calls.
	DefaultToolCalls = 50
	// DefaultMaxToolCalls caps max_tool_calls.
	DefaultMaxToolCalls = 500
	// DefaultMaxInstructions is the Lua VM instruction budget of a run.
	DefaultMaxInstructions = 100_000_000
	// DefaultMemoryLimit is the memory estimate's cap, in bytes.
	DefaultMemoryLimit = 64 << 20
	// DefaultMaxCodeBytes caps a program's source.
	DefaultMaxCodeBytes = 256 << 10
	// DefaultMaxLogBytes caps a run's captured print output.
	DefaultMaxLogBytes = 64 << 10
	// DefaultMaxCallDepth is the Lua call stack's size in frames.
	DefaultMaxCallDepth = 200
	// DefaultMaxRegistrySlots caps the Lua value stack, in slots.
	DefaultMaxRegistrySlots = 256 << 10
	// DefaultCallTimeout is each tool call's own deadline.
	DefaultCallTimeout = 30 * time.Second
	// MaxNesting bounds the syntactic nesting of a program (blocks and
	// expressions), so that compiling it cannot exhaust the Go stack.
	MaxNesting = 1000
)

// Tools is what a program's tools come from: *gateway.Gateway is one.
// Its methods must be safe for concurrent use.
type Tools interface {
	// CallTool calls a tool once, as gateway.Gateway.CallTool.
	CallTool(ctx context.Context, name string, args map[string]any, opts gateway.CallOptions) (*utcp.Result, error)
	// SearchTools returns up to limit tools matching query (limit <= 0:
	// all), as gateway.Gateway.SearchTools: within the caller's scope
	// (gateway.ScopeFrom(ctx)).
	SearchTools(ctx context.Context, query string, limit int, tags []string) []*utcp.Tool
	// ListTools returns every tool within the caller's scope.
	ListTools(ctx context.Context) []*utcp.Tool
}

// Options configure a Runner. Tools is required; zero fields take the
// Default* constants.
type Options struct {
	// Tools serves call_tool, search_tools and list_tools.
	Tools Tools
	// DefaultTimeout is a run's wall-clock deadline when the request sets
	// none; MaxTimeout caps the request's timeout_ms.
	DefaultTimeout, MaxTimeout time.Duration
	// DefaultToolCalls is the call_tool budget when the request sets
	// none; MaxToolCalls caps the request's max_tool_calls.
	DefaultToolCalls, MaxToolCalls int
	// MaxInstructions is the Lua instruction budget of a run.
	MaxInstructions int64
	// MemoryLimit is the memory estimate's cap, in bytes (see the package
	// documentation for what is measured).
	MemoryLimit int64
	// MaxCodeBytes caps a program's source.
	MaxCodeBytes int
	// MaxLogBytes caps the captured print output of a run; later lines
	// are dropped and a final line says so.
	MaxLogBytes int
	// MaxCallDepth is the Lua call stack's size in frames.
	MaxCallDepth int
	// MaxRegistrySlots caps the Lua value stack (registry) in slots.
	MaxRegistrySlots int
	// CallTimeout is each tool call's own deadline (the run's deadline
	// also applies).
	CallTimeout time.Duration
	// MaxConcurrent bounds the runs executing at once (default 4 ×
	// GOMAXPROCS); a run waits for a slot up to its own timeout.
	MaxConcurrent int
	// MaxTotalMemory caps the memory estimates of all the Runner's runs
	// together (default 4 × MemoryLimit); a run whose growth would take
	// the total over it fails with memory_limit.
	MaxTotalMemory int64
}

// Caller is who runs a program: the principal its tool calls carry.
type Caller struct {
	// Principal names the authenticated caller ("" anonymous).
	Principal string
}

// Request is one program to run.
type Request struct {
	// Code is the Lua source: a chunk whose return values are the result.
	Code string `json:"code"`
	// TimeoutMS is the run's wall-clock deadline in milliseconds (0: the
	// default; capped by Options.MaxTimeout).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// MaxToolCalls is the call_tool budget (0: the default; capped by
	// Options.MaxToolCalls).
	MaxToolCalls int `json:"max_tool_calls,omitempty"`
}

// Response is what a run gave. Exactly one of Result (on success; JSON
// null when the program returned nothing) and Error is meaningful.
type Response struct {
	// Result is the JSON of the program's return value: one value as it
	// is, several as an array, none as null.
	Result any `json:"result"`
	// Logs are the captured print lines.
	Logs []string `json:"logs"`
	// ToolCalls lists the program's call_tool calls, in order.
	ToolCalls []ToolCall `json:"tool_calls"`
	// Error is set when the program failed.
	Error *Error `json:"error,omitempty"`
}

// ToolCall is one call_tool call of a program.
type ToolCall struct {
	// Tool is the name the program called.
	Tool string `json:"tool"`
	// Arguments are the call's arguments when their JSON is at most 2
	// KiB (else omitted, and ArgumentsOmitted is set).
	Arguments map[string]any `json:"arguments,omitempty"`
	// ArgumentsOmitted is set when Arguments were too large to keep.
	ArgumentsOmitted bool `json:"arguments_omitted,omitempty"`
	// DurationMS is the call's duration in milliseconds.
	DurationMS float64 `json:"duration_ms"`
	// OK reports success.
	OK bool `json:"ok"`
	// Code is the failure's utcp code when OK is false.
	Code utcp.Code `json:"code,omitempty"`
}

// Stage says when a program failed.
type Stage string

// The stages.
const (
	// StageCompile is parsing and compiling the program.
	StageCompile Stage = "compile"
	// StageExecute is running it.
	StageExecute Stage = "execute"
)

// ErrorType classifies a program's failure.
type ErrorType string

// The error types.
const (
	// SyntaxError: the program does not parse or compile (or nests too
	// deeply).
	SyntaxError ErrorType = "syntax_error"
	// RuntimeError: an uncaught Lua error, a failed call_tool included,
	// or a result that has no JSON form.
	RuntimeError ErrorType = "runtime_error"
	// Timeout: the wall-clock deadline passed.
	Timeout ErrorType = "timeout"
	// InstructionLimit: the instruction budget ran out.
	InstructionLimit ErrorType = "instruction_limit"
	// MemoryLimit: the memory estimate or the value stack was over its cap.
	MemoryLimit ErrorType = "memory_limit"
	// ToolCallLimit: the program tried more call_tool calls than allowed.
	ToolCallLimit ErrorType = "tool_call_limit"
)

// Error is a program's failure.
type Error struct {
	// Stage is when it failed.
	Stage Stage `json:"stage"`
	// Type classifies the failure.
	Type ErrorType `json:"type"`
	// Message explains it ("codemode:LINE: ..." for Lua errors).
	Message string `json:"message"`
	// Logs are the print lines captured before the failure.
	Logs []string `json:"logs"`
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("codemode %s %s: %s", e.Stage, e.Type, e.Message) }

// Runner runs programs. It is safe for concurrent use.
type Runner struct {
	opts  Options
	sem   chan struct{}
	cache protoCache
	total atomic.Int64 // the runs' memory estimates together
}

// New returns a Runner for opts.
func New(opts Options) (*Runner, error) {
	if opts.Tools == nil {
		return nil, errors.New("codemode: Options.Tools is required")
	}
	if opts.DefaultTimeout < 0 || opts.MaxTimeout < 0 || opts.DefaultToolCalls < 0 || opts.MaxToolCalls < 0 ||
		opts.MaxInstructions < 0 || opts.MemoryLimit < 0 || opts.MaxCodeBytes < 0 || opts.MaxLogBytes < 0 ||
		opts.MaxCallDepth < 0 || opts.MaxRegistrySlots < 0 || opts.CallTimeout < 0 || opts.MaxConcurrent < 0 || opts.MaxTotalMemory < 0 {
		return nil, errors.New("codemode: limits must not be negative")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defD(&opts.MaxTimeout, DefaultMaxTimeout)
	defD(&opts.DefaultTimeout, min(DefaultTimeout, opts.MaxTimeout))
	defD(&opts.CallTimeout, DefaultCallTimeout)
	def(&opts.MaxToolCalls, DefaultMaxToolCalls)
	def(&opts.DefaultToolCalls, min(DefaultToolCalls, opts.MaxToolCalls))
	def(&opts.MaxCodeBytes, DefaultMaxCodeBytes)
	def(&opts.MaxLogBytes, DefaultMaxLogBytes)
	def(&opts.MaxCallDepth, DefaultMaxCallDepth)
	def(&opts.MaxRegistrySlots, DefaultMaxRegistrySlots)
	def(&opts.MaxConcurrent, 4*maxProcs())
	if opts.MaxInstructions == 0 {
		opts.MaxInstructions = DefaultMaxInstructions
	}
	if opts.MemoryLimit == 0 {
		opts.MemoryLimit = DefaultMemoryLimit
	}
	if opts.MaxTotalMemory == 0 {
		opts.MaxTotalMemory = 4 * opts.MemoryLimit
	}
	if opts.MaxTotalMemory < opts.MemoryLimit {
		return nil, errors.New("codemode: MaxTotalMemory must be at least MemoryLimit")
	}
	if opts.DefaultTimeout > opts.MaxTimeout || opts.DefaultToolCalls > opts.MaxToolCalls {
		return nil, errors.New("codemode: a default is above its maximum")
	}
	if opts.MaxRegistrySlots < 1024 {
		return nil, errors.New("codemode: MaxRegistrySlots must be at least 1024")
	}
	return &Runner{opts: opts, sem: make(chan struct{}, opts.MaxConcurrent)}, nil
}

// Options returns the Runner's effective options (defaults filled in).
func (r *Runner) Options() Options { return r.opts }

// Run compiles and runs req.Code as caller. A program's own failure
// (syntax, runtime, any limit) is a Response with Error set and a nil
// error; the error return is for requests that cannot run at all: an
// invalid request (utcp.CodeInvalidRequest, CodePayloadTooLarge), no run
// slot free within the run's timeout (CodeUnavailable), or ctx ending
// before a slot was free (CodeCanceled, CodeTimeout). A ctx that
// ends during the run ends it: its deadline as a timeout Error, its
// cancellation as CodeCanceled.
func (r *Runner) Run(ctx context.Context, caller Caller, req Request) (*Response, error) {
	if tracing.On() {
		var span trace.Span
		ctx, span = tracing.Start(ctx, tracing.OperationExecuteTool+" "+ToolName, trace.SpanKindInternal,
			tracing.GenAIOperationName.String(tracing.OperationExecuteTool), tracing.GenAIToolName.String(ToolName))
		defer tracing.End(span, nil)
	}
	timeout, calls, err := r.limits(req)
	if err != nil {
		return nil, err
	}
	proto, cerr := r.cache.get(req.Code)
	if cerr != nil {
		return &Response{Logs: []string{}, ToolCalls: []ToolCall{}, Error: cerr}, nil
	}
	select {
	case r.sem <- struct{}{}:
	default:
		wait := time.NewTimer(timeout)
		select {
		case r.sem <- struct{}{}:
			wait.Stop()
		case <-ctx.Done():
			wait.Stop()
			return nil, ctxError(ctx, "waiting for a free CodeMode slot")
		case <-wait.C:
			return nil, utcp.NewError(utcp.CodeUnavailable, "codemode: all %d run slots stayed busy for %v", cap(r.sem), timeout)
		}
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rn := newRun(r, runCtx, caller, calls)
	done := make(chan struct{})
	go func() {
		defer func() { <-r.sem }()
		defer close(done)
		rn.execute(proto)
	}()
	select {
	case <-done:
	case <-runCtx.Done():
		// The VM notices at its next instruction; a library function
		// running inside Go does not: give it a moment, then leave it.
		grace := time.NewTimer(250 * time.Millisecond)
		select {
		case <-done:
		case <-grace.C:
		}
		grace.Stop()
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, ctxError(ctx, "running the program")
	}
	return rn.response(), nil
}

// limits validates req and returns its timeout and tool-call budget.
func (r *Runner) limits(req Request) (time.Duration, int, error) {
	if req.Code == "" {
		return 0, 0, utcp.NewError(utcp.CodeInvalidRequest, "code is required")
	}
	if len(req.Code) > r.opts.MaxCodeBytes {
		return 0, 0, utcp.NewError(utcp.CodePayloadTooLarge, "code is %d bytes, above the limit of %d", len(req.Code), r.opts.MaxCodeBytes)
	}
	if req.TimeoutMS < 0 {
		return 0, 0, utcp.NewError(utcp.CodeInvalidRequest, "timeout_ms must not be negative")
	}
	if req.MaxToolCalls < 0 {
		return 0, 0, utcp.NewError(utcp.CodeInvalidRequest, "max_tool_calls must not be negative")
	}
	timeout := r.opts.DefaultTimeout
	if req.TimeoutMS > 0 {
		timeout = min(time.Duration(min(req.TimeoutMS, int64(r.opts.MaxTimeout/time.Millisecond)+1))*time.Millisecond, r.opts.MaxTimeout)
	}
	calls := r.opts.DefaultToolCalls
	if req.MaxToolCalls > 0 {
		calls = min(req.MaxToolCalls, r.opts.MaxToolCalls)
	}
	return timeout, calls, nil
}

func ctxError(ctx context.Context, doing string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return utcp.NewError(utcp.CodeTimeout, "codemode: deadline passed while %s", doing)
	}
	return utcp.NewError(utcp.CodeCanceled, "codemode: canceled while %s", doing)
}

// logBuffer collects print lines up to a byte cap.
type logBuffer struct {
	mu      sync.Mutex
	lines   []string
	size    int
	max     int
	dropped int
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 || b.size+len(line) > b.max {
		b.dropped++
		return
	}
	b.size += len(line)
	b.lines = append(b.lines, line)
}

func (b *logBuffer) snapshot() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, len(b.lines), len(b.lines)+1)
	copy(out, b.lines)
	if b.dropped > 0 {
		out = append(out, fmt.Sprintf("[%d more line(s) dropped: the log is capped at %d bytes]", b.dropped, b.max))
	}
	return out
}
