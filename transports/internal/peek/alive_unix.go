//go:build unix

package peek

import (
	"net"
	"syscall"
)

// Alive reports whether an idle pooled connection (the tcp
// transport's, the HTTP clients' keep-alive ones) is open with nothing to
// read, with one non-blocking MSG_PEEK: EOF (the server closed it),
// unasked data or an error mean it must not carry another call.
func Alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = n < 0 && (rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && alive
}
