package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
	"github.com/docketdb/docket/server"
)

// fakeSession is a session server for tests, on a 127.0.0.1 port that
// also serves a real server's HTTP routes (so that Dial's Health and the
// operator's calls answer): a connection that begins with the preface is
// a session, handled as the test says; any other goes to net/http.
type fakeSession struct {
	t       *testing.T
	url     string
	welcome *v1.Welcome   // the answer to a Hello
	refuse  *v1.ItemError // if set, the answer to a Hello instead
	// handle is called on the session's reader for each call; it answers
	// through sc.reply, now or later, or not at all.
	handle func(sc *fakeConn, c *v1.Call)
	// lean, if set, answers every call at once as an Enqueue of task 7,
	// without decoding it or recording it (nor handle), allocating
	// nothing per call: what a test counts is the client's.
	lean bool

	changes  changes // signalled at each session opened and call read
	mu       sync.Mutex
	sessions int
	calls    []*v1.Call
	hellos   []*v1.Hello
}

// fakeConn is one session of a fakeSession.
type fakeConn struct {
	nc net.Conn
	w  *session.Writer
	n  int // 1 for the first session
}

func (sc *fakeConn) reply(r *v1.Reply) { sc.w.Send(r) }

func newFakeSession(t *testing.T, handle func(sc *fakeConn, c *v1.Call)) *fakeSession {
	t.Helper()
	f := &fakeSession{t: t, welcome: &v1.Welcome{Version: 1, Session: "s", MaxCalls: 64, MaxParked: 32, MaxFrameBytes: 1 << 20},
		handle: handle, changes: newChanges()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	httpConns := &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	hs := server.NewHTTPServer(server.New(memDB(t, engine.Options{}), server.Options{Logger: quiet}).Mux(), nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); hs.Serve(httpConns) }()
	var open sync.Map
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			open.Store(nc, true)
			go func() {
				br := bufio.NewReader(nc)
				p, err := br.Peek(len(session.Preface))
				if err != nil || !session.IsPreface(p) {
					select {
					case httpConns.conns <- &peekedConn{Conn: nc, r: br}:
					case <-httpConns.done:
						nc.Close()
					}
					return
				}
				br.Discard(len(session.Preface))
				f.serve(nc, br)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(httpConns.done)
		hs.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return f
}

func (f *fakeSession) serve(nc net.Conn, br *bufio.Reader) {
	defer nc.Close()
	var hello v1.Hello
	if err := session.ReadMessage(br, session.MaxHelloBytes, &hello); err != nil {
		f.t.Errorf("fake session: reading the Hello: %v", err)
		return
	}
	w := session.NewWriter(nc)
	f.mu.Lock()
	f.hellos = append(f.hellos, &hello)
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		w.Send(&v1.Reply{Reply: &v1.Reply_Error{Error: refuse}})
		return
	}
	w.Send(f.welcome)
	f.mu.Lock()
	f.sessions++
	sc := &fakeConn{nc: nc, w: w, n: f.sessions}
	f.mu.Unlock()
	f.changes.changed()
	if f.lean {
		serveLean(nc, br)
		return
	}
	for {
		var c v1.Call
		if err := session.ReadMessage(br, 1<<20, &c); err != nil {
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, &c)
		f.mu.Unlock()
		f.changes.changed()
		f.handle(sc, &c)
	}
}

func (f *fakeSession) count() (sessions, calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, len(f.calls)
}

func (f *fakeSession) call(i int) *v1.Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[i]
}

// chanListener hands net/http the connections that are not sessions.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// enqueued answers an Enqueue with id.
func enqueued(id, task uint64, dedup bool) *v1.Reply {
	return &v1.Reply{Id: id, Reply: &v1.Reply_Enqueue{Enqueue: &v1.EnqueueResponse{
		Enqueued: &v1.Enqueued{Id: task, Deduplicated: dedup}}}}
}

func fastRetries(o Options) Options {
	o.BackoffBase, o.BackoffMax = time.Millisecond, 5*time.Millisecond
	return o
}

