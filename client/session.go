package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// This file is the session transport: the calls of engine.API as frames on
// one long-lived connection per server (internal/session,
// proto/docket/v1/session.proto), many in flight, each answered by its id
// in any order.

// Transport chooses how a client carries its calls (Options.Transport).
type Transport int

const (
	// TransportSession, the default, carries the calls of engine.API on
	// a session: one connection to each server, many calls in flight.
	// Against a server that does not speak it the client uses the unary
	// RPCs instead (and asks again a minute later).
	TransportSession Transport = iota
	// TransportUnary makes every call an RPC of its own (connect over
	// HTTP), as curl or another language would.
	TransportUnary
)

const (
	// noSessionFor is how long calls to a server that did not speak the
	// session protocol go as unary RPCs before the client asks again: a
	// server upgraded in place gets sessions within it.
	noSessionFor = time.Minute
	// sessionDialTimeout bounds the connection and the Hello's answer.
	sessionDialTimeout = 10 * time.Second
	// abandonWait bounds how long a ClaimWait whose context ended waits
	// for the answer to its Abandon, which brings any lease the server
	// took as the wait ended.
	abandonWait = time.Second
	// maxReplyBytes bounds a Reply frame, as the unary path bounds an
	// answer.
	maxReplyBytes = 4 * engine.MaxCommitBytes
)

// errNoSession is what a try learns when the server does not speak the
// session protocol: the call goes as a unary RPC instead.
var errNoSession = errors.New("docket: the server does not speak the session protocol")

// errSessionLost is the error of a call written to a session whose
// connection ended before its answer came: it may have been taken.
var errSessionLost = errors.New("docket: the session's connection ended before the answer")

// errGoingAway is the cause of a call that a server going away (it is
// stopping) did not read: it was not run, and may go elsewhere.
var errGoingAway = errors.New("docket: the server is going away and did not read the call")

// notSentError is the error of a try that never reached the server: the
// session could not be opened, or was already broken when the call was
// to be written.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "docket: session not open: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// unsentError is the error of a try whose context ended before it was
// sent: nothing was done, and the call returns the context's error.
type unsentError struct{ err error }

func (e unsentError) Error() string { return e.err.Error() }
func (e unsentError) Unwrap() error { return e.err }

// helloCRLF is appended to the Hello as an unknown field (number 15, two
// bytes: CR LF), which a session server ignores: an HTTP/1.1 server that
// reads the preface and the Hello as a request line then finds the line's
// end and answers 400 at once, instead of waiting for its header timeout.
var helloCRLF = []byte{15<<3 | 2, 2, '\r', '\n'}

// sessionHost is the session state of one server: its connection, the
// bounds of the calls in flight on it, and whether it speaks sessions.
type sessionHost struct {
	c    *Client
	base string
	// calls bounds the calls in flight, parked the waiting claims
	// (ClaimWait), apart: Welcome.max_calls and max_parked.
	calls, parked slots

	mu        sync.Mutex
	conn      *sessionConn // nil when none is open
	dial      *sessionDial // the dial under way, nil when none
	noSession int64        // the client's clock's nanoseconds until which calls go unary (0: never)

	// Tests' hooks, set before the first call: onReader runs as the
	// reader goroutine starts, onFrame as a caller that reads begins a
	// frame, onInterrupt as one is asked to stop (under the connection's
	// lock), onEnd once a connection ended (fail).
	onReader, onFrame, onInterrupt, onEnd func()
	// noProbe makes the connections as on a platform without a probe.
	noProbe bool
}

// sessionDial is a dial under way; done is closed when it ends.
type sessionDial struct {
	done chan struct{}
	conn *sessionConn
	err  error
}

// sessionHost returns the session state of the server at base.
func (c *Client) sessionHost(base string) *sessionHost {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.sessions[base]
	if h == nil {
		h = &sessionHost{c: c, base: base}
		h.calls.limit = DefaultMaxConns
		h.parked.limit = DefaultMaxConns / 2
		if proxied(base) {
			h.noSession = math.MaxInt64 // the proxy speaks HTTP: unary calls, through it
		}
		c.sessions[base] = h
	}
	return h
}

