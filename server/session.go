package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
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

// This file serves sessions (proto/docket/v1/session.proto): many calls in
// flight on one connection, answered in any order. The reader of a session
// reads a frame (waiting as long as the client likes between frames), then
// every whole frame already buffered, and runs that batch: in order, on a
// standalone DB with one engine.DeferDurable context, so that the batch's
// commits share one sync of the log, and its Enqueue calls in a row as one
// engine.DB.EnqueueRun, so that they are one engine step (one record of the
// log), each with the answer it would have had alone; then it hands the batch to the
// session's answerer, which waits for that sync and writes the replies
// while the reader goes on with the next batch; the answerer answers the
// batches it finds queued together (one sync, one write). A batch with no
// fsync to wait for (its calls wrote nothing, or the DB does not sync each
// commit) and none ahead of it is answered by the reader itself, and so is
// every batch of a client that calls one at a time (session.LoneStreak
// lone calls in a row), whose next call cannot come during the fsync. A
// ClaimWait waits on a goroutine of its own and answers when it ends; on a
// replicated DB (whose commits wait for the replicated log inside each
// call) every call does.

// Session bounds.
const (
	// sessionParallel bounds the calls of one session that run at once
	// on a replicated DB.
	sessionParallel = eachParallel
	// sessionPipeline is how many batches the reader may run ahead of the
	// answerer's waits for the log.
	sessionPipeline = 2
	// sessionWriteTimeout bounds one write of replies to a client: one
	// that takes none of it for that long loses its session.
	sessionWriteTimeout = 30 * time.Second
	// keepFrameBuf bounds the frame buffer a reader keeps between frames.
	keepFrameBuf = 64 << 10
)

// sessionInFlight bounds the calls of one session read and not yet
// answered; past it the reader stops reading until one is answered (a
// variable for tests).
var sessionInFlight = 4096

// errSessionEnded is the cause of a session's context once its reader
// stopped.
var errSessionEnded = errors.New("docket: the session ended")

// sess is one session on one connection.
type sess struct {
	s    *Server
	conn net.Conn
	br   *bufio.Reader
	w    *session.Writer
	id   string
	ci   callInfo
	auth atomic.Pointer[callInfo] // ci once authenticated, for a reload of the tokens
	log  *slog.Logger

	ctx    context.Context // the calls' context: the caller, stale reads
	cancel context.CancelCauseFunc

	stopping atomic.Bool   // stop was called: read no more calls
	stopped  chan struct{} // closed by stop
	stopOnce sync.Once

	slots   chan struct{} // calls in flight (sessionInFlight)
	par     chan struct{} // calls running at once on a replicated DB
	answers chan *sbatch  // batches waiting for their sync, to answer
	calls   sync.WaitGroup
	queued  atomic.Int32 // batches handed to the answerer and not yet answered

	waitMu sync.Mutex
	waits  map[uint64]context.CancelFunc // ClaimWaits by call id, for Abandon

	frame []byte          // the reader's frame buffer
	batch []scall         // the reader's batch of calls, reused
	spare []*enqueueFrame // Enqueue calls to decode into (readCall)
	large bool            // the reader holds the server's large body slot
	lbuf  []byte          // and the slot's frame buffer (Server.largeBufs)
	poll  *session.Poller // asks for the next call a little before the reader waits
	lones session.Streak  // the client's lone calls in a row (the reader records them)
	last  uint64          // the highest id of a call the reader ran or answered (GoingAway)

	erun []engine.RunEnqueue // the run of Enqueue calls the reader holds (flushRun)
	eat  []int               // and where their results are in the batch
}

// sbatch is the calls of one read, run and waiting to be answered.
type sbatch struct {
	deferred *engine.Deferred
	results  []sresult
}

// sresult is one call's outcome.
type sresult struct {
	id   uint64
	rt   *route // nil: refused before it was routed
	res  proto.Message
	err  error
	slot *usage // the caller's call slot (limiter.take), nil if none
}

type sessionWaitKey struct{}

// sessionWait is what a session gives the ClaimWait it runs on a goroutine
// of its own (park): the context whose end ends its wait as the server's
// own end of it does (the session's Abandon of the call), and the caller's
// parked slot the session's reader took for it before it started the
// goroutine, so that a claim over the caller's limit is refused by the
// reader and costs no goroutine.
type sessionWait struct {
	abandon context.Context
	release func() // gives back the parked slot; may be called again
}

