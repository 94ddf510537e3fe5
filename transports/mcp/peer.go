//lint:file-ignore SA1019 sampling, roots and logging are what MCP servers behind utcpd use; deprecated only from protocol 2026-07-28 on (SEP-2577), still served to clients on earlier revisions

package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Server-to-client requests. A backend session declares sampling (with
// tools), elicitation (form and URL mode) and roots, so that a server
// offers what it offers only to such clients. A request the server
// raises — sampling/createMessage, elicitation/create, roots/list — and
// each notifications/message log is routed to the caller of the call it
// belongs to (transports.PeerOf that call's context), found as follows:
//
//   - Streamable HTTP: the server sends what belongs to a call on the
//     event stream that answers the call's POST; the stream's tap stamps
//     each such message with the call (_meta["utcpd/call"], an
//     unguessable token, removed before the message is passed on). What
//     arrives on the stream of a request that is no call belongs to no
//     call; what arrives on the standalone GET stream (meant for what is
//     unrelated to any call, but servers send call-related requests
//     there too) is treated as stdio's.
//   - Protocol 2026-07-28 (input-required results, SEP-2322): the request
//     is part of the call's own result, so the call is known.
//   - stdio, the legacy HTTP+SSE transport and the standalone stream
//     carry nothing that ties a request to a call: it goes to the one
//     call in flight on the session, and is declined while none or
//     several are.
//
// A request that belongs to no call, whose call's caller cannot answer
// (REST, CodeMode, LLM adapters), or that cannot be told apart, is
// declined: JSON-RPC error -32001 "utcpd: <method> declined: <why>". A
// log that reaches no caller is logged at debug level. A call's result
// waits (up to logDrain) for the logs the server sent before it, so that
// they reach the caller first.

// Names of the server requests and notifications routed to a caller.
const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
	methodLog           = "notifications/message"
	methodElicitDone    = "notifications/elicitation/complete"
)

// urlElicitationTTL bounds how long a session remembers which caller
// asked a URL-mode elicitation, for its notifications/elicitation/complete;
// maxURLElicitations caps how many it remembers.
const (
	urlElicitationTTL  = 30 * time.Minute
	maxURLElicitations = 1024
)

// urlElicitation is the caller of a URL-mode elicitation.
type urlElicitation struct {
	peer    transports.Peer
	expires time.Time
}

// codeDeclined is the JSON-RPC error code of a declined server request
// (one of the implementation-defined codes; -32601 would be replaced by
// the SDK's own "method not found").
const codeDeclined = -32001

// metaCall and metaUnrouted are the _meta keys the HTTP tap stamps
// routed messages with: the call's token, or why the message belongs to
// no call.
const (
	metaCall     = "utcpd/call"
	metaUnrouted = "utcpd/unrouted"
)

// logDrain bounds how long a call's result waits for the log messages
// the server sent before it to be passed on.
const logDrain = 2 * time.Second

// peerLogTimeout bounds passing one log message on to a caller.
const peerLogTimeout = 2 * time.Second

// inflight is one call in flight on a session.
type inflight struct {
	token string
	tool  string
	peer  transports.Peer // nil: the caller cannot answer
	ctx   context.Context // the call's; ends with it
}

type inflightKey struct{}

// calls holds every call in flight by token, for the stamped messages.
var calls sync.Map // token → *inflight

// peerState is what a session knows of its calls in flight and of the
// log messages seen and passed on.
type peerState struct {
	mu       sync.Mutex
	inflight map[*inflight]struct{}
	logsSeen uint64 // log notifications the taps saw
	logsDone uint64 // log notifications handled
	logCond  *sync.Cond
	// urls are the callers of URL-mode elicitations by elicitationId,
	// told of their completion.
	urls map[string]urlElicitation
}

func (ps *peerState) init() {
	if ps.inflight == nil {
		ps.inflight = map[*inflight]struct{}{}
		ps.logCond = sync.NewCond(&ps.mu)
	}
}

// beginCall registers a call in flight on sess and returns the context
// to make it with and the function that ends it.
func (ss *session) beginCall(ctx context.Context, tool string) (context.Context, func()) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	e := &inflight{token: hex.EncodeToString(b[:]), tool: tool, peer: transports.PeerOf(ctx), ctx: ctx}
	calls.Store(e.token, e)
	ss.peers.mu.Lock()
	ss.peers.init()
	ss.peers.inflight[e] = struct{}{}
	ss.peers.mu.Unlock()
	return context.WithValue(ctx, inflightKey{}, e), func() {
		calls.Delete(e.token)
		ss.peers.mu.Lock()
		delete(ss.peers.inflight, e)
		ss.peers.mu.Unlock()
	}
}

