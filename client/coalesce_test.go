package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
	"github.com/docketdb/docket/server"
)

const (
	enqueuePath     = "/docket.v1.Queues/Enqueue"
	enqueueEachPath = "/docket.v1.Pipeline/EnqueueEach"
)

// hold wraps a server's routes: the first request to path, once it has
// arrived, waits until release is closed, so that the client's next calls
// of its kind gather behind it. Every request is counted by path.
type hold struct {
	path     string
	mu       sync.Mutex
	arrived  chan struct{}
	release  chan struct{}
	taken    bool
	requests map[string]int
}

func newHold(path string) *hold {
	return &hold{path: path, arrived: make(chan struct{}), release: make(chan struct{}), requests: map[string]int{}}
}

func (h *hold) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.requests[r.URL.Path]++
		held := r.URL.Path == h.path && !h.taken
		h.taken = h.taken || held
		arrived, release := h.arrived, h.release
		h.mu.Unlock()
		if held {
			close(arrived)
			<-release
		}
		next.ServeHTTP(w, r)
	})
}

// again makes h hold the next request to its path, as it held the first
// (whose release must have been closed).
func (h *hold) again() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.arrived, h.release, h.taken = make(chan struct{}), make(chan struct{}), false
}

// chans returns the channels of the request h holds.
func (h *hold) chans() (arrived, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.arrived, h.release
}

func (h *hold) count(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests[path]
}

// gatherBehind makes the call first, which the server holds (h), then
// the calls of rest at once; once all of rest have gathered behind first,
// it lets first go and returns every call's error.
func gatherBehind(t *testing.T, c *Client, h *hold, first func() error, rest ...func() error) (error, []error) {
	t.Helper()
	gathered := make(chan int, len(rest)+1)
	c.gathered = func(n int) { gathered <- n }
	defer func() { c.gathered = nil }()
	arrived, release := h.chans()
	firstErr := make(chan error, 1)
	go func() { firstErr <- first() }()
	<-arrived
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	for i, f := range rest {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f()
		}()
	}
	// Bounded, so that a client that stopped gathering fails the test
	// rather than hanging it.
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	for n := 0; n < len(rest); {
		select {
		case n = <-gathered:
		case <-bound.C:
			close(release)
			t.Fatalf("%d of %d calls gathered behind the one held", n, len(rest))
		}
	}
	close(release)
	wg.Wait()
	return <-firstErr, errs
}

// TestConcurrentEnqueuesShareARequest: enqueues made while one is in
// flight go out together in one EnqueueEach request when it returns, and
// each gets its own task.
func TestConcurrentEnqueuesShareARequest(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, h.wrap)
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")

	const n = 40
	ids := make([]uint64, n+1)
	enqueue := func(i int) func() error {
		return func() error {
			e, err := q.Enqueue(ctx, engine.Task{Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
			ids[i] = e.ID
			return err
		}
	}
	rest := make([]func() error, n)
	for i := range rest {
		rest[i] = enqueue(i + 1)
	}
	firstErr, errs := gatherBehind(t, c, h, enqueue(0), rest...)
	if err := errors.Join(append(errs, firstErr)...); err != nil {
		t.Fatal(err)
	}
	if got, each := h.count(enqueuePath), h.count(enqueueEachPath); got != 1 || each != 1 {
		t.Fatalf("%d enqueues went in %d Enqueue and %d EnqueueEach requests; want 1 and 1", n+1, got, each)
	}
	seen := map[uint64]bool{}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("call %d got id %d twice", i, id)
		}
		seen[id] = true
		task := must(db.Queue(ns, "q").Get(ctx, id))(t)
		if want := fmt.Sprintf(`{"i":%d}`, i); string(task.Payload) != want {
			t.Fatalf("call %d got task %d holding %s; want %s", i, id, task.Payload, want)
		}
	}
}

