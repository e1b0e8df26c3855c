package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
	"github.com/docketdb/docket/server"
	"github.com/docketdb/docket/worker"
)

// announcing wraps a server's routes: every answer announces the limits
// v; the calls to the procedures in hold are counted while in progress
// (at most, by procedure) and wait for release.
type announcing struct {
	v       string
	hold    map[string]bool
	release chan struct{}

	mu       sync.Mutex
	inflight map[string]int
	most     map[string]int
	changes  changes // signalled at every change of inflight
}

// announced sets the LimitsHeader to v as the answer's headers are
// written, over what the server set.
type announced struct {
	http.ResponseWriter
	v string
}

func (a announced) WriteHeader(code int) {
	a.Header().Set(wire.LimitsHeader, a.v)
	a.ResponseWriter.WriteHeader(code)
}

func (a announced) Write(b []byte) (int, error) {
	a.Header().Set(wire.LimitsHeader, a.v) // no effect once the headers are written
	return a.ResponseWriter.Write(b)
}

func (a announced) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *announcing) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w = announced{w, a.v}
		if !a.hold[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		a.mu.Lock()
		a.inflight[r.URL.Path]++
		a.most[r.URL.Path] = max(a.most[r.URL.Path], a.inflight[r.URL.Path])
		a.mu.Unlock()
		a.changes.changed()
		<-a.release
		next.ServeHTTP(w, r)
		a.mu.Lock()
		a.inflight[r.URL.Path]--
		a.mu.Unlock()
		a.changes.changed()
	})
}

func (a *announcing) counts(path string) (inflight, most int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight[path], a.most[path]
}

// changes is a signal of state other goroutines change: every change
// sends on it without blocking, so a change made after a receive is never
// lost (its send finds the buffer free).
type changes chan struct{}

func newChanges() changes { return make(changes, 1) }

func (c changes) changed() {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitFor waits, for up to 5 s, until cond holds: it reads cond again at
// each change c signals.
func (c changes) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-c:
		case <-timeout.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (s *slots) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}

// TestClientLearnsTheServersLimits: a server that announces calls=2,
// parked=3 gets at most 2 calls and 3 waiting claims of the client at
// once, apart; the calls beyond wait in the client, and all complete.
func TestClientLearnsTheServersLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	get := docketv1connect.QueuesGetProcedure
	wait := docketv1connect.QueuesClaimWaitProcedure
	a := &announcing{v: "calls=2, parked=3", hold: map[string]bool{get: true, wait: true}, release: make(chan struct{}),
		inflight: map[string]int{}, most: map[string]int{}, changes: newChanges()}
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, a.wrap)
	var once sync.Once
	answer := func() { once.Do(func() { close(a.release) }) }
	t.Cleanup(answer) // before the server stops
	c := dial(t, srv.url, Options{Transport: TransportUnary})
	q := c.Queue(ns, "q")
	id := must(q.Enqueue(ctx, engine.Task{Payload: []byte(`"x"`)}))(t).ID
	hl := c.hc.Transport.(limited).lim.host(strings.TrimPrefix(srv.url, "http://"))
	hl.calls.watch(a.changes.changed)
	hl.parked.watch(a.changes.changed)

	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := q.Get(ctx, id)
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := c.Queue(ns, "empty").ClaimWait(ctx, "w", time.Minute, 1)
			errs <- err
		}()
	}
	a.changes.waitFor(t, "2 calls and 3 waiting claims at the server, the others waiting in the client", func() bool {
		calls, _ := a.counts(get)
		parked, _ := a.counts(wait)
		return calls == 2 && parked == 3 && hl.calls.waiting() == n-2 && hl.parked.waiting() == n-3
	})
	answer() // the server answers from now on
	// The claims wait on an empty queue until work comes: one task each.
	for range n {
		must(db.Queue(ns, "empty").Enqueue(ctx, engine.Task{}))(t)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, most := a.counts(get); most != 2 {
		t.Errorf("at most %d calls at once; want 2", most)
	}
	if _, most := a.counts(wait); most != 3 {
		t.Errorf("at most %d waiting claims at once; want 3", most)
	}
}

