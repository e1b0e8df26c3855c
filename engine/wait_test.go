package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type claimResult struct {
	ls  []Lease
	err error
}

func parkClaim(q Queue, ctx context.Context) chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		ls, err := q.ClaimWait(ctx, "waiter", time.Minute, 5)
		ch <- claimResult{ls, err}
	}()
	return ch
}

// waitParked waits until n claimers are parked on the queue: registered to
// be woken and, if something of the queue comes due, waiting on their
// timer, so that a commit or a clock move made next reaches them.
func waitParked(t *testing.T, e *env, q Queue, n int) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := e.db.WaitParked(wctx, q.Namespace(), q.Name(), n); err != nil {
		t.Fatal(err)
	}
}

// parkedOn returns the claims parked on q now.
func parkedOn(e *env, q Queue) []*parkedClaim {
	p := &e.db.c.parking
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*parkedClaim(nil), p.claims[q.(*queue).key()]...)
}

// stillParked fails t unless the claims parked on q are exactly before and
// none has been woken. A commit wakes a parked claim before it returns and
// a ManualClock fires a due timer before Advance returns, so a wake-up
// that should not have happened is seen here at once: the claim is marked
// awake, or it has left, or it parked again as a new claim.
func stillParked(t *testing.T, e *env, q Queue, before []*parkedClaim, ch chan claimResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("claim returned early: %+v", r)
	default:
	}
	now := parkedOn(e, q)
	if len(now) != len(before) {
		t.Fatalf("%d claims parked, want the %d parked before", len(now), len(before))
	}
	for i := range now {
		if now[i] != before[i] {
			t.Fatal("a parked claim was woken and parked again")
		}
		if now[i].awake() {
			t.Fatal("a parked claim was woken")
		}
	}
}

func expectClaim(t *testing.T, ch chan claimResult, id uint64) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || len(r.ls) != 1 || r.ls[0].ID != id {
			t.Fatalf("claim returned %+v, want task %d", r, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked claim never woke")
	}
}

func TestClaimWaitWakesOnEnqueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	e.enqueue(e.q("other"), Task{}) // another queue does not wake it
	stillParked(t, e, q, before, ch)
	id := e.enqueue(q, Task{})
	expectClaim(t, ch, id)
}

func TestClaimWaitWakesWhenTimerDue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{Delay: time.Minute})
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	e.clock.Advance(30 * time.Second) // the timer is not due yet
	stillParked(t, e, q, before, ch)
	e.clock.Advance(30 * time.Second)
	expectClaim(t, ch, id)
}

func TestClaimWaitWakesWhenLeaseExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	if _, err := q.Claim(ctx, "first", 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	e.clock.Advance(10 * time.Second)
	expectClaim(t, ch, id)
}

func TestClaimWaitContextAndClose(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	cctx, cancel := context.WithCancel(ctx)
	ch := parkClaim(q, cctx)
	waitParked(t, e, q, 1)
	cancel()
	if r := <-ch; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled claim: %+v", r)
	}
	ch = parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	e.db.Close()
	select {
	case r := <-ch:
		wantErr(t, r.err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("close did not wake the parked claim")
	}
	e.db = nil
}

func TestClaimWaitManyWaitersEachTaskOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.Clock = nil })
	q := e.q("q")
	const waiters = 8
	out := make(chan claimResult, waiters)
	for range waiters {
		go func() {
			ls, err := q.ClaimWait(ctx, "w", time.Minute, 1)
			out <- claimResult{ls, err}
		}()
	}
	waitParked(t, e, q, waiters)
	seen := map[uint64]bool{}
	for range waiters {
		e.enqueue(q, Task{})
	}
	for range waiters {
		select {
		case r := <-out:
			if r.err != nil || len(r.ls) != 1 || seen[r.ls[0].ID] {
				t.Fatalf("waiter got %+v", r)
			}
			seen[r.ls[0].ID] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d waiters got a task", len(seen), waiters)
		}
	}
}

// TestWaitParked: WaitParked and Parked count the claims waiting on a
// queue, drop a woken one at once, keep nothing once they have left, and
// refuse what they cannot do.
func TestWaitParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	e.enqueue(q, Task{Delay: time.Minute})

	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	err := e.db.WaitParked(short, ns, "q", 1)
	cancel()
	wantErr(t, err, context.DeadlineExceeded)
	if !strings.Contains(err.Error(), "0 of 1 claims parked on queue acme/prod/q") {
		t.Fatalf("timeout error: %v", err)
	}
	wantErr(t, e.db.WaitParked(ctx, ns, "q", 0), ErrInvalid)
	_, err = e.db.As(Caller{ID: "c"}).Parked(ns, "q")
	wantErr(t, err, ErrPermission)
	wantErr(t, e.db.As(Caller{ID: "c"}).WaitParked(ctx, ns, "q", 1), ErrPermission)
	_, err = e.db.As(Caller{ID: "c"}).Parks()
	wantErr(t, err, ErrPermission)

	cctx, stop := context.WithCancel(ctx)
	defer stop()
	first, second := parkClaim(q, cctx), parkClaim(q, cctx)
	waitParked(t, e, q, 2)
	if n, err := e.db.Parked(ns, "q"); err != nil || n != 2 {
		t.Fatalf("Parked = %d, %v; want 2", n, err)
	}
	if n, err := e.db.Parks(); err != nil || n != 2 {
		t.Fatalf("Parks = %d, %v; want 2", n, err)
	}
	if n, _ := e.db.Parked(ns, "other"); n != 0 {
		t.Fatalf("Parked on another queue = %d", n)
	}
	// One timer watches the queue's next due time: the claim holding it is
	// woken inside Advance, before it has returned; the other is not woken
	// by the timer, since one task came due. (It may be awake already: the
	// first one's claim, committed as soon as it runs, wakes it to watch the
	// new lease, as below; so count the timers that fired, not the claims
	// awake.)
	before := parkedOn(e, q)
	e.clock.Advance(time.Minute)
	fired := 0
	for _, pc := range before {
		if mt, ok := pc.t.(*manualTimer); ok && !mt.pending() {
			fired++
		}
	}
	if fired != 1 {
		t.Fatalf("%d parked claims woken by the timer that fired, want 1", fired)
	}
	// One leases the task; its lease is now the queue's next due time, so
	// the other is woken to watch it: it finds nothing and parks again,
	// with a timer, until its context ends.
	var leased, ended claimResult
	select {
	case leased = <-first:
		waitParked(t, e, q, 1)
		stop()
		ended = <-second
	case leased = <-second:
		waitParked(t, e, q, 1)
		stop()
		ended = <-first
	}
	if leased.err != nil || len(leased.ls) != 1 || !errors.Is(ended.err, context.Canceled) {
		t.Fatalf("claims returned %+v and %+v", leased, ended)
	}
	if n, _ := e.db.Parks(); n != 3 {
		t.Fatalf("Parks = %d, want 3: two, then the one woken to watch the lease", n)
	}
	if n, _ := e.db.Parked(ns, "q"); n != 0 {
		t.Fatalf("Parked = %d after every claim left", n)
	}
	if p := &e.db.c.parking; len(p.claims) != 0 {
		t.Fatalf("parking keeps %d queues after every claim left", len(p.claims))
	}

	// Close ends a WaitParked that nothing will satisfy.
	done := make(chan error, 1)
	go func() { done <- e.db.WaitParked(ctx, ns, "q", 1) }()
	e.db.Close()
	select {
	case err := <-done:
		wantErr(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("WaitParked outlived Close")
	}
	e.db = nil
}
