package engine

import (
	"testing"
	"time"
)

// TestReleaseIntoPausedQueue: a waiting task released while its queue is
// paused is ready (Get, Counts) but leased by no claim, a ClaimWait parked
// on the queue is not woken by the release, and Resume hands it the task.
// A bound on the tasks in flight holds for released tasks too.
func TestReleaseIntoPausedQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	up, down := e.q("up"), e.q("down")
	p := mustEnqueue(t, up, Task{})
	c := mustEnqueue(t, down, Task{DependsOn: []uint64{p}})
	mustDo(t, down.Pause(ctx))
	ch := parkClaim(down, ctx)
	waitParked(t, e, down, 1)
	before := parkedOn(e, down)
	parks, _ := e.db.Parks()
	completeIDs(t, up, p)
	wantState(t, down, c, Ready)
	if n, _ := down.Counts(ctx); n.Ready != 1 || n.Waiting != 0 {
		t.Fatalf("counts after the release: %+v", n)
	}
	stillParked(t, e, down, before, ch)
	if n, _ := e.db.Parks(); n != parks {
		t.Fatalf("the release woke the claim parked on the paused queue %d times", n-parks)
	}
	if ls := e.claim(down, 10); len(ls) != 0 {
		t.Fatalf("a paused queue leased the released task: %v", leaseIDs(ls))
	}
	mustDo(t, down.Resume(ctx))
	if r := recv(t, ch); r.err != nil || len(r.ls) != 1 || r.ls[0].ID != c {
		t.Fatalf("claim after resume: %v %v", leaseIDs(r.ls), r.err)
	}

	// In-flight bound: with one task of the queue in flight and a bound of
	// one, released tasks wait their turn.
	mustDo(t, down.SetLimits(ctx, Limits{MaxInFlight: 1}))
	a, b := mustEnqueue(t, up, Task{}), mustEnqueue(t, up, Task{})
	d1 := mustEnqueue(t, down, Task{DependsOn: []uint64{a}})
	d2 := mustEnqueue(t, down, Task{DependsOn: []uint64{b}})
	completeIDs(t, up, a, b)
	wantState(t, down, d1, Ready)
	wantState(t, down, d2, Ready)
	if ls := e.claim(down, 10); len(ls) != 0 {
		t.Fatalf("claimed %v past the bound", leaseIDs(ls))
	}
}

// TestUniqueWithDependencies: a task unique by content that waits for its
// dependencies blocks the same content (whether or not its States name
// Waiting); a duplicate is deduplicated into it whatever its own
// dependencies, which are ignored; once the first is cancelled because its
// parent failed, the same content enqueues anew. An idempotency key does
// the same.
func TestUniqueWithDependencies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q, up := e.q("q"), e.q("up")
	p := mustEnqueue(t, up, Task{MaxAttempts: 1})
	other := mustEnqueue(t, up, Task{})
	first := unique("k", `{"a":1}`, time.Hour)
	first.DependsOn = []uint64{p}
	u := e.enqueued(q, first)
	wantState(t, q, u.ID, Waiting, p)
	for name, dup := range map[string]Task{
		"no dependencies":    unique("k", `{"a":1}`, time.Hour),
		"other dependencies": {Kind: "k", Payload: []byte(`{"a": 1}`), Unique: &Unique{Window: time.Hour}, DependsOn: []uint64{other}},
		"naming waiting":     unique("k", `{"a":1}`, time.Hour, Ready, Scheduled, InFlight, Waiting),
	} {
		if res := e.enqueued(q, dup); !res.Deduplicated || res.ID != u.ID {
			t.Fatalf("%s: %+v, want deduplicated into %d", name, res, u.ID)
		}
	}
	wantState(t, q, u.ID, Waiting, p)
	if info := e.get(up, other); len(info.Dependents) != 0 {
		t.Fatalf("a deduplicated enqueue added dependents %v", info.Dependents)
	}

	keyed := mustEnqueue(t, q, Task{IdempotencyKey: "key", DependsOn: []uint64{p}})
	if res := e.enqueued(q, Task{IdempotencyKey: "key", DependsOn: []uint64{other}}); !res.Deduplicated || res.ID != keyed {
		t.Fatalf("keyed duplicate: %+v", res)
	}
	wantState(t, q, keyed, Waiting, p)

	// The parent dies: both dependents are cancelled (CancelOnFailure).
	// The content's key goes with the unique one; the caller's key stays
	// for its time to live, as it does for any cancelled task.
	ls := e.claim(up, 1)
	if len(ls) != 1 || ls[0].ID != p {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	if err := up.Fail(ctx, ls[0], Failure{Err: "boom", Permanent: true}); err != nil {
		t.Fatal(err)
	}
	wantGone(t, q, u.ID)
	wantGone(t, q, keyed)
	again := e.enqueued(q, unique("k", `{"a":1}`, time.Hour))
	if again.Deduplicated || again.ID == u.ID {
		t.Fatalf("the content of a cancelled task: %+v", again)
	}
	wantState(t, q, again.ID, Ready)
	if res := e.enqueued(q, Task{IdempotencyKey: "key"}); !res.Deduplicated || res.ID != keyed {
		t.Fatalf("the key of a cancelled task: %+v", res)
	}
}

// TestCompleteAndClaimReleasesDependents: the completion half of
// CompleteAndClaim releases the tasks waiting for the completed one in its
// own commit (ready, on this queue and others, a ClaimWait parked on the
// other woken with its task), while its claim half, planned against the
// state before the commit, leases none of them; the next claim does. An
// asynchronous enqueue waits like any other.
func TestCompleteAndClaimReleasesDependents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q, r := e.q("q"), e.q("r")
	p := mustEnqueue(t, q, Task{Priority: 5})
	same := mustEnqueue(t, q, Task{DependsOn: []uint64{p}, Priority: 9})
	other := mustEnqueue(t, r, Task{DependsOn: []uint64{p}})
	pend := q.EnqueueAsync(ctx, Task{DependsOn: []uint64{p, same}})
	later, err := pend.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, q, later.ID, Waiting, p, same)
	plain := mustEnqueue(t, q, Task{})
	ls := e.claim(q, 1)
	if len(ls) != 1 || ls[0].ID != p {
		t.Fatalf("claimed %v", leaseIDs(ls))
	}
	ch := parkClaim(r, ctx)
	waitParked(t, e, r, 1)
	commits := e.db.Stats().Commits
	_, next, err := q.CompleteAndClaim(ctx, ls[0], Done{}, "w2", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := leaseIDs(next); len(got) != 1 || got[0] != plain {
		t.Fatalf("the claim half leased %v, want only %d (the released tasks are not stored ready yet)", got, plain)
	}
	wantState(t, q, same, Ready)
	wantState(t, q, later.ID, Waiting, same)
	if res := recv(t, ch); res.err != nil || len(res.ls) != 1 || res.ls[0].ID != other {
		t.Fatalf("the claim parked on the other queue: %v %v", leaseIDs(res.ls), res.err)
	}
	// Two commits: the completion with its claim, and the woken claim's.
	if d := e.db.Stats().Commits - commits; d != 2 {
		t.Fatalf("%d commits, want 2", d)
	}
	e.reopen()
	if ls := e.claim(q, 10); len(ls) != 1 || ls[0].ID != same {
		t.Fatalf("next claim %v, want %d", leaseIDs(ls), same)
	}
}
