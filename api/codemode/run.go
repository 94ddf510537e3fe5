package codemode

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/utcpd/utcpd/utcp"
)

func maxProcs() int { return runtime.GOMAXPROCS(0) }

// killReason is why a run was stopped by a limit.
type killReason int

const (
	alive killReason = iota
	killInstructions
	killMemory
	killToolCalls
)

// closedChan is returned by hook.Done once a run is killed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// hook is the context of a run's Lua state. gopher-lua calls Done before
// every VM instruction (mainLoopWithContext), so Done counts
// instructions, looks at the process's allocation counter every
// allocCheckEvery instructions to schedule the memory walks and, once the
// run is killed, returns a closed channel so that every further
// instruction raises. It is used by the run's Lua goroutine only.
type hook struct {
	context.Context // the run's deadline context
	done            <-chan struct{}
	rn              *run
	steps           int64 // instructions (and pattern-matching steps) so far
	next            int64 // steps at which slow runs
	maxSteps        int64
	nextWalk        int64 // no allocation-triggered walk before
}

// Done counts one instruction.
func (h *hook) Done() <-chan struct{} {
	h.steps++
	if h.steps < h.next {
		return h.done
	}
	return h.slow()
}

func (h *hook) slow() <-chan struct{} {
	rn := h.rn
	if rn.killed != alive {
		h.next = 0
		return closedChan
	}
	if h.steps > h.maxSteps {
		rn.kill(killInstructions, fmt.Sprintf("the program ran more than %d Lua instructions", h.maxSteps))
		h.next = 0
		return closedChan
	}
	if h.steps >= h.nextWalk && rn.needWalk() {
		if !rn.walk() {
			h.next = 0
			return closedChan
		}
	}
	h.next = min(h.maxSteps+1, h.steps+allocCheckEvery)
	return h.done
}

// spend charges n steps of work done inside Go (pattern matching) to the
// instruction budget and checks the deadline: it raises once the run is
// killed, over its budget or past its deadline.
func (h *hook) spend(L *lua.LState, n int64) {
	h.steps += n
	rn := h.rn
	if rn.killed == alive && h.steps > h.maxSteps {
		rn.kill(killInstructions, fmt.Sprintf("the program ran more than %d Lua instructions (pattern matching steps included)", h.maxSteps))
	}
	if rn.killed != alive {
		L.RaiseError("%s", rn.killMsg)
	}
	if h.Context.Err() != nil {
		L.RaiseError("the run's deadline passed")
	}
}

// Err is the kill message once killed, else the deadline's error.
func (h *hook) Err() error {
	if h.rn.killed != alive {
		return errors.New(h.rn.killMsg)
	}
	if err := h.Context.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return errors.New("the run's deadline passed")
		}
		return err
	}
	return nil
}

// run is one program's execution.
type run struct {
	r        *Runner
	ctx      context.Context // the run's deadline context, for tool calls
	caller   Caller
	maxCalls int
	logs     logBuffer

	mu       sync.Mutex // guards the fields below, read by Run
	calls    []ToolCall
	result   any
	failure  *Error
	finished bool

	// Used by the Lua goroutine only.
	L        *lua.LState
	hook     *hook
	killed   killReason
	killMsg  string
	nCalls   int
	memLimit int64
	memEst   int64 // bytes reachable at the last walk
	fresh    int64 // bytes charged since the last walk
	reported int64 // what the Runner's total holds for this run
	// allocsAtWalk is the process's allocation counter at the last walk.
	allocsAtWalk uint64
	nodes        int64 // values toGo may still visit
	toolErrMt    *lua.LTable
	null         *lua.LUserData
	rng          *rand.Rand
}

func newRun(r *Runner, ctx context.Context, caller Caller, maxCalls int) *run {
	rn := &run{r: r, ctx: ctx, caller: caller, maxCalls: maxCalls, memLimit: r.opts.MemoryLimit, calls: []ToolCall{}}
	rn.logs.max = r.opts.MaxLogBytes
	rn.hook = &hook{Context: ctx, done: ctx.Done(), rn: rn, maxSteps: r.opts.MaxInstructions}
	rn.hook.next = min(rn.hook.maxSteps+1, allocCheckEvery)
	rn.allocsAtWalk = processAllocs()
	return rn
}

// kill stops the run for reason; the first reason wins.
func (rn *run) kill(reason killReason, msg string) {
	if rn.killed == alive {
		rn.killed, rn.killMsg = reason, msg
	}
	rn.hook.next = 0 // every further instruction takes the slow path and raises
}

