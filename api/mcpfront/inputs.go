//lint:file-ignore SA1019 sampling, roots and logging are what MCP servers behind utcpd use; deprecated only from protocol 2026-07-28 on (SEP-2577), and on that revision asked as input requests

package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/gateway"
	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Input-required results (SEP-2322) for clients on protocol 2026-07-28,
// which has no server-to-client requests. When such a client calls a
// tool and declares sampling, elicitation or roots, the backend call
// runs detached from the request: a question the MCP server behind
// utcpd asks during the call (sampling/createMessage, elicitation/create,
// roots/list) ends the request with an input-required result
//
//	{"content": [], "resultType": "input_required",
//	 "inputRequests": {"q1": {"method": "elicitation/create", "params": {...}}},
//	 "requestState": "<token>"}
//
// while the backend call stays parked, its question pending. The client
// retries the tools/call (same name) with "inputResponses" {"q1":
// <ElicitResult>} and the "requestState" echoed: the answers go to the
// server as the answers of its requests, and the retry waits for the
// next questions or the call's result. A parked call is bound to the
// principal that made it (another principal's retry is told the state is
// unknown), counted (Options.MaxInputCalls per principal: a question
// beyond is declined), and cancelled when no retry comes within
// Options.InputTimeout or when the retrying request goes away; the
// call's own deadline (CallTimeout) bounds it as a whole.

const (
	// DefaultInputTimeout is how long a call parked on an input-required
	// result waits for the client's retry when Options.InputTimeout is 0.
	DefaultInputTimeout = 2 * time.Minute
	// DefaultMaxInputCalls caps the calls of one principal parked on
	// input-required results when Options.MaxInputCalls is 0.
	DefaultMaxInputCalls = 16
)

// inputCalls are the calls parked on input-required results.
type inputCalls struct {
	mu     sync.Mutex
	calls  map[string]*inputCall // requestState → call
	counts map[string]int        // principal → parked calls
	closed bool
}

// inputCall is one backend call of a 2026-07-28 client, detached from the
// requests that carry it.
type inputCall struct {
	s         *Server
	token     string
	principal string
	tool      string // the MCP name called
	caps      *mcp.ClientCapabilities
	cancel    context.CancelFunc
	done      chan struct{} // closed when the call ended: res, err set
	closing   chan struct{} // closed when the front closes: questions are declined
	closeOnce sync.Once
	res       *mcp.CallToolResult
	err       error

	mu        sync.Mutex
	questions map[string]*question // pending, by id
	next      int
	asked     chan struct{}      // a question arrived (capacity 1)
	counted   bool               // counted in inputCalls.counts
	round     context.Context    // the request carrying the call now, nil between requests
	roundSS   *mcp.ServerSession // its session
	timer     *time.Timer        // the retry window while no request carries the call
}

// question is one server request waiting for the client's input.
type question struct {
	req    mcp.InputRequest
	answer chan json.RawMessage // capacity 1
}

// wantsInputs reports whether a call of req is served with input-required
// results: a 2026-07-28 client that declares sampling, elicitation or
// roots (one that declares none is answered as before: its server
// requests are declined).
func wantsInputs(req *mcp.CallToolRequest) (*mcp.ClientCapabilities, bool) {
	if req.Session == nil || req.ProtocolVersion() < peerVersionLimit {
		return nil, false
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Sampling == nil && caps.Elicitation == nil && caps.RootsV2 == nil {
		return nil, false
	}
	return caps, true
}

// callWithInputs serves a tools/call of a 2026-07-28 client that can be
// asked (wantsInputs): a retry (requestState set) resumes its parked
// call, anything else starts one.
func (s *Server) callWithInputs(ctx context.Context, req *mcp.CallToolRequest, caps *mcp.ClientCapabilities, qualified string, check *outputCheck) (*mcp.CallToolResult, error) {
	principal := s.principal(req)
	if state := req.Params.RequestState; state != "" {
		c, err := s.inputs.resume(state, principal, req.Params.Name)
		if err != nil {
			return nil, err
		}
		return c.await(ctx, req.Session, req.Params.InputResponses)
	}
	args, err := decodeArguments(req.Params.Arguments)
	if err != nil {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidArguments, err.Error(), nil)
	}
	c := &inputCall{
		s: s, token: rand.Text(), principal: principal, tool: req.Params.Name, caps: caps,
		done: make(chan struct{}), closing: make(chan struct{}), questions: map[string]*question{}, asked: make(chan struct{}, 1),
	}
	// The call keeps the request's values (principal, tracing) but not its
	// cancellation: it outlives the request when it asks for input.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	if !s.inputs.add(c) {
		cancel()
		return nil, rpcError(jsonrpc.CodeInternalError, utcp.CodeUnavailable, "the MCP front is closing", nil)
	}
	opts := gateway.CallOptions{Principal: principal, Front: FrontName, Timeout: s.opts.CallTimeout}
	cctx = transports.WithPeer(cctx, &inputPeer{c: c})
	go func() {
		defer close(c.done)
		defer cancel()
		if t := s.opts.Tracker; t != nil {
			t.CallStarted()
			defer t.CallFinished()
		}
		c.res, c.err = s.callWith(cctx, req, qualified, args, opts, check)
	}()
	return c.await(ctx, req.Session, nil)
}