// proxied reports whether the environment (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY) sends calls to base through a proxy, as the unary transport
// does.
func proxied(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	p, err := proxyFor(&http.Request{URL: u})
	return err == nil && p != nil
}

// proxyFor is the unary transport's choice of proxy; tests replace it.
var proxyFor = http.ProxyFromEnvironment

// useSession reports whether a call made with ctx goes on a session.
func (c *Client) useSession(ctx context.Context) bool {
	if c.opts.Transport != TransportSession {
		return false
	}
	// A session's reads are stale or not as a whole (Hello.stale_reads):
	// a call that asks for stale reads alone goes as an RPC.
	return !engine.StaleReads(ctx) || c.opts.StaleReads
}

// get returns the open connection, dialing one if there is none; ctx and
// bound (if not 0) bound the wait, not the dial, which others may be
// waiting for too. A wait cut by bound (a server that accepts connections
// and does not answer) sent nothing, and moves the call on.
func (h *sessionHost) get(ctx context.Context, bound time.Duration) (*sessionConn, error) {
	h.mu.Lock()
	if until := h.noSession; until != 0 && h.c.now().UnixNano() < until {
		h.mu.Unlock()
		return nil, errNoSession
	}
	if h.conn != nil {
		conn := h.conn
		h.mu.Unlock()
		return conn, nil
	}
	d := h.dial
	if d == nil {
		d = &sessionDial{done: make(chan struct{})}
		h.dial = d
		go h.dialing(d)
	}
	h.mu.Unlock()
	var timeout <-chan time.Time
	if bound > 0 {
		t := time.NewTimer(bound)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-d.done:
	case <-ctx.Done():
		return nil, unsentError{ctx.Err()}
	case <-timeout:
		return nil, &notSentError{fmt.Errorf("no answer to the session's Hello within %v", bound)}
	}
	if d.err != nil {
		return nil, d.err
	}
	return d.conn, nil
}

// dialing opens a session for d.
func (h *sessionHost) dialing(d *sessionDial) {
	ctx, cancel := context.WithTimeout(h.c.closing, sessionDialTimeout)
	defer cancel()
	conn, err := h.open(ctx)
	h.mu.Lock()
	h.dial = nil
	switch {
	case errors.Is(err, errNoSession):
		h.noSession = h.c.now().Add(noSessionFor).UnixNano()
	case err == nil && h.c.closed.Load():
		conn.nc.Close()
		err = &notSentError{errClosed}
	case err == nil:
		h.conn = conn
	}
	h.mu.Unlock()
	d.conn, d.err = conn, err
	close(d.done)
	if err == nil && conn.probe == nil {
		// Nothing tells an idle connection's end but a read: the
		// reader goroutine reads for as long as it is open (reading
		// was set as the connection was made).
		go conn.read()
	}
}

