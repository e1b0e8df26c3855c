package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// partitions lists every partition of q (paging through Partitions).
func partitions(t *testing.T, q Queue) []PartitionInfo {
	t.Helper()
	var out []PartitionInfo
	o := PartitionListOptions{Limit: 2}
	for {
		p, err := q.Partitions(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Partitions...)
		if p.Next == "" {
			return out
		}
		o.Cursor = p.Next
	}
}

// byPart counts leases by partition.
func byPart(ls []Lease) map[string]int {
	m := map[string]int{}
	for _, l := range ls {
		m[l.Partition]++
	}
	return m
}

// TestClaimsRotateBetweenPartitions: a claim takes one task from each
// partition with work in turn, then another round, so a partition with
// many ready tasks enqueued first does not hold back one with a few;
// within a partition, priority and then age decide.
func TestClaimsRotateBetweenPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	var big []Task
	for range 200 {
		big = append(big, Task{Partition: "big"})
	}
	if _, err := q.EnqueueBatch(ctx, big); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		for range 3 {
			e.enqueue(q, Task{Partition: fmt.Sprintf("small-%d", i)})
		}
	}
	e.enqueue(q, Task{}) // the default partition
	first := e.claim(q, 12)
	got := byPart(first)
	if len(got) != 12 {
		t.Fatalf("a claim of 12 over 12 partitions: %v", got)
	}
	next := e.claim(q, 100)
	got = byPart(next)
	// Two more rounds empty the small partitions; the rest is big's.
	for i := range 10 {
		if n := got[fmt.Sprintf("small-%d", i)]; n != 2 {
			t.Fatalf("small-%d gave %d in the second claim: %v", i, n, got)
		}
	}
	if got["big"] != 80 || got[""] != 0 {
		t.Fatalf("second claim: %v", got)
	}
	// Within the big partition: oldest first.
	var bigIDs []uint64
	for _, l := range append(first, next...) {
		if l.Partition == "big" {
			bigIDs = append(bigIDs, l.ID)
		}
	}
	if !slices.IsSorted(bigIDs) || bigIDs[0] != 1 {
		t.Fatalf("big partition served out of order: %v", bigIDs)
	}
	mustDo(t, e.db.Verify())
}

// TestPriorityWithinPartition: priority orders a partition's tasks; the
// rotation, not priority, orders partitions.
func TestPriorityWithinPartition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	a1 := e.enqueue(q, Task{Partition: "a", Priority: 1})
	a9 := e.enqueue(q, Task{Partition: "a", Priority: 9})
	b0 := e.enqueue(q, Task{Partition: "b"})
	ls := e.claim(q, 2)
	got := map[uint64]bool{}
	for _, l := range ls {
		got[l.ID] = true
	}
	if !got[a9] || !got[b0] {
		t.Fatalf("claim of 2 took %v, want a's priority 9 task %d and b's %d", ids(ls), a9, b0)
	}
	if ls := e.claim(q, 2); len(ls) != 1 || ls[0].ID != a1 {
		t.Fatalf("then %v, want %d", ids(ls), a1)
	}
}

// TestUnpartitionedQueueUnchanged: a queue whose tasks name no partition
// keeps no partition state and serves by priority across all its tasks.
func TestUnpartitionedQueueUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	lo := e.enqueue(q, Task{})
	hi := e.enqueue(q, Task{Priority: 5})
	if ls := e.claim(q, 2); len(ls) != 2 || ls[0].ID != hi || ls[1].ID != lo {
		t.Fatalf("claimed %v", ids(ls))
	}
	if iq := e.db.c.store.Queue(q.(*queue).key()); iq == nil || iq.Partitioned() {
		t.Fatal("a queue without partitioned tasks has partition state")
	}
	if ps := partitions(t, q); len(ps) != 0 {
		t.Fatalf("partitions of an unpartitioned queue: %+v", ps)
	}
}