// drainLogs waits, up to logDrain or ctx's end, until every log message
// the session's taps saw so far has been handled.
func (ss *session) drainLogs(ctx context.Context) {
	ps := &ss.peers
	ps.mu.Lock()
	ps.init()
	target := ps.logsSeen
	if ps.logsDone >= target {
		ps.mu.Unlock()
		return
	}
	ps.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, logDrain)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		ps.mu.Lock()
		ps.logCond.Broadcast()
		ps.mu.Unlock()
	})
	defer stop()
	ps.mu.Lock()
	for ps.logsDone < target && ctx.Err() == nil {
		ps.logCond.Wait()
	}
	ps.mu.Unlock()
}

func (ss *session) logHandled() {
	ss.peers.mu.Lock()
	ss.peers.init()
	ss.peers.logsDone++
	ss.peers.logCond.Broadcast()
	ss.peers.mu.Unlock()
}

// tapMessage sees every message from the server in wire order (both
// taps): progress for the calls, and the count of log messages.
func (ss *session) tapMessage(msg []byte) {
	ss.onMessage(msg)
	if bytes.Contains(msg, []byte(methodLog)) {
		var n struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(msg, &n) == nil && n.Method == methodLog {
			ss.peers.mu.Lock()
			ss.peers.init()
			ss.peers.logsSeen++
			ss.peers.mu.Unlock()
		}
	}
}

// stamper returns the rewrite of the HTTP tap of one response to req: it
// marks the routed messages on that stream with the call they belong to,
// or as belonging to none; nil for a stream that says nothing (the legacy
// transport's one stream).
func (ss *session) stamper(req *http.Request) func([]byte) []byte {
	e, _ := req.Context().Value(inflightKey{}).(*inflight)
	var unrouted string
	switch {
	case e != nil:
	case req.Method == http.MethodGet:
		// The legacy transport's one stream, or the standalone stream,
		// which the spec says SHOULD carry nothing related to a call but
		// on which servers do send what a call asks (server-everything
		// asks for roots there): the one call in flight.
		return nil
	default:
		unrouted = "it came while the server answered a request that is no tool call"
	}
	return func(data []byte) []byte {
		if !bytes.Contains(data, []byte(`"method"`)) {
			return nil
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		var method string
		if json.Unmarshal(m["method"], &method) != nil || !routed(method) {
			return nil
		}
		var params map[string]json.RawMessage
		if len(m["params"]) > 0 && json.Unmarshal(m["params"], &params) != nil {
			return nil
		}
		if params == nil {
			params = map[string]json.RawMessage{}
		}
		var meta map[string]any
		if raw := params["_meta"]; len(raw) > 0 && json.Unmarshal(raw, &meta) != nil {
			return nil
		}
		if meta == nil {
			meta = map[string]any{}
		}
		delete(meta, metaCall)
		delete(meta, metaUnrouted)
		if e != nil {
			meta[metaCall] = e.token
		} else {
			meta[metaUnrouted] = unrouted
		}
		var err error
		if params["_meta"], err = json.Marshal(meta); err != nil {
			return nil
		}
		if m["params"], err = json.Marshal(params); err != nil {
			return nil
		}
		out, err := json.Marshal(m)
		if err != nil {
			return nil
		}
		return out
	}
}

func routed(method string) bool {
	switch method {
	case methodCreateMessage, methodElicit, methodListRoots, methodLog, methodElicitDone:
		return true
	}
	return false
}

// route finds the call a server request belongs to, taking (and
// removing) the tap's stamp from meta. It returns the call, or why there
// is none.
func (sess *session) route(ctx context.Context, meta sdk.Meta) (*inflight, string) {
	token, _ := meta[metaCall].(string)
	unrouted, _ := meta[metaUnrouted].(string)
	delete(meta, metaCall)
	delete(meta, metaUnrouted)
	if e, ok := ctx.Value(inflightKey{}).(*inflight); ok {
		return e, "" // an input-required result of the call itself
	}
	if token != "" {
		if v, ok := calls.Load(token); ok {
			return v.(*inflight), ""
		}
		return nil, "the tool call it belongs to has ended"
	}
	if unrouted != "" {
		return nil, unrouted
	}
	sess.peers.mu.Lock()
	defer sess.peers.mu.Unlock()
	switch len(sess.peers.inflight) {
	case 0:
		return nil, "it came outside any tool call"
	case 1:
		for e := range sess.peers.inflight {
			return e, ""
		}
	}
	return nil, fmt.Sprintf("%d tool calls are in flight on this %s session and nothing in the request says which one it belongs to", len(sess.peers.inflight), sess.kind)
}

// declined is the answer to a server request nobody can answer.
func declined(method, why string) error {
	return &jsonrpc.Error{Code: codeDeclined, Message: fmt.Sprintf("utcpd: %s declined: %s", method, why)}
}

// ask routes one server request to its caller and returns the caller's
// answer decoded into res.
func (sess *session) ask(ctx context.Context, method string, params sdk.Params, res any) error {
	s := sess.s
	meta := params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	e, why := sess.route(ctx, meta)
	if len(meta) == 0 {
		params.SetMeta(nil)
	} else {
		params.SetMeta(meta)
	}
	if e == nil {
		s.log.Debug("mcp: a server request was declined", "method", method, "reason", why)
		return declined(method, why)
	}
	if e.peer == nil {
		return declined(method, fmt.Sprintf("the caller of %s cannot answer it (only MCP clients calling through utcpd's MCP front can; REST, CodeMode and LLM-adapter callers cannot)", e.tool))
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	var out json.RawMessage
	switch method {
	case methodCreateMessage:
		out, err = e.peer.CreateMessage(pctx, raw)
	case methodElicit:
		sess.rememberURL(params, e.peer)
		out, err = e.peer.Elicit(pctx, raw)
	case methodListRoots:
		out, err = e.peer.ListRoots(pctx, raw)
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			return we
		}
		var ue *utcp.Error
		if errors.Is(err, transports.ErrPeerDeclined) && errors.As(err, &ue) {
			return declined(method, ue.Message)
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("utcpd: %s: the caller's answer failed: %v", method, err)}
	}
	if err := json.Unmarshal(out, res); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("utcpd: %s: the caller's answer cannot be read: %v", method, err)}
	}
	return nil
}

