// Package grpc is the transport for call_template_type "grpc": any gRPC
// service, called dynamically from its descriptors, with no generated
// client code. It takes the v0.1 field set (host, port, service_name,
// method_name, use_ssl, auth as metadata) and adds target, TLS options,
// metadata, descriptor sources, timeout, max_message_size and
// allow_insecure.
//
// # Template
//
//	{
//	  "name": "demo",
//	  "call_template_type": "grpc",
//	  "host": "127.0.0.1",
//	  "port": 8092,
//	  "metadata": {"x-tenant": "acme"},
//	  "timeout": 5000
//	}
//
// host and port, or target (a gRPC target such as "dns:///host:443" or
// "unix:///run/app.sock"), name the server. use_ssl connects with TLS
// (system roots, or ca_file; cert_file and key_file for mutual TLS;
// server_name overrides the checked name; insecure_skip_verify, for tests
// only, accepts any certificate). Without use_ssl the connection is
// plaintext, allowed only to literal loopback hosts (localhost,
// 127.0.0.0/8, ::1; names are not resolved) and unix sockets unless the
// template sets allow_insecure. timeout, in milliseconds (default 30000),
// bounds each call, streams included, and discovery. max_message_size
// (default 16 MiB) caps each message sent or received; more is
// payload_too_large.
//
// # Descriptors and tools
//
// RegisterManual loads the service descriptors from descriptor_set (a
// binary FileDescriptorSet, as protoc --descriptor_set_out
// --include_imports writes it), from proto_files compiled at registration
// with github.com/bufbuild/protocompile (imports looked up in
// import_paths; google/protobuf/*.proto built in), or else by server
// reflection: grpc.reflection.v1, then v1alpha; a server offering neither
// is discovery_failed saying so. Reflection lists the services and asks
// for the files that define them and their imports; the services
// grpc.reflection.* and grpc.health.* are not tools. service_name keeps
// one service, and method_name one method of it.
//
// Each method becomes one tool named "<Service>.<Method>" with the
// service's simple name (its full name when two services share a simple
// name), so the gateway's qualified name is "<manual>.<Service>.<Method>";
// the manual is the part before the first dot. Descriptions come from the
// .proto comments when the descriptors carry them (proto_files), else
// they name the method and its kind. Tags are "grpc" and the service's
// full name.
//
// Inputs and outputs are JSON Schemas of the messages as protojson reads
// and writes them with proto field names: integers of 32 bits as numbers,
// of 64 bits as strings (numbers accepted on input), enums as their value
// names, bytes as base64, repeated fields as arrays, maps as objects,
// nested messages inline (a message inside itself is described once, then
// as a plain object), and the well-known types in their JSON forms
// (Timestamp as an RFC 3339 string, Duration as "1.5s", Struct as an
// object, wrappers as their bare values, Any as an object with "@type").
//
// # Calls
//
// The arguments of a unary or server-streaming method are the request
// message in its JSON form: unknown fields and wrong types are
// invalid_arguments, before anything is sent. When the request message is
// a well-known type whose JSON form is not an object (a wrapper,
// Timestamp, Duration, FieldMask, Value, ListValue), the arguments are
// {"value": <that form>}. A client-streaming or bidirectional method
// takes {"messages": [<request>, ...]}: the messages are sent in order and
// the stream closed (a bidirectional call sends while it reads).
//
// CallTool returns the response message of a unary or client-streaming
// method, and the list of response messages of a server-streaming or
// bidirectional one (at most Config.MaxResponseBytes together).
// CallToolStream yields each response message as one event; for unary and
// client-streaming methods it yields the single response. Closing a
// stream early cancels the call, which the server sees as its context
// ending. Results are rendered with proto field names and default values
// included (a zero sum is {"sum": 0}, not {}).
//
// The call carries the template's metadata and the auth as metadata:
// api_key under var_name (default x-api-key; only location header),
// basic as authorization: Basic, oauth2 as authorization: Bearer with a
// token from the shared token cache (invalidated when the server answers
// UNAUTHENTICATED), oauth2_user as var_name (default authorization) with
// prefix (default "Bearer "). Reflection requests carry them too.
//
// # Errors
//
// A status the server reports is a *utcp.ToolError whose Status is the
// gRPC code and whose Value is {"code": "FAILED_PRECONDITION", "message":
// ..., "details": [...]}, each detail rendered by protojson with its
// "@type" when the type is known (google.rpc.* and the manual's own
// messages), else {"@type", "value": base64}: INVALID_ARGUMENT, NOT_FOUND,
// ALREADY_EXISTS, PERMISSION_DENIED, FAILED_PRECONDITION, ABORTED,
// OUT_OF_RANGE, INTERNAL, UNKNOWN, DATA_LOSS, UNAUTHENTICATED and
// RESOURCE_EXHAUSTED. The others are utcpd's own codes: UNIMPLEMENTED
// (the server lacks the method) and a tool the manual does not have are
// tool_not_found; UNAVAILABLE (server down, TLS handshake failed) is
// transport_error; DEADLINE_EXCEEDED is timeout; CANCELLED is canceled; a
// message over max_message_size is payload_too_large. A caller whose
// context ends gets the context's error (timeout or canceled).
//
// # Connections
//
// Each manual keeps one *grpc.ClientConn per connection setting (target
// and TLS), created on its first call and shared by all its calls (HTTP/2
// multiplexes them). Release (called by transports.Count when the
// manual's last registration ends) closes the manual's connections and
// drops its descriptors; later calls (and those still in flight) fail
// with manual_not_found. Close closes every connection; calls
// in flight fail with unavailable. Discovery by reflection uses a connection of its own,
// closed when discovery ends.
//
// Method descriptors, message types and marshal options are built once at
// registration. Requests and responses of messages without well-known
// types go between Go values and messages directly; the rest through
// protojson, with the same result.
package grpc