// TestPartitionMaxInFlight: each partition has at most the bound in
// flight; a partition at it is passed over, the others are served; a
// completion, a failure or an expired lease frees its slot.
func TestPartitionMaxInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for _, p := range []string{"a", "a", "a", "a", "b", "b", "b", ""} {
		e.enqueue(q, Task{Partition: p})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 2}))
	ls := e.claim(q, 10)
	if got := byPart(ls); got["a"] != 2 || got["b"] != 2 || got[""] != 1 || len(ls) != 5 {
		t.Fatalf("claimed %v", got)
	}
	if more := e.claim(q, 10); len(more) != 0 {
		t.Fatalf("claimed past the partition bound: %v", byPart(more))
	}
	var a []Lease
	for _, l := range ls {
		if l.Partition == "a" {
			a = append(a, l)
		}
	}
	if _, err := q.Complete(ctx, a[0], Done{}); err != nil {
		t.Fatal(err)
	}
	if more := e.claim(q, 10); len(more) != 1 || more[0].Partition != "a" {
		t.Fatalf("after a's completion: %v", byPart(more))
	}
	mustDo(t, q.Fail(ctx, a[1], Failure{Err: "x", RetryAfter: time.Hour}))
	if more := e.claim(q, 10); len(more) != 1 || more[0].Partition != "a" {
		t.Fatalf("after a's failure: %v", byPart(more))
	}
	// Every lease expires: each partition gets its bound again (a's
	// failed task waits out its hour).
	e.clock.Advance(30 * time.Second)
	if more := e.claim(q, 10); !mapsEqual(byPart(more), map[string]int{"a": 2, "b": 2, "": 1}) {
		t.Fatalf("after the leases expired: %v", byPart(more))
	}
	if s := settings(t, q); s.Limits.PartitionMaxInFlight != 2 || s.Limits.String() != "at most 2 in flight per partition" {
		t.Fatalf("settings: %+v %q", s, s.Limits.String())
	}
	mustDo(t, e.db.Verify())
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPartitionBoundOnUnpartitionedQueue: without partitioned tasks the
// queue is one partition, so the bound is one on the queue's tasks.
func TestPartitionBoundOnUnpartitionedQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 5 {
		e.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 2, MaxInFlight: 3}))
	if ls := e.claim(q, 5); len(ls) != 2 {
		t.Fatalf("claimed %d, want 2", len(ls))
	}
}

// TestCompleteAndClaimRotates: the claim half of CompleteAndClaim rotates
// between partitions and counts the completed task's slot of its
// partition's bound as free.
func TestCompleteAndClaimRotates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	var ts []Task
	for range 50 {
		ts = append(ts, Task{Partition: "big"})
	}
	if _, err := q.EnqueueBatch(ctx, ts); err != nil {
		t.Fatal(err)
	}
	first := e.claim(q, 1)
	for _, p := range []string{"x", "y", "z"} {
		e.enqueue(q, Task{Partition: p})
	}
	_, ls, err := q.CompleteAndClaim(ctx, first[0], Done{}, "w", time.Minute, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := byPart(ls); !mapsEqual(got, map[string]int{"big": 1, "x": 1, "y": 1, "z": 1}) {
		t.Fatalf("complete and claim took %v", got)
	}
	// With a bound of 1 per partition, big's completion frees big's slot
	// only: the others are at their bound.
	mustDo(t, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 1}))
	for _, p := range []string{"x", "y"} {
		e.enqueue(q, Task{Partition: p})
	}
	var bigLease Lease
	for _, l := range ls {
		if l.Partition == "big" {
			bigLease = l
		}
	}
	_, ls, err = q.CompleteAndClaim(ctx, bigLease, Done{}, "w", time.Minute, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := byPart(ls); !mapsEqual(got, map[string]int{"big": 1}) {
		t.Fatalf("complete and claim at the partition bound took %v", got)
	}
	mustDo(t, e.db.Verify())
}

// TestClaimWaitPartitionBound: a claim parked while every partition with
// work is at its bound is not served by more work for those partitions,
// and is woken by a completion that frees a slot.
func TestClaimWaitPartitionBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	mustDo(t, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 1}))
	e.enqueue(q, Task{Partition: "a"})
	e.enqueue(q, Task{Partition: "a"})
	held := e.claim(q, 5)
	if len(held) != 1 {
		t.Fatalf("claimed %v", ids(held))
	}
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	e.enqueue(q, Task{Partition: "a"}) // a is at its bound: it parks again
	waitParked(t, e, q, 1)
	select {
	case r := <-ch:
		t.Fatalf("claimed past the partition bound: %v %v", ids(r.ls), r.err)
	default:
	}
	b := e.enqueue(q, Task{Partition: "b"}) // b has room: served
	expectClaim(t, ch, b)
	ch = parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	if _, err := q.Complete(ctx, held[0], Done{}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, ch)
	if r.err != nil || len(r.ls) != 1 || r.ls[0].Partition != "a" {
		t.Fatalf("woken by a's completion: %v %v", ids(r.ls), r.err)
	}
}

