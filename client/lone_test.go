package client

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// TestSessionLoneCallsReadTheirAnswers: calls one at a time on a session
// are read by their callers, no reader goroutine started for them; a
// caller that reads and gets its answer while another call waits for its
// own leaves the reading to the reader goroutine, which delivers it; once
// no call waits, callers read again.
func TestSessionLoneCallsReadTheirAnswers(t *testing.T) {
	t.Parallel()
	hold := atomic.Bool{}
	got := make(chan *fakeConn, 2)
	calls := make(chan *v1.Call, 2)
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		if !hold.Load() {
			sc.reply(enqueued(c.GetId(), 5, false))
			return
		}
		got <- sc
		calls <- c
	})
	c := dial(t, f.url, Options{})
	var readers atomic.Int32
	c.sessionHost(f.url).onReader = func() { readers.Add(1) }
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	for i := range 20 {
		if e, err := q.Enqueue(ctx, engine.Task{}); err != nil || e.ID != 5 {
			t.Fatalf("lone call %d: %+v, %v", i, e, err)
		}
	}
	if n := readers.Load(); n != 0 {
		t.Fatalf("20 lone calls started the reader goroutine %d times, want 0", n)
	}

	// A reads; B waits; A's answer comes alone.
	hold.Store(true)
	aDone, bDone := make(chan uint64, 1), make(chan uint64, 1)
	go enqueueTo(t, q, aDone)
	sc, a := <-got, <-calls
	go enqueueTo(t, q, bDone)
	<-got
	b := <-calls
	sc.reply(enqueued(a.GetId(), 6, false))
	if id := <-aDone; id != 6 {
		t.Fatalf("A got task %d, want 6", id)
	}
	sc.reply(enqueued(b.GetId(), 7, false))
	if id := <-bDone; id != 7 {
		t.Fatalf("B got task %d, want 7", id)
	}
	if n := readers.Load(); n != 1 {
		t.Fatalf("the reader goroutine started %d times for B, whose answer came after A's reader returned; want 1", n)
	}
	hold.Store(false)
	for range 5 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := readers.Load(); n != 1 {
		t.Fatalf("lone calls after B started the reader goroutine %d more times", n-1)
	}
	if s, _ := f.count(); s != 1 {
		t.Fatalf("%d sessions, want 1", s)
	}
}

// TestSessionEndedWhileIdle: a server that ends the connection while no
// call is in flight does not make the next call's outcome unknown: the
// client finds the end before writing, and the call (an unkeyed enqueue,
// never repeated once written) goes on a new session.
func TestSessionEndedWhileIdle(t *testing.T) {
	t.Parallel()
	f, closed := closingSession(t, 1)
	c := dial(t, f.url, fastRetries(Options{}))
	q := c.Queue(engine.NS("acme", "prod"), "q")
	if e, err := q.Enqueue(context.Background(), engine.Task{}); err != nil || e.ID != 1 {
		t.Fatalf("first call: %+v, %v", e, err)
	}
	<-closed
	wantNewSession(t, q)
	if s, calls := f.count(); s != 2 || calls != 2 {
		t.Fatalf("%d sessions, %d calls; want 2 and 2", s, calls)
	}
}

// TestSessionReaderInterrupted: a caller that reads the session and whose
// context ends returns at once; a reply it leaves half read is read whole
// (for the call it answers), and the session goes on.
func TestSessionReaderInterrupted(t *testing.T) {
	t.Parallel()
	f, got, calls := heldSession(t)
	c := dial(t, f.url, Options{})
	h := c.sessionHost(f.url)
	inFrame := make(chan struct{}, 1)
	h.onFrame = func() {
		select {
		case inFrame <- struct{}{}:
		default:
		}
	}
	interrupted := make(chan struct{}, 1)
	h.onInterrupt = func() {
		select {
		case interrupted <- struct{}{}:
		default:
		}
	}
	q := c.Queue(engine.NS("acme", "prod"), "q")

	// A reads (the lone call); B waits for the answer A reads for it.
	actx, cancelA := context.WithCancel(context.Background())
	aErr := make(chan error, 1)
	go func() {
		_, err := q.Enqueue(actx, engine.Task{})
		aErr <- err
	}()
	sc, a := <-got, <-calls
	bDone := make(chan error, 1)
	go func() {
		e, err := q.Enqueue(context.Background(), engine.Task{}) // unkeyed: never repeated, so a cut frame fails it
		if err == nil && e.ID != 42 {
			err = errors.New("B got another call's answer")
		}
		bDone <- err
	}()
	<-got
	b := <-calls

	// Half of B's answer, then A's context ends while A reads it.
	body, err := proto.Marshal(enqueued(b.GetId(), 42, false))
	if err != nil {
		t.Fatal(err)
	}
	frame := append(binary.AppendUvarint(nil, uint64(len(body))), body...)
	half := len(frame) / 2
	if _, err := sc.nc.Write(frame[:half]); err != nil {
		t.Fatal(err)
	}
	<-inFrame
	cancelA()
	<-interrupted
	if _, err := sc.nc.Write(frame[half:]); err != nil {
		t.Fatal(err)
	}
	if err := <-aErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("A, its context cancelled as it read: %v, want context.Canceled", err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("B, whose answer A was reading: %v", err)
	}
	// A's late answer, then a third call: the session goes on.
	sc.reply(enqueued(a.GetId(), 1, false))
	cDone := make(chan error, 1)
	go func() {
		e, err := q.Enqueue(context.Background(), engine.Task{})
		if err == nil && e.ID != 43 {
			err = errors.New("C got another call's answer")
		}
		cDone <- err
	}()
	sc2, cc := <-got, <-calls
	sc2.reply(enqueued(cc.GetId(), 43, false))
	if err := <-cDone; err != nil {
		t.Fatalf("C, after A was interrupted: %v", err)
	}
	if s, _ := f.count(); s != 1 {
		t.Fatalf("%d sessions, want the first to go on", s)
	}
}