// open dials the server and opens a session: the preface (cleartext) or
// ALPN (TLS), the Hello, the Welcome. errNoSession means that the server
// does not speak sessions; a refused Hello is the server's error.
func (h *sessionHost) open(ctx context.Context) (*sessionConn, error) {
	u, err := url.Parse(h.base)
	if err != nil {
		return nil, &notSentError{err}
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	var nc net.Conn
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	if u.Scheme == "https" {
		cfg := h.c.opts.TLS.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg.NextProtos = []string{session.ALPN}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		tc, err := (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, "tcp", host)
		if err != nil {
			if strings.Contains(err.Error(), "no application protocol") {
				return nil, errNoSession
			}
			return nil, &notSentError{err}
		}
		nc = tc
		if tc.(*tls.Conn).ConnectionState().NegotiatedProtocol != session.ALPN {
			nc.Close()
			return nil, errNoSession
		}
	} else {
		if nc, err = dialer.DialContext(ctx, "tcp", host); err != nil {
			return nil, &notSentError{err}
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	conn, err := h.hello(ctx, nc, u.Scheme != "https")
	if err != nil {
		nc.Close()
		return nil, err
	}
	return conn, nil
}

// hello writes the preface (when cleartext) and the Hello, and reads the
// server's answer.
func (h *sessionHost) hello(ctx context.Context, nc net.Conn, preface bool) (*sessionConn, error) {
	dl := time.Now().Add(sessionDialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var b []byte
	if preface {
		b = append(b, session.Preface...)
	}
	hello, err := proto.Marshal(&v1.Hello{Version: session.Version, Token: h.c.opts.Token,
		StaleReads: h.c.opts.StaleReads, Client: "docket-go"})
	if err != nil {
		return nil, &notSentError{err}
	}
	hello = append(hello, helloCRLF...)
	b = append(b, protowireLen(len(hello))...)
	b = append(b, hello...)
	if _, err := nc.Write(b); err != nil {
		return nil, &notSentError{err}
	}
	br := bufio.NewReaderSize(nc, session.BufSize)
	if p, err := br.Peek(5); err == nil && string(p) == "HTTP/" {
		return nil, errNoSession // an HTTP server answered the preface
	}
	frame, err := session.ReadFrame(br, session.MaxHelloBytes, nil)
	if err != nil {
		if preface && (errors.Is(err, session.ErrFrameTooLarge) || errors.Is(err, session.ErrBadFrame)) {
			return nil, errNoSession // not a session server
		}
		return nil, &notSentError{err}
	}
	var w v1.Welcome
	if err := proto.Unmarshal(frame, &w); err != nil || w.GetVersion() == 0 {
		var r v1.Reply
		if err := proto.Unmarshal(frame, &r); err == nil && r.GetId() == 0 && r.GetError() != nil {
			return nil, wire.ItemError(r.GetError()) // the Hello was refused
		}
		return nil, &notSentError{fmt.Errorf("%w: the server's first frame is neither a Welcome nor a refusal", session.ErrBadFrame)}
	}
	if w.GetVersion() != session.Version {
		return nil, &notSentError{fmt.Errorf("docket: the server speaks session version %d, not %d", w.GetVersion(), session.Version)}
	}
	nc.SetDeadline(time.Time{})
	if n := w.GetMaxCalls(); n > 0 {
		h.calls.setLimit(int(n))
	}
	if n := w.GetMaxParked(); n > 0 {
		h.parked.setLimit(int(n))
	}
	sc := &sessionConn{h: h, nc: nc, br: br, w: session.NewWriter(nc), welcome: &w, pending: map[uint64]*pendingCall{}, epoch: time.Now()}
	if !h.noProbe {
		sc.probe = probeConn(nc)
	}
	sc.poll = session.NewPoller(nc, h.c.opts.BusyPoll, h.c.pollGate, &sc.lones)
	sc.reading = sc.probe == nil // without a probe, the reader goroutine reads from the start (dialing)
	sc.w.OnFail(sc.fail)         // a write left to the Writer's goroutine failed: the connection ends
	return sc, nil
}

// protowireLen is n as a uvarint.
func protowireLen(n int) []byte {
	var b []byte
	for v := uint64(n); ; v >>= 7 {
		if v < 0x80 {
			return append(b, byte(v))
		}
		b = append(b, byte(v)|0x80)
	}
}

// sessionConn is one open session.
type sessionConn struct {
	h       *sessionHost
	nc      net.Conn
	br      *bufio.Reader
	w       *session.Writer
	welcome *v1.Welcome
	next    atomic.Uint64 // the last call id used

	epoch   time.Time // the start of clock
	mu      sync.Mutex
	pending map[uint64]*pendingCall
	// deadlines holds the pending calls with a bound, a list for each
	// bound in the order they were sent (so soonest first); timer fires
	// at armed (clock's nanoseconds, 0: not set) to fail those whose
	// bound passed.
	deadlines boundLists
	timer     *time.Timer
	armed     int64
	err       error // why the connection ended; nil while open
	closing   bool  // the client is closed: end once nothing is pending
	away      bool  // the server is going away: send nothing, end once nothing is pending

	// Who reads the replies. reading: someone does (a caller or the
	// reader goroutine), as long as a call is pending; rcaller is the
	// caller that does (nil: the goroutine, or nobody). A caller that
	// reads stops at the next frame's boundary once asked (interrupted:
	// its context ended or its bound passed), and is interrupted by a
	// read deadline only between frames (inFrame false), so that no
	// frame is cut.
	reading     bool
	rcaller     *pendingCall
	inFrame     bool
	interrupted bool

	// probe reports whether the server ended the connection, without
	// reading what it sent (nil where the platform has no way to ask:
	// there the reader goroutine reads for as long as the connection is
	// open). rbuf is the reader's frame buffer.
	probe func() error
	// poll asks for a lone call's answer a little before its caller
	// waits (Options.BusyPoll), once lones (the calls sent with none
	// other pending, in a row) is steady.
	poll  *session.Poller
	lones session.Streak
	rbuf  []byte
}

// replyTo is told a call's reply, or the error that ended it, once: by
// whoever takes the call off the connection's pending calls (the reader,
// the connection's end, the expiry of its bound).
type replyTo interface {
	deliver(*v1.Reply, error)
}

// pendingCall is a call written and not answered. Its bound, if any, is
// kept in the connection's lists of bounds, which one timer serves.
type pendingCall struct {
	to    replyTo
	id    uint64
	at    int64         // when its bound ends, in nanoseconds of the connection's clock (0: no bound)
	bound time.Duration // the bound, for the error
	// Its neighbours in the list of its bound (deadlines), list nil
	// when it is in none.
	list       *boundList
	prev, next *pendingCall
}

// chanReply delivers to a channel with room for the one reply.
type chanReply chan reply

func (ch chanReply) deliver(r *v1.Reply, err error) { ch <- reply{r, err} }

// send writes call with a fresh id, to be answered through p.to (or, if
// bound is not 0, to fail with errNoAnswer once bound passes without an
// answer), and returns the id. A call that was not written returns a
// notSentError (or the error of a message that cannot be encoded).
//
// If nobody reads the connection (no call is pending) and read is true,
// the caller becomes its reader (reader true): it must call readFor, which
// reads the replies until its own comes. Otherwise the reader goroutine
// reads, started here if none is running. On a connection nobody has read
// since its last answer, send first asks whether the server ended it: a
// call is then not sent, rather than sent on a connection already closed.
func (s *sessionConn) send(call *v1.Call, p *pendingCall, bound time.Duration, read bool) (id uint64, reader bool, err error) {
	id = s.next.Add(1)
	call.Id = id // before its size is taken: the frame's length uses the size cached
	if max := s.welcome.GetMaxFrameBytes(); max > 0 {
		// A frame over the server's bound would end the session, and
		// with it every call in flight: refused here, unsent.
		if n := (proto.MarshalOptions{}).Size(call); uint64(n) > max {
			return 0, false, connect.NewError(connect.CodeResourceExhausted,
				fmt.Errorf("docket: the call is %d bytes, over the server's limit of %d on a session's frame", n, max))
		}
	}
	s.mu.Lock()
	if s.err == nil && !s.away && !s.reading && s.probe != nil && s.br.Buffered() == 0 {
		// Nobody reads (nothing is pending), so br is nobody's.
		if perr := s.probe(); perr != nil {
			s.mu.Unlock()
			s.fail(perr)
			return 0, false, &notSentError{perr}
		}
	}
	if s.err != nil || s.away {
		err := s.err
		if err == nil {
			err = errGoingAway
		}
		s.mu.Unlock()
		return 0, false, &notSentError{err}
	}
	p.id, p.at, p.list = id, 0, nil
	if bound > 0 {
		p.at, p.bound = s.clock()+int64(bound), bound
		s.pushDeadlineLocked(p)
	}
	s.pending[id] = p
	if !s.reading {
		s.reading = true
		if read {
			s.rcaller, reader = p, true
		} else {
			go s.read()
		}
	}
	lone := len(s.pending) == 1
	s.lones.Record(lone)
	s.mu.Unlock()
	send := s.w.SendLater // other calls in flight: this one may wait for the next write of several
	if lone {
		send = s.w.Send // written at once, without a goroutine's hop
	}
	if err := send(call); err != nil {
		if s.w.Err() == nil {
			s.remove(id) // this message alone could not be encoded
			if reader {
				s.release(p)
			}
			return 0, false, err
		}
		// The write failed: the frame may be on its way. The connection
		// ends, and with it every call in flight, this one included.
		s.fail(err)
		return id, reader, nil
	}
	return id, reader, nil
}

// remove forgets call id (its caller stopped waiting), and reports
// whether it was pending.
func (s *sessionConn) remove(id uint64) bool {
	s.mu.Lock()
	p := s.takeLocked(id)
	end := (s.closing || s.away) && len(s.pending) == 0
	s.mu.Unlock()
	if end {
		s.nc.Close()
	}
	return p != nil
}

// takeLocked takes call id off the pending calls and its bound's list,
// and returns it (nil if it was not pending).
func (s *sessionConn) takeLocked(id uint64) *pendingCall {
	p := s.pending[id]
	if p == nil {
		return nil
	}
	delete(s.pending, id)
	if p.list != nil {
		s.deadlines.remove(p)
	}
	return p
}

// clock is the connection's monotonic clock, in nanoseconds.
func (s *sessionConn) clock() int64 { return int64(time.Since(s.epoch)) }

// pushDeadlineLocked adds p's bound to the lists, and sets the timer to
// fire by its end.
func (s *sessionConn) pushDeadlineLocked(p *pendingCall) {
	s.deadlines.add(p)
	if s.armed != 0 && s.armed <= p.at {
		return // the timer fires first, and sets itself again
	}
	s.armed = p.at
	d := time.Duration(p.at - s.clock())
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.expire)
	} else {
		s.timer.Reset(d)
	}
}

// expire fails the calls whose bound passed without an answer, as not
// answered (they may have been taken), and sets the timer for the next
// bound. It may run early (the call it was set for was answered): then it
// only sets the timer again.
func (s *sessionConn) expire() {
	var over []*pendingCall
	s.mu.Lock()
	now := s.clock()
	s.armed = 0
	for _, l := range s.deadlines {
		for l.head != nil && l.head.at <= now {
			p := s.takeLocked(l.head.id)
			over = append(over, p)
			if p == s.rcaller {
				s.interruptLocked() // it reads: it stops, and finds its error
			}
		}
	}
	if at := s.deadlines.soonest(); at != 0 && s.err == nil {
		s.armed = at
		s.timer.Reset(time.Duration(at - now))
	}
	end := (s.closing || s.away) && len(s.pending) == 0 && len(over) > 0
	s.mu.Unlock()
	for _, p := range over {
		p.to.deliver(nil, fmt.Errorf("%w within %v", errNoAnswer, p.bound))
	}
	if end {
		s.nc.Close()
	}
}

// boundLists holds pending calls by their bound, each list in the order
// the calls were sent: as a connection's clock only goes on, the first of
// a list is its soonest, and a call goes in and out in constant time.
type boundLists map[time.Duration]*boundList

// boundList is the calls of one bound, oldest first.
type boundList struct{ head, tail *pendingCall }

// keepLists is how many empty lists are kept for bounds to come (a
// connection's calls mostly have the client's CallTimeout).
const keepLists = 4

func (ls *boundLists) add(p *pendingCall) {
	if *ls == nil {
		*ls = boundLists{}
	}
	l := (*ls)[p.bound]
	if l == nil {
		l = &boundList{}
		(*ls)[p.bound] = l
	}
	p.list, p.prev, p.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = p
	} else {
		l.head = p
	}
	l.tail = p
}

func (ls boundLists) remove(p *pendingCall) {
	l := p.list
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		l.head = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		l.tail = p.prev
	}
	p.list, p.prev, p.next = nil, nil, nil
	if l.head == nil && len(ls) > keepLists {
		delete(ls, p.bound)
	}
}

