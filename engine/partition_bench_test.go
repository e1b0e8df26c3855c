package engine

import (
	"fmt"
	"testing"
)

// BenchmarkClaimCompletePartitioned is BenchmarkClaimCompleteInMemory with
// the tasks spread over 1, 100 or 10,000 partitions, with and without a
// partition bound (too high to refuse a claim), against the same tasks
// naming no partition: what the rotation costs a claim and a completion.
func BenchmarkClaimCompletePartitioned(b *testing.B) {
	for _, c := range []struct {
		name  string
		parts int
		bound int
	}{
		{"unpartitioned", 0, 0}, {"1", 1, 0}, {"100", 100, 0}, {"10000", 10_000, 0}, {"100/bound", 100, 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := benchDB(b, "", SyncAlways).Queue(ns, "q")
			if err := q.SetLimits(ctx, Limits{PartitionMaxInFlight: c.bound}); err != nil {
				b.Fatal(err)
			}
			batch := make([]Task, 1000)
			n := 0
			for i := 0; i < b.N; i += len(batch) {
				for j := range batch {
					batch[j].Payload = benchPayload
					if c.parts > 0 {
						batch[j].Partition = fmt.Sprintf("p%d", n%c.parts)
					}
					n++
				}
				q.EnqueueBatch(ctx, batch)
			}
			claimComplete(b, q)
		})
	}
}

// BenchmarkEnqueuePartitioned times in-memory EnqueueBatch calls of 100
// tasks spread over 100 partitions, against the same tasks naming none.
func BenchmarkEnqueuePartitioned(b *testing.B) {
	for _, parts := range []int{0, 100} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			q := benchDB(b, "", SyncAlways).Queue(ns, "q")
			batch := make([]Task, 100)
			for j := range batch {
				batch[j].Payload = benchPayload
				if parts > 0 {
					batch[j].Partition = fmt.Sprintf("p%d", j%parts)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i += len(batch) {
				if _, err := q.EnqueueBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
