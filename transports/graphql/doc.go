// Package graphql is the transport for call_template_type "graphql":
// the fields of a GraphQL API as tools, after python-utcp v1.1's
// utcp-gql plugin (url, operation_type, operation_name, query,
// variable_types, headers, header_fields, auth), with discovery by
// introspection, generated selection sets, and subscriptions over the
// graphql-transport-ws WebSocket protocol (github.com/gorilla/websocket).
//
// # Template
//
//	{
//	  "name": "shop",
//	  "call_template_type": "graphql",
//	  "url": "https://api.example.com/graphql",
//	  "headers": {"X-Client": "utcpd"},
//	  "auth": {"auth_type": "api_key", "api_key": "Bearer ${SHOP_TOKEN}", "var_name": "Authorization"},
//	  "selection_depth": 2,
//	  "timeout": 30000
//	}
//
// url is required and must be https://, or http:// to a literal loopback
// host unless allow_insecure is true (httpclient.CheckURL, also applied
// to every redirect). headers and auth (api_key in a header, the query or
// a cookie; basic; oauth2 client credentials, retried once with a fresh
// token after a 401; oauth2_user) go with every POST and with the
// WebSocket handshake of a subscription. header_fields names arguments
// sent as headers instead of variables. timeout, in milliseconds, bounds a
// query or mutation call, a subscription read whole by CallTool, discovery
// and a subscription's handshake up to connection_ack; without it calls
// run until the caller's deadline, and discovery and handshakes give up
// after DefaultTimeout. subscription_url (ws:// or wss://) overrides the
// subscription endpoint, which is otherwise url with http → ws and
// https → wss.
//
// # Discovery
//
// RegisterManual POSTs IntrospectionQuery and makes a tool of every field
// of the Query, Mutation and Subscription root types (in that order; a
// name already taken becomes "<operation type>_<field>"). A tool's
// description is the field's; its tags are "graphql" and the operation
// type; its inputs are a JSON Schema object of the field's arguments (Int
// → integer, Float → number, String and ID → string, Boolean → boolean,
// enums → string enums, input objects → object schemas (recursive types
// cut at eight levels), lists → arrays, other scalars → any value;
// non-null arguments without a default are required); its outputs are the
// schema of the result as the generated selection returns it.
//
// For each tool the transport keeps, per manual, one document:
//
//	query add($a: Float!, $b: Float!) { add(a: $a, b: $b) { sum } }
//
// declaring every argument as a variable of its introspected type
// (variable_types overrides), in name order, and selecting the result's
// leaf fields and its nested objects up to selection_depth levels
// (default 2; 1 keeps the result's own leaves). Fields that need a
// required argument are skipped; interfaces select __typename and their
// own fields; unions select __typename and an inline fragment of each
// member's leaf fields (leaving out names whose type differs between
// members); an object left with nothing to select selects __typename. A
// call is then one POST. Arguments the call leaves out are absent
// variables, so the server applies the field's defaults.
//
// A server that answers the introspection query with errors
// (introspection disabled), with a body that is not a GraphQL response,
// or not at all fails discovery with discovery_failed naming the URL (and
// introspection, when the server answered with errors). For such servers,
// write the document yourself: a template with query describes one tool,
// named operation_name, or the document's operation name, or the manual's
// name; its inputs are the document's variables (types from the variable
// definitions, then variable_types); discovery sends nothing. Variables
// are substituted in url, headers and auth, never in query.
//
// Calls of a manual this transport never registered (tools restored from
// a store) introspect the endpoint once on their first call. A tool that
// discovery did not see, or an endpoint that cannot be introspected, gets
// python-utcp's document: the tool name as the root field of
// operation_type (default query), the arguments as variables typed by
// variable_types or inferred from their JSON values (boolean → Boolean,
// integral number → Int, number → Float, anything else → String), and no
// selection set; the server then decides.
//
// # Calls and errors
//
// A query or mutation POSTs {"query","variables","operationName"} as
// application/json, accepting application/graphql-response+json and
// application/json. Text arguments are coerced where the variable's type
// is Int, Float or Boolean (numbers to text for String), as command lines
// and query strings send them. An argument a discovered tool does not
// take is invalid_arguments.
//
// The result is data.<field> (for a template's own document, the value of
// data's only key, or the whole data when it has several). GraphQL errors
// in the answer, with any HTTP status, are a *utcp.ToolError whose
// Message joins the first three error messages and whose Value is
//
//	{"errors": [<the errors array as received>], "data": <partial data, or null>}
//
// so partial data is kept; its Status is the HTTP status when that is
// 400 or more. The validation error `Cannot query field "<tool>" on type
// "..."` is tool_not_found instead. An HTTP status of 300 or more without
// a GraphQL body, a 2xx body that is not a GraphQL response (a JSON object
// with data or errors), and a backend that cannot be reached are a
// *utcp.TransportError (with the status when there is one). A response
// over Config.MaxResponseBytes (64 MiB) is payload_too_large; the end of
// the context or of timeout is timeout or canceled.
//
// # Subscriptions
//
// Subscription tools stream over graphql-transport-ws (subprotocol
// "graphql-transport-ws"), one WebSocket per subscription call:
// connection_init, wait for connection_ack (answering ping with pong),
// subscribe {id, payload: {query, variables, operationName}}; then each
// next is one event whose Data is data.<field>, complete ends the stream
// with io.EOF, and an error message (or a next carrying errors) ends it
// with the *utcp.ToolError described above. The server's pings are
// answered throughout. Closing the stream early, or the end of the
// call's context, sends complete for the subscription, then closes the
// connection. A server that does not select the subprotocol, a dropped
// connection, or a frame that is not a protocol message is a
// *utcp.TransportError; one message over Config.MaxMessageBytes (16 MiB)
// is payload_too_large. CallTool on a subscription collects the events'
// values into a list until complete (capped at Config.MaxResponseBytes);
// CallToolStream on a query or mutation yields its result as one event.
// A connection per call keeps subscriptions independent (one failing
// cannot end another) at the cost of a handshake per subscription.
//
// # State
//
// RegisterManual keeps the manual's documents; Release (called by
// transports.Count when the manual's last registration ends; calls of
// that manual then fail with manual_not_found until it is registered
// again) forgets them (subscriptions in flight run on). Close ends
// every subscription, waits for their goroutines, and closes the pooled
// HTTP connections.
package graphql
