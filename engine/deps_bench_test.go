package engine

import (
	"testing"
	"time"
)

// BenchmarkReleaseFanOut completes a root that 10,000 tasks wait for: the
// commit releases all of them. It reports the time per released task.
func BenchmarkReleaseFanOut(b *testing.B) {
	const n = 10_000
	db := benchDB(b, "", SyncAlways)
	q := db.Queue(ns, "root")
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		root := mustEnqueueB(b, q, Task{})
		tasks := make([]Task, n)
		for i := range tasks {
			tasks[i] = Task{DependsOn: []uint64{root}}
		}
		if _, err := db.Queue(ns, "work").EnqueueBatch(ctx, tasks); err != nil {
			b.Fatal(err)
		}
		ls, err := q.Claim(ctx, "w", time.Minute, 1)
		if err != nil || len(ls) != 1 {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		drain(b, db.Queue(ns, "work"))
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/released")
}

// BenchmarkCompleteFanInParent completes, one commit each, the parents a
// task waiting on 10,000 of them waits for: each completion costs the same
// however many parents are left (a count, not a rescan).
func BenchmarkCompleteFanInParent(b *testing.B) {
	const n = 10_000
	db := benchDB(b, "", SyncAlways)
	pq, sq := db.Queue(ns, "parents"), db.Queue(ns, "sink")
	var ls []Lease
	refill := func() {
		tasks := make([]Task, n)
		res, err := pq.EnqueueBatch(ctx, tasks)
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uint64, n)
		for i, r := range res {
			ids[i] = r.ID
		}
		mustEnqueueB(b, sq, Task{DependsOn: ids})
		if ls, err = pq.Claim(ctx, "w", time.Hour, n); err != nil || len(ls) != n {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(ls) == 0 {
			b.StopTimer()
			drain(b, sq)
			refill()
			b.StartTimer()
		}
		if _, err := pq.Complete(ctx, ls[0], Done{}); err != nil {
			b.Fatal(err)
		}
		ls = ls[1:]
	}
}

func mustEnqueueB(b *testing.B, q Queue, t Task) uint64 {
	res, err := q.Enqueue(ctx, t)
	if err != nil {
		b.Fatal(err)
	}
	return res.ID
}

// drain completes every ready task of q.
func drain(b *testing.B, q Queue) {
	for {
		ls, err := q.Claim(ctx, "w", time.Hour, MaxBatch)
		if err != nil {
			b.Fatal(err)
		}
		if len(ls) == 0 {
			return
		}
		if _, err := q.CompleteBatch(ctx, ls); err != nil {
			b.Fatal(err)
		}
	}
}
