package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAttemptHistory: every failed attempt (a worker's Fail and an expired
// lease) is kept with its attempt number, time and error, oldest first, at
// most MaxAttemptErrors; snoozes are not failures; the history survives a
// restart from the log and from a snapshot.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	id := e.enqueue(q, Task{MaxAttempts: 100, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	var want []AttemptError
	for i := 1; i <= MaxAttemptErrors+4; i++ {
		e.clock.Advance(time.Second)
		l := e.claim(q, 1)[0]
		switch {
		case i == 2:
			// Snoozed: the attempt is refunded and nothing is recorded.
			if err := q.Snooze(ctx, l, 0); err != nil {
				t.Fatal(err)
			}
			continue
		case i%5 == 0:
			e.clock.Advance(31 * time.Second) // the lease expires
			want = append(want, AttemptError{Attempt: l.Attempt, At: l.Deadline, Error: "lease expired"})
			continue
		}
		msg := fmt.Sprintf("failure %d", i)
		if err := q.Fail(ctx, l, Failure{Err: msg}); err != nil {
			t.Fatal(err)
		}
		want = append(want, AttemptError{Attempt: l.Attempt, At: e.clock.Now().UTC(), Error: msg})
	}
	want = want[len(want)-MaxAttemptErrors:]
	check := func(when string) {
		t.Helper()
		got := e.get(q, id).Errors
		if !slices.Equal(got, want) {
			t.Fatalf("%s: history\n%v\nwant\n%v", when, got, want)
		}
	}
	check("live")
	if want[0].Attempt == 1 {
		t.Fatal("the test did not overflow the history")
	}
	e.crash() // the log alone rebuilds it
	e.open()
	check("after replaying the log")
	e.reopen() // and a snapshot holds it
	check("after a snapshot")
	// Dead-lettering records the last failure too.
	e.clock.Advance(time.Second)
	l := e.claim(q, 1)[0]
	if err := q.Fail(ctx, l, Failure{Err: "fatal", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	want = append(want[1:], AttemptError{Attempt: l.Attempt, At: e.clock.Now().UTC(), Error: "fatal"})
	check("dead")
}

// TestFollowUpLinks: a task enqueued by a completion (a follow-up or an
// Enqueue op of the same Complete) records its parent; a completed task
// kept by RetainCompleted lists the follow-ups its completion enqueued
// (not the deduplicated ones), and both survive a restart.
func TestFollowUpLinks(t *testing.T) {
	t.Parallel()
	for _, retain := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprintf("retain=%v", retain), func(t *testing.T) {
			e := newEnv(t, false, func(o *Options) { o.RetainCompleted = retain })
			q := e.q("q")
			existing := e.enqueue(e.q("audit"), Task{IdempotencyKey: "dup"})
			parent := e.enqueue(q, Task{})
			l := e.claim(q, 1)[0]
			res, err := q.Complete(ctx, l, Done{
				Ops: []Op{Enqueue("audit", Task{Kind: "op"})},
				FollowUps: []FollowUp{{Queue: "next", Task: Task{Kind: "a"}}, {Queue: "audit", Task: Task{IdempotencyKey: "dup"}},
					{Queue: "next", Task: Task{Kind: "b"}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Enqueued) != 4 || !res.Enqueued[2].Deduplicated || res.Enqueued[2].ID != existing {
				t.Fatalf("enqueued %+v", res.Enqueued)
			}
			var children []uint64
			for _, r := range res.Enqueued {
				if !r.Deduplicated {
					children = append(children, r.ID)
				}
			}
			check := func(when string) {
				t.Helper()
				for i, id := range children {
					name := []string{"audit", "next", "next"}[i]
					if info := e.get(e.q(name), id); info.Parent != parent {
						t.Fatalf("%s: follow-up %d has parent %d", when, id, info.Parent)
					}
				}
				if info := e.get(e.q("audit"), existing); info.Parent != 0 {
					t.Fatalf("%s: the deduplicated task got a parent: %+v", when, info)
				}
				info, err := q.Get(ctx, parent)
				if retain == 0 {
					wantErr(t, err, ErrNotFound)
					return
				}
				if err != nil || info.State != Completed || !slices.Equal(info.FollowUps, children) {
					t.Fatalf("%s: completed task %+v %v, want follow-ups %v", when, info, err, children)
				}
			}
			check("live")
			e.crash()
			e.open()
			check("after replaying the log")
			e.reopen()
			check("after a snapshot")
		})
	}
}

// TestQueueTotals: a queue's totals count what happened to its tasks, as
// the log recorded it (an expired lease taken over counts a retry and a
// claim; one dead-lettered counts a dead letter), and survive restarts
// from the log and from a snapshot. A queue that holds no task is not
// listed, but keeps its totals for 24 hours after its last task left:
// filled again in that time it counts on, after it (and a commit) it
// starts again from zero.
func TestQueueTotals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	info := func() QueueInfo {
		t.Helper()
		qs, err := e.db.Queues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range qs {
			if x.Name == "q" {
				return x
			}
		}
		return QueueInfo{}
	}
	for p := range 5 {
		e.enqueue(q, Task{Priority: 10 - p, MaxAttempts: 2})
	}
	ls := e.claim(q, 5)
	if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(ctx, ls[1], Failure{Err: "retry"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Fail(ctx, ls[2], Failure{Err: "fatal", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	if err := q.Snooze(ctx, ls[3], 0); err != nil { // not a failure
		t.Fatal(err)
	}
	// ls[4] expires; the retry's backoff passes.
	e.clock.Advance(time.Minute)
	want := Totals{Enqueued: 5, Claimed: 5, Completed: 1, Retried: 1, DeadLettered: 1}
	if got := info().Totals; got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	// Reads show the expired lease ready, but totals count what was
	// written: the claim that takes it counts a retry and a claim.
	if got := info(); got.Counts != (Counts{Ready: 3, Dead: 1}) || !got.OldestReady.Equal(ls[3].EnqueuedAt) {
		t.Fatalf("queue %+v", got)
	}
	more := e.claim(q, 3)
	if len(more) != 3 {
		t.Fatal(more)
	}
	want.Claimed, want.Retried = 8, 2
	if got := info().Totals; got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	// The leases expire again: the two on their last attempt are dead at
	// once in reads and dead letters when a claim stores them; the other
	// is taken over.
	e.clock.Advance(time.Minute)
	if got := info().Counts; got != (Counts{Ready: 1, Dead: 3}) {
		t.Fatalf("counts %+v", got)
	}
	last := e.claim(q, 1)
	want.Claimed, want.Retried, want.DeadLettered = 9, 3, 3
	if got := info().Totals; got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
	e.crash()
	e.open()
	if got := info().Totals; got != want {
		t.Fatalf("after replaying the log: %+v, want %+v", got, want)
	}
	// Emptied, the queue is not listed, but its totals are kept, also
	// across a snapshot.
	if n, err := q.RedriveAll(ctx); err != nil || n != 3 {
		t.Fatal(n, err)
	}
	for _, l := range append(last, e.claim(q, 10)...) {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	want.Claimed, want.Completed = 12, 5
	if got := info(); got.Name != "" {
		t.Fatalf("an empty queue is listed: %+v", got)
	}
	if n, _ := e.queuesAndWaiters(); n != 0 {
		t.Fatalf("%d queues in memory", n)
	}
	e.reopen()
	e.clock.Advance(23 * time.Hour)
	e.enqueue(q, Task{})
	want.Enqueued++
	if got := info().Totals; got != want {
		t.Fatalf("refilled within a day: %+v, want %+v", got, want)
	}
	// Drained and idle for a day, the totals are forgotten by the next
	// commit (of any queue), and the queue starts afresh.
	l := e.claim(q, 1)[0]
	if _, err := q.Complete(ctx, l, Done{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(24 * time.Hour)
	e.enqueue(e.q("other"), Task{})
	if hash := dump(e.db); strings.Contains(hash, "totals {{acme prod} q}") {
		t.Fatalf("idle totals not forgotten:\n%s", hash)
	}
	e.enqueue(q, Task{})
	if got := info().Totals; got != (Totals{Enqueued: 1}) {
		t.Fatalf("after a day idle: %+v", got)
	}
	e.reopen()
}