// soonest is the end of the soonest bound, 0 if none.
func (ls boundLists) soonest() int64 {
	var at int64
	for _, l := range ls {
		if l.head != nil && (at == 0 || l.head.at < at) {
			at = l.head.at
		}
	}
	return at
}

// len is how many calls the lists hold.
func (ls boundLists) len() int {
	n := 0
	for _, l := range ls {
		for p := l.head; p != nil; p = p.next {
			n++
		}
	}
	return n
}

// abandon asks the server to end call id's wait.
func (s *sessionConn) abandon(id uint64) {
	s.w.Send(&v1.Call{Id: id, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}}) // a failure ends the connection: the reader tells
}

// read is the reader goroutine: it matches the server's replies to the
// calls in flight until none is pending (or, on a connection that cannot
// be probed, until the connection ends).
func (s *sessionConn) read() {
	if s.h.onReader != nil {
		s.h.onReader()
	}
	for s.readOne() {
		s.mu.Lock()
		if s.probe != nil && len(s.pending) == 0 { // a caller reads only once nobody does
			s.reading = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// readFor is a caller reading the replies, its own (p's, to come on ch)
// and others', until its own has come, ctx ends or its bound passed; then
// the reader goroutine reads for the calls still pending. A lone call so
// reads its answer itself: no goroutine wakes another for it.
func (s *sessionConn) readFor(ctx context.Context, p *pendingCall, ch chanReply) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() {
			s.mu.Lock()
			if s.rcaller == p {
				s.interruptLocked()
			}
			s.mu.Unlock()
		})
		defer stop()
	}
	for len(ch) == 0 {
		s.mu.Lock()
		stop := s.interrupted
		s.mu.Unlock()
		if stop {
			s.release(p)
			return
		}
		poll := s.br.Buffered() == 0
		if poll {
			s.poll.Poll()
		}
		if !s.readOne() {
			s.release(p)
			return
		}
		if poll {
			s.poll.Waited()
		}
	}
	// The replies that came with its own, read already, go to their
	// calls before the reading passes on: often all there are.
	for session.FrameBuffered(s.br) && s.readOne() {
	}
	s.release(p)
}

