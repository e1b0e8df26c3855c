//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package client

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
)

// probeConn returns a function that reports whether the peer ended nc
// (io.EOF, or the socket's error) without reading from it: a peek of one
// byte that does not wait. Bytes waiting (a reply the caller gave up on,
// a GoingAway) are left for the reader. Nil if nc is not a socket.
func probeConn(nc net.Conn) func() error {
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
	p := &prober{rc: rc}
	p.peekFn = p.peek // once: a method value per probe would allocate
	return p.probe
}

// prober peeks at one socket; only the reader of its connection (or a
// caller about to become it) uses it, one at a time.
type prober struct {
	rc     syscall.RawConn
	peekFn func(uintptr) bool
	b      [1]byte
	n      int
	err    error
}

func (p *prober) peek(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // asked once: never waits
}

func (p *prober) probe() error {
	if err := p.rc.Read(p.peekFn); err != nil {
		return err
	}
	switch {
	case errors.Is(p.err, syscall.EAGAIN) || errors.Is(p.err, syscall.EWOULDBLOCK) || errors.Is(p.err, syscall.EINTR):
		return nil // open, nothing to read
	case p.err != nil:
		return p.err
	case p.n == 0:
		return io.EOF
	}
	return nil
}
