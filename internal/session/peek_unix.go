//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package session

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
)

// Peek asks a connection's socket, without waiting and without taking
// them, whether bytes, its end or an error are there: one recv of a byte
// with MSG_PEEK and MSG_DONTWAIT. Under TLS it asks the socket beneath.
// One goroutine at a time uses it.
type Peek struct {
	rc  syscall.RawConn
	fn  func(uintptr) bool // p.peek, made once: a method value per call would allocate
	b   [1]byte
	n   int
	err error
}

// NewPeek returns a Peek of nc, nil if nc is not a socket (or this
// platform has no such recv).
func NewPeek(nc net.Conn) *Peek {
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
	p := &Peek{rc: rc}
	p.fn = p.peek
	return p
}

func (p *Peek) peek(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // asked once: never waits
}

// Ask reports whether a read would return at once (ready), and whether
// the connection has ended: err is io.EOF once the peer closed it, the
// socket's error once it failed, nil while it is open. Bytes there are
// left for the reader.
func (p *Peek) Ask() (ready bool, err error) {
	if err := p.rc.Read(p.fn); err != nil {
		return true, err // closed here: a read fails at once
	}
	switch {
	case errors.Is(p.err, syscall.EAGAIN) || errors.Is(p.err, syscall.EWOULDBLOCK) || errors.Is(p.err, syscall.EINTR):
		return false, nil // open, nothing to read
	case p.err != nil:
		return true, p.err
	case p.n == 0:
		return true, io.EOF
	}
	return true, nil
}
