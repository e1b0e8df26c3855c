package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// dialWithCalls opens a session and sends calls in the same write as its
// Hello, so that the server finds them all buffered once it has read the
// Hello: one batch.
func dialWithCalls(t *testing.T, addr string, calls ...proto.Message) *testSession {
	t.Helper()
	ts := dialRaw(t, addr)
	ts.send(append([]proto.Message{&v1.Hello{Version: session.Version}}, calls...)...)
	var w v1.Welcome
	if err := session.ReadMessage(ts.br, session.MaxHelloBytes, &w); err != nil {
		t.Fatalf("welcome: %v", err)
	}
	return ts
}

// durableSessions serves a DB with a directory, whose syncs fail while
// failSyncs is set; setup, if any, is given the server before it serves.
func durableSessions(t *testing.T, dir string, setup ...func(*Server)) (addr string, db *engine.DB, failSyncs *atomic.Bool, stop func() error) {
	t.Helper()
	failSyncs = new(atomic.Bool)
	opts := engine.Options{Logger: slog.New(slog.DiscardHandler)}
	enginetest.FS(&opts, errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpSync && strings.Contains(op.Path, "wal") && failSyncs.Load() {
			return errors.New("disk gone")
		}
		return nil
	})))
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler)})
	for _, f := range setup {
		f(s)
	}
	addr, stop = serveSessions(t, s)
	return addr, db, failSyncs, stop
}

// TestSessionBatchSharesOneSync: the calls of one read commit one by one
// and wait for the log once; when that sync fails, every call whose
// answer rested on it gets the failure, and one refused for its arguments
// keeps its own answer.
func TestSessionBatchSharesOneSync(t *testing.T) {
	t.Parallel()
	addr, db, failSyncs, _ := durableSessions(t, t.TempDir())
	const n = 50
	var calls []proto.Message
	for i := range n {
		calls = append(calls, enqueueCall(uint64(i+1), "q"))
	}
	syncs := db.Stats().LogSyncs
	ts := dialWithCalls(t, addr, calls...)
	got := ts.recvAll(n)
	for id, r := range got {
		if r.GetEnqueue() == nil {
			t.Fatalf("call %d: %v", id, r)
		}
	}
	if d := db.Stats().LogSyncs - syncs; d != 1 {
		t.Fatalf("%d syncs for %d enqueues of one read, want 1", d, n)
	}

	failSyncs.Store(true)
	ts = dialWithCalls(t, addr,
		enqueueCall(1, "q"),
		&v1.Call{Id: 2, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Namespace: sessNS, Queue: ""}}},
		enqueueCall(3, "q"))
	got = ts.recvAll(3)
	for _, id := range []uint64{1, 3} {
		if e := got[id].GetError(); e == nil || !errorsContain(e, "disk gone") {
			t.Fatalf("call %d after the sync failed: %v", id, got[id])
		}
	}
	if e := got[2].GetError(); wire.ItemError(e).Code() != connect.CodeInvalidArgument {
		t.Fatalf("an invalid call keeps its own answer: %v", got[2])
	}
}

// TestSessionLoneCallSyncFails: a lone call that the reader answers
// itself (a client calling one at a time) gets the failure of the sync
// its answer rested on, as the answerer's calls do, and the session goes
// on answering.
func TestSessionLoneCallSyncFails(t *testing.T) {
	t.Parallel()
	var handoffs atomic.Int64
	addr, _, failSyncs, _ := durableSessions(t, t.TempDir(), func(s *Server) {
		s.onHandoff = func() { handoffs.Add(1) }
	})
	ts, _ := dialSession(t, addr, "")
	id := uint64(0)
	call := func() *v1.Reply {
		t.Helper()
		id++
		ts.send(enqueueCall(id, "q"))
		r := ts.mustRecv()
		if r.GetId() != id {
			t.Fatalf("call %d answered as %d", id, r.GetId())
		}
		return r
	}
	for range session.LoneStreak {
		if r := call(); r.GetEnqueue() == nil {
			t.Fatalf("call %d: %v", id, r)
		}
	}
	before := handoffs.Load()
	failSyncs.Store(true)
	if r := call(); !errorsContain(r.GetError(), "disk gone") {
		t.Fatalf("a lone call whose sync failed: %v", r)
	}
	if got := handoffs.Load(); got != before {
		t.Fatalf("the lone call went to the answerer (%d hand-offs, %d before)", got, before)
	}
	// The log failed for good: the next lone call is refused, answered.
	if r := call(); r.GetError() == nil {
		t.Fatalf("a call after the log failed: %v", r)
	}
}

func errorsContain(e *v1.ItemError, s string) bool {
	return e != nil && strings.Contains(e.GetMessage(), s)
}