// TestARequestsReturnSendsTheNext: calls that gather while a request of
// gathered calls is in flight go out in the next one when it returns
// (sent by the returning request's sender), and every call of both gets
// its own task.
func TestARequestsReturnSendsTheNext(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	first, next := newHold(enqueuePath), newHold(enqueueEachPath)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(h http.Handler) http.Handler { return first.wrap(next.wrap(h)) })
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")
	gathered := make(chan int, 64)
	c.gathered = func(n int) { gathered <- n }

	const second, third = 5, 7
	ids := make([]uint64, 1+second+third)
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	enqueue := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := q.Enqueue(ctx, engine.Task{Payload: fmt.Appendf(nil, `{"i":%d}`, i)})
				ids[i], errs[i] = e.ID, err
			}()
		}
	}
	waitGathered := func(n int) {
		for got := range gathered {
			if got == n {
				return
			}
		}
	}
	enqueue(0, 1) // alone, held by the server
	<-first.arrived
	enqueue(1, 1+second)
	waitGathered(second)
	close(first.release) // its return sends the second request, which the server holds
	<-next.arrived
	enqueue(1+second, len(ids))
	waitGathered(third)
	close(next.release) // its return sends the third
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if single, each := first.count(enqueuePath), first.count(enqueueEachPath); single != 1 || each != 2 {
		t.Fatalf("%d enqueues went in %d Enqueue and %d EnqueueEach requests; want 1 and 2", len(ids), single, each)
	}
	seen := map[uint64]bool{}
	for i, id := range ids {
		if seen[id] {
			t.Fatalf("call %d got id %d twice", i, id)
		}
		seen[id] = true
		task := must(db.Queue(ns, "q").Get(ctx, id))(t)
		if want := fmt.Sprintf(`{"i":%d}`, i); string(task.Payload) != want {
			t.Fatalf("call %d got task %d holding %s; want %s", i, id, task.Payload, want)
		}
	}
}

// TestNoCoalesceSendsEachCallAlone: with coalescing off, concurrent calls
// are in flight together, each in a request of its own.
func TestNoCoalesceSendsEachCallAlone(t *testing.T) {
	ctx := context.Background()
	const n = 8
	var arrived atomic.Int32
	all := make(chan struct{})
	h := newHold("")
	barrier := func(next http.Handler) http.Handler {
		return h.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == enqueuePath {
				if arrived.Add(1) == n {
					close(all)
				}
				<-all // only n calls in flight together get past
			}
			next.ServeHTTP(w, r)
		}))
	}
	srv := serve(t, memDB(t, engine.Options{}), "127.0.0.1:0", server.Options{}, barrier)
	c := dial(t, srv.url, Options{NoCoalesce: true})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = q.Enqueue(ctx, engine.Task{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got, each := h.count(enqueuePath), h.count(enqueueEachPath); got != n || each != 0 {
		t.Fatalf("%d requests of Enqueue and %d of EnqueueEach; want %d and 0", got, each, n)
	}
}

// TestACoalescedCallFailsAlone: an invalid enqueue and one the caller may
// not make, gathered with valid ones, fail alone, with the error each
// would have got alone; the others are enqueued.
func TestACoalescedCallFailsAlone(t *testing.T) {
	ctx := context.Background()
	tab, tok := tokens(t)
	db := memDB(t, engine.Options{Secure: true, Authorizer: tab})
	h := newHold(enqueuePath)
	srv := serve(t, db, "127.0.0.1:0", server.Options{Tokens: tab}, h.wrap)
	c := dial(t, srv.url, Options{Token: tok["worker"]}) // acme/prod only
	prod := c.Queue(engine.NS("acme", "prod"), "q")
	other := c.Queue(engine.NS("acme", "other"), "q")
	unnamed := c.Queue(engine.NS("acme", "prod"), "")

	var invalid, denied error
	var good [4]error
	rest := []func() error{
		func() error { _, invalid = unnamed.Enqueue(ctx, engine.Task{}); return nil },
		func() error { _, denied = other.Enqueue(ctx, engine.Task{}); return nil },
	}
	for i := range good {
		rest = append(rest, func() error { _, good[i] = prod.Enqueue(ctx, engine.Task{}); return nil })
	}
	firstErr, _ := gatherBehind(t, c, h, func() error { return second(prod.Enqueue(ctx, engine.Task{})) }, rest...)
	if err := errors.Join(append(good[:], firstErr)...); err != nil {
		t.Fatalf("a valid call gathered with bad ones failed: %v", err)
	}
	if h.count(enqueueEachPath) != 1 {
		t.Fatalf("%d EnqueueEach requests; want 1", h.count(enqueueEachPath))
	}
	// What each bad call gets alone.
	_, aloneInvalid := unnamed.Enqueue(ctx, engine.Task{})
	_, aloneDenied := other.Enqueue(ctx, engine.Task{})
	for _, bad := range []struct {
		what       string
		got, alone error
		sentinel   error
		code       connect.Code
	}{
		{"invalid", invalid, aloneInvalid, engine.ErrInvalid, connect.CodeInvalidArgument},
		{"forbidden", denied, aloneDenied, engine.ErrPermission, connect.CodePermissionDenied},
	} {
		wantErr(t, bad.what, bad.got, bad.sentinel)
		if bad.got.Error() != bad.alone.Error() || connect.CodeOf(bad.got) != bad.code || connect.CodeOf(bad.alone) != bad.code {
			t.Errorf("%s: gathered %q (%v), alone %q (%v)", bad.what, bad.got, connect.CodeOf(bad.got), bad.alone, connect.CodeOf(bad.alone))
		}
	}
	if n := must(db.As(engine.Caller{ID: "root"}).Queue(engine.NS("acme", "prod"), "q").Counts(ctx))(t); n.Ready != 5 {
		t.Fatalf("counts %+v; want the 5 valid enqueues", n)
	}
}

// TestACallLeavesTheGatheringWhenItsContextEnds: a gathered call whose
// context ends before its request goes out returns the context's error
// and is not sent; the others are.
func TestACallLeavesTheGatheringWhenItsContextEnds(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, h.wrap)
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")

	gathered := make(chan int, 8)
	c.gathered = func(n int) { gathered <- n }
	first := make(chan error, 1)
	go func() { first <- second(q.Enqueue(ctx, engine.Task{Payload: []byte(`"first"`)})) }()
	<-h.arrived
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { left <- second(q.Enqueue(cctx, engine.Task{Payload: []byte(`"left"`)})) }()
	<-gathered
	stays := make(chan error, 2)
	for _, p := range []string{`"a"`, `"b"`} {
		go func() { stays <- second(q.Enqueue(ctx, engine.Task{Payload: []byte(p)})) }()
	}
	for n := range gathered {
		if n == 3 {
			break
		}
	}
	cancel()
	if err := <-left; err != context.Canceled {
		t.Fatalf("a call whose context ended while it gathered: %v; want context.Canceled", err)
	}
	close(h.release)
	for _, ch := range []chan error{first, stays, stays} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	page := must(db.Queue(ns, "q").List(ctx, engine.ListOptions{State: engine.Ready}))(t)
	var payloads []string
	for _, task := range page.Tasks {
		payloads = append(payloads, string(task.Payload))
	}
	if len(payloads) != 3 || strings.Contains(strings.Join(payloads, " "), "left") {
		t.Fatalf("tasks %v; want first, a and b", payloads)
	}
	if h.count(enqueueEachPath) != 1 {
		t.Fatalf("%d EnqueueEach requests; want 1 (a and b)", h.count(enqueueEachPath))
	}
}

