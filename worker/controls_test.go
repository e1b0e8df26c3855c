package worker_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// A Worker on a paused queue idles: its slots park in the engine's
// blocking claim and stay parked however many tasks arrive (no claim is
// made, nothing spins), and the queue's Resume sets them to work.
func TestWorkerIdlesOnPausedQueue(t *testing.T) {
	e := newEnv(t)
	q := e.q("jobs")
	if err := q.Pause(bg); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "jobs", func(ctx context.Context, tk *worker.Task) error {
		ran.Add(1)
		return nil
	}, worker.QueueOptions{Concurrency: 3})
	e.start(w)
	e.waitParked("jobs", 3)
	parks, _ := e.db.Parks()
	claims := e.db.Stats().Claimed
	for range 5 {
		e.enqueue("jobs", engine.Task{})
	}
	if n, _ := e.db.Parked(ns, "jobs"); n != 3 {
		t.Fatalf("%d of 3 slots parked after enqueues on the paused queue", n)
	}
	if p, _ := e.db.Parks(); p != parks || e.db.Stats().Claimed != claims || ran.Load() != 0 {
		t.Fatalf("the paused queue was worked: %d parks, %d claimed, %d ran", p-parks, e.db.Stats().Claimed-claims, ran.Load())
	}
	if err := q.Resume(bg); err != nil {
		t.Fatal(err)
	}
	e.eventually("the five tasks done", func() bool {
		c, _ := q.Counts(bg)
		return ran.Load() == 5 && c == (engine.Counts{})
	})
	e.stop(w)
}

// Two Workers (two processes, as far as the engine knows) share a queue
// bounded to 2 tasks in flight: however many slots they have, at most two
// handlers run at once, and a finished one lets the next start.
func TestWorkersShareTheInFlightBound(t *testing.T) {
	e := newEnv(t)
	q := e.q("jobs")
	if err := q.SetLimits(bg, engine.Limits{MaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	started := make(chan uint64, 10)
	release := make(chan struct{})
	h := func(ctx context.Context, tk *worker.Task) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- tk.ID
		<-release
		running.Add(-1)
		return nil
	}
	var ws []*worker.Worker
	for _, owner := range []string{"a", "b"} {
		w := e.worker(worker.Options{Owner: owner})
		w.HandleFunc(ns, "jobs", h, worker.QueueOptions{Concurrency: 3})
		ws = append(ws, w)
	}
	for range 5 {
		e.enqueue("jobs", engine.Task{})
	}
	for _, w := range ws {
		e.start(w)
	}
	recv(t, started)
	recv(t, started)
	// The other four slots find no room and park.
	e.waitParked("jobs", 4)
	select {
	case id := <-started:
		t.Fatalf("task %d started past the bound", id)
	default:
	}
	for range 3 {
		release <- struct{}{}
		recv(t, started) // a slot is free: the next starts
	}
	close(release)
	e.eventually("every task done", func() bool {
		c, _ := q.Counts(bg)
		return c == (engine.Counts{})
	})
	if m := most.Load(); m != 2 {
		t.Fatalf("at most %d handlers ran at once, want 2", m)
	}
	for _, w := range ws {
		e.stop(w)
	}
}
