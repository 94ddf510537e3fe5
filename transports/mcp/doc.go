// Package mcp is the transport for call_template_type "mcp": utcpd as an
// MCP client (github.com/modelcontextprotocol/go-sdk) of the MCP servers a
// manual lists, over stdio, Streamable HTTP or the legacy HTTP+SSE
// transport, in the shape python-utcp and @utcp/mcp use.
//
// # Template
//
//	{
//	  "name": "tools",
//	  "call_template_type": "mcp",
//	  "config": {"mcpServers": {
//	    "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
//	               "env": {"LOG_LEVEL": "info"}, "cwd": "/srv"},
//	    "remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Tenant": "${TENANT}"}, "timeout": 30}
//	  }},
//	  "auth": {"auth_type": "oauth2", "token_url": "https://auth.example.com/token", "client_id": "${CID}", "client_secret": "${SECRET}"},
//	  "register_resources_as_tools": false
//	}
//
// config.mcpServers is required: a map from server name to server. A
// server with command is a stdio server (args, env, cwd); a server with
// url is an HTTP server (headers). transport ("stdio", "http", "sse"; also
// "streamable_http" and friends) or its alias type (Claude Desktop, VS
// Code) may say so explicitly, as @utcp/mcp requires; "http" speaks
// Streamable HTTP and falls back to the legacy HTTP+SSE transport when the
// server refuses the Streamable HTTP handshake with a 4xx, "sse" speaks
// only the legacy transport. timeout (seconds, as in other MCP client
// configurations) bounds each call (default DefaultCallTimeout) and
// connecting plus discovery (default DefaultConnectTimeout); a sooner
// context deadline wins. disabled servers are skipped. sse_read_timeout
// and terminate_on_close are accepted for @utcp/mcp compatibility and not
// needed (sessions are supervised with pings and always ended with
// DELETE). Unknown fields, also inside config and inside a server, are
// reported, never fatal.
//
// The manual-level auth applies to every request sent to an HTTP server's
// origin (the url's scheme, host and port), with the semantics of
// httpclient.ApplyAuth: api_key, basic, oauth2 (client credentials; a 401
// invalidates the token and the request is retried once) and oauth2_user.
// headers go to that origin too; a redirect elsewhere carries neither.
// URLs must be https or http to a literal loopback host unless the server
// sets allow_insecure (see httpclient.CheckURL). auth does not apply to
// stdio servers: pass their credentials in env.
//
// A stdio server inherits only the daemon environment variables in
// DefaultInherit (PATH, HOME, LANG, ...), or those its inherit_env_vars
// (a utcpd extension) names, plus env. Unlike @utcp/mcp, the daemon's
// whole environment is not passed on, so its secrets do not leak into
// third-party servers. command is looked up in the daemon's PATH.
//
// # Tools
//
// Registration connects to every server and lists every tool (all pages
// of tools/list). Each tool is returned named "<server>.<tool>"; the
// gateway prefixes the manual, so callers see "manual.server.tool" as in
// python-utcp. A call's name is routed to the server whose name is the
// longest prefix followed by a dot, so server names may contain dots. The
// tools carry no tool_call_template: the manual's template reaches them.
// inputSchema becomes inputs and outputSchema outputs, unchanged. MCP
// annotations have no UTCP field; they become tags: every tool is tagged
// "mcp" and its server name, plus "read_only" (readOnlyHint),
// "destructive" (destructiveHint true on a tool that is not read-only),
// "idempotent" (idempotentHint) and "open_world" (openWorldHint true). A
// tool without a description gets its title as the description. The
// tool's title, annotations, icons and _meta, as the server listed them,
// are kept in utcp.Tool.MCP ({"title", "annotations", "icons", "_meta"},
// each only when listed), from which the MCP front lists the tool as the
// server does.
//
// With register_resources_as_tools, every resource a server lists (all
// pages of resources/list) is also a tool "<server>.resource_<name>" (the
// name's characters outside [A-Za-z0-9_-] replaced by '_') without
// arguments, whose call reads the resource: the text of a single text
// content (JSON-decoded when it is a JSON object or array), else
// {"contents": [...]} with each content as MCP JSON (blob in base64).
//
// A failure of any server fails the registration (discovery_failed, with
// the tail of a stdio server's standard error) and stops the servers that
// did start.
//
// # Sessions
//
// Each server of a registered manual template has one long-lived MCP
// session, shared by every call and multiplexed (JSON-RPC ids); a stdio
// server is never started per call. Sessions belong to the manual template
// that registered them, keyed by the manual's name and a hash of the
// template as registered (RegistrationKey, by which transports.Count
// counts registrations). A template registered again unchanged (a
// refresh) shares the sessions and re-lists the tools over them; Release,
// after the last registration of the template, closes them. A changed template under the same
// name (a Replace) gets sessions of its own, so deregistering the old
// template afterwards never closes the new one. A call whose template
// matches no registration exactly (its variables were resolved anew since
// registration) uses the newest registration of its manual name.
//
// # Supervision
//
// A supervisor per server watches its session. A stdio server that exits,
// closes its output, or stops answering pings (every
// Config.PingIntervalMS, each bounded by PingTimeoutMS, PingFailures
// misses in a row) is stopped, reaped and started again, and an HTTP
// session that dies is opened again; reconnection waits
// DefaultRestartBackoff, doubling per consecutive failure up to
// DefaultMaxRestartBackoff, and starts from the beginning once a session
// has lived 30 s. The server's tools stay registered meanwhile: calls
// wait for the new session up to their deadline, and a call whose request
// provably never reached the server (its connection was already closed,
// or its write failed) is sent once more on the new session. A call in
// flight when a server dies fails with a transport error; it is never
// repeated, since it may have run.
//
// An HTTP session that the server no longer knows (404 to a request
// carrying Mcp-Session-Id, or the 400 some servers, server-everything
// among them, send instead) is initialised again at once, and the call
// that was refused, which the server never ran, is retried once on the new
// session.
//
// # Tool list changes
//
// A server's notifications/tools/list_changed (and, with
// register_resources_as_tools, notifications/resources/list_changed), and
// every restart or reconnection of a server (a new session may list other
// tools), make the transport call transports.Options.OnToolsChanged with
// the manual's name, debounced by ToolsChangedDebounce. The callback is
// optional: the receiver (the gateway) re-registers the manual with its
// current template, which re-lists the tools over the live sessions.
// Notifications that arrive before the first listing finished are not
// reported: that listing already reflects them.
//
// # Results
//
// A successful tools/call result becomes one JSON value:
//
//   - structuredContent, when the server sent it and every content block
//     is text (the spec has servers repeat the structured value as text);
//   - else the text of a single text block, JSON-decoded (numbers as
//     json.Number) when it is a JSON object or array, otherwise the string
//     as it is ("42" stays a string);
//   - null for a result without content;
//   - else {"content": [blocks], "structured": <structuredContent>}
//     (structured only when present), each block as MCP JSON with its
//     type: {"type": "text", "text"}, {"type": "image"|"audio", "data":
//     <base64>, "mimeType"}, {"type": "resource", "resource": {"uri",
//     "mimeType", "text" | "blob": <base64>}}, {"type": "resource_link",
//     "uri", "name", ...}, annotations and _meta included. Nothing is
//     dropped; only the result's own _meta is.
//
// That value is what the REST front and the exports answer. The result
// itself, as the server sent it (content blocks with their annotations
// and _meta, structuredContent, the result's _meta), is kept in
// utcp.Result.MCP, from which the MCP front answers block for block.
//
// An isError result is a *utcp.ToolError whose message is the result's
// text blocks joined with newlines, whose Value is the value above and
// whose MCP is the result as sent. A
// server saying it does not know the tool, whichever way it says it (an
// isError result such as the TypeScript SDK's "MCP error -32602: Tool x
// not found", or a JSON-RPC error -32602 "unknown tool" as go-sdk servers
// send, or -32601), is transports.ErrToolNotFound, as is a name that
// matches no server. Other JSON-RPC errors: -32602 is invalid_arguments;
// -32700, -32600 and -32000..-32099 are transport errors; anything else
// (-32603, application codes) is a *utcp.ToolError whose Value is {"code",
// "message", "data"}. A broken connection is a *utcp.TransportError.
//
// # Streaming and cancellation
//
// The transport implements transports.Streamer. CallToolStream sends the
// call with a progress token; every notifications/progress for it is an
// event {Type: "progress", Data: {"progress", "total", "message"}} (total
// and message when sent, as the server sent them), and the result, as
// CallTool returns it, is the last event {Type: "result"} (with
// utcp.Event.MCP set), followed by io.EOF. Progress notifications
// are read from the wire ahead of the SDK, so they are delivered in order
// and always before the result they precede. A reader that falls more
// than 1024 events behind sees the newest progress replace the queued
// one before it. A call whose context ends, or a stream closed early, is
// abandoned at once and the server is sent notifications/cancelled (by the
// go-sdk client, off the caller's path).
//
// # Processes
//
// A stdio server runs in its own process group. Stopping it (deregistration,
// Close, a replaced session) closes its standard input, waits
// DefaultShutdownGrace, sends SIGTERM to the group, waits again, then
// SIGKILL, and reaps it before returning; a server that stopped answering
// is killed at once. After the leader exits, whatever is left of its group
// is killed too, so descendants it started do not linger (one that calls
// setsid escapes). Its standard error is logged through slog (component
// logger with manual, server and pid), one record per line, each line
// capped at Config.MaxStderrLineBytes, at most StderrLinesPerSecond lines
// per second with bursts of twice that; lines over the rate are counted
// and the count is logged. Should utcpd itself die, its servers see
// their standard input close, on which MCP servers exit.
//
// The transport needs a Unix system (process groups); it does not build
// on Windows.
package mcp