// add registers c; false once the front is closed.
func (ic *inputCalls) add(c *inputCall) bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.closed {
		return false
	}
	if ic.calls == nil {
		ic.calls, ic.counts = map[string]*inputCall{}, map[string]int{}
	}
	ic.calls[c.token] = c
	return true
}

// remove forgets c and its count.
func (ic *inputCalls) remove(c *inputCall) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.calls[c.token] == c {
		delete(ic.calls, c.token)
	}
	c.mu.Lock()
	counted := c.counted
	c.counted = false
	c.mu.Unlock()
	if counted {
		if ic.counts[c.principal]--; ic.counts[c.principal] <= 0 {
			delete(ic.counts, c.principal)
		}
	}
}

// count counts c as parked; false when its principal has max parked.
func (ic *inputCalls) count(c *inputCall, max int) bool {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted {
		return true
	}
	if ic.counts[c.principal] >= max {
		return false
	}
	ic.counts[c.principal]++
	c.counted = true
	return true
}

// resume finds the parked call of a retry.
func (ic *inputCalls) resume(state, principal, tool string) (*inputCall, error) {
	ic.mu.Lock()
	c := ic.calls[state]
	ic.mu.Unlock()
	if c == nil || c.principal != principal || c.tool != tool {
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidRequest,
			"requestState is unknown or expired: the call it belonged to has ended (a call waits "+
				"for its retry for a limited time); call the tool again without it", nil)
	}
	return c, nil
}

// closeWait bounds how long Server.Close waits for the parked calls to
// end once their questions are declined.
const closeWait = 5 * time.Second

// closeAll ends every parked call (Server.Close). Their questions,
// pending and future, are declined, which the MCP servers behind get as
// the answers of their requests; the calls then end as the servers end
// them, and closeAll waits for that up to closeWait before it cancels
// what is left. So no server is left with a request unanswered when the
// gateway then closes its sessions: a go-sdk server whose tool waits for
// an answer that never comes cannot even close its session.
func (ic *inputCalls) closeAll() {
	ic.mu.Lock()
	ic.closed = true
	calls := make([]*inputCall, 0, len(ic.calls))
	for _, c := range ic.calls {
		calls = append(calls, c)
	}
	ic.mu.Unlock()
	for _, c := range calls {
		c.closeOnce.Do(func() { close(c.closing) })
	}
	deadline := time.NewTimer(closeWait)
	defer deadline.Stop()
	for _, c := range calls {
		select {
		case <-c.done:
		case <-deadline.C:
		}
		c.cancel()
	}
}

// deliver hands the client's answers to the questions they answer;
// answers to no pending question are ignored.
func (c *inputCall) deliver(responses mcp.InputResponseMap) error {
	for id, r := range responses {
		raw, err := json.Marshal(r)
		if err != nil {
			return rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidRequest, fmt.Sprintf("inputResponses[%q] cannot be encoded: %v", id, err), nil)
		}
		c.mu.Lock()
		q := c.questions[id]
		delete(c.questions, id)
		c.mu.Unlock()
		if q != nil {
			q.answer <- raw
		}
	}
	return nil
}

// await carries the call in one request: it hands the retry's answers
// (responses) to their questions, then waits for the call's result,
// or for questions, which it answers as an input-required result (the
// call stays parked for the retry), or for the request to end, which
// cancels the call.
func (c *inputCall) await(ctx context.Context, ss *mcp.ServerSession, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	if c.round != nil {
		c.mu.Unlock()
		return nil, rpcError(jsonrpc.CodeInvalidParams, utcp.CodeInvalidRequest,
			"another request is retrying this call (requestState) now; retry once it answered", nil)
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.round, c.roundSS = ctx, ss
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.round, c.roundSS = nil, nil
		c.mu.Unlock()
	}()
	if err := c.deliver(responses); err != nil {
		c.park() // the call waits for a proper retry
		return nil, err
	}
	for {
		c.mu.Lock()
		pending := len(c.questions)
		c.mu.Unlock()
		if pending > 0 {
			select {
			case <-c.done:
				c.s.inputs.remove(c)
				return c.res, c.err
			default:
			}
			return c.park(), nil
		}
		select {
		case <-c.done:
			c.s.inputs.remove(c)
			return c.res, c.err
		case <-c.asked:
		case <-ctx.Done():
			c.cancel()
			<-c.done
			c.s.inputs.remove(c)
			return nil, ctx.Err()
		}
	}
}