// sessionWaitOf returns the sessionWait of a session's ClaimWait, or nil.
func sessionWaitOf(ctx context.Context) *sessionWait {
	w, _ := ctx.Value(sessionWaitKey{}).(*sessionWait)
	return w
}

// sessions tracks the sessions being served, so that none outlives Serve.
type sessions struct {
	mu     sync.Mutex
	all    map[*sess]struct{}
	closed bool // Serve is stopping: no new session
	wg     sync.WaitGroup
}

// add registers x, or reports false once the server stopped taking sessions.
func (ss *sessions) add(x *sess) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	if ss.all == nil {
		ss.all = map[*sess]struct{}{}
	}
	ss.all[x] = struct{}{}
	ss.wg.Add(1)
	return true
}

func (ss *sessions) remove(x *sess) {
	ss.mu.Lock()
	delete(ss.all, x)
	ss.mu.Unlock()
	ss.wg.Done()
}

// each calls f for every session being served.
func (ss *sessions) each(f func(*sess)) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for x := range ss.all {
		f(x)
	}
}

// ServeSession serves a session on conn, whose preface (in cleartext) has
// been read, and returns when it ended; it closes conn.
func (s *Server) ServeSession(conn net.Conn) {
	x := &sess{
		s:       s,
		conn:    conn,
		br:      bufio.NewReaderSize(conn, session.BufSize),
		w:       session.NewWriter(&deadlineWriter{conn}),
		id:      s.newRequestID(),
		log:     s.log,
		stopped: make(chan struct{}),
		slots:   make(chan struct{}, sessionInFlight),
		par:     make(chan struct{}, sessionParallel),
		answers: make(chan *sbatch, sessionPipeline),
		waits:   map[uint64]context.CancelFunc{},
	}
	x.poll = session.NewPoller(conn, s.busyPoll, s.pollGate, &x.lones)
	if !s.sessions.add(x) {
		conn.Close()
		return
	}
	defer s.sessions.remove(x)
	defer conn.Close()
	if !x.handshake() {
		return
	}
	x.serve()
}

// deadlineWriter writes to a connection, each write within
// sessionWriteTimeout.
type deadlineWriter struct{ c net.Conn }

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.c.SetWriteDeadline(time.Now().Add(sessionWriteTimeout))
	return d.c.Write(p)
}

// refuseSession answers a Hello with err (a Reply of id 0).
func (x *sess) refuseSession(err error) {
	ce := wire.ToConnect(err)
	x.log.Info("docket: session refused", "req", x.id, "remote", x.conn.RemoteAddr().String(), "code", ce.Code().String(), "err", err)
	x.w.Send(&v1.Reply{Reply: &v1.Reply_Error{Error: wire.PBItemError(ce)}})
}

// handshake reads the Hello (within BodyTimeout), authenticates its token
// and answers with a Welcome; false means the session is refused.
func (x *sess) handshake() bool {
	s := x.s
	x.conn.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
	if x.stopping.Load() { // stop's deadline may have just been replaced
		return false
	}
	var hello v1.Hello
	if err := session.ReadMessage(x.br, session.MaxHelloBytes, &hello); err != nil {
		x.log.Info("docket: session ended before its hello", "req", x.id, "remote", x.conn.RemoteAddr().String(), "err", readErr(err, s.opts.BodyTimeout))
		return false
	}
	x.conn.SetReadDeadline(time.Time{})
	if hello.GetVersion() != session.Version {
		x.refuseSession(connect.NewError(connect.CodeUnimplemented,
			fmt.Errorf("docket: session version %d is not served here (version %d is)", hello.GetVersion(), session.Version)))
		return false
	}
	ci := callInfo{id: x.id}
	if s.opts.Tokens != nil {
		c, ok := s.opts.Tokens.Authenticate(hello.GetToken())
		if !ok {
			x.refuseSession(connect.NewError(connect.CodeUnauthenticated, ErrUnauthenticated))
			return false
		}
		ci.caller, ci.token = &c, hashToken(hello.GetToken())
	}
	x.ci = ci
	x.auth.Store(&x.ci)
	ctx := context.WithValue(context.Background(), callerKey{}, ci)
	if hello.GetStaleReads() && s.opts.Cluster != nil {
		ctx = engine.WithStaleReads(ctx)
	}
	x.ctx, x.cancel = context.WithCancelCause(ctx)
	// A reload between the check above and now is not missed: the session
	// is registered (sessions.add) before the check below.
	if ci.caller != nil && !s.opts.Tokens.holds(ci.token, ci.caller.ID) {
		x.refuseSession(connect.NewError(connect.CodeUnauthenticated, ErrUnauthenticated))
		return false
	}
	err := x.w.Send(&v1.Welcome{
		Version:       session.Version,
		Session:       x.id,
		MaxCalls:      uint32(s.lim.maxCalls),
		MaxParked:     uint32(s.lim.maxParked),
		MaxFrameBytes: uint64(s.opts.MaxRequestBytes),
	})
	if err != nil {
		return false
	}
	x.log.Debug("docket: session opened", "req", x.id, "remote", x.conn.RemoteAddr().String(),
		"caller", ci.callerID(), "client", hello.GetClient())
	return true
}

