package engine

import (
	"testing"
	"time"
)

// BenchmarkClaimCompleteControlled is BenchmarkClaimCompleteInMemory on a
// queue with no settings, one with an in-flight bound, and one with a
// bound and a rate limit (both too high to refuse a claim): what planning
// against a queue's settings costs a claim and a completion.
func BenchmarkClaimCompleteControlled(b *testing.B) {
	for _, c := range []struct {
		name   string
		limits Limits
	}{
		{"none", Limits{}},
		{"bound", Limits{MaxInFlight: 1000}},
		{"bound+rate", Limits{MaxInFlight: 1000, Rate: MaxRateTokens, Per: time.Microsecond}},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := benchDB(b, "", SyncAlways).Queue(ns, "q")
			if err := q.SetLimits(ctx, c.limits); err != nil {
				b.Fatal(err)
			}
			batch := make([]Task, 1000)
			for i := range batch {
				batch[i].Payload = benchPayload
			}
			for i := 0; i < b.N; i += len(batch) {
				q.EnqueueBatch(ctx, batch)
			}
			claimComplete(b, q)
		})
	}
}