// execute runs proto in a new state and records the outcome.
func (rn *run) execute(proto *lua.FunctionProto) {
	var result any
	var failure *Error
	defer func() {
		if v := recover(); v != nil {
			failure = &Error{Stage: StageExecute, Type: RuntimeError, Message: fmt.Sprintf("internal error: %v", v)}
		}
		rn.mu.Lock()
		rn.result, rn.failure, rn.finished = result, failure, true
		rn.mu.Unlock()
	}()
	L := lua.NewState(lua.Options{
		SkipOpenLibs:    true,
		CallStackSize:   rn.r.opts.MaxCallDepth,
		RegistrySize:    256,
		RegistryMaxSize: rn.r.opts.MaxRegistrySlots,
		// gopher-lua grows the registry by this many slots at a time,
		// copying it each time: a small step makes filling it quadratic.
		RegistryGrowStep: 8192,
		// The auto-growing call stack (MinimizeStackMemory) loses track
		// of its segments when pcall unwinds a stack overflow; the fixed
		// one does not.
		MinimizeStackMemory: false,
	})
	defer L.Close()
	defer rn.release()
	rn.L = L
	cat := rn.openLibs(L)
	L.SetContext(rn.hook)
	L.Push(L.NewFunctionFromProto(proto))
	L.Push(cat)
	err := L.PCall(1, lua.MultRet, nil)
	if err != nil {
		failure = rn.classify(L, err)
		return
	}
	n := L.GetTop()
	vals := make([]lua.LValue, n)
	for i := range n {
		vals[i] = L.Get(i + 1)
	}
	L.RemoveContext()
	var cerr error
	switch n {
	case 0:
	case 1:
		result, cerr = rn.toGo(vals[0], 0)
	default:
		arr := make([]any, n)
		for i, v := range vals {
			if arr[i], cerr = rn.toGo(v, 0); cerr != nil {
				break
			}
		}
		result = arr
	}
	if cerr != nil {
		result = nil
		failure = &Error{Stage: StageExecute, Type: RuntimeError, Message: "the result cannot be encoded as JSON: " + cerr.Error()}
	}
}

// classify turns a PCall error into the run's Error.
func (rn *run) classify(L *lua.LState, err error) *Error {
	e := &Error{Stage: StageExecute, Type: RuntimeError}
	switch rn.killed {
	case killInstructions:
		e.Type, e.Message = InstructionLimit, rn.killMsg
		return e
	case killMemory:
		e.Type, e.Message = MemoryLimit, rn.killMsg
		return e
	case killToolCalls:
		e.Type, e.Message = ToolCallLimit, rn.killMsg
		return e
	}
	if rn.ctx.Err() != nil {
		e.Type, e.Message = Timeout, "the run's deadline passed"
		return e
	}
	e.Message = rn.errorText(L, err)
	switch {
	case strings.Contains(e.Message, "registry overflow"):
		e.Type = MemoryLimit
		e.Message = fmt.Sprintf("the Lua value stack is over its limit of %d slots (%s)", rn.r.opts.MaxRegistrySlots, e.Message)
	case strings.Contains(e.Message, "callstack overflow"):
		e.Message = "stack overflow"
	}
	return e
}

// errorText renders an error value: a string as it is, a call_tool
// error as "call_tool(tool): code: message".
func (rn *run) errorText(L *lua.LState, err error) string {
	var ae *lua.ApiError
	if !errors.As(err, &ae) || ae.Object == nil {
		return err.Error()
	}
	switch v := ae.Object.(type) {
	case lua.LString:
		return string(v)
	case *lua.LTable:
		if v.Metatable == rn.toolErrMt && rn.toolErrMt != nil {
			return toolErrText(v)
		}
		if m, ok := v.RawGetString("message").(lua.LString); ok {
			return string(m)
		}
		return "error object is a table"
	default:
		return v.String()
	}
}

// response is the outcome so far: a run still executing (abandoned in a
// Go function past its deadline) is a timeout.
func (rn *run) response() *Response {
	logs := rn.logs.snapshot()
	rn.mu.Lock()
	defer rn.mu.Unlock()
	calls := make([]ToolCall, len(rn.calls))
	copy(calls, rn.calls)
	res := &Response{Logs: logs, ToolCalls: calls}
	switch {
	case !rn.finished:
		res.Error = &Error{Stage: StageExecute, Type: Timeout, Message: "the run's deadline passed while a library function was running"}
	case rn.failure != nil:
		f := *rn.failure
		res.Error = &f
	default:
		res.Result = rn.result
	}
	if res.Error != nil {
		res.Error.Logs = logs
		res.Logs = logs
	}
	return res
}

// record appends a tool call.
func (rn *run) record(c ToolCall) {
	rn.mu.Lock()
	rn.calls = append(rn.calls, c)
	rn.mu.Unlock()
}

// remaining is the time left before the run's deadline.
func (rn *run) remaining() time.Duration {
	if d, ok := rn.ctx.Deadline(); ok {
		return time.Until(d)
	}
	return rn.r.opts.CallTimeout
}

// codeOf is err's utcp code, internal when it has none.
func codeOf(err error) utcp.Code {
	if c := utcp.CodeOf(err); c != "" {
		return c
	}
	return utcp.CodeInternal
}