// readErr names what went wrong reading a session.
func readErr(err error, timeout time.Duration) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("docket: a frame did not arrive within %v (docket serve -body-timeout)", timeout)
	}
	return err
}

// stop makes the reader stop reading calls; what was read is answered,
// then the session closes. It does not block.
func (x *sess) stop() {
	x.stopOnce.Do(func() {
		x.stopping.Store(true)
		close(x.stopped)
		x.conn.SetReadDeadline(time.Unix(1, 0)) // wakes the reader
	})
}

// serve runs the session's reader until the client closes, a frame is
// refused, or stop; then it answers what was read and closes.
func (x *sess) serve() {
	s := x.s
	done := make(chan struct{})
	go func() {
		defer close(done)
		var bs []*sbatch
		for b := range x.answers {
			bs = append(bs[:0], b)
			if s.onAnswerer != nil {
				s.onAnswerer()
			}
		more:
			for len(bs) < cap(x.answers)+1 {
				select {
				case b, ok := <-x.answers:
					if !ok {
						break more
					}
					bs = append(bs, b)
				default:
					break more
				}
			}
			x.answerAll(bs)
			clear(bs)
		}
	}()
	err := x.read()
	switch {
	case x.stopping.Load():
		// A clean stop (shutdown, a revoked token): tell the client which
		// calls were not read, so that it may send them again elsewhere,
		// and answer what was read.
		x.w.Send(&v1.Reply{Reply: &v1.Reply_GoingAway{GoingAway: &v1.GoingAway{LastCallId: x.last}}})
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		x.cancel(errSessionEnded)
	default:
		x.log.Info("docket: session ended", "req", x.id, "remote", x.conn.RemoteAddr().String(),
			"caller", x.ci.callerID(), "err", readErr(err, s.opts.BodyTimeout))
		x.cancel(errSessionEnded)
	}
	close(x.answers)
	<-done
	x.calls.Wait()
	x.w.Wait()
	x.cancel(errSessionEnded)
}

// read reads and runs batches of calls until it cannot.
func (x *sess) read() error {
	s := x.s
	deadline := false
	defer x.releaseLarge()
	for !x.stopping.Load() {
		if deadline {
			x.conn.SetReadDeadline(time.Time{})
			deadline = false
			if x.stopping.Load() { // stop's deadline may have just been lifted
				return nil
			}
		}
		// Idle: as long as the client likes. With no call in flight, the
		// client's next is likely on its way: the reader asks for it in a
		// loop a little first (session.Poller).
		idle := x.br.Buffered() == 0 && len(x.slots) == 0
		if idle {
			x.poll.Poll()
		}
		if _, err := x.br.Peek(1); err != nil {
			return err
		}
		if idle {
			x.poll.Waited()
		}
		if !session.FrameBuffered(x.br) {
			// The rest of a frame that began must arrive within
			// BodyTimeout.
			x.conn.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
			deadline = true
		}
		calls := x.batch[:0]
		for {
			c, err := x.readCall()
			if err != nil {
				return err
			}
			calls = append(calls, c)
			if !session.FrameBuffered(x.br) {
				break
			}
		}
		// A lone call: the only one read, with none in flight before it.
		x.lones.Record(len(calls) == 1 && len(x.slots) == 0)
		b := x.run(calls)
		if !x.s.replicated() {
			// The calls ran and are done with their requests (on a
			// replicated DB they run on goroutines of their own).
			for i := range calls {
				if e := calls[i].spare; e != nil {
					x.spare = append(x.spare, e)
				}
			}
		}
		// The requests are dropped before the large body slot is given
		// back: the next large frame, of this session or another, is then
		// read while this one's request (a copy of its frame's strings
		// and bytes) is garbage, not alongside it.
		clear(calls)
		x.batch = calls[:0]
		x.releaseLarge()
		if b != nil {
			x.answer(b)
		}
	}
	return nil
}

