package engine

import (
	"testing"
	"time"
)

var benchPayload = []byte(`{"to":"someone@example.com","subject":"hello","body":"a short message body of some length"}`)

func benchDB(b *testing.B, dir string, mode Durability) *DB {
	opts := Options{Durability: mode, SnapshotBytes: -1}
	db, err := Open(dir, opts)
	if dir == "" {
		db, err = OpenInMemory(opts)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func BenchmarkEnqueueInMemory(b *testing.B) {
	q := benchDB(b, "", SyncAlways).Queue(ns, "q")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Enqueue(ctx, Task{Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnqueueSyncNever(b *testing.B) {
	q := benchDB(b, b.TempDir(), SyncNever).Queue(ns, "q")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Enqueue(ctx, Task{Payload: benchPayload}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClaimCompleteInMemory(b *testing.B) {
	q := benchDB(b, "", SyncAlways).Queue(ns, "q")
	batch := make([]Task, 1000)
	for i := range batch {
		batch[i].Payload = benchPayload
	}
	for i := 0; i < b.N; i += len(batch) {
		q.EnqueueBatch(ctx, batch)
	}
	claimComplete(b, q)
}

// claimComplete times b.N claims of one task of q, each completed: q must
// hold at least b.N ready tasks.
func claimComplete(b *testing.B, q Queue) {
	b.Helper()
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
	}
}
