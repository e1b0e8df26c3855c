package server

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/docketdb/docket/internal/session"
)

// Sessions share the API's port. In cleartext, sessionListener hands a
// connection whose first bytes are session.Preface to the session server
// and every other one to net/http, the bytes it read put back; under TLS,
// a client asking for the ALPN protocol session.ALPN is handed over by
// net/http itself (http.Server.TLSNextProto).

// sessionListener is a listener whose connections are sniffed: sessions
// are served, the rest returned by Accept.
type sessionListener struct {
	net.Listener
	s     *Server
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // the inner listener's error, set before done is closed
}

// sniff returns ln wrapped so that sessions are served on it.
func (s *Server) sniff(ln net.Listener) *sessionListener {
	l := &sessionListener{Listener: ln, s: s, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.accept()
	return l
}

// accept accepts connections and sniffs each on a goroutine of its own,
// so that a client slow to send its first bytes delays no other.
func (l *sessionListener) accept() {
	var tempDelay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// as net/http does for temporary errors (EMFILE)
				tempDelay = min(max(2*tempDelay, 5*time.Millisecond), time.Second)
				time.Sleep(tempDelay)
				continue
			}
			l.once.Do(func() {
				l.err = err
				close(l.done)
			})
			return
		}
		tempDelay = 0
		go l.route(c)
	}
}

// route reads as many of c's first bytes as it takes to tell a session
// from anything else, within BodyTimeout, and serves or returns c.
func (l *sessionListener) route(c net.Conn) {
	var b [len(session.Preface)]byte
	n := 0
	c.SetReadDeadline(time.Now().Add(l.s.opts.BodyTimeout))
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil || string(b[:n]) != session.Preface[:n] {
			break
		}
	}
	c.SetReadDeadline(time.Time{})
	if n == len(b) && session.IsPreface(b[:]) {
		l.s.ServeSession(c)
		return
	}
	pc := &peekedConn{Conn: c, head: append([]byte(nil), b[:n]...)}
	select {
	case l.conns <- pc:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection that is not a session.
func (l *sessionListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// Close closes the listener: Accept returns, and no session starts on a
// connection accepted after it.
func (l *sessionListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// peekedConn is a connection whose first bytes were read; Read returns
// them first.
type peekedConn struct {
	net.Conn
	head []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// serveALPN makes hs hand a TLS connection that negotiated session.ALPN to
// the session server. It adds the protocol to hs.TLSConfig's NextProtos.
func (s *Server) serveALPN(hs *http.Server) {
	cfg := hs.TLSConfig
	if !slices.Contains(cfg.NextProtos, session.ALPN) {
		cfg.NextProtos = append(cfg.NextProtos, session.ALPN)
	}
	if hs.Protocols == nil {
		// A TLSNextProto without "h2" would turn HTTP/2 off: say what
		// the server served before the session's entry was added.
		var p http.Protocols
		p.SetHTTP1(true)
		if _, h2 := hs.TLSNextProto["h2"]; hs.TLSNextProto == nil || h2 {
			p.SetHTTP2(true)
		}
		hs.Protocols = &p
	}
	if hs.TLSNextProto == nil {
		hs.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	hs.TLSNextProto[session.ALPN] = func(_ *http.Server, c *tls.Conn, _ http.Handler) {
		s.ServeSession(c)
	}
}

// stopSessions stops taking sessions, stops those being served (each
// answers the calls it read and closes), and waits until ctx ends for
// them to end; then it closes those left.
func (s *Server) stopSessions(ctx context.Context) {
	ss := &s.sessions
	ss.mu.Lock()
	ss.closed = true
	ss.mu.Unlock()
	ss.each(func(x *sess) { x.stop() })
	done := make(chan struct{})
	go func() {
		ss.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	ss.each(func(x *sess) { x.conn.Close() })
	<-done
}

var _ io.Reader = (*peekedConn)(nil)