// TestCoalescedCallsWithALostAnswer: when the answer of a request of
// gathered calls is lost, each call is handled as it would be alone: an
// enqueue without a key has an unknown outcome, one with a key is
// repeated and finds the task of the first try.
func TestCoalescedCallsWithALostAnswer(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	var cuts atomic.Int32
	cuts.Store(1)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
		return h.wrap(cutAnswers(&cuts, enqueueEachPath)(next))
	})
	c := dial(t, srv.url, Options{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	q := c.Queue(ns, "q")

	var unkeyed error
	keyed := make([]engine.Enqueued, 2)
	keyedErr := make([]error, 2)
	firstErr, _ := gatherBehind(t, c, h, func() error { return second(q.Enqueue(ctx, engine.Task{})) },
		func() error { _, unkeyed = q.Enqueue(ctx, engine.Task{Payload: []byte(`"unkeyed"`)}); return nil },
		func() error {
			keyed[0], keyedErr[0] = q.Enqueue(ctx, engine.Task{Payload: []byte(`"k0"`), IdempotencyKey: "k0"})
			return nil
		},
		func() error {
			keyed[1], keyedErr[1] = q.Enqueue(ctx, engine.Task{Payload: []byte(`"k1"`), IdempotencyKey: "k1"})
			return nil
		})
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if cuts.Load() > 0 {
		t.Fatal("no EnqueueEach answer was cut")
	}
	wantErr(t, "an enqueue without a key whose request lost its answer", unkeyed, ErrOutcomeUnknown)
	for i := range keyed {
		if keyedErr[i] != nil || !keyed[i].Deduplicated {
			t.Fatalf("an enqueue with a key whose request lost its answer: %+v, %v; want its repeat deduplicated", keyed[i], keyedErr[i])
		}
	}
	// Every call took effect once: the lost answer's request did run.
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != 4 {
		t.Fatalf("counts %+v; want 4 tasks", n)
	}
}

// olderServer hides the Each calls, as a server of a build without them
// does (its mux has no such route: 404, which connect reads as
// Unimplemented).
func olderServer(next http.Handler) http.Handler {
	var old atomic.Bool
	old.Store(true)
	return olderUntil(&old, next)
}

// olderUntil is olderServer while old holds, the server itself after
// (upgraded in place).
func olderUntil(old *atomic.Bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if old.Load() && strings.HasSuffix(r.URL.Path, "Each") {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TestCoalescingFallsBackToSingleCalls: against a server without the Each
// calls, gathered calls are made alone, and the client stops gathering
// for that server, until noEachFor has passed: then it tries again, and
// calls gather once more on a server upgraded meanwhile.
func TestCoalescingFallsBackToSingleCalls(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	var old atomic.Bool
	old.Store(true)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler { return h.wrap(olderUntil(&old, next)) })
	c := dial(t, srv.url, Options{})
	start := time.Now()
	c.now = func() time.Time { return start }
	q := c.Queue(ns, "q")
	rest := make([]func() error, 5)
	for i := range rest {
		rest[i] = func() error { return second(q.Enqueue(ctx, engine.Task{})) }
	}
	firstErr, errs := gatherBehind(t, c, h, func() error { return second(q.Enqueue(ctx, engine.Task{})) }, rest...)
	if err := errors.Join(append(errs, firstErr)...); err != nil {
		t.Fatal(err)
	}
	if each, single := h.count(enqueueEachPath), h.count(enqueuePath); each != 1 || single != 6 {
		t.Fatalf("%d EnqueueEach and %d Enqueue requests; want 1 refused and 6", each, single)
	}
	// From now on every call goes alone.
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if each := h.count(enqueueEachPath); each != 1 {
		t.Fatalf("%d EnqueueEach requests after the first was refused", each)
	}
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != 16 {
		t.Fatalf("counts %+v; want 16", n)
	}

	// The server is upgraded. Just before noEachFor has passed, calls made
	// while one is held still go alone: they finish while it waits.
	old.Store(false)
	c.now = func() time.Time { return start.Add(noEachFor - time.Millisecond) }
	h.again()
	arrived, release := h.chans()
	held := make(chan error, 1)
	go func() { held <- second(q.Enqueue(ctx, engine.Task{})) }()
	<-arrived
	for range 5 {
		if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// Once it has passed, the calls gather behind one held, and go out in
	// one EnqueueEach request.
	c.now = func() time.Time { return start.Add(noEachFor) }
	h.again()
	firstErr, errs = gatherBehind(t, c, h, func() error { return second(q.Enqueue(ctx, engine.Task{})) }, rest...)
	if err := errors.Join(append(errs, firstErr)...); err != nil {
		t.Fatal(err)
	}
	if each := h.count(enqueueEachPath); each != 2 {
		t.Fatalf("%d EnqueueEach requests; want the one refused and one now", each)
	}
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != 28 {
		t.Fatalf("counts %+v; want 28", n)
	}
}

// TestCoalescedCallsOnLeases: completions, failures, heartbeats and
// completions that claim gather as enqueues do, each fenced on its own:
// a lost lease fails alone.
func TestCoalescedCallsOnLeases(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	for _, tc := range []struct {
		name, path string
		call       func(q engine.Queue, l *engine.Lease) error
		check      func(t *testing.T, local engine.Queue, l engine.Lease, after engine.Lease)
	}{
		{"complete", "/docket.v1.Queues/Complete",
			func(q engine.Queue, l *engine.Lease) error {
				_, err := q.Complete(ctx, *l, engine.Done{Result: []byte(`1`)})
				return err
			},
			func(t *testing.T, local engine.Queue, l, _ engine.Lease) {
				if info := must(local.Get(ctx, l.ID))(t); info.State != engine.Completed || string(info.Result) != `1` {
					t.Errorf("task %d after its completion: %+v", l.ID, info)
				}
			}},
		{"fail", "/docket.v1.Queues/Fail",
			func(q engine.Queue, l *engine.Lease) error {
				return q.Fail(ctx, *l, engine.Failure{Err: "boom", RetryAfter: time.Hour})
			},
			func(t *testing.T, local engine.Queue, l, _ engine.Lease) {
				if info := must(local.Get(ctx, l.ID))(t); info.State != engine.Scheduled || info.LastError != "boom" {
					t.Errorf("task %d after its failure: %+v", l.ID, info)
				}
			}},
		{"heartbeat", "/docket.v1.Queues/Heartbeat",
			func(q engine.Queue, l *engine.Lease) error { return q.Heartbeat(ctx, l, time.Hour, []byte(`{"p":1}`)) },
			func(t *testing.T, local engine.Queue, l, after engine.Lease) {
				info := must(local.Get(ctx, l.ID))(t)
				if !after.Deadline.After(l.Deadline.Add(30*time.Minute)) || !info.LeaseUntil.Equal(after.Deadline) || string(info.Progress) != `{"p":1}` {
					t.Errorf("task %d after its heartbeat: %+v, the lease held %v", l.ID, info, after.Deadline)
				}
			}},
		{"complete and claim", "/docket.v1.Pipeline/CompleteAndClaim",
			func(q engine.Queue, l *engine.Lease) error {
				_, ls, err := q.CompleteAndClaim(ctx, *l, engine.Done{}, "w2", time.Minute, 1)
				if err == nil && len(ls) != 1 {
					err = fmt.Errorf("claimed %d leases with the completion; want 1", len(ls))
				}
				return err
			},
			func(t *testing.T, local engine.Queue, l, _ engine.Lease) {
				if info := must(local.Get(ctx, l.ID))(t); info.State != engine.Completed {
					t.Errorf("task %d after its completion: %+v", l.ID, info)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := memDB(t, engine.Options{RetainCompleted: time.Hour})
			local := db.Queue(ns, "q")
			const n = 6
			for range 3 * n {
				must(local.Enqueue(ctx, engine.Task{}))(t)
			}
			leases := must(local.Claim(ctx, "w", time.Minute, n+1))(t)
			h := newHold(tc.path)
			srv := serve(t, db, "127.0.0.1:0", server.Options{}, h.wrap)
			c := dial(t, srv.url, Options{})
			q := c.Queue(ns, "q")
			held := make([]engine.Lease, n)
			copy(held, leases)
			forged := leases[n] // a lease nobody else calls on: its state does not change
			forged.Token++
			var forgedErr error
			rest := []func() error{func() error { forgedErr = tc.call(q, &forged); return nil }}
			for i := 1; i < n; i++ {
				rest = append(rest, func() error { return tc.call(q, &held[i]) })
			}
			firstErr, errs := gatherBehind(t, c, h, func() error { return tc.call(q, &held[0]) }, rest...)
			errs = append(errs[1:], firstErr)
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			wantErr(t, "a call on a forged lease", forgedErr, engine.ErrLeaseLost)
			// It is the error the call gets alone.
			alone := tc.call(q, &forged)
			if forgedErr.Error() != alone.Error() || connect.CodeOf(forgedErr) != connect.CodeOf(alone) {
				t.Errorf("gathered %q, alone %q", forgedErr, alone)
			}
			if each := h.count(strings.Replace(tc.path, "/docket.v1.Queues/", "/docket.v1.Pipeline/", 1) + "Each"); each != 1 {
				t.Fatalf("%d Each requests; want 1", each)
			}
			for i := range n {
				tc.check(t, local, leases[i], held[i])
			}
		})
	}
}

// TestCoalescedRequestsAreBounded: a request carries at most about
// maxEachBytes of calls (a full one goes out at once, even while another
// is in flight), and a call over soloBytes goes alone at once.
func TestCoalescedRequestsAreBounded(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, h.wrap)
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")
	first := make(chan error, 1)
	go func() { first <- second(q.Enqueue(ctx, engine.Task{})) }()
	<-h.arrived

	// A call over soloBytes does not wait for the one in flight.
	big := []byte(`"` + strings.Repeat("x", soloBytes) + `"`)
	if _, err := q.Enqueue(ctx, engine.Task{Payload: big}); err != nil {
		t.Fatal(err)
	}
	// Calls of a little less than soloBytes: a request holds as many as
	// fit in maxEachBytes, and goes out when the next does not fit. Its
	// return sends the call left over. All this while the first call is
	// still in flight.
	mid := []byte(`"` + strings.Repeat("y", soloBytes-100) + `"`)
	fit := maxEachBytes / (soloBytes - 50)
	var wg sync.WaitGroup
	for range fit + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.Enqueue(ctx, engine.Task{Payload: mid}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-first:
		t.Fatalf("the first call returned while the server held it: %v", err)
	default:
	}
	if single, each := h.count(enqueuePath), h.count(enqueueEachPath); single != 3 || each != 1 {
		t.Fatalf("%d Enqueue and %d EnqueueEach requests; want 3 (the first, the big call, the call left over) and 1", single, each)
	}
	close(h.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != fit+3 {
		t.Fatalf("counts %+v; want %d", n, fit+3)
	}
}

// TestCoalescedRequestsInFlightAreBounded: a request carries at most
// maxEachItems calls, and at most maxEachInFlight requests of a kind are
// in flight to a server: a full batch beyond waits for one to return.
func TestCoalescedRequestsInFlightAreBounded(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	h := newHold(enqueuePath)
	eachSeen := make(chan struct{}, 16)
	releaseEach := make(chan struct{})
	srv := serve(t, db, "127.0.0.1:0", server.Options{}, func(next http.Handler) http.Handler {
		return h.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == enqueueEachPath {
				eachSeen <- struct{}{}
				<-releaseEach
			}
			next.ServeHTTP(w, r)
		}))
	})
	c := dial(t, srv.url, Options{})
	q := c.Queue(ns, "q")
	gathered := make(chan int, 10*maxEachItems)
	c.gathered = func(n int) { gathered <- n }
	var wg sync.WaitGroup
	calls := func(n int) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	calls(1)
	<-h.arrived
	// The first is in flight: maxEachInFlight-1 full requests may join it.
	calls((maxEachInFlight - 1) * maxEachItems)
	for range maxEachInFlight - 1 {
		<-eachSeen
	}
	// The next full batch, and one call more, wait: nothing of them is
	// sent (every gathered call is still counted as waiting).
	calls(maxEachItems + 1)
	for n := range gathered {
		if n == maxEachItems+1 {
			break
		}
	}
	if n := len(eachSeen); n != 0 || h.count(enqueueEachPath) != maxEachInFlight-1 {
		t.Fatalf("%d EnqueueEach requests beyond the bound of %d in flight", h.count(enqueueEachPath), maxEachInFlight)
	}
	// The first returns: the full batch takes its place.
	close(h.release)
	<-eachSeen
	close(releaseEach)
	wg.Wait()
	if each := h.count(enqueueEachPath); each != maxEachInFlight && each != maxEachInFlight+1 {
		t.Fatalf("%d EnqueueEach requests; want %d and maybe one for the call left over", each, maxEachInFlight)
	}
	if n := must(db.Queue(ns, "q").Counts(ctx))(t); n.Ready != 1+maxEachInFlight*maxEachItems+1 {
		t.Fatalf("counts %+v", n)
	}
}

// TestItemErrorsAreClassifiedAsAnswers: a failed item's error is rebuilt
// as the single call's answer and classified by the same rules: an
// engine error is final, a refusal of a server that took nothing is
// repeated elsewhere (following a named leader), an unknown outcome and
// an item cut by the request's deadline count as sent without an answer.
func TestItemErrorsAreClassifiedAsAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		pb   *v1.ItemError
		want failure
	}{
		{"lease lost", &v1.ItemError{Code: "failed_precondition", Message: "lost", Detail: &v1.Error{Sentinel: v1.Sentinel_SENTINEL_LEASE_LOST}}, final},
		{"permission", &v1.ItemError{Code: "permission_denied", Message: "no", Detail: &v1.Error{Sentinel: v1.Sentinel_SENTINEL_PERMISSION}}, final},
		{"closed", &v1.ItemError{Code: "unavailable", Message: "closed", Detail: &v1.Error{Sentinel: v1.Sentinel_SENTINEL_CLOSED}, Unavailable: "closed"}, redirected},
		{"not the leader", &v1.ItemError{Code: "unavailable", Message: "not leader", Unavailable: "not the leader", Leader: "http://l:1"}, redirected},
		{"outcome unknown", &v1.ItemError{Code: "unavailable", Message: "cut"}, maybeSent},
		{"deadline", &v1.ItemError{Code: "deadline_exceeded", Message: "late"}, maybeSent},
		{"a code of a later build", &v1.ItemError{Code: "code_99", Message: "?"}, final},
	} {
		err := itemError(c.pb, time.Second)
		if got := classify(err); got != c.want {
			t.Errorf("%s: classified %d; want %d (%v)", c.name, got, c.want, err)
		}
	}
	err := itemError(&v1.ItemError{Code: "failed_precondition", Message: "docket: lease lost: task 1", Detail: &v1.Error{Sentinel: v1.Sentinel_SENTINEL_LEASE_LOST}}, time.Second)
	var ce *connect.Error
	if !errors.As(err, &ce) || !errors.Is(wire.FromConnect(err), engine.ErrLeaseLost) || wire.FromConnect(err).Error() != "docket: lease lost: task 1" {
		t.Fatalf("rebuilt %v", wire.FromConnect(err))
	}
}

