package engine

import (
	"context"
	"errors"
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

// waitParked waits until a claimer is parked on the queue.
func waitParked(t *testing.T, e *env, q Queue) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		e.db.c.mu.Lock()
		_, ok := e.db.c.waiters[q.(*queue).key()]
		e.db.c.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("claimer never parked")
}

func expectNothing(t *testing.T, ch chan claimResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("claim returned early: %+v", r)
	case <-time.After(20 * time.Millisecond):
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
	e := newEnv(t, true)
	q := e.q("q")
	ch := parkClaim(q, ctx)
	waitParked(t, e, q)
	e.enqueue(e.q("other"), Task{}) // another queue does not wake it
	expectNothing(t, ch)
	id := e.enqueue(q, Task{})
	expectClaim(t, ch, id)
}

func TestClaimWaitWakesWhenTimerDue(t *testing.T) {
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{Delay: time.Minute})
	ch := parkClaim(q, ctx)
	waitParked(t, e, q)
	e.clock.Advance(30 * time.Second)
	expectNothing(t, ch)
	e.clock.Advance(30 * time.Second)
	expectClaim(t, ch, id)
}

func TestClaimWaitWakesWhenLeaseExpires(t *testing.T) {
	e := newEnv(t, true)
	q := e.q("q")
	id := e.enqueue(q, Task{})
	if _, err := q.Claim(ctx, "first", 10*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	ch := parkClaim(q, ctx)
	waitParked(t, e, q)
	e.clock.Advance(10 * time.Second)
	expectClaim(t, ch, id)
}

func TestClaimWaitContextAndClose(t *testing.T) {
	e := newEnv(t, true)
	q := e.q("q")
	cctx, cancel := context.WithCancel(ctx)
	ch := parkClaim(q, cctx)
	waitParked(t, e, q)
	cancel()
	if r := <-ch; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled claim: %+v", r)
	}
	ch = parkClaim(q, ctx)
	waitParked(t, e, q)
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
	waitParked(t, e, q)
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