// readCall reads and decodes one frame: a Call, held to the request limit
// (and, past its first MiB, read only while holding the server's large
// body slot) and to the engine's element limits before it is built.
func (x *sess) readCall() (scall, error) {
	s := x.s
	n, err := session.ReadLen(x.br, int(s.opts.MaxRequestBytes))
	if err != nil {
		return scall{}, err
	}
	buf := x.frame
	if n > largeBodyBytes {
		// Read only while no other large frame or body is, and held
		// until the call has run (read releases it); the one frame under
		// the slot is allocated whole, as an HTTP body would be.
		if !x.large {
			if err := x.waitLarge(); err != nil {
				return scall{}, err
			}
			x.large, x.lbuf = true, <-s.largeBufs
		}
		buf = x.lbuf
	}
	b, err := session.ReadBody(x.br, n, buf)
	if err != nil {
		return scall{}, err
	}
	switch {
	case n > largeBodyBytes:
		// Decoding copies what the call keeps: the buffer is the slot's
		// again for its next large frame.
		x.lbuf = b[:0]
	case cap(b) <= keepFrameBuf:
		x.frame = b
	}
	if err := wire.CheckRequest(b, callDesc, s.maxValue); err != nil {
		id, ok := callID(b)
		if !ok {
			return scall{}, fmt.Errorf("%w: %v", session.ErrBadFrame, err)
		}
		// A well-formed call over the engine's limits fails alone, as a
		// unary request would, in the words connect gives a unary
		// request its codec refused.
		return scall{id: id, refused: connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("unmarshal message: %w", err))}, nil
	}
	var c *v1.Call
	var spare *enqueueFrame
	if callKind(b) == enqueueField.Number() {
		spare = x.spareEnqueue()
		c = spare.wired()
		err = mergeCall.Unmarshal(b, c)
	} else {
		c = new(v1.Call)
		err = proto.Unmarshal(b, c)
	}
	if err != nil {
		return scall{}, fmt.Errorf("%w: %v", session.ErrBadFrame, err)
	}
	sc := scall{id: c.GetId(), c: c, spare: spare}
	if t := c.GetTimeoutMicros(); t > 0 {
		sc.deadline = time.Now().Add(time.Duration(min(t, uint64(math.MaxInt64/1000))) * time.Microsecond)
	}
	return sc, nil
}

// scall is a call read: decoded, or refused before it was.
type scall struct {
	id       uint64
	c        *v1.Call
	refused  error
	deadline time.Time     // from Call.timeout_micros, zero for none
	spare    *enqueueFrame // what c was decoded into, reused once the call ran; nil if c is its own
}

// enqueueFrame is a Call wired for an Enqueue, which the reader decodes an
// Enqueue's frame into and reuses once the call ran: the request's
// messages are made once per session, not per call. What the decoder
// allocates for the request's bytes, strings and maps is new each time,
// and only those outlive the call (in the engine's task).
type enqueueFrame struct {
	call v1.Call
	wrap v1.Call_Enqueue
	req  v1.EnqueueRequest
	task v1.Task
	ns   v1.Namespace
}

// mergeCall decodes into an enqueueFrame, whose messages are set and empty,
// so that the decoder fills them instead of allocating its own.
var mergeCall = proto.UnmarshalOptions{Merge: true}

// spareEnqueue returns a spare enqueueFrame, or a new one.
func (x *sess) spareEnqueue() *enqueueFrame {
	if n := len(x.spare); n > 0 {
		e := x.spare[n-1]
		x.spare[n-1] = nil
		x.spare = x.spare[:n-1]
		return e
	}
	return new(enqueueFrame)
}

// wired empties e's messages and wires them together as an Enqueue's Call.
func (e *enqueueFrame) wired() *v1.Call {
	e.call.Reset()
	e.wrap = v1.Call_Enqueue{}
	e.req.Reset()
	e.task.Reset()
	e.ns.Reset()
	e.req.Task, e.req.Namespace = &e.task, &e.ns
	e.wrap.Enqueue = &e.req
	e.call.Call = &e.wrap
	return &e.call
}

