//lint:file-ignore SA1019 sampling, roots and logging are what MCP servers behind utcpd use; deprecated only from protocol 2026-07-28 on (SEP-2577), still served to clients on earlier revisions

package mcpfront

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/utcpd/utcpd/transports"
	"github.com/utcpd/utcpd/utcp"
)

// Server-to-client requests: each tools/call carries the client session
// that made it as the call's transports.Peer, so that an MCP server
// behind utcpd that asks, while it serves the call, for sampling
// (sampling/createMessage), elicitation (elicitation/create, form or URL
// mode) or roots (roots/list), or sends log messages
// (notifications/message), asks this client: the request goes to the
// client on the tools/call's own stream, and the client's answer, or its
// JSON-RPC error, goes back to the server as it came. A client that did
// not declare the capability (sampling with tools needs sampling.tools,
// a URL-mode elicitation elicitation.url) is not asked: the server's
// request is declined with a message saying so. Log messages are passed
// on at or above the level the client set with logging/setLevel (none
// before it does). A client on protocol 2026-07-28, which has no
// server-to-client requests, is asked with input-required results
// instead (SEP-2322, inputs.go) when it declares any of the
// capabilities; when it declares none, its server requests are declined
// as here.

// peerVersionLimit is the first protocol revision without server-to-client
// requests.
const peerVersionLimit = "2026-07-28"

// sessionPeer is one tools/call's client session as the call's Peer.
type sessionPeer struct {
	ctx     context.Context // the tools/call's, so that requests go on its stream
	ss      *mcp.ServerSession
	version string                  // the call's protocol revision
	clcaps  *mcp.ClientCapabilities // the calling client's, nil if it sent none
}

// withPeer returns ctx carrying req's session as the peer of the call.
func withPeer(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Session == nil {
		return transports.WithPeer(ctx, nil)
	}
	return transports.WithPeer(ctx, &sessionPeer{ctx: ctx, ss: req.Session, version: req.ProtocolVersion(), clcaps: req.ClientCapabilities()})
}

func refuse(format string, args ...any) error {
	return &utcp.Error{Code: utcp.CodeUnsupported, Message: fmt.Sprintf(format, args...), Err: transports.ErrPeerDeclined}
}

// caps returns the client's capabilities, or why it cannot be asked.
func (p *sessionPeer) caps() (*mcp.ClientCapabilities, error) {
	if p.version == "" && p.ss.InitializeParams() == nil {
		return nil, refuse("the MCP client calling the tool has not initialized its session")
	}
	if p.version >= peerVersionLimit {
		// Only a client that declared none of the capabilities gets here
		// (the others are asked with input-required results, inputs.go).
		return nil, refuse("the MCP client calling the tool speaks protocol %s and declared none of sampling, elicitation and roots", p.version)
	}
	if p.clcaps == nil {
		return &mcp.ClientCapabilities{}, nil
	}
	return p.clcaps, nil
}

