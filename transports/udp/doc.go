// Package udp is the transport for call_template_type "udp": tools
// reached with UDP datagrams, with python-utcp v1.1's socket field set
// (host, port, number_of_response_datagrams, request_data_format,
// request_data_template, response_byte_format, timeout in milliseconds)
// and an optional request envelope of utcpd's own so that discovery,
// tool errors, streaming and cancellation work.
//
// # Template
//
//	{
//	  "name": "dgram",
//	  "call_template_type": "udp",
//	  "host": "127.0.0.1",
//	  "port": 8091,
//	  "envelope": true,
//	  "timeout": 5000
//	}
//
// host and port are required. UDP carries no TLS: hosts that are not
// literally loopback (localhost, 127.0.0.0/8, ::1; names are not
// resolved) are refused with invalid_template unless allow_insecure is
// true. timeout, in milliseconds (default 30000), bounds each call from
// sending to its last datagram (streams included) and discovery; an
// answer that never comes ends the call with the context's error, code
// timeout.
//
// Each incoming datagram is capped at max_datagram_size bytes (default and
// maximum MaxDatagram, 65507): a larger one fails the call with
// payload_too_large. What one call collects over all its datagrams is
// capped at max_response_size (default 16 MiB). A request larger than one
// datagram is refused with invalid_arguments before anything is sent.
//
// # Requests without the envelope
//
// request_data_format json (the default) sends the arguments as one JSON
// object; text sends request_data_template with each
// UTCP_ARG_<name>_UTCP_END (or python-utcp's UTCP_ARG_<name>_UTCP_ARG)
// placeholder replaced by the argument as text (see RenderRequest). The
// call then reads number_of_response_datagrams datagrams (default 1), each
// converted by response_format: json (it must parse), text or raw
// (base64); absent, JSON when it parses, text when it is UTF-8, base64
// otherwise. One datagram is the result, several are a list, and 0 is
// fire-and-forget: the call returns null once the request is sent.
// python-utcp's response_byte_format null means raw.
//
// # The utcpd envelope
//
// With "envelope": true (a utcpd extension; it needs request_data_format
// json), every datagram is one JSON envelope frame, the same as the tcp
// and websocket transports' (see Frame):
//
//	{"type": "call", "id": "7", "tool": "echo", "arguments": {...}}   client → server
//	{"type": "cancel", "id": "7"}                                     client → server: the caller gave up
//	{"type": "utcp", "id": "8"}                                       client → server: send your manual
//	{"type": "result", "id": "7", "result": <any>}
//	{"type": "event", "id": "7", "data": <any>, "event": "name"}
//	{"type": "end", "id": "7"}
//	{"type": "error", "id": "7", "error": {"code": "tool_error", "message": "...", "data": <any>}}
//	{"type": "manual", "id": "8", "manual": {<UTCP manual>}}
//
// number_of_response_datagrams does not apply: a call reads datagrams
// until its result, error or end. Datagrams with another id are skipped;
// one that is not an envelope is a transport_error quoting it. Error
// codes map as in the tcp transport. When a call ends early (deadline,
// cancelled context, stream closed) a cancel datagram is sent, best
// effort: UDP may lose it, and the server cannot otherwise notice.
//
// UDP does not order or guarantee delivery. The envelope assumes a
// network that loses nothing (loopback, a quiet LAN): a lost answer ends
// the call with timeout, and streamed events could arrive out of order.
//
// # Discovery
//
// RegisterManual sends {"type":"utcp"} (with an id in envelope mode) and
// reads one datagram: {"type":"manual","manual":{...}} or a bare UTCP
// manual, which must fit one datagram.
//
// # Sockets
//
// Each call uses a connected socket of its own while it runs. Envelope
// sockets whose call ended cleanly are kept (up to 64 per manual and
// address) for later calls; other sockets are closed after their call.
// Release (called by transports.Count when the manual's last
// registration ends; later calls of that manual then fail with
// manual_not_found until it is registered again) closes the manual's idle
// sockets. Close closes every socket; calls in flight fail with
// unavailable. The transport starts no goroutines.
package udp