// callKind returns the number of the last field of a Call's bytes other
// than its id and timeout (the field of its oneof that decoding keeps), 0
// if none or if the bytes are not well-formed protobuf at their top level.
func callKind(b []byte) protowire.Number {
	var kind protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0
		}
		b = b[n:]
		if num != 1 && num != 3 {
			kind = num
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0
		}
		b = b[n:]
	}
	return kind
}

// errCallTimedOut answers a call whose time ran out before it ran.
var errCallTimedOut = connect.NewError(connect.CodeDeadlineExceeded,
	errors.New("docket: the call's deadline passed before it ran"))

// withDeadline bounds ctx by the call's deadline, if it has one.
func (sc *scall) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if sc.deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, sc.deadline)
}

// callID returns the id of a Call's bytes that are well-formed protobuf at
// their top level.
func callID(b []byte) (uint64, bool) {
	var id uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false
			}
			id = v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return id, true
}

// releaseLarge gives back the large body slot, if the reader holds it.
func (x *sess) releaseLarge() {
	if x.large {
		x.large = false
		x.s.largeBufs <- x.lbuf
		x.lbuf = nil
		<-x.s.large
		if x.s.onLargeReleased != nil {
			x.s.onLargeReleased()
		}
	}
}

// waitLarge takes the server's large body slot, waiting at most
// BodyTimeout.
func (x *sess) waitLarge() error {
	t := time.NewTimer(x.s.opts.BodyTimeout)
	defer t.Stop()
	expired := t.C
	if x.s.largeTimer != nil {
		expired = x.s.largeTimer(x.s.opts.BodyTimeout)
	}
	select {
	case x.s.large <- struct{}{}:
		return nil
	case <-expired:
		return fmt.Errorf("docket: a frame of over %d bytes waited %v for the server to read it (docket serve -body-timeout)",
			largeBodyBytes, x.s.opts.BodyTimeout)
	case <-x.stopped:
		return net.ErrClosed
	}
}

// slot takes one of the session's in-flight slots, waiting for one to be
// given back if need be; false means the session is stopping.
func (x *sess) slot() bool {
	select {
	case x.slots <- struct{}{}:
		return true
	default:
	}
	select {
	case x.slots <- struct{}{}:
		return true
	case <-x.stopped:
		return false
	}
}

func (x *sess) unslot() { <-x.slots }

// replicated reports whether the DB's commits wait for durability inside
// each call (engine.DeferDurable defers nothing).
func (s *Server) replicated() bool {
	r, ok := s.db.(interface{ Replicated() bool })
	return ok && r.Replicated()
}

