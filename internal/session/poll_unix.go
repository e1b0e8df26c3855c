//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package session

import (
	"crypto/tls"
	"net"
	"syscall"
)

// newPeeker returns a function that reports, without waiting, whether a
// read of nc would return at once (bytes, the end or an error are there),
// nil if nc is not a socket.
func newPeeker(nc net.Conn) func() bool {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var (
		b     [1]byte
		ready bool
	)
	peek := func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ready = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
		return true // asked once: never waits
	}
	return func() bool {
		if err := rc.Read(peek); err != nil {
			return true // closed: the read says so at once
		}
		return ready
	}
}
