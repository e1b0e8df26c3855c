package bench

import (
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// benchSmall sizes the workloads that do not scale with b.N (W8, W9).
const benchSmall = 20_000

// benchWorkload runs workload w in mode m with b.N as the task count and
// reports the run's own figures; ns/op and allocs/op are per task for the
// workloads sized by b.N, setup included.
func benchWorkload(b *testing.B, w string, m mode) {
	b.ReportAllocs()
	cfg := m.config(b, w, b.N)
	switch w {
	case "W6", "W6R":
		cfg.Duration = 30 * time.Second // b.N completions end the run first
	case "W8", "W9":
		cfg.N = benchSmall
	}
	var res Result
	b.ResetTimer()
	for range iterations(b, w) {
		var err error
		if res, err = Run(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	switch {
	case res.Recovery != nil:
		rc := res.Recovery
		b.ReportMetric(float64(rc.FromSnapshot.Milliseconds()), "ms-from-snapshot")
		b.ReportMetric(float64(rc.FromLog.Milliseconds()), "ms-from-log")
		b.ReportMetric(float64(rc.Tasks)/rc.FromLog.Seconds(), "replayed-tasks/s")
	case res.Footprint != nil:
		f := res.Footprint
		b.ReportMetric(f.HeapPerTask, "heap-bytes/task")
		b.ReportMetric(f.HeapBeyondPayload, "heap-beyond-payload/task")
		b.ReportMetric(f.LogLifecycle, "log-bytes/lifecycle")
	default:
		b.ReportMetric(res.TasksPerSec, "tasks/s")
		if res.Tasks > 0 {
			b.ReportMetric(float64(res.Elapsed.Nanoseconds())/float64(res.Tasks), "ns/task")
		}
		b.ReportMetric(res.BytesPerTask, "bytes/task")
		b.ReportMetric(float64(res.Latency.P99.Nanoseconds()), "p99-ns")
		if res.EndToEnd != nil {
			b.ReportMetric(float64(res.EndToEnd.P99.Nanoseconds()), "e2e-p99-ns")
		}
		if res.Fsyncs > 0 {
			b.ReportMetric(res.GroupSize, "commits/fsync")
		}
	}
}

// iterations is how many runs a benchmark does: one sized by b.N, or b.N
// runs of a fixed size.
func iterations(b *testing.B, w string) int {
	if w == "W8" || w == "W9" {
		return b.N
	}
	return 1
}

func BenchmarkW1_SyncAlways(b *testing.B)  { benchWorkload(b, "W1", syncAlways) }
func BenchmarkW1_SyncNever(b *testing.B)   { benchWorkload(b, "W1", syncNever) }
func BenchmarkW1_InMemory(b *testing.B)    { benchWorkload(b, "W1", memory) }
func BenchmarkW1P_SyncAlways(b *testing.B) { benchWorkload(b, "W1P", syncAlways) }
func BenchmarkW1P_SyncNever(b *testing.B)  { benchWorkload(b, "W1P", syncNever) }
func BenchmarkW1P_InMemory(b *testing.B)   { benchWorkload(b, "W1P", memory) }
func BenchmarkW2_SyncAlways(b *testing.B)  { benchWorkload(b, "W2", syncAlways) }
func BenchmarkW2_SyncNever(b *testing.B)   { benchWorkload(b, "W2", syncNever) }
func BenchmarkW2_InMemory(b *testing.B)    { benchWorkload(b, "W2", memory) }
func BenchmarkW3_SyncAlways(b *testing.B)  { benchWorkload(b, "W3", syncAlways) }
func BenchmarkW3_SyncNever(b *testing.B)   { benchWorkload(b, "W3", syncNever) }
func BenchmarkW3_InMemory(b *testing.B)    { benchWorkload(b, "W3", memory) }
func BenchmarkW4_SyncAlways(b *testing.B)  { benchWorkload(b, "W4", syncAlways) }
func BenchmarkW4_SyncNever(b *testing.B)   { benchWorkload(b, "W4", syncNever) }
func BenchmarkW4_InMemory(b *testing.B)    { benchWorkload(b, "W4", memory) }
func BenchmarkW5_SyncAlways(b *testing.B)  { benchWorkload(b, "W5", syncAlways) }
func BenchmarkW5_SyncNever(b *testing.B)   { benchWorkload(b, "W5", syncNever) }
func BenchmarkW5_InMemory(b *testing.B)    { benchWorkload(b, "W5", memory) }
func BenchmarkW6_SyncAlways(b *testing.B)  { benchWorkload(b, "W6", syncAlways) }
func BenchmarkW6_SyncNever(b *testing.B)   { benchWorkload(b, "W6", syncNever) }
func BenchmarkW6_InMemory(b *testing.B)    { benchWorkload(b, "W6", memory) }
func BenchmarkW6R_SyncAlways(b *testing.B) { benchWorkload(b, "W6R", syncAlways) }
func BenchmarkW6R_SyncNever(b *testing.B)  { benchWorkload(b, "W6R", syncNever) }
func BenchmarkW6R_InMemory(b *testing.B)   { benchWorkload(b, "W6R", memory) }
func BenchmarkW7_SyncAlways(b *testing.B)  { benchWorkload(b, "W7", syncAlways) }
func BenchmarkW7_SyncNever(b *testing.B)   { benchWorkload(b, "W7", syncNever) }
func BenchmarkW7_InMemory(b *testing.B)    { benchWorkload(b, "W7", memory) }
func BenchmarkW8_SyncAlways(b *testing.B)  { benchWorkload(b, "W8", syncAlways) }
func BenchmarkW8_SyncNever(b *testing.B)   { benchWorkload(b, "W8", syncNever) }
func BenchmarkW9_SyncAlways(b *testing.B)  { benchWorkload(b, "W9", syncAlways) }
func BenchmarkW9_InMemory(b *testing.B)    { benchWorkload(b, "W9", memory) }

// The same workloads through the client, to a server on 127.0.0.1 in this
// process.
func BenchmarkRemoteW1_SyncAlways(b *testing.B)  { benchWorkload(b, "W1", remoteAlways) }
func BenchmarkRemoteW1_SyncNever(b *testing.B)   { benchWorkload(b, "W1", remoteNever) }
func BenchmarkRemoteW1_InMemory(b *testing.B)    { benchWorkload(b, "W1", remoteMemory) }
func BenchmarkRemoteW2_SyncAlways(b *testing.B)  { benchWorkload(b, "W2", remoteAlways) }
func BenchmarkRemoteW2_SyncNever(b *testing.B)   { benchWorkload(b, "W2", remoteNever) }
func BenchmarkRemoteW2_InMemory(b *testing.B)    { benchWorkload(b, "W2", remoteMemory) }
func BenchmarkRemoteW3_SyncAlways(b *testing.B)  { benchWorkload(b, "W3", remoteAlways) }
func BenchmarkRemoteW3_SyncNever(b *testing.B)   { benchWorkload(b, "W3", remoteNever) }
func BenchmarkRemoteW4_SyncAlways(b *testing.B)  { benchWorkload(b, "W4", remoteAlways) }
func BenchmarkRemoteW4_SyncNever(b *testing.B)   { benchWorkload(b, "W4", remoteNever) }
func BenchmarkRemoteW5_SyncAlways(b *testing.B)  { benchWorkload(b, "W5", remoteAlways) }
func BenchmarkRemoteW5_SyncNever(b *testing.B)   { benchWorkload(b, "W5", remoteNever) }
func BenchmarkRemoteW5_InMemory(b *testing.B)    { benchWorkload(b, "W5", remoteMemory) }
func BenchmarkRemoteW6_SyncAlways(b *testing.B)  { benchWorkload(b, "W6", remoteAlways) }
func BenchmarkRemoteW6_SyncNever(b *testing.B)   { benchWorkload(b, "W6", remoteNever) }
func BenchmarkRemoteW6R_SyncAlways(b *testing.B) { benchWorkload(b, "W6R", remoteAlways) }
func BenchmarkRemoteW6R_SyncNever(b *testing.B)  { benchWorkload(b, "W6R", remoteNever) }
func BenchmarkRemoteW7_SyncNever(b *testing.B)   { benchWorkload(b, "W7", remoteNever) }
func BenchmarkRemoteW7_InMemory(b *testing.B)    { benchWorkload(b, "W7", remoteMemory) }

// BenchmarkEnqueueAllocs is one in-memory Enqueue per op: its allocs/op
// is the engine's allocations per enqueued task.
func BenchmarkEnqueueAllocs(b *testing.B) {
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(benchNS, "tasks")
	task := engine.Task{Payload: makePayload(100, 0)}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := q.Enqueue(ctx, task); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkClaimCompleteAllocs is one in-memory Claim(1) and Complete per
// op over a backlog enqueued beforehand: its allocs/op is the engine's
// allocations per claimed and completed task.
func BenchmarkClaimCompleteAllocs(b *testing.B) {
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(benchNS, "tasks")
	tasks := make([]engine.Task, setupBatch)
	for i := range tasks {
		tasks[i].Payload = makePayload(100, 0)
	}
	for n := 0; n < b.N; n += setupBatch {
		if _, err := q.EnqueueBatch(ctx, tasks[:min(setupBatch, b.N-n)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ls, err := q.Claim(ctx, "bench", lease, 1)
		if err != nil || len(ls) != 1 {
			b.Fatalf("claim: %v, %d tasks", err, len(ls))
		}
		if _, err := q.Complete(ctx, ls[0], engine.Done{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}