// interruptLocked asks the caller that reads to stop: at once if it waits
// for a frame to begin (a read deadline in the past), else once the frame
// it reads is whole.
func (s *sessionConn) interruptLocked() {
	s.interrupted = true
	if !s.inFrame {
		s.nc.SetReadDeadline(time.Unix(1, 0))
	}
	if s.h.onInterrupt != nil {
		s.h.onInterrupt()
	}
}

// release ends caller p's reading: the reader goroutine goes on if calls
// are pending.
func (s *sessionConn) release(p *pendingCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rcaller != p {
		return
	}
	s.rcaller = nil
	if s.interrupted {
		s.interrupted = false
		s.nc.SetReadDeadline(time.Time{})
	}
	if s.err == nil && len(s.pending) > 0 {
		go s.read()
		return
	}
	s.reading = false
}

// readOne reads one reply and hands it to its call; false means the
// connection ended (fail was called), or a caller that reads was
// interrupted before a frame began.
func (s *sessionConn) readOne() bool {
	if _, err := s.br.Peek(1); err != nil {
		s.mu.Lock()
		stopped := s.interrupted && s.rcaller != nil && errors.Is(err, os.ErrDeadlineExceeded)
		s.mu.Unlock()
		if !stopped {
			s.fail(err)
		}
		return false
	}
	s.mu.Lock()
	s.inFrame = true
	if s.interrupted {
		s.nc.SetReadDeadline(time.Time{}) // set as the frame began: it is read whole
	}
	caller := s.rcaller != nil
	s.mu.Unlock()
	if caller && s.h.onFrame != nil {
		s.h.onFrame()
	}
	f, err := session.ReadFrame(s.br, maxReplyBytes, s.rbuf)
	s.mu.Lock()
	s.inFrame = false
	s.mu.Unlock()
	if err != nil {
		s.fail(err)
		return false
	}
	s.rbuf = f
	id, kind, ok := replyHead(f)
	if !ok {
		s.fail(fmt.Errorf("%w: a Reply that is not protobuf", session.ErrBadFrame))
		return false
	}
	var p *pendingCall
	end := false
	if id != 0 {
		s.mu.Lock()
		p = s.takeLocked(id)
		end = (s.closing || s.away) && len(s.pending) == 0
		s.mu.Unlock()
	}
	var r *v1.Reply
	if p != nil {
		if ri, ok := p.to.(replyInto); ok {
			r = ri.replyFor(kind)
		}
	}
	if r != nil {
		err = mergeReply.Unmarshal(f, r)
	} else {
		r = new(v1.Reply)
		err = proto.Unmarshal(f, r)
	}
	if err != nil {
		err = fmt.Errorf("%w: %v", session.ErrBadFrame, err)
		s.fail(err)
		if p != nil {
			p.to.deliver(nil, fmt.Errorf("%w: %w", errSessionLost, err))
		}
		return false
	}
	if id == 0 {
		if g := r.GetGoingAway(); g != nil {
			s.goingAway(g.GetLastCallId())
		}
		return true // a Reply of id 0 answers no call: one of a newer server is ignored
	}
	if p != nil {
		p.to.deliver(r, nil)
	}
	if end {
		s.nc.Close()
	}
	return true
}