// TestSessionRepliesOutOfOrder: calls in flight together on one session,
// answered in the reverse order, each get their own answer.
func TestSessionRepliesOutOfOrder(t *testing.T) {
	t.Parallel()
	const n = 8
	var mu sync.Mutex
	var held []*v1.Call
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, c)
		if len(held) == n {
			for i := n - 1; i >= 0; i-- {
				var task uint64
				fmt.Sscan(string(held[i].GetEnqueue().GetTask().GetPayload()), &task)
				sc.reply(enqueued(held[i].GetId(), task, false))
			}
		}
	})
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := q.Enqueue(context.Background(), engine.Task{Payload: []byte(fmt.Sprint(100 + i))})
			if err != nil || e.ID != uint64(100+i) {
				t.Errorf("call %d: got task %d, %v", i, e.ID, err)
			}
		}()
	}
	wg.Wait()
	if s, calls := f.count(); s != 1 || calls != n {
		t.Fatalf("%d sessions, %d calls; want 1 session carrying %d calls", s, calls, n)
	}
}

// TestSessionBoundsCallsInFlight: a Welcome with max_calls=2 bounds the
// client's calls in flight on the session to 2; the others wait in the
// client, and go as answers free slots.
func TestSessionBoundsCallsInFlight(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inflight, most atomic.Int32
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		if now := inflight.Add(1); now > most.Load() {
			most.Store(now)
		}
		go func() {
			<-release
			inflight.Add(-1)
			sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Get{Get: &v1.GetResponse{Task: &v1.TaskInfo{Id: 1}}}})
		}()
	})
	f.welcome.MaxCalls = 2
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	h := c.sessionHost(f.url)
	h.calls.watch(f.changes.changed)
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := q.Get(context.Background(), 1)
			errs <- err
		}()
	}
	f.changes.waitFor(t, "2 calls at the server, 4 waiting in the client", func() bool {
		_, calls := f.count()
		return calls == 2 && h.calls.waiting() == n-2
	})
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("at most %d calls in flight; want 2", m)
	}
}

// TestSessionCutAfterWrite: the connection ends after a call was written
// and before its answer. A keyed enqueue is repeated on a new session and
// deduplicated there; an unkeyed one is not repeated and returns
// ErrOutcomeUnknown.
func TestSessionCutAfterWrite(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	keys := map[string]uint64{}
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		mu.Lock()
		defer mu.Unlock()
		key := c.GetEnqueue().GetTask().GetIdempotencyKey() + "|" + string(c.GetEnqueue().GetTask().GetPayload())
		id, seen := keys[key]
		if !seen {
			id = uint64(len(keys) + 1)
			keys[key] = id
		}
		if !seen {
			sc.nc.Close() // taken, and no answer: the first call of each key
			return
		}
		sc.reply(enqueued(c.GetId(), id, seen))
	})
	c := dial(t, f.url, fastRetries(Options{}))
	q := c.Queue(engine.NS("acme", "prod"), "q")
	e, err := q.Enqueue(context.Background(), engine.Task{IdempotencyKey: "k"})
	if err != nil || !e.Deduplicated || e.ID != 1 {
		t.Fatalf("a keyed enqueue cut after it was written: %+v, %v; want task 1 deduplicated", e, err)
	}
	if s, calls := f.count(); s != 2 || calls != 2 {
		t.Fatalf("%d sessions, %d calls; want the call on 2 sessions", s, calls)
	}
	_, err = q.Enqueue(context.Background(), engine.Task{})
	wantErr(t, "an unkeyed enqueue cut after it was written", err, ErrOutcomeUnknown)
	if errors.Is(err, ErrUnavailable) {
		t.Fatalf("a call that may have been taken reported as unavailable: %v", err)
	}
	if _, calls := f.count(); calls != 3 {
		t.Fatalf("%d calls in all; the unkeyed enqueue was repeated", calls)
	}
	// The same through EnqueueAsync, whose repeats run on a goroutine of
	// their own.
	e, err = q.EnqueueAsync(context.Background(), engine.Task{IdempotencyKey: "k2"}).Wait(context.Background())
	if err != nil || !e.Deduplicated || e.ID != 3 {
		t.Fatalf("a keyed async enqueue cut after it was written: %+v, %v; want task 3 deduplicated", e, err)
	}
	_, err = q.EnqueueAsync(context.Background(), engine.Task{Payload: []byte("1")}).Wait(context.Background())
	wantErr(t, "an unkeyed async enqueue cut after it was written", err, ErrOutcomeUnknown)
	if _, calls := f.count(); calls != 6 {
		t.Fatalf("%d calls in all, want 6", calls)
	}
}