// peerOptions makes the client of a session declare sampling,
// elicitation and roots and route those requests, and log messages, to
// the callers.
func (s *server) peerOptions(opts *sdk.ClientOptions, sess *session) {
	if opts.Capabilities == nil {
		opts.Capabilities = &sdk.ClientCapabilities{}
	}
	opts.Capabilities.RootsV2 = &sdk.RootCapabilities{}
	opts.Capabilities.Sampling = &sdk.SamplingCapabilities{Tools: &sdk.SamplingToolsCapabilities{}}
	opts.Capabilities.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}, URL: &sdk.URLElicitationCapabilities{}}
	opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *sdk.CreateMessageWithToolsRequest) (*sdk.CreateMessageWithToolsResult, error) {
		res := new(sdk.CreateMessageWithToolsResult)
		if err := sess.ask(ctx, methodCreateMessage, req.Params, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	opts.ElicitationHandler = func(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		res := new(sdk.ElicitResult)
		if err := sess.ask(ctx, methodElicit, req.Params, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	opts.LoggingMessageHandler = sess.onLog
	opts.ElicitationCompleteHandler = sess.onElicitationComplete
}

// rememberURL notes the caller of a URL-mode elicitation, for its
// completion notice.
func (sess *session) rememberURL(params sdk.Params, peer transports.Peer) {
	ep, ok := params.(*sdk.ElicitParams)
	if !ok || ep.Mode != "url" || ep.ElicitationID == "" {
		return
	}
	if _, ok := peer.(transports.ElicitationCompleter); !ok {
		return
	}
	ps := &sess.peers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	now := time.Now()
	if ps.urls == nil {
		ps.urls = map[string]urlElicitation{}
	}
	if len(ps.urls) >= maxURLElicitations {
		for id, u := range ps.urls {
			if now.After(u.expires) {
				delete(ps.urls, id)
			}
		}
		if len(ps.urls) >= maxURLElicitations {
			return // the completion notice will find the call in flight, if any
		}
	}
	ps.urls[ep.ElicitationID] = urlElicitation{peer: peer, expires: now.Add(urlElicitationTTL)}
}

// onElicitationComplete tells the caller that asked a URL-mode
// elicitation that it completed: the caller remembered for its
// elicitationId, else the caller of the call the notice belongs to.
func (sess *session) onElicitationComplete(ctx context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
	s := sess.s
	if req.Params == nil {
		return
	}
	meta := req.Params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	var peer transports.Peer
	ps := &sess.peers
	ps.mu.Lock()
	if u, ok := ps.urls[req.Params.ElicitationID]; ok {
		delete(ps.urls, req.Params.ElicitationID)
		if time.Now().Before(u.expires) {
			peer = u.peer
		}
	}
	ps.mu.Unlock()
	e, why := sess.route(ctx, meta)
	if len(meta) == 0 {
		req.Params.SetMeta(nil)
	} else {
		req.Params.SetMeta(meta)
	}
	if peer == nil && e != nil {
		peer = e.peer
	}
	done, ok := peer.(transports.ElicitationCompleter)
	if !ok {
		if why == "" {
			why = "its caller cannot take it"
		}
		s.log.Debug("mcp: an elicitation completion reached no caller", "reason", why, "elicitation_id", req.Params.ElicitationID)
		return
	}
	raw, err := json.Marshal(req.Params)
	if err != nil {
		return
	}
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), peerLogTimeout)
	defer cancel()
	if err := done.ElicitationComplete(nctx, raw); err != nil {
		s.log.Debug("mcp: passing an elicitation completion on failed", "err", err)
	}
}

// rootsMiddleware answers roots/list from the caller (the SDK's client
// would answer from its own, empty, list).
func (sess *session) rootsMiddleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method != methodListRoots {
			return next(ctx, method, req)
		}
		params, _ := req.GetParams().(*sdk.ListRootsParams)
		if params == nil {
			params = &sdk.ListRootsParams{}
		}
		res := new(sdk.ListRootsResult)
		if err := sess.ask(ctx, methodListRoots, params, res); err != nil {
			return nil, err
		}
		if res.Roots == nil {
			res.Roots = []*sdk.Root{}
		}
		return res, nil
	}
}

