package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// serveHTTP serves s's Mux with NewHTTPServer on a loopback listener
// until the test ends, and returns the listener's address.
func serveHTTP(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(s.Mux(), nil)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// serveSessions serves s on a loopback listener with Serve (cleartext)
// until the test ends, and returns its address and a function that stops
// it and returns Serve's error.
func serveSessions(t testing.TB, s *Server) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(s.Mux(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, s, hs, ln, 10*time.Second) }()
	var once bool
	var serr error
	stop = func() error {
		if !once {
			once = true
			cancel()
			serr = <-served
		}
		return serr
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

// testSession is a client's end of a session, raw.
type testSession struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	away *v1.GoingAway // the server's GoingAway, once recv read it
}

// dialRaw connects to addr and writes the preface.
func dialRaw(t testing.TB, addr string) *testSession {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a test that would hang fails
	if _, err := c.Write([]byte(session.Preface)); err != nil {
		t.Fatal(err)
	}
	return &testSession{t: t, conn: c, br: bufio.NewReaderSize(c, session.BufSize)}
}

// dialSession opens a session with token and returns it with the Welcome.
func dialSession(t testing.TB, addr, token string) (*testSession, *v1.Welcome) {
	t.Helper()
	ts := dialRaw(t, addr)
	ts.send(&v1.Hello{Version: session.Version, Token: token, Client: "test"})
	var w v1.Welcome
	if err := session.ReadMessage(ts.br, session.MaxHelloBytes, &w); err != nil {
		t.Fatalf("welcome: %v", err)
	}
	return ts, &w
}

func (ts *testSession) send(ms ...proto.Message) {
	ts.t.Helper()
	var b []byte
	for _, m := range ms {
		var err error
		if b, err = session.AppendFrame(b, m); err != nil {
			ts.t.Fatal(err)
		}
	}
	if _, err := ts.conn.Write(b); err != nil {
		ts.t.Fatal(err)
	}
}

// recv reads one Reply; io.EOF (or a reset) when the server closed. A
// GoingAway is kept in ts.away, not returned.
func (ts *testSession) recv() (*v1.Reply, error) {
	for {
		var r v1.Reply
		if err := session.ReadMessage(ts.br, MaxResponseBytes+16, &r); err != nil {
			return nil, err
		}
		if g := r.GetGoingAway(); g != nil && r.GetId() == 0 {
			if ts.away != nil {
				ts.t.Errorf("a second GoingAway: %v", g)
			}
			ts.away = g
			continue
		}
		return &r, nil
	}
}

func (ts *testSession) mustRecv() *v1.Reply {
	ts.t.Helper()
	r, err := ts.recv()
	if err != nil {
		ts.t.Fatalf("reply: %v", err)
	}
	return r
}

// recvAll reads n replies and returns them by id.
func (ts *testSession) recvAll(n int) map[uint64]*v1.Reply {
	ts.t.Helper()
	out := map[uint64]*v1.Reply{}
	for range n {
		r := ts.mustRecv()
		if _, dup := out[r.GetId()]; dup {
			ts.t.Fatalf("two replies for call %d", r.GetId())
		}
		out[r.GetId()] = r
	}
	return out
}

// closed reports whether the server closed the session (the next read
// ends), reading at most a few replies before.
func (ts *testSession) closed() error {
	for range 100 {
		if _, err := ts.recv(); err != nil {
			return err
		}
	}
	return errors.New("the session is still open")
}

func enqueueCall(id uint64, queue string) *v1.Call {
	return &v1.Call{Id: id, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{
		Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: queue,
		Task: &v1.Task{Payload: []byte(`"x"`)},
	}}}
}

func TestSessionServesCalls(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{})
	addr, _ := serveSessions(t, s)
	ts, w := dialSession(t, addr, "")
	if w.GetVersion() != session.Version || w.GetSession() == "" || w.GetMaxCalls() != DefaultMaxCalls ||
		w.GetMaxParked() != DefaultMaxParked || w.GetMaxFrameBytes() != DefaultMaxRequestBytes {
		t.Fatalf("welcome %v", w)
	}
	const n = 100
	var calls []proto.Message
	for i := range n {
		calls = append(calls, enqueueCall(uint64(i+1), "q"))
	}
	calls = append(calls, &v1.Call{Id: n + 1, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{
		Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: "q"}}})
	ts.send(calls...)
	got := ts.recvAll(n + 1)
	for i := range n {
		if r := got[uint64(i+1)]; r.GetEnqueue().GetEnqueued().GetId() == 0 {
			t.Fatalf("call %d: %v", i+1, r)
		}
	}
	c, err := db.Queue(engine.NS("p", "s"), "q").Counts(context.Background())
	if err != nil || c.Ready != n {
		t.Fatalf("counts %+v %v", c, err)
	}
	_ = got[n+1].GetCounts()
	if got[n+1].GetError() != nil {
		t.Fatalf("counts call: %v", got[n+1])
	}
	// The unary API is still served on the same port.
	st := newStubs("http://"+addr, "")
	res, err := st.q.Counts(context.Background(), connect.NewRequest(&v1.CountsRequest{Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: "q"}))
	if err != nil || res.Msg.GetCounts().GetReady() != n {
		t.Fatalf("unary beside sessions: %v %v", res, err)
	}
	ts.conn.(*net.TCPConn).CloseWrite()
	if _, err := ts.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the client's end: %v, want EOF", err)
	}
}

