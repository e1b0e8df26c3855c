package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/wal"
)

// syncGate is a failpoint that holds the log's fsyncs until it is opened:
// while it is shut, commits pile up in flight. fail makes the held fsync
// (and every later one) fail instead.
type syncGate struct {
	mu      sync.Mutex
	shut    bool
	fail    error
	open    chan struct{}
	waiting chan struct{} // closed once an fsync is held
}

func newSyncGate() *syncGate {
	return &syncGate{shut: true, open: make(chan struct{}), waiting: make(chan struct{})}
}

func (g *syncGate) failpoint(name string) error {
	if name != "sync" {
		return nil
	}
	g.mu.Lock()
	shut := g.shut
	if shut {
		select {
		case <-g.waiting:
		default:
			close(g.waiting)
		}
	}
	g.mu.Unlock()
	if shut {
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fail
}

// release lets the held fsync, and every later one, go on, failing with
// err if it is not nil.
func (g *syncGate) release(err error) {
	g.mu.Lock()
	g.shut, g.fail = false, err
	g.mu.Unlock()
	close(g.open)
}

// held waits until an fsync is held at the gate.
func (g *syncGate) held(t *testing.T) {
	t.Helper()
	select {
	case <-g.waiting:
	case <-time.After(5 * time.Second):
		t.Fatal("no fsync reached the gate")
	}
}

// gated opens a durable DB whose fsyncs wait at a shut gate, the gate armed
// only after Open (which fsyncs too).
func gated(t *testing.T, tweak ...func(*Options)) (*env, *syncGate) {
	t.Helper()
	var mu sync.Mutex
	var gate *syncGate
	e := newEnv(t, false, append(tweak, func(o *Options) {
		o.Logger = quiet
		o.failpoint = func(name string) error {
			mu.Lock()
			g := gate
			mu.Unlock()
			if g == nil {
				return nil
			}
			return g.failpoint(name)
		}
	})...)
	mu.Lock()
	gate = newSyncGate()
	mu.Unlock()
	return e, gate
}

func isSettled(p *Pending) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// TestEnqueueAsyncPipelines: many enqueues in flight from one goroutine are
// applied at once, none is reported before the fsync that makes it durable
// has returned, and one or two fsyncs cover them all; their ids follow the
// call order, and a reopened DB holds every one.
func TestEnqueueAsyncPipelines(t *testing.T) {
	t.Parallel()
	e, gate := gated(t)
	q := e.q("q")
	first := q.EnqueueAsync(ctx, Task{Payload: []byte(`1`)})
	gate.held(t) // the first round's fsync
	syncs, groups := e.db.Stats().LogSyncs, e.db.Stats().LogGroups
	const n = 200
	ps := []*Pending{first}
	for i := 1; i < n; i++ {
		ps = append(ps, q.EnqueueAsync(ctx, Task{Payload: []byte(fmt.Sprint(i + 1))}))
	}
	for i, p := range ps {
		if isSettled(p) {
			t.Fatalf("enqueue %d settled while its fsync is held", i)
		}
	}
	if got := e.db.Stats().Enqueued; got != n {
		t.Fatalf("%d enqueues applied, want %d applied before any is durable", got, n)
	}
	gate.release(nil)
	for i, p := range ps {
		res, err := p.Wait(ctx)
		if err != nil || res.ID != uint64(i+1) || res.Deduplicated {
			t.Fatalf("enqueue %d: %+v %v", i, res, err)
		}
	}
	if d := e.db.Stats().LogSyncs - syncs; d > 2 {
		t.Fatalf("%d fsyncs for %d enqueues in flight, want at most 2", d, n)
	}
	// The held fsync covers the first enqueue, the next all the others.
	groups[0]++
	groups[wal.GroupBucket(n-1)]++
	if got := e.db.Stats().LogGroups; got != groups {
		t.Fatalf("LogGroups %v, want one more fsync of 1 and one of %d: %v", got, n-1, groups)
	}
	e.crash()
	e.open()
	if c := counts(t, q); c.Ready != n {
		t.Fatalf("after a crash: %+v, want %d ready", c, n)
	}
}

// TestEnqueueAsyncLogFailure: when the fsync of a round fails, every
// enqueue in flight reports ErrFailed, none succeeds, and the engine takes
// no more writes, pipelined or not.
func TestEnqueueAsyncLogFailure(t *testing.T) {
	t.Parallel()
	e, gate := gated(t)
	q := e.q("q")
	ps := []*Pending{q.EnqueueAsync(ctx, Task{})}
	gate.held(t)
	for range 50 {
		ps = append(ps, q.EnqueueAsync(ctx, Task{}))
	}
	gate.release(errors.New("disk gone"))
	for i, p := range ps {
		if res, err := p.Wait(ctx); !errors.Is(err, ErrFailed) || res != (Enqueued{}) {
			t.Fatalf("enqueue %d in flight: %+v %v, want ErrFailed", i, res, err)
		}
	}
	if _, err := q.EnqueueAsync(ctx, Task{}).Wait(ctx); !errors.Is(err, ErrFailed) {
		t.Fatalf("enqueue after the failure: %v", err)
	}
	wantErr(t, errOnly(q.Enqueue(ctx, Task{})), ErrFailed)
}

// doneCtx is a context that says when somebody first waits on it.
type doneCtx struct {
	context.Context
	once   sync.Once
	asked  chan struct{}
	cancel context.CancelFunc
}

func newDoneCtx() *doneCtx {
	c, cancel := context.WithCancel(ctx)
	return &doneCtx{Context: c, asked: make(chan struct{}), cancel: cancel}
}

func (c *doneCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// TestEnqueueAsyncBackPressure: with MaxInFlight enqueues in flight the
// next one waits for a slot: cancelled, it enqueues nothing; otherwise it
// goes ahead once a round settles. Refused calls hold no slot.
func TestEnqueueAsyncBackPressure(t *testing.T) {
	t.Parallel()
	e, gate := gated(t, func(o *Options) { o.MaxInFlight = 4 })
	q := e.q("q")
	var ps []*Pending
	for range 4 {
		ps = append(ps, q.EnqueueAsync(ctx, Task{}))
	}
	gate.held(t)
	for range 10 {
		// Invalid input is refused before a slot is taken.
		if _, err := q.EnqueueAsync(ctx, Task{Payload: []byte(`{`)}).Wait(ctx); !errors.Is(err, ErrInvalid) {
			t.Fatalf("invalid enqueue: %v", err)
		}
	}

	// A fifth waits for a slot; cancelled, it returns without enqueueing.
	dc := newDoneCtx()
	got := make(chan *Pending, 1)
	go func() { got <- q.EnqueueAsync(dc, Task{}) }()
	<-dc.asked
	if n := e.db.Stats().Enqueued; n != 4 {
		t.Fatalf("%d enqueued while the fifth waits for a slot", n)
	}
	dc.cancel()
	p := <-got
	if res, err := p.Wait(ctx); !errors.Is(err, context.Canceled) || res.ID != 0 {
		t.Fatalf("cancelled while waiting for a slot: %+v %v", res, err)
	}

	// Another waits, and goes ahead once the round settles.
	dc = newDoneCtx()
	go func() { got <- q.EnqueueAsync(dc, Task{}) }()
	<-dc.asked
	if n := e.db.Stats().Enqueued; n != 4 {
		t.Fatalf("%d enqueued while the sixth waits for a slot", n)
	}
	gate.release(nil)
	for _, p := range append(ps, <-got) {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c := counts(t, q); c.Ready != 5 {
		t.Fatalf("%+v, want 5 ready", c)
	}
	if n := len(e.db.c.slots); n != 0 {
		t.Fatalf("%d slots held after every enqueue settled", n)
	}
}

// TestEnqueueAsyncOutcomes: a refusal (a failed assertion) and a
// deduplicated enqueue are reported once the state they rest on is
// durable, as Enqueue reports them; a context that ends first only ends
// the Wait; in memory every Pending is settled at once.
func TestEnqueueAsyncOutcomes(t *testing.T) {
	t.Parallel()
	e, gate := gated(t, func(o *Options) { o.MaxInFlight = 8 })
	q := e.q("q")
	first := q.EnqueueAsync(ctx, Task{IdempotencyKey: "k"}, Set("a", []byte("1")))
	gate.held(t)
	dup := q.EnqueueAsync(ctx, Task{IdempotencyKey: "k"})
	conflict := q.EnqueueAsync(ctx, Task{}, IfAbsent("a"))
	if isSettled(dup) || isSettled(conflict) {
		t.Fatal("answers resting on a batch not yet durable were settled")
	}
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := dup.Wait(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with an ended context: %v", err)
	}
	gate.release(nil)
	res, err := first.Wait(ctx)
	if err != nil || res.ID != 1 {
		t.Fatalf("first: %+v %v", res, err)
	}
	if res, err := dup.Wait(ctx); err != nil || res != (Enqueued{ID: 1, Deduplicated: true}) {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
	if res, err := conflict.Wait(ctx); !errors.Is(err, ErrConflict) || res.ID != 0 {
		t.Fatalf("conflict: %+v %v", res, err)
	}

	mem := newEnv(t, true)
	p := mem.q("q").EnqueueAsync(ctx, Task{})
	if !isSettled(p) {
		t.Fatal("an in-memory enqueue was not settled at once")
	}
	if res, err := p.Wait(ctx); err != nil || res.ID != 1 {
		t.Fatalf("in memory: %+v %v", res, err)
	}
	done, cancelled := context.WithCancel(ctx)
	cancelled()
	wantErr(t, errOnly(mem.q("q").EnqueueAsync(done, Task{}).Wait(ctx)), context.Canceled)
	_, err = mem.db.As(Caller{ID: "nobody"}).Queue(ns, "q").EnqueueAsync(ctx, Task{}).Wait(ctx)
	wantErr(t, err, ErrPermission)
}

// TestEnqueueAsyncClose: Close with enqueues in flight settles them (the
// last round is synced before the log closes); later calls get ErrClosed.
func TestEnqueueAsyncClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	var ps []*Pending
	for range 300 {
		ps = append(ps, q.EnqueueAsync(ctx, Task{}))
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatalf("enqueue %d in flight at Close: %v", i, err)
		}
	}
	wantErr(t, errOnly(q.EnqueueAsync(ctx, Task{}).Wait(ctx)), ErrClosed)
	e.open()
	if c := counts(t, q); c.Ready != 300 {
		t.Fatalf("after Close: %+v", c)
	}
}

// TestEnqueueAsyncReplicated: on a replicated DB the enqueue is submitted
// to the log; every member applies it.
func TestEnqueueAsyncReplicated(t *testing.T) {
	t.Parallel()
	l := newLocalLog(t, 2, func(int) Options { return Options{Clock: NewManualClock(t0), MaxInFlight: 2} })
	q := l.members[0].db.Queue(ns, "q")
	var ps []*Pending
	for range 20 {
		ps = append(ps, q.EnqueueAsync(ctx, Task{}))
	}
	for i, p := range ps {
		if res, err := p.Wait(ctx); err != nil || res.ID == 0 {
			t.Fatalf("enqueue %d: %+v %v", i, res, err)
		}
	}
	for _, m := range l.members {
		if c, err := m.db.Queue(ns, "q").Counts(WithStaleReads(ctx)); err != nil || c.Ready != 20 {
			t.Fatalf("member %d: %+v %v", m.i, c, err)
		}
	}
}

// TestNewPending: a Pending made for another implementation settles once,
// with the first outcome.
func TestNewPending(t *testing.T) {
	t.Parallel()
	p, settle := NewPending()
	if isSettled(p) {
		t.Fatal("settled before settle")
	}
	settle(Enqueued{ID: 7}, nil)
	settle(Enqueued{ID: 8}, ErrClosed)
	if res, err := p.Wait(ctx); err != nil || res.ID != 7 {
		t.Fatalf("%+v %v", res, err)
	}
	p, settle = NewPending()
	settle(Enqueued{ID: 9}, ErrConflict)
	if res, err := p.Wait(ctx); !errors.Is(err, ErrConflict) || res.ID != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}

func counts(t *testing.T, q Queue) Counts {
	t.Helper()
	c, err := q.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
