// Package tcp is the transport for call_template_type "tcp": tools
// reached over a plain TCP connection, with python-utcp v1.1's socket
// field set (host, port, request_data_format, request_data_template,
// framing_strategy, length_prefix_bytes, length_prefix_endian,
// message_delimiter, interpret_escape_sequences, fixed_message_length,
// max_response_size, timeout in milliseconds) and an optional request
// envelope of utcpd's own so that discovery, tool errors and streaming
// work.
//
// # Template
//
//	{
//	  "name": "sock",
//	  "call_template_type": "tcp",
//	  "host": "127.0.0.1",
//	  "port": 8090,
//	  "envelope": true,
//	  "framing_strategy": "delimiter",
//	  "message_delimiter": "\\n",
//	  "timeout": 5000
//	}
//
// host and port are required. TCP carries no TLS: hosts that are not
// literally loopback (localhost, 127.0.0.0/8, ::1; names are not
// resolved) are refused with invalid_template unless allow_insecure is
// true. timeout, in milliseconds (default 30000), bounds each call from
// connecting to its last frame (streams included) and discovery.
//
// # Framing
//
// framing_strategy delimits requests and answers alike:
//
//   - length_prefix: an unsigned length of length_prefix_bytes (1, 2, 4
//     or 8; default 4) bytes, length_prefix_endian big (default) or
//     little, then that many bytes;
//   - delimiter: the frame, then message_delimiter (default "\n"; with
//     interpret_escape_sequences, the default, "\\n" in the template is a
//     newline); a request containing the delimiter is refused;
//   - fixed_length: the request as it is, the answer exactly
//     fixed_message_length bytes;
//   - stream (the default, as in python-utcp): the request as it is, the
//     answer everything until the server closes the connection.
//
// Every answer frame is capped at max_response_size bytes (default
// DefaultMaxResponseSize, 16 MiB; python-utcp's default is 64 KiB). A
// length prefix announcing more fails at once, before anything is
// allocated; a delimiter that does not come within the cap fails as soon
// as the cap is passed. A frame cut short by the end of the connection is
// a transport_error ("partial frame"); a server that sends nothing ends
// with the context's error when timeout passes.
//
// # Requests without the envelope
//
// request_data_format json (the default) sends the arguments as one JSON
// object; text sends request_data_template with each
// UTCP_ARG_<name>_UTCP_END (or python-utcp's UTCP_ARG_<name>_UTCP_ARG)
// placeholder replaced by the argument as text (see RenderRequest). The
// first answer frame is the result, converted by response_format: json
// (it must parse), text (as a string) or raw (base64); absent, JSON when
// it parses, text when it is UTF-8, base64 otherwise. python-utcp's
// response_byte_format null means raw.
//
// # The utcpd envelope
//
// With "envelope": true (a utcpd extension; it needs
// request_data_format json and framing length_prefix or delimiter), every
// frame is a JSON envelope, the same as the websocket transport's (see
// Frame). The client sends
//
//	{"type": "call", "id": "7", "tool": "echo", "arguments": {...}}
//	{"type": "utcp", "id": "8"}     discovery: send your manual
//	{"type": "cancel", "id": "7"}   the caller gave up (utcpd closes the connection instead)
//
// and the server answers each request, by its id, with
//
//	{"type": "result", "id": "7", "result": <any>}                 the whole result; the call ends
//	{"type": "event", "id": "7", "data": <any>, "event": "name"}   one streamed item
//	{"type": "end", "id": "7"}                                     the stream is over
//	{"type": "error", "id": "7", "error": {"code": "tool_error", "message": "...", "data": <any>}}
//	{"type": "manual", "id": "8", "manual": {<UTCP manual>}}
//
// Error codes: tool_error (the default) is a *utcp.ToolError,
// tool_not_found is transports.ErrToolNotFound, invalid_request is a
// transport_error; any other code is a *utcp.ToolError. Answers whose id
// is not the call's are skipped; a frame that is not an envelope is a
// transport_error quoting it, and the connection is dropped. CallTool
// returns the result frame's value, or the event data as a list when the
// call ends with end; CallToolStream yields each event frame.
//
// # Discovery
//
// RegisterManual sends {"type":"utcp"} (with an id in envelope mode),
// framed like a call, and reads one answer: {"type":"manual","manual":
// {...}} or a bare UTCP manual. Anything else is discovery_failed.
//
// # Connections
//
// With keep_alive (the default) and a framing that delimits answers
// (length_prefix, delimiter, fixed_length), a connection that completed a
// call cleanly goes back to a pool per manual, server and framing
// (Config.MaxIdle, 64; idle connections older than Config.IdleTimeout,
// 90 s, are discarded), and one call uses one connection at a time, so a
// late answer can never reach another call. Before reuse a pooled
// connection is checked: one the server closed, or that carries unasked
// bytes, is discarded. A call that ends early (deadline, cancelled
// context, stream closed) closes its connection, which is how the server
// learns that the caller went away. Stream framing opens a connection per
// call. The transport starts no goroutines.
//
// Release (called by transports.Count when the manual's last
// registration ends; later calls of that manual then fail with
// manual_not_found until it is registered again) closes the manual's
// pooled connections. Close closes every connection; calls in
// flight fail with unavailable.
package tcp