// handoffSession is a session with a server on a DB of durability d that
// counts the batches its sessions' readers leave to the answerer.
func handoffSession(t *testing.T, d engine.Durability) (*testSession, *atomic.Int64) {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{Durability: d})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler)})
	handoffs := new(atomic.Int64)
	s.onHandoff = func() { handoffs.Add(1) }
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	return ts, handoffs
}

// TestSessionAnswersInlineWithoutFsync: a batch with no fsync to wait for
// (a DB that does not sync each commit, or calls that wrote nothing) is
// answered by the session's reader; one whose commits wait for an fsync
// goes to the answerer, so that the reader reads on meanwhile.
func TestSessionAnswersInlineWithoutFsync(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		d       engine.Durability
		call    func(id uint64) *v1.Call
		handoff bool
	}{
		{"enqueue/never", engine.SyncNever, func(id uint64) *v1.Call { return enqueueCall(id, "q") }, false},
		{"enqueue/interval", engine.SyncInterval, func(id uint64) *v1.Call { return enqueueCall(id, "q") }, false},
		{"enqueue/always", engine.SyncAlways, func(id uint64) *v1.Call { return enqueueCall(id, "q") }, true},
		{"counts/always", engine.SyncAlways, func(id uint64) *v1.Call {
			return &v1.Call{Id: id, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{
				Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: "q"}}}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, handoffs := handoffSession(t, c.d)
			const n = 10
			for i := uint64(1); i <= n; i++ {
				ts.send(c.call(i))
				r := ts.mustRecv()
				if r.GetId() != i || r.GetError() != nil {
					t.Fatalf("call %d: %v", i, r)
				}
			}
			if got := handoffs.Load(); (got > 0) != c.handoff {
				t.Fatalf("%d of %d batches went to the answerer, want handoffs: %v", got, n, c.handoff)
			}
		})
	}
}

// TestSessionAnswersLoneCallsInline: a client that calls one at a time
// (session.LoneStreak lone calls in a row) has its calls answered by the
// session's reader even when they wait for an fsync, without the
// answerer's hop; a batch of two ends the streak, and the calls after it
// go to the answerer until a streak builds again.
func TestSessionAnswersLoneCallsInline(t *testing.T) {
	t.Parallel()
	ts, handoffs := handoffSession(t, engine.SyncAlways)
	id := uint64(0)
	lone := func(n int) {
		t.Helper()
		for range n {
			id++
			ts.send(enqueueCall(id, "q"))
			if r := ts.mustRecv(); r.GetId() != id || r.GetEnqueue() == nil {
				t.Fatalf("call %d: %v", id, r)
			}
		}
	}
	want := func(n int64, after string) {
		t.Helper()
		if got := handoffs.Load(); got != n {
			t.Fatalf("after %s: %d batches went to the answerer, want %d", after, got, n)
		}
	}
	lone(session.LoneStreak - 1)
	want(session.LoneStreak-1, "the lone calls before the streak")
	lone(5)
	want(session.LoneStreak-1, "a streak of lone calls")
	// Two calls in one write: read as one batch, not lone.
	ts.send(enqueueCall(id+1, "q"), enqueueCall(id+2, "q"))
	got := ts.recvAll(2)
	if got[id+1].GetEnqueue() == nil || got[id+2].GetEnqueue() == nil {
		t.Fatalf("the batch of two: %v", got)
	}
	id += 2
	want(session.LoneStreak, "a batch of two")
	lone(1)
	want(session.LoneStreak+1, "a lone call after the batch")
}

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	n atomic.Int64
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestSessionAnswersQueuedBatchesTogether: batches queued behind the one
// the answerer is waiting for are answered with it, in one write.
func TestSessionAnswersQueuedBatchesTogether(t *testing.T) {
	t.Parallel()
	db, err := engine.Open(t.TempDir(), engine.Options{Durability: engine.SyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler)})
	handoffs := make(chan struct{}, 8)
	s.onHandoff = func() { handoffs <- struct{}{} }
	hold := make(chan struct{})
	var first atomic.Bool
	s.onAnswerer = func() {
		if first.CompareAndSwap(false, true) {
			<-hold
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan *writeCounter, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			close(served)
			return
		}
		if _, err := io.ReadFull(c, make([]byte, len(session.Preface))); err != nil {
			t.Error(err)
		}
		wc := &writeCounter{Conn: c}
		served <- wc
		s.ServeSession(wc)
	}()
	ts, _ := dialSession(t, ln.Addr().String(), "")
	wc := <-served
	if wc == nil {
		t.FailNow()
	}
	welcome := wc.n.Load()
	for i := uint64(1); i <= 3; i++ {
		ts.send(enqueueCall(i, "q"))
		<-handoffs // run, and handed to the answerer (the first held in it)
	}
	close(hold)
	got := ts.recvAll(3)
	for i := uint64(1); i <= 3; i++ {
		if r := got[i]; r == nil || r.GetEnqueue() == nil {
			t.Fatalf("call %d: %v", i, r)
		}
	}
	if n := wc.n.Load() - welcome; n != 1 {
		t.Fatalf("the replies of 3 batches answered together took %d writes", n)
	}
	ts.conn.Close()
	<-done
}