// TestSessionAbandonsAClaimWait: a ClaimWait whose context ends sends
// Abandon for its call's id, and returns the context's error.
func TestSessionAbandonsAClaimWait(t *testing.T) {
	t.Parallel()
	waits := map[uint64]bool{}
	var mu sync.Mutex
	abandoned := make(chan uint64, 1)
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case c.GetClaimWait() != nil:
			waits[c.GetId()] = true
		case c.GetAbandon() != nil && waits[c.GetId()]:
			abandoned <- c.GetId()
			sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_ClaimWait{ClaimWait: &v1.ClaimWaitResponse{}}})
		default:
			t.Errorf("unexpected call %v", c)
		}
	})
	c := dial(t, f.url, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Queue(engine.NS("acme", "prod"), "q").ClaimWait(ctx, "w", time.Minute, 1)
		errc <- err
	}()
	f.changes.waitFor(t, "the ClaimWait at the server", func() bool { _, n := f.count(); return n == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("ClaimWait: %v; want context.Canceled", err)
	}
	select {
	case id := <-abandoned:
		if id != f.call(0).GetId() {
			t.Fatalf("abandoned call %d, want %d", id, f.call(0).GetId())
		}
	default:
		t.Fatal("no Abandon for the waiting claim")
	}
}

// TestSessionRefusedHello: a Hello refused for its token is
// ErrUnauthenticated.
func TestSessionRefusedHello(t *testing.T) {
	t.Parallel()
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { t.Errorf("a call on a refused session: %v", c) })
	f.refuse = &v1.ItemError{Code: "unauthenticated", Message: "bad token"}
	c := dial(t, f.url, Options{Token: "nope"})
	_, err := c.Queue(engine.NS("acme", "prod"), "q").Get(context.Background(), 1)
	wantErr(t, "a call on a session whose Hello was refused", err, ErrUnauthenticated)
	if len(f.hellos) == 0 || f.hellos[0].GetToken() != "nope" || f.hellos[0].GetVersion() != 1 {
		t.Fatalf("hellos %v", f.hellos)
	}
}

// TestSessionFallsBackToUnary: against a server that answers the preface
// with HTTP, calls go as unary RPCs, and the client remembers it.
func TestSessionFallsBackToUnary(t *testing.T) {
	t.Parallel()
	db := memDB(t, engine.Options{})
	var enqueues atomic.Int32
	mux := server.New(db, server.Options{Logger: quiet}).Mux()
	// An HTTP server alone, as a server of an older build is: no sessions.
	hs := server.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == docketv1connect.QueuesEnqueueProcedure {
			enqueues.Add(1)
		}
		mux.ServeHTTP(w, r)
	}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	srv := struct{ url string }{"http://" + ln.Addr().String()}
	c := dial(t, srv.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	// The server answers the preface and Hello at once (their CR LF ends
	// its request line), long before its header timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := enqueues.Load(); n != 3 {
		t.Fatalf("%d unary enqueues, want 3", n)
	}
	h := c.sessionHost(srv.url)
	h.mu.Lock()
	until := h.noSession
	h.mu.Unlock()
	if until == 0 {
		t.Fatal("the client did not remember that the server speaks no session")
	}
}

// TestSessionFollowsTheLeader: a reply whose error names the leader moves
// the client there, as the unary answer's Docket-Leader header does; one
// marked unavailable is tried elsewhere.
func TestSessionFollowsTheLeader(t *testing.T) {
	t.Parallel()
	leader := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { sc.reply(enqueued(c.GetId(), 7, false)) })
	follower := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Error{Error: &v1.ItemError{Code: "unavailable", Message: "not the leader",
			Unavailable: "follower", Leader: leader.url}}})
	})
	c := dial(t, follower.url, fastRetries(Options{}))
	e, err := c.Queue(engine.NS("acme", "prod"), "q").Enqueue(context.Background(), engine.Task{})
	if err != nil || e.ID != 7 {
		t.Fatalf("enqueue: %+v, %v", e, err)
	}
	if cur := c.r.eps.current(); cur != leader.url {
		t.Fatalf("the client is on %s, want the leader %s", cur, leader.url)
	}
	drained := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Error{Error: &v1.ItemError{Code: "unavailable", Message: "draining", Unavailable: "draining"}}})
	})
	c2 := dial(t, drained.url+","+leader.url, fastRetries(Options{}))
	if _, err := c2.Queue(engine.NS("acme", "prod"), "q").Enqueue(context.Background(), engine.Task{}); err != nil {
		t.Fatalf("an enqueue refused as unavailable, then taken elsewhere: %v", err)
	}
}