// TestSessionShutdown: Serve's clean stop answers a session's waiting
// claim (empty, as a drain does) and its calls in flight, then closes the
// session, and returns only once it is closed.
func TestSessionShutdown(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	addr, stop := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	ts.send(&v1.Call{Id: 1, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
		Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	<-parked
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s.sessions.mu.Lock()
	left := len(s.sessions.all)
	s.sessions.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sessions outlive Serve", left)
	}
	r := ts.mustRecv()
	if r.GetId() != 1 || r.GetClaimWait() == nil {
		t.Fatalf("the waiting claim at the stop: %v", r)
	}
	if _, err := ts.recv(); err == nil {
		t.Fatal("the session outlives Serve")
	}
}

// TestSessionStopUnderLoad: sessions sending enqueues while the server
// stops (and the DB closes) see their sessions end; every enqueue that
// was acknowledged is in the DB when it is opened again.
func TestSessionStopUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, db, _, stop := durableSessions(t, dir)
	var mu sync.Mutex
	var acked []uint64
	var wg sync.WaitGroup
	started := make(chan struct{}, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts := dialWithCalls(t, addr)
			var next uint64
			go func() {
				for i := 0; i < 2000; i++ {
					var b []byte
					for range 16 {
						next++
						b, _ = session.AppendFrame(b, enqueueCall(next, "load"))
					}
					if _, err := ts.conn.Write(b); err != nil {
						return
					}
				}
			}()
			first := true
			for {
				r, err := ts.recv()
				if err != nil {
					return
				}
				if id := r.GetEnqueue().GetEnqueued().GetId(); id != 0 {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
				if first {
					first = false
					started <- struct{}{}
				}
			}
		}()
	}
	for range 4 {
		<-started
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := engine.Open(dir, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	q := db2.Queue(engine.NS("p", "s"), "load")
	mu.Lock()
	defer mu.Unlock()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	for _, id := range acked {
		if _, err := q.Get(context.Background(), id); err != nil {
			t.Fatalf("acknowledged task %d: %v", id, err)
		}
	}
	t.Logf("%d acknowledged enqueues, all there after the stop", len(acked))
}

// TestSessionOnAReplicatedDB: on a replicated DB (no deferred waits) the
// calls of one read run at once, not one after another; a follower
// answers with the leader's URL; stale reads are served when the Hello
// asks for them.
func TestSessionOnAReplicatedDB(t *testing.T) {
	t.Parallel()
	const n = 8
	log := &gatedLog{testLog: &testLog{}, n: n, gate: make(chan struct{})}
	db, err := engine.OpenReplicated(engine.Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	log.db = db
	t.Cleanup(func() { db.Close() })
	c := &testCluster{leaderURL: "http://leader.example", changed: make(chan struct{})}
	s := New(db, Options{Cluster: c, Logger: slog.New(slog.DiscardHandler), MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	var calls []proto.Message
	for i := range n {
		calls = append(calls, enqueueCall(uint64(i+1), "r"))
	}
	ts := dialWithCalls(t, addr, calls...)
	got := ts.recvAll(n)
	for id, r := range got {
		if r.GetEnqueue() == nil {
			t.Fatalf("call %d: %v", id, r)
		}
	}
	if log.timedOut.Load() {
		t.Fatalf("the %d calls of one read ran one after another on a replicated DB", n)
	}

	// A waiting claim ends when the leadership changes, answered with the
	// new leader.
	ts.send(&v1.Call{Id: 50, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
		Namespace: sessNS, Queue: "empty", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	<-parked
	c.bump("http://new-leader.example")
	if r := ts.mustRecv(); r.GetId() != 50 || r.GetError().GetLeader() != "http://new-leader.example" {
		t.Fatalf("a waiting claim when the leadership changed: %v", r)
	}

	log.mu.Lock()
	log.notLeader = true
	log.mu.Unlock()
	ts.send(enqueueCall(100, "r"))
	r := ts.mustRecv()
	if e := r.GetError(); e.GetLeader() != "http://new-leader.example" || e.GetUnavailable() == "" {
		t.Fatalf("a write on a follower: %v", r)
	}
	get := &v1.Call{Id: 101, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{Namespace: sessNS, Queue: "r"}}}
	ts.send(get)
	if r := ts.mustRecv(); r.GetError().GetLeader() == "" {
		t.Fatalf("a linearizable read on a follower: %v", r)
	}
	stale := dialWithCalls(t, addr) // no stale reads asked for
	stale.send(get)
	if r := stale.mustRecv(); r.GetError() == nil {
		t.Fatalf("a read on a follower without stale reads: %v", r)
	}
	stale = dialRaw(t, addr)
	stale.send(&v1.Hello{Version: session.Version, StaleReads: true}, get)
	var w v1.Welcome
	if err := session.ReadMessage(stale.br, session.MaxHelloBytes, &w); err != nil {
		t.Fatal(err)
	}
	if r := stale.mustRecv(); r.GetCounts().GetCounts().GetReady() != n {
		t.Fatalf("a stale read on a follower: %v", r)
	}
}

// gatedLog holds each of the first n submits until all n have come (or a
// bound passed: then they ran one after another).
type gatedLog struct {
	*testLog
	n         int32
	submitted atomic.Int32
	gate      chan struct{}
	timedOut  atomic.Bool
}

func (g *gatedLog) Submit(ctx context.Context, cmd []byte) (*engine.Applied, error) {
	if k := g.submitted.Add(1); k == g.n {
		close(g.gate)
	} else if k < g.n {
		select {
		case <-g.gate:
		case <-time.After(5 * time.Second):
			g.timedOut.Store(true)
		}
	}
	return g.testLog.Submit(ctx, cmd)
}

// TestSessionDrainEndsWaitingClaims: Drain answers a session's waiting
// claim at once (no leases) and refuses new ones as the unary call does;
// the session goes on.
func TestSessionDrainEndsWaitingClaims(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	wait := func(id uint64) *v1.Call {
		return &v1.Call{Id: id, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}}
	}
	ts.send(wait(1))
	<-parked
	s.Drain()
	if r := ts.mustRecv(); r.GetId() != 1 || r.GetClaimWait() == nil {
		t.Fatalf("the waiting claim at the drain: %v", r)
	}
	ts.send(wait(2), enqueueCall(3, "q"))
	got := ts.recvAll(2)
	if e := got[2].GetError(); wire.ItemError(e).Code() != connect.CodeUnavailable || e.GetUnavailable() != "draining" {
		t.Fatalf("a claim while draining: %v", got[2])
	}
	if got[3].GetEnqueue() == nil {
		t.Fatalf("an enqueue while draining: %v", got[3])
	}
}

// TestSessionStopDoesNotWaitForAHello: a clean stop ends a session still
// waiting for its Hello at once, not when its BodyTimeout or the grace
// period passes.
func TestSessionStopDoesNotWaitForAHello(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{BodyTimeout: time.Hour})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, s, NewHTTPServer(s.Mux(), nil), ln, time.Hour) }()
	ts := dialRaw(t, ln.Addr().String()) // the preface, no Hello
	// Wait until the session is being served.
	for {
		s.sessions.mu.Lock()
		n := len(s.sessions.all)
		s.sessions.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve waits for a session's Hello at its stop")
	}
	if _, err := ts.recv(); err == nil {
		t.Fatal("the session outlives Serve")
	}
}

// TestSessionInFlightBound: a session reads no more calls while
// sessionInFlight of its calls are unanswered: past the bound, waiting
// claims are not even read until a drain answers the first ones (and the
// later ones, read then, are refused for the drain).
func TestSessionInFlightBound(t *testing.T) {
	defer func(n int) { sessionInFlight = n }(sessionInFlight)
	sessionInFlight = 16
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 64)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	const n = 20
	var calls []proto.Message
	for i := range n {
		calls = append(calls, &v1.Call{Id: uint64(i + 1), Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	}
	ts.send(calls...)
	for range 16 {
		<-parked
	}
	s.Drain()
	got := ts.recvAll(n)
	var empty, draining int
	for id, r := range got {
		switch {
		case r.GetClaimWait() != nil:
			empty++
		case r.GetError().GetUnavailable() == "draining":
			draining++
		default:
			t.Fatalf("claim %d: %v", id, r)
		}
	}
	if empty != 16 || draining != n-16 || len(parked) != 0 {
		t.Fatalf("%d claims waited, %d refused for the drain, %d more parked; want 16 and %d and 0", empty, draining, len(parked), n-16)
	}
}

// TestSessionGoingAway: a session whose server stops while a batch runs
// sends GoingAway naming the last call it read, answers that call, and
// does not run the calls written after it.
func TestSessionGoingAway(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{})
	running, proceed := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s.onCall = func() {
		if !first.Swap(true) {
			close(running)
			<-proceed
		}
	}
	addr, stop := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	ts.send(enqueueCall(1, "q"))
	<-running
	ts.send(enqueueCall(2, "q"), enqueueCall(3, "q")) // written, not read: the reader runs call 1
	s.sessions.each(func(x *sess) { x.stop() })
	close(proceed)
	r := ts.mustRecv()
	if r.GetId() != 1 || r.GetEnqueue() == nil {
		t.Fatalf("the call read before the stop: %v", r)
	}
	if err := ts.closed(); err == nil {
		t.Fatal("the session outlives its stop")
	}
	if ts.away == nil || ts.away.GetLastCallId() != 1 {
		t.Fatalf("GoingAway %v; want last_call_id 1", ts.away)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	n, err := db.Queue(engine.NS("p", "s"), "q").Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.Ready != 1 {
		t.Fatalf("%+v; want the one call read enqueued, not those after it", n)
	}
}