// park is the input-required result asking every pending question; the
// retry window starts.
func (c *inputCall) park() *mcp.CallToolResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	reqs := make(mcp.InputRequestMap, len(c.questions))
	for id, q := range c.questions {
		reqs[id] = q.req
	}
	c.timer = time.AfterFunc(c.s.inputTimeout(), func() {
		c.s.log.Info("MCP front: a call waiting for the client's input was not retried in time; cancelled", "tool", c.tool)
		c.cancel()
		<-c.done
		c.s.inputs.remove(c)
	})
	return &mcp.CallToolResult{Content: []mcp.Content{}, InputRequests: reqs, RequestState: c.token}
}

// ask parks one server request as a question of the call and waits for
// the client's answer (or for the server's request, or the call, to
// end).
func (c *inputCall) ask(ctx context.Context, ir mcp.InputRequest) (json.RawMessage, error) {
	if !c.s.inputs.count(c, c.s.maxInputCalls()) {
		return nil, refuse("the MCP client calling the tool already has %d calls waiting for its input (the front's limit)", c.s.maxInputCalls())
	}
	select {
	case <-c.closing:
		return nil, errFrontClosing
	default:
	}
	q := &question{req: ir, answer: make(chan json.RawMessage, 1)}
	c.mu.Lock()
	c.next++
	id := "q" + strconv.Itoa(c.next)
	c.questions[id] = q
	c.mu.Unlock()
	select {
	case c.asked <- struct{}{}:
	default:
	}
	forget := func() {
		c.mu.Lock()
		delete(c.questions, id)
		c.mu.Unlock()
	}
	select {
	case raw := <-q.answer:
		return raw, nil
	case <-c.closing:
		forget()
		return nil, errFrontClosing
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// errFrontClosing declines the questions of the calls parked when the
// front closes.
var errFrontClosing = refuse("utcpd's MCP front is closing; the MCP client that called the tool cannot be asked any more")

func (s *Server) inputTimeout() time.Duration {
	if s.opts.InputTimeout > 0 {
		return s.opts.InputTimeout
	}
	return DefaultInputTimeout
}

func (s *Server) maxInputCalls() int {
	if s.opts.MaxInputCalls > 0 {
		return s.opts.MaxInputCalls
	}
	return DefaultMaxInputCalls
}

// inputPeer is the Peer of a call of a 2026-07-28 client: server
// requests become the call's questions, checked against the client's
// capabilities as sessionPeer checks them.
type inputPeer struct{ c *inputCall }

// CreateMessage asks for sampling as an input request.
func (p *inputPeer) CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	withTools, err := checkSampling(p.c.caps, params)
	if err != nil {
		return nil, err
	}
	var ir mcp.InputRequest
	if withTools {
		var cp mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(params, &cp); err != nil {
			return nil, fmt.Errorf("the sampling request cannot be read: %w", err)
		}
		ir = &cp
	} else {
		var cp mcp.CreateMessageParams
		if err := json.Unmarshal(params, &cp); err != nil {
			return nil, fmt.Errorf("the sampling request cannot be read: %w", err)
		}
		ir = &cp
	}
	return p.c.ask(ctx, ir)
}

// Elicit asks the user as an input request.
func (p *inputPeer) Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	var ep mcp.ElicitParams
	if err := json.Unmarshal(params, &ep); err != nil {
		return nil, fmt.Errorf("the elicitation request cannot be read: %w", err)
	}
	if err := checkElicit(p.c.caps, &ep); err != nil {
		return nil, err
	}
	return p.c.ask(ctx, &ep)
}

// ListRoots asks for the roots as an input request.
func (p *inputPeer) ListRoots(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	if p.c.caps.RootsV2 == nil {
		return nil, refuse("the MCP client calling the tool did not declare the roots capability")
	}
	var lp mcp.ListRootsParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &lp); err != nil {
			return nil, fmt.Errorf("the roots request cannot be read: %w", err)
		}
	}
	return p.c.ask(ctx, &lp)
}

// Log passes a log message on through the request carrying the call now,
// if any (between requests it is dropped).
func (p *inputPeer) Log(ctx context.Context, params json.RawMessage) error {
	var lp mcp.LoggingMessageParams
	if err := json.Unmarshal(params, &lp); err != nil {
		return fmt.Errorf("the log message cannot be read: %w", err)
	}
	p.c.mu.Lock()
	round, ss := p.c.round, p.c.roundSS
	p.c.mu.Unlock()
	if round == nil || ss == nil {
		return errors.New("no request carries the call now (it waits for the client's retry)")
	}
	rctx, cancel := context.WithCancel(round)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return ss.Log(rctx, &lp)
}

// ElicitationComplete passes a URL-mode elicitation's completion on
// through the request carrying the call now, if any.
func (p *inputPeer) ElicitationComplete(ctx context.Context, params json.RawMessage) error {
	var cp mcp.ElicitationCompleteParams
	if err := json.Unmarshal(params, &cp); err != nil {
		return fmt.Errorf("the elicitation completion cannot be read: %w", err)
	}
	p.c.mu.Lock()
	round, ss := p.c.round, p.c.roundSS
	p.c.mu.Unlock()
	if round == nil || ss == nil {
		return errors.New("no request carries the call now")
	}
	return ss.NotifyElicitationComplete(round, &cp)
}