// replyInto is a replyTo that decodes its reply into a Reply it holds,
// wired for the answer it expects, when the reply's field is kind; it
// returns nil for a reply to be decoded into a fresh Reply. Its deliver
// must be done with that Reply when it returns.
type replyInto interface {
	replyFor(kind protowire.Number) *v1.Reply
}

// mergeReply decodes into a Reply whose messages are set and empty, so
// that the decoder fills them instead of allocating its own.
var mergeReply = proto.UnmarshalOptions{Merge: true}

// replyHead returns a Reply's id (field 1) and the number of the last of
// its other fields (the reply's kind), from its bytes; false if they are
// not well-formed protobuf at their top level.
func replyHead(b []byte) (id uint64, kind protowire.Number, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, 0, false
			}
			id = v
		} else {
			kind = num
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, 0, false
		}
		b = b[n:]
	}
	return id, kind, true
}

// goingAway handles the server's GoingAway: no call is sent on the
// connection any more (the next call opens a new session), every call in
// flight of an id above last was not read and fails as not sent (the
// retrier sends it again, elsewhere or later), and the calls the server
// read wait for their answers; the connection ends once none is left.
func (s *sessionConn) goingAway(last uint64) {
	s.mu.Lock()
	if s.err != nil || s.away {
		s.mu.Unlock()
		return
	}
	s.away = true
	var unread []*pendingCall
	for id := range s.pending {
		if id > last {
			unread = append(unread, s.takeLocked(id))
		}
	}
	end := len(s.pending) == 0
	s.mu.Unlock()
	h := s.h
	h.mu.Lock()
	if h.conn == s {
		h.conn = nil
	}
	h.mu.Unlock()
	err := &notSentError{errGoingAway}
	for _, p := range unread {
		p.to.deliver(nil, err)
	}
	if end {
		s.nc.Close()
	}
}