// TestPartitionCountsThroughEveryTransition: retries, expired leases,
// dead-lettering, redrive, run-now, cancel and dependencies all keep the
// partitions' counts right (Verify recomputes them from the records after
// each step), and Partitions reports them.
func TestPartitionCountsThroughEveryTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	check := func(step string) {
		t.Helper()
		if err := e.db.Verify(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	a := e.enqueue(q, Task{Partition: "a", MaxAttempts: 2})
	timer := e.enqueue(q, Task{Partition: "a", Delay: time.Hour})
	parent := e.enqueue(q, Task{Partition: "b"})
	child := e.enqueue(q, Task{Partition: "c", DependsOn: []uint64{parent}})
	check("enqueue")
	if got := e.get(q, a).Partition; got != "a" {
		t.Fatalf("Get shows partition %q", got)
	}
	ls := e.claim(q, 10)
	check("claim")
	e.clock.Advance(31 * time.Second) // a's lease expires: ready again
	ls2 := e.claim(q, 10)
	check("expired lease reclaimed")
	if len(ls2) != 2 {
		t.Fatalf("reclaimed %v", ids(ls2))
	}
	for _, l := range ls2 {
		if l.ID == a {
			mustDo(t, q.Fail(ctx, l, Failure{Err: "x"})) // last attempt: dead
		}
		if l.ID == parent {
			if _, err := q.Complete(ctx, l, Done{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = ls
	check("dead-lettered, dependency released")
	if got := e.get(q, child).State; got != Ready {
		t.Fatalf("child is %v", got)
	}
	mustDo(t, q.Redrive(ctx, a))
	check("redrive")
	mustDo(t, q.RunNow(ctx, timer))
	check("run now")
	mustDo(t, q.Cancel(ctx, child))
	check("cancel")
	got := partitions(t, q)
	want := []PartitionInfo{{Key: "a", Counts: Counts{Ready: 2}}} // b and c hold no task
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partitions: %+v, want %+v", got, want)
	}
	if n, _ := q.RedriveAll(ctx); n != 0 {
		t.Fatalf("redrove %d", n)
	}
	ls = e.claim(q, 10)
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	check("drained")
	if iq := e.db.c.store.Queue(q.(*queue).key()); iq != nil {
		t.Fatal("a drained queue is still in memory")
	}
	// It fills again without partitions: no partition state.
	e.enqueue(q, Task{})
	if iq := e.db.c.store.Queue(q.(*queue).key()); iq.Partitioned() {
		t.Fatal("a refilled queue kept its partition state")
	}
	check("refilled")
}

// TestPartitionsSurviveCrashAndReopen: the partitions of tasks and the
// partition bound come back from the log after a crash and from a
// snapshot after a reopen, and claims go on rotating and bounded.
func TestPartitionsSurviveCrashAndReopen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	q := e.q("q")
	for _, p := range []string{"a", "a", "a", "b", "b", ""} {
		e.enqueue(q, Task{Partition: p})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 1}))
	held := e.claim(q, 10)
	if got := byPart(held); !mapsEqual(got, map[string]int{"a": 1, "b": 1, "": 1}) {
		t.Fatalf("claimed %v", got)
	}
	before := partitions(t, q)
	e.crash()
	e.open()
	mustDo(t, e.db.Verify())
	if got := partitions(t, q); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("partitions after a crash: %+v, before %+v", got, before)
	}
	if s := settings(t, q); s.Limits.PartitionMaxInFlight != 1 {
		t.Fatalf("limits after a crash: %+v", s.Limits)
	}
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("claimed past the bound after a crash: %v", byPart(ls))
	}
	e.reopen() // through a snapshot
	if got := partitions(t, q); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("partitions after a reopen: %+v, before %+v", got, before)
	}
	for _, l := range held {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := byPart(e.claim(q, 10)); !mapsEqual(got, map[string]int{"a": 1, "b": 1}) {
		t.Fatalf("claimed after the reopen: %v", got)
	}
	e.reopen()
}

