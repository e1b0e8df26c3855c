package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCloseWhileEnqueueing: a commit that starts a background snapshot
// registers it with Close's wait group under the engine lock. Registered
// after the lock is released instead, the registration races with a Close
// that took the lock next and waits for the snapshot, and -race reports it
// (the race detector orders a WaitGroup.Add from zero against a Wait that
// blocks, not by the real timing). Each round builds that schedule: the
// enqueue is held inside its commit (by the tap, under the lock) until it is
// released and Close is called, and the snapshot it starts is held (by the
// snapshot lock) until Close waits for it. The enqueuer's goroutine shares
// nothing with Close but the engine lock, so nothing else orders the two.
// A round detects the old ordering unless the enqueuer is descheduled
// between its unlock and its Add long enough for Close to reach its wait
// first, hence several rounds.
func TestCloseWhileEnqueueing(t *testing.T) {
	t.Parallel()
	rounds := 20
	if testing.Short() {
		rounds = 4
	}
	for range rounds {
		closeWhileEnqueueing(t)
	}
}

func closeWhileEnqueueing(t *testing.T) {
	committing, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	db, err := Open(t.TempDir(), Options{SnapshotBytes: 1, Durability: SyncNever, tap: func(uint64, []byte) {
		once.Do(func() {
			close(committing)
			<-proceed
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := db.c
	c.snapMu.Lock() // the background snapshot waits here
	enqueued := make(chan error, 1)
	go func() {
		_, err := db.Queue(ns, "jobs").Enqueue(ctx, Task{})
		enqueued <- err
	}()
	<-committing   // the enqueue holds the engine lock and has logged its batch
	close(proceed) // it decides on a snapshot and releases the lock
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	<-c.stopBg // Close has marked the engine closed and waits for bg
	c.snapMu.Unlock()
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-enqueued; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if got := c.stats.Snapshots; got != 1 {
		t.Fatalf("%d snapshots written, want Close's own", got)
	}
}

// Everything a call returns is the caller's: writing to it changes nothing
// stored.
func TestReturnedValuesAreCopies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("jobs")
	id := e.enqueue(q, Task{Payload: []byte(`{"a":1}`), Headers: map[string]string{"k": "v"}})
	ls := e.claim(q, 1)
	l := ls[0]
	l.Headers["k"] = "changed"
	l.Headers["new"] = "x"
	l.Payload[2] = 'Z'
	if err := q.Heartbeat(ctx, &l, time.Minute, []byte(`[1]`)); err != nil {
		t.Fatal(err)
	}
	l.Progress[1] = '7'
	info := e.get(q, id)
	info.Headers["k"] = "again"
	info.Payload[2] = 'Y'
	info.Progress[1] = '8'
	info = e.get(q, id)
	if info.Headers["k"] != "v" || len(info.Headers) != 1 || string(info.Payload) != `{"a":1}` || string(info.Progress) != `[1]` {
		t.Fatalf("stored task changed through returned values: headers %v payload %s progress %s",
			info.Headers, info.Payload, info.Progress)
	}
	if _, err := q.Complete(ctx, l, Done{Result: []byte(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	info = e.get(q, id)
	info.Result[1] = 'X'
	if got := e.get(q, id).Result; string(got) != `"ok"` {
		t.Fatalf("result changed through a returned value: %s", got)
	}
}

// Returned times are in UTC whatever the process's zone.
func TestTimesInUTC(t *testing.T) {
	// Not parallel: it changes time.Local.
	old := time.Local
	time.Local = time.FixedZone("EST", -5*3600)
	defer func() { time.Local = old }()
	e := newEnv(t, true)
	q := e.q("jobs")
	id := e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	info := e.get(q, id)
	for name, tm := range map[string]time.Time{"deadline": l.Deadline, "enqueued": l.EnqueuedAt,
		"created": info.CreatedAt, "lease": info.LeaseUntil, "not before": info.NotBefore} {
		if tm.Location() != time.UTC {
			t.Errorf("%s %v is not in UTC", name, tm)
		}
	}
	if !info.CreatedAt.Equal(t0) || info.CreatedAt.String() != t0.String() {
		t.Errorf("created %v, want %v", info.CreatedAt, t0)
	}
	if err := q.Heartbeat(ctx, &l, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if l.Deadline.Location() != time.UTC || !l.Deadline.Equal(t0.Add(time.Minute)) {
		t.Errorf("heartbeat deadline %v", l.Deadline)
	}
}

// A follow-up that reuses the idempotency key of the task completing is
// enqueued: that task ends in the same commit.
func TestFollowUpTakesCompletingTasksKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("jobs")
	id := e.enqueue(q, Task{IdempotencyKey: "step"})
	l := e.claim(q, 1)[0]
	res, err := q.Complete(ctx, l, Done{FollowUps: []FollowUp{
		{Queue: "jobs", Task: Task{IdempotencyKey: "step", Payload: []byte(`2`)}},
		{Queue: "jobs", Task: Task{IdempotencyKey: "step", Payload: []byte(`3`)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Enqueued) != 2 || res.Enqueued[0].Deduplicated || res.Enqueued[0].ID == id ||
		!res.Enqueued[1].Deduplicated || res.Enqueued[1].ID != res.Enqueued[0].ID {
		t.Fatalf("follow-ups %+v (completed task %d)", res.Enqueued, id)
	}
	next := res.Enqueued[0].ID
	if info := e.get(q, next); string(info.Payload) != `2` || info.IdempotencyKey != "step" {
		t.Fatalf("follow-up %+v", info)
	}
	// The key now names the follow-up.
	dup, err := q.Enqueue(ctx, Task{IdempotencyKey: "step"})
	if err != nil || !dup.Deduplicated || dup.ID != next {
		t.Fatalf("enqueue with the moved key: %+v %v", dup, err)
	}
	e.reopen()
	// A key held by another live task still deduplicates a follow-up.
	other := e.enqueue(q, Task{IdempotencyKey: "other"})
	l = e.claim(q, 1)[0]
	res, err = q.Complete(ctx, l, Done{FollowUps: []FollowUp{{Queue: "jobs", Task: Task{IdempotencyKey: "other"}}}})
	if err != nil || !res.Enqueued[0].Deduplicated || res.Enqueued[0].ID != other {
		t.Fatalf("follow-up with another task's key: %+v %v", res, err)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.RetainCompleted = time.Hour })
	q := e.q("jobs")
	timer := e.enqueue(q, Task{Delay: time.Hour})
	retry := e.enqueue(q, Task{BackoffBase: time.Hour})
	l := e.claim(q, 1)[0]
	if err := q.Fail(ctx, l, Failure{Err: "boom"}); err != nil {
		t.Fatal(err)
	}
	if got := e.claim(q, 10); len(got) != 0 {
		t.Fatalf("claimed %v before RunNow", ids(got))
	}
	e.clock.Advance(time.Second)
	for _, id := range []uint64{timer, retry} {
		if err := q.RunNow(ctx, id); err != nil {
			t.Fatalf("run now %d: %v", id, err)
		}
		info := e.get(q, id)
		if info.State != Ready || !info.NotBefore.Equal(t0.Add(time.Second)) {
			t.Fatalf("task %d after RunNow: %s at %v", id, info.State, info.NotBefore)
		}
	}
	if err := q.RunNow(ctx, timer); err != nil {
		t.Fatalf("run now of a ready task: %v", err)
	}
	got := e.claim(q, 10)
	if len(got) != 2 || got[0].ID != timer || got[1].ID != retry || got[1].Attempt != 2 {
		t.Fatalf("claimed %+v", got)
	}
	wantErr(t, q.RunNow(ctx, timer), ErrInvalid) // in flight
	if err := q.RunNow(ctx, timer); err == nil || !strings.Contains(err.Error(), "in-flight") {
		t.Fatalf("error does not name the state: %v", err)
	}
	wantErr(t, q.RunNow(ctx, 999), ErrNotFound)
	wantErr(t, e.db.Queue(ns, "other").RunNow(ctx, timer), ErrNotFound)
	if _, err := q.Complete(ctx, got[0], Done{}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, q.RunNow(ctx, timer), ErrInvalid) // completed
	if err := q.Fail(ctx, got[1], Failure{Permanent: true}); err != nil {
		t.Fatal(err)
	}
	before := dump(e.db)
	wantErr(t, q.RunNow(ctx, retry), ErrInvalid) // dead
	if dump(e.db) != before {
		t.Fatal("a refused RunNow changed the state")
	}
	e.reopen()
}

func TestRunNowNeedsAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{"w": {{Project: "*", Scope: "*", Perms: PermWork | PermEnqueue | PermRead}}}
	})
	id := e.enqueue(e.q("jobs"), Task{Delay: time.Hour})
	err := e.db.As(Caller{ID: "w"}).Queue(ns, "jobs").RunNow(ctx, id)
	wantErr(t, err, ErrPermission)
	if e.get(e.q("jobs"), id).State != Scheduled {
		t.Fatal("a refused RunNow changed the task")
	}
}

// doneOnceCtx is a context that reports no error on its first check and is
// cancelled from then on: a ClaimWait with it parks once, then gives up.
type doneOnceCtx struct {
	context.Context
	checked bool
	done    chan struct{}
}

func (c *doneOnceCtx) Done() <-chan struct{} { return c.done }

func (c *doneOnceCtx) Err() error {
	if !c.checked {
		c.checked = true
		return nil
	}
	return context.Canceled
}

func (e *env) queuesAndWaiters() (int, int) {
	c := e.db.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store.NumQueues(), len(c.waiters)
}

// Refused calls and cancelled waits on new queue names leave nothing in
// memory, and a queue whose last task goes is forgotten.
func TestRefusedCallsLeaveNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) {
		o.Authorizer = Policy{"w": {{Project: "acme", Scope: "other", Perms: PermAll}}}
	})
	view := e.db.As(Caller{ID: "w"})
	closed := make(chan struct{})
	close(closed)
	for i := 0; i < 50_000; i++ {
		name := fmt.Sprintf("q%d", i)
		var err error
		switch i % 3 {
		case 0: // an assertion that fails
			_, err = e.q(name).Enqueue(ctx, Task{}, IfExists("missing"))
			wantErr(t, err, ErrConflict)
		case 1: // no permission
			_, err = view.Queue(ns, name).Enqueue(ctx, Task{})
			wantErr(t, err, ErrPermission)
		case 2: // a ClaimWait that parks and is cancelled
			_, err = e.q(name).ClaimWait(&doneOnceCtx{Context: ctx, done: closed}, "w1", time.Minute, 1)
			wantErr(t, err, context.Canceled)
		}
	}
	if nq, nw := e.queuesAndWaiters(); nq != 0 || nw != 0 {
		t.Fatalf("after 50,000 refused calls: %d queues, %d waiters", nq, nw)
	}
	qs, err := e.db.Queues(ctx)
	if err != nil || len(qs) != 0 {
		t.Fatalf("queues %v %v", qs, err)
	}

	// A queue lives while it holds a task.
	q := e.q("jobs")
	e.enqueue(q, Task{})
	if nq, _ := e.queuesAndWaiters(); nq != 1 {
		t.Fatalf("%d queues with one task", nq)
	}
	l := e.claim(q, 1)[0]
	if _, err := q.Complete(ctx, l, Done{}); err != nil {
		t.Fatal(err)
	}
	if nq, _ := e.queuesAndWaiters(); nq != 0 {
		t.Fatalf("%d queues after the last task completed", nq)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
	// And comes back with the next one.
	id := e.enqueue(q, Task{})
	if got := e.claim(q, 1); len(got) != 1 || got[0].ID != id {
		t.Fatalf("claimed %v", got)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// A queue emptied and refilled in one commit (a completion whose follow-up
// goes to the same queue) keeps working, across a restart too.
func TestQueueEmptiedAndRefilledInOneCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("jobs")
	e.enqueue(q, Task{})
	l := e.claim(q, 1)[0]
	res, err := q.Complete(ctx, l, Done{FollowUps: []FollowUp{{Queue: "jobs"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if got := e.claim(q, 1); len(got) != 1 || got[0].ID != res.Enqueued[0].ID {
		t.Fatalf("claimed %v", got)
	}
}

// A lease presented through another queue's handle is the caller's
// mistake: ErrInvalid naming both queues, not a lost lease, and nothing
// changes (the task stays leased, no lease-lost is counted). A lease that
// names no queue (id, token and secret only, as the network sends it) is
// judged by the fence alone.
func TestLeaseOfAnotherQueueIsInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	jobs, other := e.q("jobs"), e.q("other")
	id := e.enqueue(jobs, Task{})
	l := e.claim(jobs, 1)[0]
	lostBefore := e.db.Stats().LeaseLost
	wrongNS := e.db.Queue(NS("acme", "staging"), "jobs")
	calls := map[string]func(q Queue) error{
		"complete": func(q Queue) error { _, err := q.Complete(ctx, l, Done{}); return err },
		"fail":     func(q Queue) error { return q.Fail(ctx, l, Failure{Err: "x"}) },
		"snooze":   func(q Queue) error { return q.Snooze(ctx, l, time.Second) },
		"heartbeat": func(q Queue) error {
			c := l
			return q.Heartbeat(ctx, &c, time.Minute, nil)
		},
		"complete batch": func(q Queue) error { _, err := q.CompleteBatch(ctx, []Lease{l}); return err },
		"complete and claim": func(q Queue) error {
			_, _, err := q.CompleteAndClaim(ctx, l, Done{}, "w", time.Minute, 1)
			return err
		},
		"heartbeat batch": func(q Queue) error {
			c := l
			_, err := q.HeartbeatBatch(ctx, []*Lease{&c}, time.Minute)
			return err
		},
	}
	for name, call := range calls {
		for _, q := range []Queue{other, wrongNS} {
			err := call(q)
			if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrLeaseLost) {
				t.Fatalf("%s through %s/%s: %v, want ErrInvalid", name, q.Namespace(), q.Name(), err)
			}
			for _, want := range []string{`"jobs"`, `"` + q.Name() + `"`, q.Namespace().String()} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: %q does not name %s", name, err, want)
				}
			}
		}
	}
	if info := e.get(jobs, id); info.State != InFlight || info.Token != l.Token {
		t.Fatalf("the task changed: %+v", info)
	}
	if n := e.db.Stats().LeaseLost; n != lostBefore {
		t.Fatalf("lease-lost counted %d times", n-lostBefore)
	}
	bare := Lease{ID: l.ID, Token: l.Token, Secret: l.Secret}
	if _, err := jobs.Complete(ctx, bare, Done{}); err != nil {
		t.Fatalf("a lease with no queue named, on its own queue: %v", err)
	}
}
