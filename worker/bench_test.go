package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

func benchFill(b *testing.B, q engine.Queue, n int) {
	b.Helper()
	tasks := make([]engine.Task, 0, 1000)
	for n > 0 {
		k := min(n, cap(tasks))
		tasks = tasks[:k]
		if _, err := q.EnqueueBatch(bg, tasks); err != nil {
			b.Fatal(err)
		}
		n -= k
	}
}

func benchDB(b *testing.B) *engine.DB {
	b.Helper()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkRuntimeOverhead moves b.N tasks through the in-memory engine
// several ways in one run and reports each as tasks/s: raw Claim+Complete
// on one goroutine (one task at a time, or Claim 16 + CompleteBatch), and
// the runtime with a no-op handler on one goroutine with the same claim
// sizes.
// overhead-ns/task is what the runtime adds to a raw one-task loop.
func BenchmarkRuntimeOverhead(b *testing.B) {
	b.ReportAllocs()
	raw := func(batch int) time.Duration {
		b.StopTimer()
		db := benchDB(b)
		q := db.Queue(ns, "raw")
		benchFill(b, q, b.N)
		b.StartTimer()
		start := time.Now()
		for done := 0; done < b.N; {
			ls, err := q.Claim(bg, "raw", 30*time.Second, batch)
			if err != nil || len(ls) == 0 {
				b.Fatalf("claim: %v %d", err, len(ls))
			}
			if len(ls) == 1 {
				if _, err := q.Complete(bg, ls[0], engine.Done{}); err != nil {
					b.Fatal(err)
				}
			} else if errs, err := q.CompleteBatch(bg, ls); err != nil || errs[0] != nil {
				b.Fatal(err, errs)
			}
			done += len(ls)
		}
		return time.Since(start)
	}
	viaRuntime := func(opts worker.QueueOptions) time.Duration {
		b.StopTimer()
		db := benchDB(b)
		benchFill(b, db.Queue(ns, "q"), b.N)
		w := worker.New(db, worker.Options{Owner: "bench"})
		var n atomic.Int64
		all := make(chan struct{})
		w.HandleFunc(ns, "q", func(ctx context.Context, t *worker.Task) error {
			if n.Add(1) == int64(b.N) {
				close(all)
			}
			return nil
		}, opts)
		b.StartTimer()
		start := time.Now()
		if err := w.Start(bg); err != nil {
			b.Fatal(err)
		}
		<-all
		if err := w.Stop(bg); err != nil { // waits for the last completions to commit
			b.Fatal(err)
		}
		d := time.Since(start)
		if st := db.Stats(); st.Completed != uint64(b.N) {
			b.Fatalf("completed %d of %d", st.Completed, b.N)
		}
		return d
	}
	raw1 := raw(1)
	raw16 := raw(16)
	rt1 := viaRuntime(worker.QueueOptions{})
	rt16 := viaRuntime(worker.QueueOptions{ClaimBatch: 16})

	rate := func(d time.Duration) float64 { return float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(raw1), "raw-tasks/s")
	b.ReportMetric(rate(rt1), "runtime-tasks/s")
	b.ReportMetric(rate(raw16), "raw-batch16-tasks/s")
	b.ReportMetric(rate(rt16), "runtime-batch16-tasks/s")
	b.ReportMetric(float64(rt1-raw1)/float64(b.N), "overhead-ns/task")
	b.ReportMetric(0, "ns/op") // the phases share b.N: the rates are the figures
}
