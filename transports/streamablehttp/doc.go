// Package streamablehttp is the transport for call_template_type
// "streamable_http": HTTP chunked streaming as in python-utcp v1.1 (this
// is not MCP's Streamable HTTP; the legacy name is "http_stream").
//
// # Template
//
//	{
//	  "name": "llm_stream",
//	  "call_template_type": "streamable_http",
//	  "url": "https://ai.example.com/generate",
//	  "http_method": "POST",
//	  "content_type": "application/json",
//	  "body_field": "prompt",
//	  "chunk_size": 8192,
//	  "timeout": 120000
//	}
//
// url is required; http_method is GET (the default) or POST; timeout, in
// milliseconds, bounds a whole call, stream included (default 60000).
// Arguments map onto the request as for the http transport
// (httpcall.Mapping): header_fields arguments become headers, the
// body_field argument (none by default) becomes the body, encoded for
// content_type (default application/octet-stream: a string as it is,
// other values as JSON text; a JSON type sends JSON), {name} URL
// placeholders take their arguments and the rest become query parameters.
// Plain http is accepted only to loopback hosts unless allow_insecure is
// true (httpclient.CheckURL, at discovery, before every call and at every
// redirect hop).
//
// # Splitting the response
//
// The response's Content-Type decides how the body is split, as it
// arrives:
//
//   - application/x-ndjson, application/ndjson, application/jsonl,
//     application/x-jsonl, application/json-lines (and jsonlines): one
//     event per non-blank line, the line decoded as JSON (numbers as
//     json.Number), kept as a string when it does not parse;
//   - text/event-stream: one event per server-sent event, read with
//     eventstream.Reader, the data decoded as JSON when it parses, the
//     event name and id in utcp.Event Type and ID;
//   - application/json and +json types: the whole body, read to its end,
//     as one value;
//   - anything else: raw chunks of at most chunk_size bytes (default
//     4096), each delivered as soon as it is read. A chunk that is valid
//     UTF-8 is an event of Type "text" whose Data is the string; a UTF-8
//     character split at a chunk boundary is held back and starts the next
//     chunk, so text never breaks inside a character. A chunk that is not
//     UTF-8 is an event of Type "binary" whose Data is the chunk in
//     standard base64.
//
// CallTool collects the same: the value for a JSON body; a list ([]any)
// of the line or event values for NDJSON and event streams; and for raw
// bodies the concatenated bytes, as a string when they are valid UTF-8 and
// otherwise as {"content_type": ..., "encoding": "base64", "data": ...}.
// An empty body (or 204) is nil for JSON and raw bodies and an empty list
// for streams. One line or event larger than Config.MaxEventBytes (16 MiB)
// and a collected result or JSON body larger than Config.MaxResponseBytes
// (64 MiB) fail with payload_too_large; a stream has no total cap.
//
// A 4xx answer is a *utcp.ToolError with the status and body; any other
// non-2xx answer, and a connection that breaks before the body's end, is a
// *utcp.TransportError. Closing a stream, cancelling its context or
// closing the transport closes the connection, which the server observes.
//
// # Discovery
//
// RegisterManual sends http_method to url (with headers and auth, no body)
// and reads a UTCP manual (v1.1 or legacy, through manuals.ParseManual);
// anything else is discovery_failed. The transport keeps no per-manual
// state: Release does nothing.
package streamablehttp