// TestAServersRefusalForALimitIsSaid: a server that refuses every call
// for being over the caller's limit: the client tries again, then reports
// the refusal as what it is (ErrOverLimit), which is also ErrUnavailable
// (nothing was done).
func TestAServersRefusalForALimitIsSaid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := memDB(t, engine.Options{})
	var refuse atomic.Bool
	var refused atomic.Int32
	ew := connect.NewErrorWriter()
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !refuse.Load() {
				next.ServeHTTP(w, r)
				return
			}
			refused.Add(1)
			ew.Write(w, r, connect.NewError(connect.CodeResourceExhausted,
				errors.New("docket: too many concurrent calls for this caller (limit 256)")))
		})
	})
	c := dial(t, srv.url, Options{Transport: TransportUnary, MaxRetries: 2, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	refuse.Store(true)
	_, err := c.Queue(engine.NS("acme", "prod"), "q").Enqueue(ctx, engine.Task{})
	wantErr(t, "a call refused for a limit", err, ErrOverLimit)
	wantErr(t, "a call refused for a limit", err, ErrUnavailable)
	if !strings.Contains(err.Error(), "over the server's limit") || refused.Load() != 3 {
		t.Fatalf("%v after %d tries", err, refused.Load())
	}
	var ol interface{ OverLimit() bool }
	if !errors.As(err, &ol) || !ol.OverLimit() {
		t.Fatalf("%v does not tell the worker runtime what it is", err)
	}
}

// TestAWorkerOfManySlotsOnOneToken: a worker with 300 slots on one token
// against a server with the default limits (256 calls a caller), its
// claims waiting on an empty queue, then 40 tasks that each run until
// heartbeats extended their lease three times. The client keeps its calls
// within the server's limits, so heartbeats are not refused, no lease
// expires, and each task runs exactly once.
func TestAWorkerOfManySlotsOnOneToken(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("300 slots: not under -short")
	}
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	tab, tok := tokens(t)
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab})
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, nil)
	c := dial(t, srv.url, Options{Token: tok["worker"]})

	const n = 40
	var mu sync.Mutex
	runs := map[uint64]int{}
	var finished sync.WaitGroup
	finished.Add(n)
	w := worker.New(c, worker.Options{Logger: quiet, ShutdownGrace: 5 * time.Second})
	w.HandleFunc(ns, "jobs", func(ctx context.Context, tk *worker.Task) error {
		mu.Lock()
		runs[tk.ID]++
		first := runs[tk.ID] == 1
		mu.Unlock()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last, moved := tk.Deadline(), 0
		for moved < 3 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
			if dl := tk.Deadline(); dl.After(last) {
				last, moved = dl, moved+1
			}
		}
		if first {
			finished.Done()
		}
		return nil
	}, worker.QueueOptions{Concurrency: 300, Lease: time.Second})
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.WaitParked(pctx, ns, "jobs", DefaultMaxConns/2); err != nil {
		t.Fatal(err)
	}
	for range n {
		must(c.Queue(ns, "jobs").Enqueue(ctx, engine.Task{}))(t)
	}
	all := make(chan struct{})
	go func() { finished.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("the tasks did not all finish")
	}
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range runs {
		if k != 1 {
			t.Errorf("task %d ran %d times", id, k)
		}
	}
	if cn := must(c.Queue(ns, "jobs").Counts(ctx))(t); cn.Ready+cn.InFlight+cn.Scheduled+cn.Dead != 0 || len(runs) != n {
		t.Fatalf("%d tasks ran; left %+v", len(runs), cn)
	}
}

// TestCallsGiveTheirSlotsBack: after calls that succeed, that the server
// refuses, that are cut by their deadline, and waiting claims, the client
// holds no slot.
func TestCallsGiveTheirSlotsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	for _, o := range []Options{{}, {Transport: TransportUnary}, {JSON: true}, {HTTPClient: &http.Client{}}} {
		c := dial(t, srv.url, o)
		q := c.Queue(ns, "q")
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := q.Enqueue(ctx, engine.Task{})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := q.Get(ctx, e.ID+1_000_000); !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("get of no task: %v", err)
				}
				if i%10 == 0 {
					wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					defer cancel()
					c.Queue(ns, "empty").ClaimWait(wctx, "w", time.Minute, 1)
				}
			}()
		}
		wg.Wait()
		var calls, parked *slots
		if c.opts.Transport == TransportSession {
			h := c.sessionHost(srv.url)
			calls, parked = &h.calls, &h.parked
		} else {
			var lim *limits
			switch tr := c.hc.Transport.(type) {
			case limited:
				lim = tr.lim
			default:
				t.Fatalf("transport %T", tr)
			}
			hl := lim.host(strings.TrimPrefix(srv.url, "http://"))
			calls, parked = &hl.calls, &hl.parked
		}
		ch := newChanges()
		calls.watch(ch.changed)
		parked.watch(ch.changed)
		ch.waitFor(t, "every slot given back", func() bool {
			calls.mu.Lock()
			defer calls.mu.Unlock()
			parked.mu.Lock()
			defer parked.mu.Unlock()
			return calls.used == 0 && parked.used == 0
		})
	}
}

// TestACallThatNeverGotASlotWasNotSent: a call whose context ends while it
// waits in the client for a slot under the server's limit was not sent:
// it returns the context's error alone, not ErrOutcomeUnknown.
func TestACallThatNeverGotASlotWasNotSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	get := docketv1connect.QueuesGetProcedure
	a := &announcing{v: "calls=1, parked=1", hold: map[string]bool{get: true}, release: make(chan struct{}),
		inflight: map[string]int{}, most: map[string]int{}, changes: newChanges()}
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, a.wrap)
	var once sync.Once
	answer := func() { once.Do(func() { close(a.release) }) }
	t.Cleanup(answer)
	c := dial(t, srv.url, Options{Transport: TransportUnary})
	q := c.Queue(ns, "q")
	held := make(chan error, 1)
	go func() { _, err := q.Get(ctx, 1); held <- err }()
	a.changes.waitFor(t, "the held call at the server", func() bool { n, _ := a.counts(get); return n == 1 })
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := q.Enqueue(cctx, engine.Task{IdempotencyKey: "k"})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a call that waited for a slot until its deadline: %v; want the context's error alone", err)
	}
	answer()
	if err := <-held; !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != 0 {
		t.Fatalf("the call that never got a slot was done: %+v", n)
	}
}
