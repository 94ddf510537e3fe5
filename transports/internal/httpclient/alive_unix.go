//go:build unix

package httpclient

import (
	"net"
	"syscall"
)

// aliveIdle reports whether an idle keep-alive connection can carry the
// next request: the server has neither closed it (a read would see EOF
// or a reset) nor sent anything unasked. It peeks at the socket without
// blocking: one recvfrom(2) that finds nothing to read.
func aliveIdle(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		_ = n
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
