//go:build !unix

package httpclient

import "net"

// aliveIdle cannot peek at a socket here: an idle connection the server
// closed shows when the request is sent (and is retried when it may be).
func aliveIdle(net.Conn) bool { return true }