// checkSampling reports why a client with caps cannot be asked the
// sampling request params, and whether it is asked with tools.
func checkSampling(caps *mcp.ClientCapabilities, params json.RawMessage) (withTools bool, err error) {
	if caps.Sampling == nil {
		return false, refuse("the MCP client calling the tool did not declare the sampling capability")
	}
	var probe struct {
		Tools []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(params, &probe)
	if len(probe.Tools) > 0 && caps.Sampling.Tools == nil {
		return false, refuse("the request offers tools and the MCP client calling the tool did not declare sampling.tools")
	}
	return caps.Sampling.Tools != nil, nil
}

// checkElicit reports why a client with caps cannot be asked ep.
func checkElicit(caps *mcp.ClientCapabilities, ep *mcp.ElicitParams) error {
	el := caps.Elicitation
	switch {
	case el == nil:
		return refuse("the MCP client calling the tool did not declare the elicitation capability")
	case ep.Mode == "url" && el.URL == nil:
		return refuse("the MCP client calling the tool did not declare URL-mode elicitation (elicitation.url)")
	case ep.Mode != "url" && el.Form == nil && el.URL != nil:
		return refuse("the MCP client calling the tool did not declare form-mode elicitation (elicitation.form)")
	}
	return nil
}

// join is the context of one request to the client: the tools/call's
// (values, cancellation), also cancelled when the server's request ends.
// Once it has ended it no longer relates to the tools/call (unrelated
// below), so that the notifications/cancelled go-sdk then sends for the
// request goes on the session's standalone stream, which the client
// still reads, not on the stream of the call, which a client that
// cancelled the call has closed.
func (p *sessionPeer) join(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(p.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return unrelatedOnceDone{rctx}, func() { stop(); cancel() }
}

// unrelatedOnceDone is a context that, once done, hides the go-sdk's
// record of the incoming request it was made in (the streamable
// transport writes a message whose context names no request on the
// standalone SSE stream). The SDK keeps that record under an unexported
// key type, recognised by name; TestServerRequestsCancelOverHTTP fails
// should the SDK rename it.
type unrelatedOnceDone struct{ context.Context }

// sdkRequestKeyPkg and sdkRequestKeyName name the go-sdk's key type.
const sdkRequestKeyPkg, sdkRequestKeyName = "github.com/modelcontextprotocol/go-sdk/mcp", "idContextKey"

// Value is the parent's value, except for the SDK's request record once
// the context is done.
func (c unrelatedOnceDone) Value(key any) any {
	if c.Err() != nil {
		if t := reflect.TypeOf(key); t != nil && t.Name() == sdkRequestKeyName && t.PkgPath() == sdkRequestKeyPkg {
			return nil
		}
	}
	return c.Context.Value(key)
}

// ElicitationComplete tells the client that a URL-mode elicitation it
// was asked has completed: on the call's stream while the call runs,
// else (or when that stream is already closed) on the session's
// standalone stream.
func (p *sessionPeer) ElicitationComplete(ctx context.Context, params json.RawMessage) error {
	var cp mcp.ElicitationCompleteParams
	if err := json.Unmarshal(params, &cp); err != nil {
		return fmt.Errorf("the elicitation completion cannot be read: %w", err)
	}
	if p.ctx.Err() == nil {
		rctx, done := p.join(ctx)
		err := p.ss.NotifyElicitationComplete(rctx, &cp)
		done()
		if err == nil {
			return nil
		}
	}
	// ctx is the backend session's: it names no request of the front.
	return p.ss.NotifyElicitationComplete(context.WithoutCancel(ctx), &cp)
}

// CreateMessage asks the client's model.
func (p *sessionPeer) CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	caps, err := p.caps()
	if err != nil {
		return nil, err
	}
	withTools, err := checkSampling(caps, params)
	if err != nil {
		return nil, err
	}
	rctx, done := p.join(ctx)
	defer done()
	if withTools {
		var cp mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(params, &cp); err != nil {
			return nil, fmt.Errorf("the sampling request cannot be read: %w", err)
		}
		res, err := p.ss.CreateMessageWithTools(rctx, &cp)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
	var cp mcp.CreateMessageParams
	if err := json.Unmarshal(params, &cp); err != nil {
		return nil, fmt.Errorf("the sampling request cannot be read: %w", err)
	}
	res, err := p.ss.CreateMessage(rctx, &cp)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Elicit asks the client's user.
func (p *sessionPeer) Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	caps, err := p.caps()
	if err != nil {
		return nil, err
	}
	var ep mcp.ElicitParams
	if err := json.Unmarshal(params, &ep); err != nil {
		return nil, fmt.Errorf("the elicitation request cannot be read: %w", err)
	}
	if err := checkElicit(caps, &ep); err != nil {
		return nil, err
	}
	rctx, done := p.join(ctx)
	defer done()
	res, err := p.ss.Elicit(rctx, &ep)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// ListRoots asks the client for its roots.
func (p *sessionPeer) ListRoots(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	caps, err := p.caps()
	if err != nil {
		return nil, err
	}
	if caps.RootsV2 == nil {
		return nil, refuse("the MCP client calling the tool did not declare the roots capability")
	}
	var lp mcp.ListRootsParams
	if len(params) > 0 {
		if err := json.Unmarshal(params, &lp); err != nil {
			return nil, fmt.Errorf("the roots request cannot be read: %w", err)
		}
	}
	rctx, done := p.join(ctx)
	defer done()
	res, err := p.ss.ListRoots(rctx, &lp)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// Log passes one log message on, at or above the client's level.
func (p *sessionPeer) Log(ctx context.Context, params json.RawMessage) error {
	var lp mcp.LoggingMessageParams
	if err := json.Unmarshal(params, &lp); err != nil {
		return fmt.Errorf("the log message cannot be read: %w", err)
	}
	rctx, done := p.join(ctx)
	defer done()
	return p.ss.Log(rctx, &lp)
}
