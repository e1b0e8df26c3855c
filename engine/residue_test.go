package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

// heapInUse is the live heap after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// churn puts one task on each of n fresh queues, each in a namespace of its
// own, and completes it, leaving every queue empty.
func churn(t *testing.T, db *DB, prefix string, n int) {
	t.Helper()
	for i := range n {
		q := db.Queue(NS("tenant", fmt.Sprintf("%s-%06d", prefix, i)), fmt.Sprintf("queue-%06d", i))
		if _, err := q.Enqueue(ctx, Task{}); err != nil {
			t.Fatal(err)
		}
		ls, err := q.Claim(ctx, "w", time.Minute, 1)
		if err != nil || len(ls) != 1 {
			t.Fatal(ls, err)
		}
		if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmptiedQueuesCostLittle: queues (each in a namespace of its own)
// that held a task once and hold none now cost next to nothing: only the
// totals of the index.MaxIdleTotals idle most recently are kept, whatever
// the number of names used.
func TestEmptiedQueuesCostLittle(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations blur the heap figures")
	}
	db, err := OpenInMemory(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	churn(t, db, "warm", 100)
	const n = 10_000
	before := heapInUse()
	churn(t, db, "a", n)
	mid := heapInUse()
	churn(t, db, "b", n)
	after := heapInUse()
	first, second := (mid-before)/n, (after-mid)/n
	t.Logf("residue per emptied queue: %d B over the first %d, %d B over the next %d", first, n, second, n)
	if first > 64 || second > 8 {
		t.Fatalf("emptied queues cost %d B each (then %d B each), want at most 64 (then 8)", first, second)
	}
	if qs, err := db.Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("emptied queues listed: %d, %v", len(qs), err)
	}
	if got := db.c.store.NumQueues(); got != 0 {
		t.Fatalf("%d queues in memory", got)
	}
}

// TestEmptiedQueueKeepsSettings: a queue's settings outlive its tasks and
// the forgetting of idle totals, and a queue whose totals were forgotten
// comes back, counting from 0, when a task arrives.
func TestEmptiedQueueKeepsSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.Durability = SyncNever })
	ctl, plain := e.q("ctl"), e.q("plain")
	limits := Limits{MaxInFlight: 3, Rate: 10, Per: time.Second, Burst: 10, PartitionMaxInFlight: 2}
	if err := ctl.SetLimits(ctx, limits); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []Queue{ctl, plain} {
		id := e.enqueue(q, Task{Partition: "p"})
		if err := q.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	churn(t, e.db, "x", index.MaxIdleTotals+1) // pushes out the totals of ctl and plain
	e.reopen()
	s, err := ctl.Settings(ctx)
	if err != nil || !s.Paused || s.Limits.MaxInFlight != 3 || s.Limits.Rate != 10 || s.Limits.PartitionMaxInFlight != 2 {
		t.Fatalf("settings after the queue emptied: %+v, %v", s, err)
	}
	qs, err := e.db.Queues(ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "ctl" || !qs[0].Paused || qs[0].Totals != (Totals{}) {
		t.Fatalf("listed: %+v, %v", qs, err)
	}
	id := e.enqueue(plain, Task{})
	if i := e.get(plain, id); i.State != Ready {
		t.Fatalf("task on a forgotten queue: %+v", i)
	}
	qs, err = e.db.Queues(ctx)
	if err != nil || len(qs) != 2 || qs[1].Name != "plain" || qs[1].Counts.Ready != 1 || qs[1].Totals.Enqueued != 1 {
		t.Fatalf("listed: %+v, %v", qs, err)
	}
}
