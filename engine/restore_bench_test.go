package engine

import (
	"fmt"
	"testing"
)

// BenchmarkOpenSnapshot times opening a directory whose snapshot holds
// 100,000 ready tasks, unpartitioned and spread over 100 partitions:
// b.N opens, each reading the snapshot, reported per task.
func BenchmarkOpenSnapshot(b *testing.B) {
	for _, parts := range []int{0, 100} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			const n = 100_000
			dir := b.TempDir()
			db, err := Open(dir, Options{Durability: SyncNever, SnapshotBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			q := db.Queue(ns, "q")
			batch := make([]Task, 1000)
			for i := 0; i < n; i += len(batch) {
				for j := range batch {
					batch[j] = Task{Payload: benchPayload}
					if parts > 0 {
						batch[j].Partition = fmt.Sprintf("customer-%d", j%parts)
					}
				}
				if _, err := q.EnqueueBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.Checkpoint(ctx); err != nil {
				b.Fatal(err)
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				db, err := Open(dir, Options{Durability: SyncNever, SnapshotBytes: -1})
				if err != nil {
					b.Fatal(err)
				}
				if got := db.Stats().Tasks; got != n {
					b.Fatalf("opened %d tasks of %d", got, n)
				}
				b.StopTimer()
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/task")
		})
	}
}
