// Package all registers every transport utcpd ships with
// transports.Default. Import it for its side effect:
//
//	import _ "github.com/utcpd/utcpd/transports/all"
package all

import (
	_ "github.com/utcpd/utcpd/transports/cli"            // call_template_type "cli"
	_ "github.com/utcpd/utcpd/transports/file"           // call_template_type "file"
	_ "github.com/utcpd/utcpd/transports/graphql"        // call_template_type "graphql"
	_ "github.com/utcpd/utcpd/transports/grpc"           // call_template_type "grpc"
	_ "github.com/utcpd/utcpd/transports/http"           // call_template_type "http"
	_ "github.com/utcpd/utcpd/transports/mcp"            // call_template_type "mcp"
	_ "github.com/utcpd/utcpd/transports/sse"            // call_template_type "sse"
	_ "github.com/utcpd/utcpd/transports/streamablehttp" // call_template_type "streamable_http"
	_ "github.com/utcpd/utcpd/transports/tcp"            // call_template_type "tcp"
	_ "github.com/utcpd/utcpd/transports/text"           // call_template_type "text"
	_ "github.com/utcpd/utcpd/transports/udp"            // call_template_type "udp"
	_ "github.com/utcpd/utcpd/transports/webrtc"         // call_template_type "webrtc"
	_ "github.com/utcpd/utcpd/transports/websocket"      // call_template_type "websocket"
)