// fail ends the connection: every call in flight learns that it may
// have been taken, and the next call opens a new session.
func (s *sessionConn) fail(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	s.err = cause
	pending := s.pending
	s.pending = nil
	for _, l := range s.deadlines {
		for p := l.head; p != nil; {
			next := p.next
			p.list, p.prev, p.next = nil, nil, nil
			p = next
		}
	}
	s.deadlines = nil
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.nc.Close()
	h := s.h
	h.mu.Lock()
	if h.conn == s {
		h.conn = nil
	}
	h.mu.Unlock()
	err := fmt.Errorf("%w: %w", errSessionLost, cause)
	for _, p := range pending {
		p.to.deliver(nil, err)
	}
	if h.onEnd != nil {
		h.onEnd()
	}
}

// shutdown ends the connection once no call is in flight (Client.Close).
func (s *sessionConn) shutdown() {
	s.mu.Lock()
	s.closing = true
	end := len(s.pending) == 0
	s.mu.Unlock()
	if end {
		s.nc.Close()
	}
}

// closeSessions ends the client's sessions as their calls finish.
func (c *Client) closeSessions() {
	c.mu.Lock()
	hosts := make([]*sessionHost, 0, len(c.sessions))
	for _, h := range c.sessions {
		hosts = append(hosts, h)
	}
	c.mu.Unlock()
	for _, h := range hosts {
		h.mu.Lock()
		conn := h.conn
		h.conn = nil
		h.mu.Unlock()
		if conn != nil {
			conn.shutdown()
		}
	}
}

