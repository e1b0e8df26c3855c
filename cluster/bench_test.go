package cluster_test

import (
	"testing"
	"time"

	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
)

// BenchmarkEnqueue measures enqueues through raft, 16 callers at once, on
// one node and on three (raft's in-memory transport, each node's log on
// its own wal with an fsync per append).
func BenchmarkEnqueue(b *testing.B) {
	for _, nodes := range []int{1, 3} {
		b.Run(map[int]string{1: "node", 3: "nodes3"}[nodes], func(b *testing.B) {
			m := clustertest.NewMesh(b, clustertest.MeshOptions{Nodes: nodes})
			l, err := m.WaitLeader(10 * time.Second)
			if err != nil {
				b.Fatal(err)
			}
			q := l.API().Queue(ns, "bench")
			ctx := within(b, 10*time.Minute)
			b.ReportAllocs()
			b.SetParallelism(8)
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := q.Enqueue(ctx, engine.Task{Payload: []byte(`{"n":1}`)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}