// onLog passes one log message on to the caller of its call.
func (sess *session) onLog(ctx context.Context, req *sdk.LoggingMessageRequest) {
	s := sess.s
	defer sess.logHandled()
	meta := req.Params.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	e, why := sess.route(ctx, meta)
	if len(meta) == 0 {
		req.Params.SetMeta(nil)
	} else {
		req.Params.SetMeta(meta)
	}
	if e == nil || e.peer == nil {
		if e != nil {
			why = "its caller cannot take it"
		}
		s.log.Debug("mcp: a server log message reached no caller", "reason", why, "level", req.Params.Level, "logger", req.Params.Logger)
		return
	}
	raw, err := json.Marshal(req.Params)
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(e.ctx, peerLogTimeout)
	defer cancel()
	if err := e.peer.Log(lctx, raw); err != nil {
		s.log.Debug("mcp: passing a log message on failed", "err", err)
	}
}

// statelessVersion is the first protocol revision in which the log level
// is a request's (_meta), not the session's (logging/setLevel).
const statelessVersion = "2026-07-28"

// logs reports whether the session's server logs, and whether it takes
// the level per request.
func (sess *session) logs() (logging, perRequest bool) {
	res := sess.cs.InitializeResult()
	if res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil {
		return false, false
	}
	return true, res.ProtocolVersion >= statelessVersion
}

// logLevelMeta asks, on protocol 2026-07-28 and later, for every log
// message of one call (the level is a request's there).
func (sess *session) logLevelMeta(params *sdk.CallToolParams) {
	if logging, perRequest := sess.logs(); logging && perRequest {
		meta := params.GetMeta()
		if meta == nil {
			meta = map[string]any{}
		}
		meta[sdk.MetaKeyLogLevel] = "debug"
		params.SetMeta(meta)
	}
}

// enableLogging asks a server that logs for every level, so that each
// caller's own level decides (the MCP front filters).
func (s *server) enableLogging(ctx context.Context, sess *session) {
	if logging, perRequest := sess.logs(); !logging || perRequest {
		return
	}
	if err := sess.cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "debug"}); err != nil {
		s.log.Debug("mcp: logging/setLevel failed", "err", err)
	}
}
