// Package webrtc is the transport for call_template_type "webrtc": tools
// served by WebRTC peers (browsers, desktops, devices behind NAT),
// reached through a signaling server and a data channel
// (github.com/pion/webrtc/v4). The template keeps UTCP v0.1's field
// names; everything on the wire is standard SDP, ICE, DTLS and SCTP data
// channels plus JSON messages, so a tool server can be written on any
// WebRTC stack.
//
// # Template
//
//	{
//	  "name": "p2p",
//	  "call_template_type": "webrtc",
//	  "signaling_server": "wss://signal.example.com/ws",
//	  "peer_id": "desk-42",
//	  "data_channel_name": "tools",
//	  "ice_servers": [{"urls": ["turn:turn.example.com:3478"], "username": "utcpd", "credential": "${TURN_PASSWORD}"}],
//	  "headers": {"X-Client": "utcpd"},
//	  "auth": {"auth_type": "api_key", "api_key": "${SIGNAL_KEY}", "var_name": "Authorization"},
//	  "connect_timeout": 15000,
//	  "timeout": 30000
//	}
//
// signaling_server and peer_id are required. signaling_server is
// http(s):// or ws(s)://; plain http:// and ws:// reach only literal
// loopback hosts unless allow_insecure is true (httpclient.CheckURL): the
// data channel is always DTLS-encrypted, but clear-text signaling would
// let an attacker swap the certificate fingerprint. headers and auth
// (httpclient.ApplyAuth) go with the signaling request. ice_servers are
// STUN/TURN servers in the browser's RTCIceServer form ("urls" a string
// or a list). connect_timeout (milliseconds, default 15000) bounds
// connecting, from the offer to the open data channel, and passing it is
// a timeout error; timeout (milliseconds, default 30000) bounds each call,
// streams included, and discovery.
//
// # Signaling
//
// With an http(s):// signaling_server, utcpd gathers every candidate (no
// trickle), then POSTs
//
//	{"type": "offer", "sdp": "v=0...", "peer_id": "desk-42"}
//
// and expects a 2xx answer {"type": "answer", "sdp": "v=0..."} holding
// the peer's candidates. {"type": "error", "error": "..."} or a non-2xx
// status refuses the offer. With a ws(s):// one, the same offer and
// answer travel as WebSocket text messages, and both sides may trickle
// {"type": "candidate", "candidate": {"candidate": "candidate:...",
// "sdpMid": "0", "sdpMLineIndex": 0}} messages (the browser's
// RTCIceCandidateInit); a candidate message without a candidate ends the
// sender's candidates. trickle (default true over WebSocket) set false
// gathers first there too. utcpd closes the WebSocket once the data
// channel is open. See Signal.
//
// # The data channel
//
// utcpd opens one reliable, ordered data channel labelled
// data_channel_name (default "tools") and exchanges JSON messages (see
// Message) on it, correlated by ids utcpd chooses:
//
//	{"type": "tool_call", "id": "7", "tool": "echo", "inputs": {...}}   utcpd → peer
//	{"type": "cancel", "id": "7"}                                       utcpd → peer: the caller gave up
//	{"type": "utcp", "id": "8"}                                         utcpd → peer: send your manual
//	{"type": "tool_response", "id": "7", "output": <any>}               ends the call
//	{"type": "tool_event", "id": "7", "event": <any>}                   one streamed item
//	{"type": "tool_error", "id": "7", "error": {"code": "tool_error", "message": "...", "data": <any>}}
//	{"type": "manual", "id": "8", "manual": {<UTCP manual>}}
//
// Calls are multiplexed: many run at once and their answers may come in
// any order. A call ends with one tool_response or tool_error. CallTool
// returns the output, or the events as a list when the tool_response
// carries no output; CallToolStream yields each event, and the output of
// the final tool_response, if any, as its last event. Error codes:
// tool_error (the default) is a *utcp.ToolError carrying message and
// data, tool_not_found is transports.ErrToolNotFound, invalid_request is
// a transport_error; error may also be a plain string. Messages utcpd
// cannot use (not JSON, no or unknown type, an id nobody waits for) are
// logged and dropped, and a call whose answer never comes ends at its
// deadline with timeout.
//
// # Chunks
//
// No data-channel message larger than Config.MaxChunkBytes (default 16
// KiB, lowered by the peer's a=max-message-size) is sent whole: a larger
// message travels as chunk messages (see Chunk, Split and Reassembler)
//
//	{"type": "chunk", "id": "7", "seq": 0, "last": false, "data": "<base64 of the piece>"}
//
// whose decoded pieces, joined in seq order up to the one with last set,
// are the message; id is the carried message's id. Both sides split and
// reassemble this way. A chunk out of sequence or not base64 fails its
// call with a transport_error; a reassembled message over
// Config.MaxMessageBytes (16 MiB) fails it with payload_too_large.
//
// # Connections
//
// A manual's discovery and calls share one peer connection per manual
// and connection settings (signaling URL, peer_id, channel name, ICE
// servers, headers, auth, trickle, allow_insecure), opened by discovery
// or by the first call. When ICE fails or disconnects, or the peer closes
// the data channel, the calls in flight fail with a transport_error and
// the next call reconnects; a failed connection attempt delays the next
// one (100 ms, doubling up to 30 s), and a call whose deadline comes
// before that attempt fails at once with the last error. Signaling
// failures (the server unreachable, a refusal, an unusable answer or SDP)
// are discovery_failed at registration and transport_error for a call,
// naming the signaling server.
//
// Release (called by transports.Count when the manual's last
// registration ends; calls of that manual then fail with manual_not_found
// until it is registered again) closes the manual's peer connection and
// waits until pion's goroutines of it have ended.
// Calls of a manual the transport never registered are served. Close
// closes every peer connection, fails the calls in flight with
// unavailable, and waits for every goroutine of the transport to end.
//
// Config.Network (candidate_ips, network_types, mdns in the daemon's
// webrtc section) chooses the local addresses ICE may use;
// LoopbackNetwork keeps everything on 127.0.0.1 for tests.
package webrtc