// TestSessionErrorsMapAsUnary: a reply's error is the error the unary
// call's answer would have been: the engine's sentinel, its message.
func TestSessionErrorsMapAsUnary(t *testing.T) {
	t.Parallel()
	lost := wire.PBItemError(wire.ToConnect(fmt.Errorf("%w: lease 3 expired", engine.ErrLeaseLost)))
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Error{Error: lost}})
	})
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	err := q.Fail(context.Background(), engine.Lease{ID: 3, Namespace: engine.NS("acme", "prod"), Queue: "q", Token: 1}, engine.Failure{})
	wantErr(t, "a fail answered ErrLeaseLost", err, engine.ErrLeaseLost)
	if errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a first try's answer marked as maybe applied: %v", err)
	}
	if !strings.Contains(err.Error(), "lease 3 expired") {
		t.Fatalf("the server's message is lost: %v", err)
	}
}

// TestEnqueueAsyncPipelines: EnqueueAsync returns with its call in
// flight; at the bound (max_calls) the next waits for a slot, and a
// context that ends while it waits settles it with the context's error.
func TestEnqueueAsyncPipelines(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		go func() {
			<-release
			sc.reply(enqueued(c.GetId(), c.GetId(), false))
		}()
	})
	f.welcome.MaxCalls = 2
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	h := c.sessionHost(f.url)
	h.calls.watch(f.changes.changed)
	ctx := context.Background()
	p1 := q.EnqueueAsync(ctx, engine.Task{})
	p2 := q.EnqueueAsync(ctx, engine.Task{})
	f.changes.waitFor(t, "both calls at the server", func() bool { _, n := f.count(); return n == 2 })
	select {
	case <-p1.Done():
		t.Fatal("the first Pending settled before its answer")
	default:
	}
	cctx, cancel := context.WithCancel(ctx)
	p3 := make(chan *engine.Pending, 1)
	go func() { p3 <- q.EnqueueAsync(cctx, engine.Task{}) }()
	f.changes.waitFor(t, "a third call waiting for a slot", func() bool { return h.calls.waiting() == 1 })
	cancel()
	if _, err := (<-p3).Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("an async enqueue whose context ended waiting for a slot: %v", err)
	}
	p4 := make(chan *engine.Pending, 1)
	go func() { p4 <- q.EnqueueAsync(ctx, engine.Task{}) }()
	f.changes.waitFor(t, "a fourth call waiting for a slot", func() bool { return h.calls.waiting() == 1 })
	close(release)
	for i, p := range []*engine.Pending{p1, p2, <-p4} {
		if e, err := p.Wait(ctx); err != nil || e.ID == 0 {
			t.Fatalf("pending %d: %+v, %v", i, e, err)
		}
	}
	if _, n := f.count(); n != 3 {
		t.Fatalf("%d calls at the server, want 3", n)
	}
}