// follower is a node of a cluster that is not the leader: it refuses
// every enqueue, alone or an item of EnqueueEach, as a follower's server
// does (Unavailable, nothing taken, the leader's URL), holding the first
// Enqueue until release is closed.
type follower struct {
	docketv1connect.UnimplementedAdminHandler
	docketv1connect.UnimplementedQueuesHandler
	docketv1connect.UnimplementedPipelineHandler
	leader   string
	arrived  chan struct{}
	release  chan struct{}
	held     atomic.Bool
	refusals atomic.Int32 // items of EnqueueEach refused
}

func (f *follower) Health(context.Context, *connect.Request[v1.HealthRequest]) (*connect.Response[v1.HealthResponse], error) {
	return connect.NewResponse(&v1.HealthResponse{Ready: true}), nil
}

func (f *follower) refusal() *connect.Error {
	ce := connect.NewError(connect.CodeUnavailable, errors.New("docket: not the leader"))
	ce.Meta().Set(wire.UnavailableHeader, "not the leader")
	ce.Meta().Set(wire.LeaderHeader, f.leader)
	return ce
}

func (f *follower) Enqueue(context.Context, *connect.Request[v1.EnqueueRequest]) (*connect.Response[v1.EnqueueResponse], error) {
	if !f.held.Swap(true) {
		close(f.arrived)
		<-f.release
	}
	return nil, f.refusal()
}