// reply is what a call over a session got: its reply, or the error that
// ended it.
type reply struct {
	r   *v1.Reply
	err error
}

// replyError is the error a reply carries, rebuilt as the unary call's
// answer would be, or nil.
func replyError(r *v1.Reply) error {
	if e := r.GetError(); e != nil {
		return wire.ItemError(e)
	}
	return nil
}

// sessionTry is one try of call on the session to base, bounded by bound
// (or what is left of ctx's deadline, if less), as try is for a unary
// call. parked marks a waiting claim: it takes a parked slot, and a ctx
// that ends while it waits sends Abandon. errNoSession means the call was
// not sent and goes as a unary RPC.
func (c *Client) sessionTry(ctx context.Context, base string, call *v1.Call, parked bool, bound time.Duration) (*v1.Reply, error) {
	h := c.sessionHost(base)
	conn, err := h.get(ctx, bound)
	if err != nil {
		return nil, err
	}
	sl := &h.calls
	if parked {
		sl = &h.parked
	}
	if err := sl.acquire(ctx); err != nil {
		return nil, err
	}
	defer sl.release()
	call.TimeoutMicros = callTimeout(ctx, bound)
	ch := make(chanReply, 1)
	// The bound is the connection's to keep (one timer for every call):
	// a try it cuts gets errNoAnswer.
	var within time.Duration
	if dl, ok := ctx.Deadline(); bound > 0 && (!ok || time.Until(dl) > bound) {
		within = bound
	}
	p := &pendingCall{to: ch}
	id, reader, err := conn.send(call, p, within, !parked)
	if err != nil {
		return nil, err
	}
	if reader {
		conn.readFor(ctx, p, ch)
	}
	select {
	case r := <-ch:
		return r.r, firstErr(r.err, replyError(r.r))
	case <-ctx.Done():
	}
	if parked {
		// The server answers an abandoned wait at once, with any lease it
		// took as the wait ended: better the caller's than nobody's.
		conn.abandon(id)
		t := time.NewTimer(abandonWait)
		defer t.Stop()
		select {
		case r := <-ch:
			if r.err == nil && replyError(r.r) == nil {
				return r.r, nil
			}
		case <-t.C:
		}
	}
	conn.remove(id)
	return nil, ctx.Err()
}

// callTimeout is a call's Call.timeout_micros: what is left of ctx's
// deadline, or bound if less (0: neither), as a unary call's
// Connect-Timeout-Ms header would say; at least 1 (a deadline that just
// passed is the server's to answer).
func callTimeout(ctx context.Context, bound time.Duration) uint64 {
	d := bound
	dl, ok := ctx.Deadline()
	if ok {
		if left := time.Until(dl); d <= 0 || left < d {
			d = left
		}
	}
	if !ok && d <= 0 {
		return 0
	}
	return uint64(max(d.Microseconds(), 1))
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sessionOp is how one call of engine.API goes on a session: wrap makes
// the Call of a request, unwrap takes the answer from a Reply (nil when
// the Reply holds another kind).
type sessionOp[Req, Res any] struct {
	wrap   func(*Req) *v1.Call
	unwrap func(*v1.Reply) *Res
	parked bool // a waiting claim
}

func (op *sessionOp[Req, Res]) try(ctx context.Context, c *Client, base string, msg *Req, bound time.Duration) (*Res, error) {
	r, err := c.sessionTry(ctx, base, op.wrap(msg), op.parked, bound)
	if err != nil {
		return nil, err
	}
	res := op.unwrap(r)
	if res == nil {
		return nil, fmt.Errorf("docket: the server answered call %d with %T", r.GetId(), r.GetReply())
	}
	return res, nil
}

// probeConn returns a function that reports whether the peer ended nc
// (io.EOF, or the socket's error) without reading from it: a peek that
// does not wait. Bytes waiting (a reply the caller gave up on, a
// GoingAway) are left for the reader. Nil where nc cannot be peeked at:
// then the reader goroutine reads the connection for as long as it is
// open.
func probeConn(nc net.Conn) func() error {
	p := session.NewPeek(nc)
	if p == nil {
		return nil
	}
	return func() error {
		_, err := p.Ask()
		return err
	}
}