// TestSessionCarriesTheAPI: against the server, every call of engine.API
// goes on the session (no RPC of the Queues, KV, Controls or Pipeline
// services reaches its HTTP routes), with the same outcomes as the unary
// transport and the DB in process.
func TestSessionCarriesTheAPI(t *testing.T) {
	t.Parallel()
	var rpcs atomic.Int32
	countRPCs := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/docket.v1.Admin/") {
				rpcs.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}
	local := exercise(t, memDB(t, engine.Options{}))
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, countRPCs)
	c := dial(t, srv.url, Options{})
	if got := exercise(t, c); !slices.Equal(local, got) {
		t.Fatalf("in process:\n%s\non a session:\n%s", strings.Join(local, "\n"), strings.Join(got, "\n"))
	}
	if n := rpcs.Load(); n != 0 {
		t.Fatalf("%d calls went as RPCs", n)
	}
	h := c.sessionHost(srv.url)
	h.mu.Lock()
	open := h.conn != nil
	h.mu.Unlock()
	if !open {
		t.Fatal("no session open")
	}
	unary := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, countRPCs)
	if got := exercise(t, dial(t, unary.url, Options{Transport: TransportUnary})); !slices.Equal(local, got) {
		t.Fatalf("in process:\n%s\nas RPCs:\n%s", strings.Join(local, "\n"), strings.Join(got, "\n"))
	}
	if rpcs.Load() == 0 {
		t.Fatal("TransportUnary made no RPC")
	}
}

// TestSessionOverTLS: under TLS the session is chosen by ALPN, on the
// server's one port.
func TestSessionOverTLS(t *testing.T) {
	t.Parallel()
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.StartTLS() // for its certificate
	cert := ts.TLS.Certificates
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	ts.Close()
	db := memDB(t, engine.Options{})
	s := server.New(db, server.Options{Logger: quiet})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Serve(ctx, s, server.NewHTTPServer(s.Mux(), &tls.Config{Certificates: cert}), ln, 5*time.Second)
	}()
	t.Cleanup(func() { cancel(); <-done })
	url := "https://" + ln.Addr().String()
	c := dial(t, url, Options{TLS: &tls.Config{RootCAs: roots, ServerName: "example.com"}, BusyPoll: 5 * time.Millisecond})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	e, err := q.Enqueue(context.Background(), engine.Task{Payload: []byte(`"x"`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := must(db.Queue(engine.NS("acme", "prod"), "q").Get(context.Background(), e.ID))(t); string(got.Payload) != `"x"` {
		t.Fatalf("task %+v", got)
	}
	h := c.sessionHost(url)
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	if conn == nil {
		t.Fatal("no session open")
	}
	if p := conn.nc.(*tls.Conn).ConnectionState().NegotiatedProtocol; p != session.ALPN {
		t.Fatalf("negotiated %q", p)
	}
	// Lone calls poll for their answers under TLS too (the socket beneath;
	// a budget of 5 ms, which the race detector's slower answers fit).
	for range 20 {
		if _, err := q.Enqueue(context.Background(), engine.Task{Payload: []byte(`"x"`)}); err != nil {
			t.Fatal(err)
		}
	}
	if polls := connPolls(c, url); runtime.GOMAXPROCS(0) > 1 && polls == 0 {
		t.Fatal("20 lone calls under TLS never polled")
	}
}

// TestSessionPipelinesAgainstTheServer: many EnqueueAsync in flight from
// one goroutine against the server, keyed ones deduplicated, and a
// ClaimWait that Close ends with ErrClosed.
func TestSessionPipelinesAgainstTheServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")
	const n = 500
	ps := make([]*engine.Pending, 0, 2*n)
	for i := range n {
		ps = append(ps, q.EnqueueAsync(ctx, engine.Task{IdempotencyKey: fmt.Sprint(i)}))
	}
	for i := range n {
		ps = append(ps, q.EnqueueAsync(ctx, engine.Task{IdempotencyKey: fmt.Sprint(i)}))
	}
	for i, p := range ps {
		e, err := p.Wait(ctx)
		if err != nil || e.Deduplicated != (i >= n) {
			t.Fatalf("enqueue %d: %+v, %v", i, e, err)
		}
	}
	if got := must(db.Queue(ns, "q").Counts(ctx))(t); got.Ready != n {
		t.Fatalf("counts %+v", got)
	}
	got := make(chan error, 1)
	go func() { _, err := c.Queue(ns, "empty").ClaimWait(ctx, "w", time.Minute, 1); got <- err }()
	h := c.sessionHost(srv.url)
	ch := newChanges()
	h.parked.watch(ch.changed)
	ch.waitFor(t, "the ClaimWait in flight", func() bool { h.parked.mu.Lock(); defer h.parked.mu.Unlock(); return h.parked.used == 1 })
	c.Close()
	wantErr(t, "a wait when the client closes", <-got, engine.ErrClosed)
}

// TestSessionRefusesAFrameOverTheBound: a call larger than the server's
// bound on a frame (Welcome.max_frame_bytes) is refused in the client,
// unsent, and the session goes on.
func TestSessionRefusesAFrameOverTheBound(t *testing.T) {
	t.Parallel()
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { sc.reply(enqueued(c.GetId(), 1, false)) })
	f.welcome.MaxFrameBytes = 200
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	_, err := q.Enqueue(context.Background(), engine.Task{Payload: []byte(`"` + strings.Repeat("x", 300) + `"`)})
	if err == nil || errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "over the server's limit") {
		t.Fatalf("a call over the frame bound: %v", err)
	}
	if _, err := q.Enqueue(context.Background(), engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if s, calls := f.count(); s != 1 || calls != 1 {
		t.Fatalf("%d sessions, %d calls; want the small call alone on the one session", s, calls)
	}
}

