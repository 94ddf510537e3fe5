//go:build unix

package tcp

import (
	"net"
	"syscall"
)

// peekAlive reports whether nc is open with nothing to read, with a
// non-blocking MSG_PEEK: EOF (the server closed it), unasked data or an
// error mean it must not carry another call.
func peekAlive(nc net.Conn) bool {
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