// run runs a batch of calls, and returns the batch if the reader is to
// answer it itself (nil if there is nothing to answer, or the answerer
// will).
func (x *sess) run(calls []scall) *sbatch {
	s := x.s
	b := &sbatch{}
	dctx := x.ctx
	par := s.replicated()
	if !par {
		dctx, b.deferred = engine.DeferDurable(x.ctx)
	}
	// Enqueue calls in a row are held and run together (flushRun), before
	// any other call runs, so that they commit in one engine step. er is
	// the DB that runs them, looked up at the first Enqueue.
	var er enqueueRunner
	erKnown := par
calls:
	for _, sc := range calls {
		if sc.refused != nil {
			if !x.slot() {
				break
			}
			x.last = max(x.last, sc.id)
			b.results = append(b.results, sresult{id: sc.id, err: sc.refused})
			continue
		}
		c := sc.c
		fd := c.ProtoReflect().WhichOneof(callOneof)
		if fd == abandonField {
			x.abandon(c.Id)
			continue
		}
		if !x.slot() {
			break
		}
		x.last = max(x.last, c.Id)
		var rt *route
		if fd != nil {
			rt = s.routes[fd.Number()]
		}
		if rt == nil {
			b.results = append(b.results, sresult{id: c.Id, err: connect.NewError(connect.CodeUnimplemented,
				errors.New("docket: a call this server does not know (an empty or newer Call)"))})
			continue
		}
		if !sc.deadline.IsZero() && !time.Now().Before(sc.deadline) {
			// Its time ran out before it ran (waiting behind others of
			// its batch, or for a slot): answered without running.
			b.results = append(b.results, sresult{id: c.Id, rt: rt, err: errCallTimedOut})
			continue
		}
		req := c.ProtoReflect().Get(fd).Message().Interface()
		if fd == enqueueField && !erKnown {
			er, erKnown = s.enqueueRunner(x.ctx), true
		}
		if fd != enqueueField || er == nil {
			x.flushRun(dctx, er, b)
		}
		if fd == claimWaitFld {
			// Its parked slot is taken here, so that one over the
			// caller's limit is refused without a goroutine, and it is
			// registered here, not on its goroutine, so that an Abandon
			// read right after it finds it.
			release, err := s.lim.acquireParked(x.ci.callerID())
			if err != nil {
				b.results = append(b.results, sresult{id: c.Id, rt: rt, err: connect.NewError(connect.CodeResourceExhausted, err)})
				continue
			}
			actx, abandon := context.WithCancel(context.Background())
			x.waitMu.Lock()
			x.waits[c.Id] = abandon
			x.waitMu.Unlock()
			x.calls.Add(1)
			go x.claimWait(c.Id, sc, rt, req, &sessionWait{abandon: actx, release: release}, abandon)
			continue
		}
		caller := x.ci.callerID()
		slot, err := s.lim.take(caller)
		if err != nil {
			b.results = append(b.results, sresult{id: c.Id, rt: rt, err: connect.NewError(connect.CodeResourceExhausted, err)})
			continue
		}
		if s.onCall != nil {
			s.onCall()
		}
		if par {
			x.calls.Add(1)
			select {
			case x.par <- struct{}{}:
			case <-x.stopped:
				s.lim.give(caller, slot, 1, 0)
				x.unslot()
				x.calls.Done()
				break calls
			}
			go func(id uint64, sc scall) {
				defer x.calls.Done()
				ctx, cancel := sc.withDeadline(x.ctx)
				res, err := x.call(ctx, id, rt, req)
				cancel()
				s.lim.give(caller, slot, 1, 0)
				<-x.par
				x.sendRan(&sbatch{results: []sresult{{id: id, rt: rt, res: res, err: err}}})
			}(c.Id, sc)
			continue
		}
		if fd == enqueueField && er != nil {
			if x.holdEnqueue(c.Id, rt, req.(*v1.EnqueueRequest), slot, b) {
				continue
			}
		}
		ctx, cancel := sc.withLazyDeadline(dctx)
		res, err := x.call(ctx, c.Id, rt, req)
		cancel()
		b.results = append(b.results, sresult{id: c.Id, rt: rt, res: res, err: err, slot: slot})
	}
	x.flushRun(dctx, er, b)
	if len(b.results) == 0 {
		return nil
	}
	if x.queued.Load() == 0 && (b.deferred == nil || !b.deferred.Syncs() || x.lones.Steady()) {
		// No batch ahead, and no fsync to wait for (nothing deferred, or
		// a DB that does not sync each commit: the wait writes the log
		// out) or a client that calls one at a time (LoneStreak lone
		// calls in a row: nothing comes to read while the fsync runs):
		// the reader answers it, without the answerer's hop, once it
		// dropped the calls' requests and gave back the large body slot
		// (read). Waking the answerer costs a lone call tens of
		// microseconds on a machine whose idle processors halt.
		return b
	}
	x.queued.Add(1)
	x.answers <- b
	if s.onHandoff != nil {
		s.onHandoff()
	}
	return nil
}

// holdEnqueue adds an Enqueue call to the run the reader holds, its
// result to be set in b when the run is flushed; false if the call is to
// run on its own (a request that does not decode: its error is the
// call's, as alone).
func (x *sess) holdEnqueue(id uint64, rt *route, m *v1.EnqueueRequest, slot *usage, b *sbatch) bool {
	t, ops, err := decodeEnqueue(m)
	if err != nil {
		return false
	}
	x.erun = append(x.erun, engine.RunEnqueue{Namespace: wire.Namespace(m.GetNamespace()), Queue: m.GetQueue(), Task: t, Ops: ops})
	x.eat = append(x.eat, len(b.results))
	b.results = append(b.results, sresult{id: id, rt: rt, slot: slot})
	return true
}