// TestSessionCallTimeoutBoundsATry: a server whose session takes calls
// and never answers costs a call one CallTimeout, after which a keyed
// enqueue moves on to the next server, and an unkeyed one is
// ErrOutcomeUnknown.
func TestSessionCallTimeoutBoundsATry(t *testing.T) {
	t.Parallel()
	paused := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {})
	live := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { sc.reply(enqueued(c.GetId(), 9, false)) })
	c := dial(t, paused.url+","+live.url, fastRetries(Options{CallTimeout: 100 * time.Millisecond}))
	// The session to the paused server is open before the calls: a Hello
	// answered later than CallTimeout (a loaded machine) would move the
	// call on unsent, not test a try cut short.
	openSession(t, c, paused.url)
	q := c.Queue(engine.NS("acme", "prod"), "q")
	if e, err := q.Enqueue(context.Background(), engine.Task{IdempotencyKey: "k"}); err != nil || e.ID != 9 {
		t.Fatalf("a keyed enqueue, paused server first: %+v, %v", e, err)
	}
	if _, n := paused.count(); n != 1 {
		t.Fatalf("%d calls reached the paused server, want 1", n)
	}
	c2 := dial(t, paused.url+","+live.url, fastRetries(Options{CallTimeout: 100 * time.Millisecond}))
	openSession(t, c2, paused.url)
	_, err := c2.Queue(engine.NS("acme", "prod"), "q").Enqueue(context.Background(), engine.Task{})
	wantErr(t, "an unkeyed enqueue, paused server first", err, ErrOutcomeUnknown)
}

// openSession opens c's session to the server at url, waiting for its
// Hello's answer as long as the dial allows.
func openSession(t *testing.T, c *Client, url string) {
	t.Helper()
	if _, err := c.sessionHost(url).get(context.Background(), 0); err != nil {
		t.Fatalf("opening a session to %s: %v", url, err)
	}
}

// TestSessionClaimWaitAcrossAStop: a server that stops ends a waiting
// claim on its session; the client asks again, finds no server, and says
// so, never as a closed client.
func TestSessionClaimWaitAcrossAStop(t *testing.T) {
	t.Parallel()
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{MaxWait: time.Hour}, nil)
	c := dial(t, srv.url, Options{MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	got := make(chan error, 1)
	h := c.sessionHost(srv.url)
	ch := newChanges()
	h.parked.watch(ch.changed)
	go func() {
		_, err := c.Queue(engine.NS("acme", "prod"), "q").ClaimWait(context.Background(), "w", time.Minute, 1)
		got <- err
	}()
	ch.waitFor(t, "the ClaimWait in flight", func() bool { h.parked.mu.Lock(); defer h.parked.mu.Unlock(); return h.parked.used == 1 })
	srv.stop()
	err := <-got
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a wait whose server stopped: %v", err)
	}
	if errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a server going away looks like a closed client: %v", err)
	}
}

