package engine

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkStandingValues is W10's standing phase in one goroutine: a
// backlog of tasks whose payloads are in the value log, each claim
// completed and replaced by a new task, so the backlog stays put.
func BenchmarkStandingValues(b *testing.B) {
	const backlog = 100_000
	db, err := Open(b.TempDir(), Options{Durability: SyncNever, SnapshotBytes: -1, ValueThreshold: 512})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	q := db.Queue(ns, "q")
	payload := []byte(`"` + string(bytes.Repeat([]byte("x"), 510)) + `"`)
	batch := make([]Task, 1000)
	for i := range batch {
		batch[i].Payload = payload
	}
	for range backlog / len(batch) {
		if _, err := q.EnqueueBatch(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ls, err := q.Claim(ctx, "w", time.Minute, 1)
		if err != nil || len(ls) != 1 {
			b.Fatal(err, len(ls))
		}
		if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
			b.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, Task{Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
}
