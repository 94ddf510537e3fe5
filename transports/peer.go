package transports

import (
	"context"
	"encoding/json"

	"github.com/utcpd/utcpd/utcp"
)

// Peer is the caller of one tool call, as the backend serving the call
// sees it: an MCP server may, while it serves a call, ask the client
// that made it to sample its model (sampling/createMessage), to ask its
// user (elicitation/create, form or URL mode), for its roots
// (roots/list), and tell it log messages (notifications/message). A
// front whose callers can answer such requests (utcpd's MCP front) puts
// a Peer into each call's context with WithPeer; the gateway passes the
// context through; a transport that receives such a request finds the
// call it belongs to and asks that call's Peer (PeerOf), and declines it
// when the call has no Peer.
//
// Parameters and results are the MCP JSON of the request's params and
// of its result, passed through unchanged. An error a Peer returns is
// sent back to the server as the answer: a *jsonrpc.Error of the go-sdk
// (the client's own refusal) as it is, anything else as an error saying
// the request was declined. Methods are called from the transport's
// goroutines while the call is in flight, possibly concurrently, and
// must be safe for that; ctx ends when the server cancels its request or
// the call ends.
type Peer interface {
	// CreateMessage answers sampling/createMessage.
	CreateMessage(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// Elicit answers elicitation/create (form and URL mode).
	Elicit(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// ListRoots answers roots/list.
	ListRoots(ctx context.Context, params json.RawMessage) (json.RawMessage, error)
	// Log passes on one notifications/message; the caller's own log
	// level decides whether it is shown. It must not block for long: the
	// transport holds the server's later messages until it returns, so
	// that logs reach the caller before the call's result.
	Log(ctx context.Context, params json.RawMessage) error
}

// ElicitationCompleter is implemented by a Peer that can also be told
// that a URL-mode elicitation it was asked has completed out of band
// (notifications/elicitation/complete, params as the server sent them).
// The transport tells the Peer of the call that asked the elicitation,
// also after that call ended; a Peer that is not one drops the notice.
type ElicitationCompleter interface {
	ElicitationComplete(ctx context.Context, params json.RawMessage) error
}

type peerKey struct{}

// WithPeer returns ctx carrying p as the caller of the calls made with
// it. A nil p removes any Peer ctx carried (a front whose callers cannot
// answer, such as CodeMode running inside an MCP call).
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, peerBox{p})
}

type peerBox struct{ p Peer }

// PeerOf returns the Peer ctx carries, or nil when the call's caller
// cannot answer server requests (REST, CodeMode, LLM adapters, or no
// caller at all).
func PeerOf(ctx context.Context) Peer {
	b, _ := ctx.Value(peerKey{}).(peerBox)
	return b.p
}

// ErrPeerDeclined is wrapped by the errors with which a server's request
// to the caller (sampling, elicitation, roots) is declined because no
// caller can answer it: the call came through a front whose callers
// cannot (REST, CodeMode, LLM adapters), the request came outside any
// call or could not be told apart from other calls', or the caller's
// client did not declare the capability.
var ErrPeerDeclined = &utcp.Error{Code: utcp.CodeUnsupported, Message: "the server's request was declined: the caller cannot answer it"}
