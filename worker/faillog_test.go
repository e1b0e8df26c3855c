package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// TestTaskFailuresAreAggregated: 1,000 tasks of a queue fail (and are
// dead-lettered) within one interval of the Worker's clock. The first
// failure is logged at once, with its task; the others share one line,
// written when the interval ends, that counts them; a failure after it
// is logged at once again. A panic, an error, is logged at once too.
func TestTaskFailuresAreAggregated(t *testing.T) {
	const n = 1000
	e := newEnv(t)
	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		if tk.Kind == "panic" {
			panic("loud")
		}
		return errors.New("boom")
	}, worker.QueueOptions{Concurrency: 8, Lease: time.Hour})
	tasks := make([]engine.Task, 0, engine.MaxBatch)
	for i := 0; i < n; i += len(tasks) {
		tasks = tasks[:0]
		for range min(engine.MaxBatch, n-i) {
			tasks = append(tasks, engine.Task{MaxAttempts: 1})
		}
		if _, err := e.q("q").EnqueueBatch(bg, tasks); err != nil {
			t.Fatal(err)
		}
	}
	e.start(w)
	e.eventually("every task dead", func() bool {
		c, err := e.q("q").Counts(bg)
		return err == nil && c.Dead == n
	})
	lines := func() []logRec {
		e.logs.mu.Lock()
		defer e.logs.mu.Unlock()
		var out []logRec
		for _, r := range e.logs.recs {
			if strings.HasPrefix(r.msg, "docket: task failed") {
				out = append(out, r)
			}
		}
		return out
	}
	if got := lines(); len(got) != 1 || got[0].attrs["task_id"] == "" || got[0].attrs["err"] != "boom" || got[0].level != slog.LevelWarn {
		t.Fatalf("%d failures within an interval logged %d lines; want the first alone: %+v", n, len(got), got[:min(len(got), 3)])
	}
	e.clock.Advance(10 * time.Second)
	e.eventually("the interval's line", func() bool { return len(lines()) == 2 })
	sum := lines()[1]
	if sum.attrs["count"] != "999" || sum.attrs["outcome_failed"] != "999" || sum.attrs["sample_err"] != "boom" ||
		sum.attrs["queue"] != "q" || sum.attrs["sample_task_id"] == "" || sum.level != slog.LevelWarn {
		t.Fatalf("the interval's line: %+v", sum)
	}
	e.enqueue("q", engine.Task{MaxAttempts: 1})
	e.eventually("a failure in the next interval", func() bool { return len(lines()) == 3 })
	e.enqueue("q", engine.Task{MaxAttempts: 1, Kind: "panic"})
	e.eventually("a panic", func() bool { return len(lines()) == 4 })
	if got := lines(); got[2].level != slog.LevelWarn || got[3].level != slog.LevelError || got[3].attrs["outcome"] != "panicked" {
		t.Fatalf("lines after the interval: %+v", got[2:])
	}
	// Failures counted when the Worker stops are logged then.
	e.enqueue("q", engine.Task{MaxAttempts: 1})
	e.enqueue("q", engine.Task{MaxAttempts: 1})
	e.eventually("every task dead", func() bool {
		c, err := e.q("q").Counts(bg)
		return err == nil && c.Dead == n+4
	})
	e.stop(w)
	if got := lines(); len(got) != 5 || got[4].attrs["count"] != "2" {
		t.Fatalf("lines at the stop: %+v", got[4:])
	}
}