// flushRun runs the Enqueue calls the reader holds, as one run of the
// engine (in as few steps as it can), and sets their results in b. A
// panic is recovered as Internal for each of them.
func (x *sess) flushRun(ctx context.Context, er enqueueRunner, b *sbatch) {
	if len(x.erun) == 0 {
		return
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				x.log.Error("docket: panic in a call", "req", x.reqID(b.results[x.eat[0]].id), "procedure", enqueueProc, "panic", p)
				for i := range x.erun {
					x.erun[i].Err = connect.NewError(connect.CodeInternal, errors.New("docket: internal error"))
				}
			}
		}()
		er.EnqueueRun(ctx, x.erun)
	}()
	enqs := make([]v1.Enqueued, len(x.erun))
	for i, at := range x.eat {
		r, res := &x.erun[i], &b.results[at]
		if r.Err != nil {
			res.err = r.Err
			continue
		}
		enqs[i].Id, enqs[i].Deduplicated = r.Enqueued.ID, r.Enqueued.Deduplicated
		res.res = &v1.EnqueueResponse{Enqueued: &enqs[i]}
	}
	clear(x.erun)
	x.erun, x.eat = x.erun[:0], x.eat[:0]
}

// call runs one call's route, a panic recovered as Internal.
func (x *sess) call(ctx context.Context, id uint64, rt *route, req proto.Message) (res proto.Message, err error) {
	defer func() {
		if p := recover(); p != nil {
			x.log.Error("docket: panic in a call", "req", x.reqID(id), "procedure", rt.proc, "panic", p)
			res, err = nil, connect.NewError(connect.CodeInternal, errors.New("docket: internal error"))
		}
	}()
	return rt.run(ctx, req)
}

func (x *sess) reqID(id uint64) string { return x.id + "-" + strconv.FormatUint(id, 10) }

// answer waits for a batch's commits to be durable and sends its replies.
func (x *sess) answer(b *sbatch) {
	x.wait(b)
	x.send(b)
}

// answerAll answers the batches the answerer found queued, in the order
// they were read, together: the newest waits first, so that one sync of
// the log covers them all (the others' waits then find their commits
// durable), and their replies go in one write. They stop counting as
// queued before it: a client that sends its next call on a reply is to
// find none ahead of it.
func (x *sess) answerAll(bs []*sbatch) {
	for i := len(bs) - 1; i >= 0; i-- {
		x.wait(bs[i])
	}
	x.queued.Add(-int32(len(bs)))
	x.send(bs...)
}

// wait waits for a batch's commits to be durable; if the log failed, the
// answers that rested on it fail with it.
func (x *sess) wait(b *sbatch) {
	if b.deferred == nil {
		return
	}
	if werr := b.deferred.Wait(); werr != nil {
		for i := range b.results {
			r := &b.results[i]
			if r.rt != nil && (r.err == nil || restsOnLog(r.err)) {
				r.res, r.err = nil, werr // the answer rested on the log, which failed
			}
		}
	}
}

// send writes batches' replies, then gives back their slots.
func (x *sess) send(bs ...*sbatch) { x.sendWith(x.w.SendFrames, bs) }

// sendRan is send for a call that ran on a goroutine of its own (a
// replicated DB's) and gave back its slot of x.par. While other calls of
// the session run, its reply is left to the Writer's goroutine, which
// writes it with those of the calls answered at the same moment (a
// replicated log answers a round's calls together), in one write instead
// of one each; a call that ran alone writes its reply itself, without the
// goroutine's hop.
func (x *sess) sendRan(b *sbatch) {
	if len(x.par) > 0 {
		x.sendWith(x.w.SendFramesLater, []*sbatch{b})
		return
	}
	x.send(b)
}

func (x *sess) sendWith(write func([]byte) error, bs []*sbatch) {
	bp := replyBufs.Get().(*[]byte)
	out := (*bp)[:0]
	caller := x.ci.callerID()
	for _, b := range bs {
		for i := range b.results {
			r := &b.results[i]
			out = x.appendReply(out, r)
			if r.slot != nil {
				x.s.lim.give(caller, r.slot, 1, 0)
			}
		}
	}
	// The calls are no longer in flight once their replies go out: a
	// client that sends its next call on the reply is to find its last
	// one answered (the reader's lone calls).
	for _, b := range bs {
		for range b.results {
			x.unslot()
		}
	}
	write(out) // copies out
	if cap(out) <= keepFrameBuf {
		*bp = out
		replyBufs.Put(bp)
	}
}

