// Package sse is the transport for call_template_type "sse": tools that
// answer with a Server-Sent Events stream (text/event-stream), following
// python-utcp v1.1's SSE communication protocol.
//
// # Template
//
//	{
//	  "name": "events",
//	  "call_template_type": "sse",
//	  "url": "https://api.example.com/events/{topic}",
//	  "event_type": "update",
//	  "headers": {"X-Client": "utcpd"},
//	  "body_field": null,
//	  "header_fields": ["X-Request-Id"],
//	  "reconnect": true,
//	  "retry_timeout": 2000,
//	  "timeout": 60000,
//	  "auth": {"auth_type": "basic", "username": "${U}", "password": "${P}"}
//	}
//
// url is required. Arguments map onto the request as for the http
// transport (httpcall.Mapping): header_fields arguments become
// headers, the body_field argument becomes a JSON body, {name} URL
// placeholders take their arguments, and the rest become query
// parameters. Without a body the request is a GET, with one a POST. Every
// request sends Accept: text/event-stream. Plain http is accepted only to
// loopback hosts unless allow_insecure is true (httpclient.CheckURL, at
// discovery, before every call and at every redirect hop).
//
// # Events
//
// The body is read incrementally with eventstream.Reader: event, id,
// retry and multi-line data fields, comments ignored, CRLF, LF or CR line
// ends. Each event's data is decoded as JSON when it parses (numbers as
// json.Number) and kept as a string otherwise; the event's name and the
// stream's last event id travel in utcp.Event Type and ID. With
// event_type set, only events of that name are delivered ("message"
// matches events without an event field). One event larger than
// Config.MaxEventBytes (16 MiB by default) fails the call with
// payload_too_large.
//
// CallToolStream delivers the events as they arrive; CallTool collects the
// data of every event into a list (capped at Config.MaxResponseBytes).
// A 2xx answer that is not an event stream is one value, decoded as the
// http transport does (JSON or text): CallTool returns it as it is and a
// stream yields it as its only event. A 204 answer is an empty stream.
// 4xx answers are a *utcp.ToolError with the status and body, other
// non-2xx answers a *utcp.TransportError.
//
// # Ends, drops and reconnection
//
// The stream ends (io.EOF) when the server ends the body cleanly. A
// connection that breaks before that (a truncated chunked body, a reset)
// is a drop. Without reconnect a drop fails the call with a
// transport_error: it never hangs and never passes for a clean end. With
// "reconnect": true, the transport waits (the server's last retry value,
// else retry_timeout, default 30000 ms, doubling on each consecutive
// failed attempt), then sends the same request again with a Last-Event-ID
// header carrying the stream's last event id, and goes on with the new
// body; after Config.MaxReconnects (default 5) attempts in a row without
// an event in between, or when the deadline leaves no room for the wait,
// the drop error is returned. A reconnection answered 204 ends the stream
// cleanly. reconnect defaults to false, unlike python-utcp's declared
// default of true (which python-utcp never acts on): reconnecting sends
// the request again, which starts the tool again on a server that does
// not resume from Last-Event-ID, so it must be asked for.
//
// timeout (milliseconds, a utcpd extension) bounds a whole call, stream
// included; without it only the caller's context does, so a stream that
// never ends is cut at the caller's deadline (or runs until the stream is
// closed). Closing a stream, cancelling its context or closing the
// transport closes the connection, which the server observes.
//
// # Discovery
//
// RegisterManual GETs url (with headers and auth) and reads a UTCP manual
// (v1.1 or legacy, through manuals.ParseManual); anything else is
// discovery_failed. The transport keeps no per-manual state:
// Release does nothing.
package sse