// TestPartitionRefusesBadInput: a partition name is checked like a kind,
// and a partition bound like the queue's.
func TestPartitionRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for _, p := range []string{"\xff", "a\x00b", strings.Repeat("p", MaxNameBytes+1)} {
		if _, err := q.Enqueue(ctx, Task{Partition: p}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("partition %q: %v, want ErrInvalid", p, err)
		}
	}
	for _, n := range []int{-1, MaxInFlightLimit + 1} {
		if err := q.SetLimits(ctx, Limits{PartitionMaxInFlight: n}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("partition bound %d: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := q.Partitions(ctx, PartitionListOptions{Limit: MaxBatch + 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a page over MaxBatch: %v", err)
	}
	if _, err := q.Partitions(ctx, PartitionListOptions{Cursor: "a"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a cursor not made by Partitions: %v", err)
	}
	if s := e.db.Stats().Seq; s != 0 {
		t.Fatalf("refused calls wrote %d batches", s)
	}
}

// TestPartitionStateFollowsRecords: a queue is partitioned while one of
// its tasks names a partition, and not once the last such task is gone,
// though others remain: as a restore, which sees only the records, would
// have it.
func TestPartitionStateFollowsRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	e.enqueue(q, Task{})
	e.enqueue(q, Task{Partition: "p"})
	iq := func() bool { return e.db.c.store.Queue(q.(*queue).key()).Partitioned() }
	if !iq() {
		t.Fatal("a queue holding a partitioned task is not partitioned")
	}
	ls := e.claim(q, 2)
	for _, l := range ls {
		if l.Partition == "p" {
			if _, err := q.Complete(ctx, l, Done{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if iq() {
		t.Fatal("the queue stayed partitioned after its last partitioned task")
	}
	mustDo(t, e.db.Verify())
	e.enqueue(q, Task{Partition: "p"}) // and back, the default partition holding the in-flight task
	if !iq() {
		t.Fatal("not partitioned again")
	}
	mustDo(t, e.db.Verify())
}

// TestReplicatedPartitionsMatchStandalone: a replicated log plans the same
// rotating, bounded claims as a standalone DB, and a member restored from
// another's image midway (its partition state rebuilt from the records
// alone, after the queue's partitioned tasks came and went) goes on
// planning the same claims as the others.
func TestReplicatedPartitionsMatchStandalone(t *testing.T) {
	t.Parallel()
	matchStandalone(t, 11, func(api API, clock *ManualClock) []func() string {
		q := api.Queue(ns, "q")
		show := func(v any, err error) string { return fmt.Sprintf("%+v err=%v", v, err) }
		var leases []Lease
		claim := func(n int) string {
			ls, err := q.Claim(ctx, "w", time.Minute, n)
			leases = append(leases, ls...)
			return show(fmt.Sprint(ids(ls), byPart(ls)), err)
		}
		batch := func(parts ...string) func() string {
			return func() string {
				var ts []Task
				for i, p := range parts {
					ts = append(ts, Task{Partition: p, Priority: i % 3})
				}
				return show(q.EnqueueBatch(ctx, ts))
			}
		}
		return []func() string{
			batch("a", "a", "a", "b", "b", "", "c", "a", "c"),
			func() string { return claim(4) },
			func() string { return claim(1) },
			func() string { return show(nil, q.SetLimits(ctx, Limits{PartitionMaxInFlight: 2})) },
			func() string { return claim(10) },
			func() string {
				_, ls, err := q.CompleteAndClaim(ctx, leases[0], Done{}, "w", time.Minute, 3)
				leases = append(leases, ls...)
				return show(ids(ls), err)
			},
			func() string { clock.Advance(2 * time.Minute); return claim(3) },
			func() string { return show(q.Partitions(ctx, PartitionListOptions{})) },
			// The partitioned tasks end; the queue holds unpartitioned
			// timers, and is no longer partitioned.
			func() string {
				return show(q.EnqueueBatch(ctx, []Task{{Delay: time.Hour}, {Delay: time.Hour, Priority: 1}}))
			},
			func() string {
				var n int
				for {
					ls, err := q.Claim(ctx, "w", time.Minute, 10)
					if err != nil || len(ls) == 0 {
						return show(n, err)
					}
					for _, l := range ls {
						if _, err := q.Complete(ctx, l, Done{}); err != nil {
							return show(n, err)
						}
						n++
					}
				}
			},
			batch("", ""),
			batch("x", "y", "y", "x", ""),
			func() string { return claim(3) },
			func() string { return claim(3) },
			func() string { return show(q.Partitions(ctx, PartitionListOptions{})) },
		}
	})
}