// replyBufs holds the buffers replies are encoded into, before the
// Writer copies them.
var replyBufs = sync.Pool{New: func() any { return new([]byte) }}

// appendReply appends r's Reply to out as a frame. An answer is encoded
// as its Reply would be (the id, then the response in its field), without
// building the Reply.
func (x *sess) appendReply(out []byte, r *sresult) []byte {
	if r.err == nil {
		n := proto.Size(r.res) // sizes cached for the marshal below
		num := r.rt.out.Number()
		size := protowire.SizeTag(num) + protowire.SizeBytes(n)
		if r.id != 0 {
			size += protowire.SizeTag(1) + protowire.SizeVarint(r.id)
		}
		if size > MaxResponseBytes {
			r.err = connect.NewError(connect.CodeResourceExhausted,
				fmt.Errorf("docket: the answer is %d bytes, over the limit of %d (ask for a smaller page)", size, MaxResponseBytes))
		} else {
			start := len(out)
			b := binary.AppendUvarint(out, uint64(size))
			if r.id != 0 {
				b = protowire.AppendTag(b, 1, protowire.VarintType)
				b = protowire.AppendVarint(b, r.id)
			}
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(n))
			at := len(b)
			b, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(b, r.res)
			if err == nil && len(b)-at == n {
				return b
			}
			out = b[:start]
			if err == nil {
				err = fmt.Errorf("%d bytes, sized %d", len(b)-at, n)
			}
			r.err = connect.NewError(connect.CodeInternal, fmt.Errorf("docket: the answer cannot be encoded: %v", err))
		}
	}
	rep := &v1.Reply{Id: r.id, Reply: &v1.Reply_Error{Error: x.itemError(r)}}
	b, err := session.AppendFrame(out, rep)
	if err != nil {
		r.err = connect.NewError(connect.CodeInternal, fmt.Errorf("docket: the answer cannot be encoded: %v", err))
		b, _ = session.AppendFrame(out, &v1.Reply{Id: r.id, Reply: &v1.Reply_Error{Error: x.itemError(r)}})
	}
	return b
}

// itemError is the answer of a call that failed with r.err, as the unary
// call's would be (with the leader's URL on a node of a cluster that is
// not the leader), logged as that call's failure would be.
func (x *sess) itemError(r *sresult) *v1.ItemError {
	ce := wire.ToConnect(r.err)
	if x.s.opts.Cluster != nil {
		if rce, ok := x.s.redirect(ce).(*connect.Error); ok {
			ce = rce
		}
	}
	proc := ""
	if r.rt != nil {
		proc = r.rt.proc
	}
	x.s.logFailure(x.ctx, x.reqID(r.id), proc, x.ci.callerID(), ce)
	return wire.PBItemError(ce)
}

// claimWait runs a ClaimWait on its own goroutine, ended by the session's
// Abandon of its id as well as by what ends a unary one's wait.
func (x *sess) claimWait(id uint64, sc scall, rt *route, req proto.Message, w *sessionWait, abandon context.CancelFunc) {
	defer x.calls.Done()
	defer w.release() // if the call ended before it parked
	defer abandon()
	if x.s.onWaitGoroutine != nil {
		x.s.onWaitGoroutine()
	}
	defer func() {
		x.waitMu.Lock()
		delete(x.waits, id)
		x.waitMu.Unlock()
	}()
	ctx, cancel := sc.withDeadline(context.WithValue(x.ctx, sessionWaitKey{}, w))
	defer cancel()
	var changed atomic.Bool
	if c := x.s.opts.Cluster; c != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		ch, done := c.LeaderChanged(), make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-ch:
				changed.Store(true)
				cancel()
			case <-done:
			}
		}()
	}
	res, err := x.call(ctx, id, rt, req)
	if err != nil && changed.Load() && x.ctx.Err() == nil && connect.CodeOf(wire.ToConnect(err)) == connect.CodeCanceled {
		err = fmt.Errorf("%w: the leadership changed while the claim waited", engine.ErrNotLeader)
	}
	x.send(&sbatch{results: []sresult{{id: id, rt: rt, res: res, err: err}}})
}

// abandon ends the wait of the session's ClaimWait id, if it waits.
func (x *sess) abandon(id uint64) {
	x.waitMu.Lock()
	f := x.waits[id]
	x.waitMu.Unlock()
	if f != nil {
		f()
	}
}