func (f *follower) EnqueueEach(_ context.Context, req *connect.Request[v1.EnqueueEachRequest]) (*connect.Response[v1.EnqueueEachResponse], error) {
	out := &v1.EnqueueEachResponse{}
	for range req.Msg.Items {
		f.refusals.Add(1)
		out.Results = append(out.Results, &v1.EnqueueEachResult{Error: wire.PBItemError(f.refusal())})
	}
	return connect.NewResponse(out), nil
}

// TestCoalescedCallsFollowTheLeader: calls gathered on a follower are
// each refused there with the leader's URL, and each follows it, as a
// call alone does.
func TestCoalescedCallsFollowTheLeader(t *testing.T) {
	ctx := context.Background()
	ns := engine.NS("acme", "prod")
	db := memDB(t, engine.Options{})
	leader := serve(t, db, "127.0.0.1:0", server.Options{}, nil)
	f := &follower{leader: leader.url, arrived: make(chan struct{}), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle(docketv1connect.NewAdminHandler(f))
	mux.Handle(docketv1connect.NewQueuesHandler(f))
	mux.Handle(docketv1connect.NewPipelineHandler(f))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	c := dial(t, ts.URL, Options{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	q := c.Queue(ns, "q")

	gathered := make(chan int, 16)
	c.gathered = func(n int) { gathered <- n }
	const n = 5
	errs := make(chan error, n+1)
	go func() { errs <- second(q.Enqueue(ctx, engine.Task{})) }()
	<-f.arrived
	for range n {
		go func() { errs <- second(q.Enqueue(ctx, engine.Task{})) }()
	}
	for g := range gathered {
		if g == n {
			break
		}
	}
	close(f.release)
	for range n + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if f.refusals.Load() != n {
		t.Fatalf("the follower refused %d items; want the %d gathered", f.refusals.Load(), n)
	}
	if got := must(db.Queue(ns, "q").Counts(ctx))(t); got.Ready != n+1 {
		t.Fatalf("the leader has %+v; want %d tasks", got, n+1)
	}
}