// TestSessionNotThroughAProxy: a server reached through an HTTP proxy (as
// the environment says) gets unary calls, through the proxy.
func TestSessionNotThroughAProxy(t *testing.T) {
	proxy, _ := url.Parse("http://proxy.invalid:3128")
	proxyFor = func(r *http.Request) (*url.URL, error) {
		if r.URL.Hostname() == "docket.example" {
			return proxy, nil
		}
		return nil, nil
	}
	t.Cleanup(func() { proxyFor = http.ProxyFromEnvironment })
	c := &Client{sessions: map[string]*sessionHost{}, now: time.Now}
	if _, err := c.sessionHost("http://docket.example:7070").get(context.Background(), 0); !errors.Is(err, errNoSession) {
		t.Fatalf("a server behind a proxy: %v, want errNoSession", err)
	}
	if h := c.sessionHost("http://127.0.0.1:7070"); h.noSession != 0 {
		t.Fatal("a server reached directly is not given sessions")
	}
}

// TestSessionGoingAway: a server that stops reads no more calls and says
// which it read (GoingAway); the calls it did not read fail as never
// sent, and go to the next server, unkeyed enqueues too, while the one it
// read is answered where it was sent.
func TestSessionGoingAway(t *testing.T) {
	t.Parallel()
	const n = 6
	var mu sync.Mutex
	var read []*v1.Call
	going := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		mu.Lock()
		defer mu.Unlock()
		read = append(read, c)
		if len(read) < n {
			return
		}
		// Every call was written; the server read the first alone.
		first := read[0].GetId()
		for _, c := range read[1:] {
			first = min(first, c.GetId())
		}
		sc.reply(&v1.Reply{Reply: &v1.Reply_GoingAway{GoingAway: &v1.GoingAway{LastCallId: first}}})
		sc.reply(enqueued(first, 1, false))
		sc.nc.Close()
	})
	live := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { sc.reply(enqueued(c.GetId(), 9, false)) })
	c := dial(t, going.url+","+live.url, fastRetries(Options{}))
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ids := make(chan uint64, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := q.Enqueue(context.Background(), engine.Task{})
			if err != nil {
				t.Errorf("an unkeyed enqueue on a server going away: %v", err)
				return
			}
			ids <- e.ID
		}()
	}
	wg.Wait()
	close(ids)
	got := map[uint64]int{}
	for id := range ids {
		got[id]++
	}
	if got[1] != 1 || got[9] != n-1 {
		t.Fatalf("tasks %v; want 1 answered by the server going away, %d by the next", got, n-1)
	}
	if _, calls := live.count(); calls != n-1 {
		t.Fatalf("%d calls at the next server, want %d", calls, n-1)
	}
}

// TestSessionGoingAwayEndsSending: after a GoingAway the client sends
// nothing more on that connection; the next call opens a new session.
func TestSessionGoingAwayEndsSending(t *testing.T) {
	t.Parallel()
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		if sc.n == 1 {
			sc.reply(&v1.Reply{Reply: &v1.Reply_GoingAway{GoingAway: &v1.GoingAway{LastCallId: c.GetId()}}})
		}
		sc.reply(enqueued(c.GetId(), uint64(sc.n), false))
	})
	c := dial(t, f.url, fastRetries(Options{}))
	q := c.Queue(engine.NS("acme", "prod"), "q")
	for i, want := range []uint64{1, 2} {
		e, err := q.Enqueue(context.Background(), engine.Task{})
		if err != nil || e.ID != want {
			t.Fatalf("enqueue %d: %+v, %v; want session %d's answer", i, e, err, want)
		}
	}
	if s, calls := f.count(); s != 2 || calls != 2 {
		t.Fatalf("%d sessions, %d calls; want the second call on a new session", s, calls)
	}
}

// TestSessionCallCarriesItsDeadline: a call sends what is left of its
// context's deadline, or the try's bound (Options.CallTimeout) if less.
func TestSessionCallCarriesItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) { sc.reply(enqueued(c.GetId(), 1, false)) })
	c := dial(t, f.url, Options{CallTimeout: time.Hour})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), engine.Task{}); err != nil {
		t.Fatal(err)
	}
	if got := f.call(0).GetTimeoutMicros(); got == 0 || got > uint64(time.Minute/time.Microsecond) {
		t.Fatalf("a call with a minute left sent timeout_micros=%d", got)
	}
	if got := f.call(1).GetTimeoutMicros(); got <= uint64(time.Minute/time.Microsecond) || got > uint64(time.Hour/time.Microsecond) {
		t.Fatalf("a call without a deadline, bounded by an hour, sent timeout_micros=%d", got)
	}
}