// TestSessionWithoutProbe: where a connection cannot be probed, the
// reader goroutine reads it from the start for as long as it is open:
// lone calls are answered through it, and a server that ends an idle
// session is seen ending it, so the next call goes on a new session.
func TestSessionWithoutProbe(t *testing.T) {
	t.Parallel()
	f, closed := closingSession(t, 3)
	c := dial(t, f.url, fastRetries(Options{}))
	h := c.sessionHost(f.url)
	h.noProbe = true
	var readers atomic.Int32
	ended := make(chan struct{}, 1)
	h.onReader = func() { readers.Add(1) }
	h.onEnd = func() {
		select {
		case ended <- struct{}{}:
		default:
		}
	}
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	for i := range 3 {
		if e, err := q.Enqueue(ctx, engine.Task{}); err != nil || e.ID != 1 {
			t.Fatalf("lone call %d: %+v, %v", i, e, err)
		}
	}
	if n := readers.Load(); n != 1 {
		t.Fatalf("the reader goroutine started %d times for one connection, want 1", n)
	}
	<-closed
	<-ended // the reader saw the end
	wantNewSession(t, q)
}

// TestSessionReaderDeliversWhatCameWithIt: a caller that reads delivers
// the answers that came in the same read as its own before it returns,
// rather than starting the reader goroutine for them.
func TestSessionReaderDeliversWhatCameWithIt(t *testing.T) {
	t.Parallel()
	f, got, calls := heldSession(t)
	c := dial(t, f.url, Options{})
	var readers atomic.Int32
	c.sessionHost(f.url).onReader = func() { readers.Add(1) }
	q := c.Queue(engine.NS("acme", "prod"), "q")
	aDone, bDone := make(chan uint64, 1), make(chan uint64, 1)
	go enqueueTo(t, q, aDone)
	sc, a := <-got, <-calls
	go enqueueTo(t, q, bDone)
	<-got
	b := <-calls
	var out []byte
	for _, r := range []*v1.Reply{enqueued(a.GetId(), 6, false), enqueued(b.GetId(), 7, false)} {
		body, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(binary.AppendUvarint(out, uint64(len(body))), body...)
	}
	if _, err := sc.nc.Write(out); err != nil { // both answers in one write
		t.Fatal(err)
	}
	if a, b := <-aDone, <-bDone; a != 6 || b != 7 {
		t.Fatalf("A got task %d, B %d; want 6 and 7", a, b)
	}
	if n := readers.Load(); n != 0 {
		t.Fatalf("the reader goroutine started %d times for an answer read with the reader's own", n)
	}
}

// heldSession is a fake session server that answers nothing itself: each
// call it reads, with its connection, comes out on got and calls.
func heldSession(t *testing.T) (f *fakeSession, got chan *fakeConn, calls chan *v1.Call) {
	got, calls = make(chan *fakeConn, 3), make(chan *v1.Call, 3)
	f = newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		got <- sc
		calls <- c
	})
	return f, got, calls
}

// closingSession is a fake session server that answers each Enqueue with
// its session's number as the task's id, and ends the first session once
// it answered the call of id last.
func closingSession(t *testing.T, last uint64) (f *fakeSession, closed chan struct{}) {
	closed = make(chan struct{})
	var once sync.Once
	f = newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		sc.reply(enqueued(c.GetId(), uint64(sc.n), false))
		if sc.n == 1 && c.GetId() == last {
			sc.nc.Close() // after the answer: the client sees it, then the end
			once.Do(func() { close(closed) })
		}
	})
	return f, closed
}

// enqueueTo enqueues on q and sends the task's id to done (0 on an error,
// which fails t).
func enqueueTo(t *testing.T, q engine.Queue, done chan<- uint64) {
	e, err := q.Enqueue(context.Background(), engine.Task{})
	if err != nil {
		t.Error(err)
	}
	done <- e.ID
}

// wantNewSession enqueues on q, unkeyed, after the server ended the idle
// session it was on: the call goes on the second session.
func wantNewSession(t *testing.T, q engine.Queue) {
	t.Helper()
	e, err := q.Enqueue(context.Background(), engine.Task{})
	if err != nil || e.ID != 2 {
		t.Fatalf("an unkeyed enqueue after the server ended the idle session: %+v, %v; want it answered on a new session", e, err)
	}
}
