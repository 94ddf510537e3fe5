// Package websocket is the transport for call_template_type "websocket":
// tools reached over a WebSocket connection (github.com/gorilla/websocket),
// after python-utcp v1.1's websocket communication protocol: by default a
// call sends its arguments as one JSON text frame (or the rendered
// message) and takes the first answer frame as its result. With
// "envelope": true it speaks a request/response envelope of utcpd's own
// instead, so that many calls share one connection, streams end
// explicitly and a caller that gives up can say so.
//
// # Template
//
//	{
//	  "name": "realtime",
//	  "call_template_type": "websocket",
//	  "url": "wss://api.example.com/ws",
//	  "envelope": true,
//	  "protocol": "utcpd.v1",
//	  "headers": {"X-Client": "utcpd"},
//	  "auth": {"auth_type": "api_key", "api_key": "${WS_KEY}", "var_name": "Authorization"},
//	  "timeout": 60,
//	  "keep_alive": true
//	}
//
// url is required and must be wss://, or ws:// to a literal loopback host
// unless allow_insecure is true (httpclient.CheckURL). headers and auth
// (api_key in a header, the query or a cookie; basic; oauth2; oauth2_user,
// applied with httpclient.ApplyAuth) go with the opening handshake.
// protocol (python-utcp's field) and subprotocols (a utcpd extension) are
// the subprotocols offered; when the server selects none of them the
// connection is refused with a transport_error naming them. timeout, in
// seconds as python-utcp counts them (fractions allowed), bounds each call
// from connecting to its last message, streams included, and discovery
// (default 30). header_fields cannot be honoured on a shared connection
// and must be empty. envelope (a utcpd extension, as in the tcp and udp
// templates) excludes message.
//
// # Discovery
//
// RegisterManual sends {"type":"utcp","id":...} and accepts an envelope
// manual frame or a bare UTCP manual object, which is how python-utcp
// servers answer, whatever the template's mode. When the server answers
// with an envelope manual frame, so that it speaks the envelope, and the
// manual template sets envelope, the tool templates of the manual that
// point at the same URL and set neither envelope nor message get
// "envelope": true; tools that would still be called without the
// envelope are logged as a warning.
//
// # Plain frames (the default)
//
// Without envelope, a call sends the arguments as one JSON object in a
// text frame ({} for none), or, with message set, the rendered message
// (see RenderMessage: UTCP_ARG_<name>_UTCP_END placeholders, also
// python-utcp's UTCP_ARG_<name>_UTCP_ARG; JSON templates are rendered
// structurally so values are always escaped). Such a protocol has no ids,
// so a connection carries one call at a time (other calls of the manual
// queue for it), and every frame that arrives during a call is that
// call's answer. CallTool returns the first answer frame, converted by
// response_format: json (the frame must be JSON), text (the frame as a
// string), raw (text as a string, binary frames as base64); absent, JSON
// when the frame parses and text otherwise (a binary frame that is not
// UTF-8 as base64). A stream yields every answer frame (binary ones as
// events of Type "binary" with base64 data) until the server closes the
// connection normally, or until an answer that is an envelope end, result
// or error frame, which ends the call as with the envelope (so a plain
// server may report a failure with {"type":"error","error":{...}}). A
// call that ends early (deadline, closed stream) closes its connection,
// so that late answers cannot reach the next call. An answer that is an
// envelope error frame with code invalid_request, which a server that
// expects the envelope sends, is a transport_error that says to set
// envelope.
//
// Earlier versions of utcpd used the envelope when message was absent; a
// template (in the store, a configuration file, a manuals folder, or
// served as a tool template) that relied on that must now set
// "envelope": true (see docs/transports.md, section websocket,
// "Migrating").
//
// # The utcpd envelope
//
// With "envelope": true, every frame is a JSON text frame of this
// envelope (see Frame). The client sends
//
//	{"type": "call", "id": "7", "tool": "echo", "arguments": {...}}
//	{"type": "cancel", "id": "7"}   the caller gave up (deadline, closed stream)
//	{"type": "utcp", "id": "8"}     discovery: send your manual
//
// and the server answers each request, by its id, with
//
//	{"type": "result", "id": "7", "result": <any>}                 the whole result; the call ends
//	{"type": "event", "id": "7", "data": <any>, "event": "name"}   one streamed item ("event" optional)
//	{"type": "end", "id": "7"}                                     the stream is over
//	{"type": "error", "id": "7", "error": {"code": "tool_error", "message": "...", "data": <any>}}
//	{"type": "manual", "id": "8", "manual": {<UTCP manual>}}
//
// A call ends with exactly one result, end or error frame. Ids are strings
// the client chooses (numbers are accepted in answers); calls are
// multiplexed: many may be in flight on one connection, and answers may
// come in any order. Error codes: tool_error (the default) is a
// *utcp.ToolError carrying message and data, tool_not_found is
// transports.ErrToolNotFound, invalid_request (the server did not
// understand the frame) is a transport_error; any other code is a
// *utcp.ToolError. A server without a manual answers utcp with an error
// frame. Servers may select the subprotocol "utcpd.v1"
// (EnvelopeSubprotocol) when it is offered; utcpd does not require it.
//
// CallTool returns the result frame's value, or the data of the event
// frames as a list when the call ends with end (a stream read whole;
// capped at Config.MaxResponseBytes). CallToolStream yields each event
// frame as an event, a result frame as one last event, and ends with
// io.EOF at the end frame. A frame that is not an envelope (not JSON, no
// type, an unknown type, a binary frame) is a protocol violation: the
// connection is closed and every call on it fails with a transport_error
// quoting the frame. Answers for ids no call waits for (a cancelled call's
// late answers) are dropped.
//
// # Connections
//
// With keep_alive (the default), a manual's calls share one connection per
// manual name and connection settings (URL, subprotocols, headers, auth,
// allow_insecure, envelope or not), opened by discovery or by
// the first call and pinged every Config.PingInterval (30 s); a
// connection silent (no frame, no pong) for two intervals is dropped, and
// one that carried no call for Config.IdleTimeout (5 minutes) is closed.
// When a connection drops, the calls in flight on it fail with a
// transport_error and the next call reconnects; a failed reconnection
// delays the next attempt (100 ms, doubling up to 30 s), and a call whose
// deadline comes before that attempt fails at once with the last error.
// With keep_alive false, each call opens its own connection and closes it
// afterwards.
//
// Release (called by transports.Count when the manual's last
// registration ends; calls of that manual then fail with manual_not_found
// until it is registered again) closes the manual's connections. Calls of a manual the transport never registered (a
// tool whose manual has another call_template_type) are served. Close
// closes every connection, fails the calls in flight with unavailable, and
// waits for every goroutine of the transport to end.
//
// One incoming message is capped at Config.MaxMessageBytes (16 MiB): a
// larger one fails the calls on the connection with payload_too_large and
// drops it.
package websocket
