package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// TestShutdownReleasesLeases: Stop's context ends while handlers run; they
// are cancelled with ErrShutdown, their leases are released, and a new
// claim gets the tasks at once, with their attempt not counted.
func TestShutdownReleasesLeases(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	w := e.worker(worker.Options{})
	var started sync.WaitGroup
	started.Add(3)
	causes := make(chan error, 3)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started.Done()
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, worker.QueueOptions{Concurrency: 3, Lease: time.Hour})
	for range 3 {
		e.enqueue("q", engine.Task{})
	}
	e.start(w)
	started.Wait()

	ctx, cancel := context.WithCancel(bg)
	cancel() // Stop may not wait for the handlers at all
	if err := w.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop: %v", err)
	}
	for range 3 {
		if c := recv(t, causes); !errors.Is(c, worker.ErrShutdown) {
			t.Fatalf("cause %v", c)
		}
	}
	// No time passes: the tasks are claimable only because they were released.
	ls, err := e.q("q").Claim(bg, "next", time.Minute, 10)
	if err != nil || len(ls) != 3 {
		t.Fatalf("claim after shutdown: %v, %d tasks", err, len(ls))
	}
	for _, l := range ls {
		if l.Attempt != 1 {
			t.Fatalf("the interrupted attempt was counted: %+v", l)
		}
	}
	e.db.Close()
	verifyNoLeaks(t)
}

// TestGracefulShutdown: Stop stops claiming at once but lets a running
// handler finish and commit.
func TestGracefulShutdown(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	claimEnded := make(chan struct{}, 2)
	w := worker.New(&hookedAPI{API: e.db, claimEnded: claimEnded},
		worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	defer e.stop(w)
	started, finish := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		runs.Add(1)
		close(started)
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, worker.QueueOptions{Concurrency: 2})
	first := e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)
	stopped := make(chan error)
	go func() { stopped <- w.Stop(bg) }()
	recv(t, claimEnded)                     // the idle slot stopped claiming
	second := e.enqueue("q", engine.Task{}) // an idle slot is free, but claiming has stopped
	select {
	case err := <-stopped:
		t.Fatalf("stop returned while a handler ran: %v", err)
	default:
	}
	close(finish)
	if err := recv(t, stopped); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !e.gone("q", first) {
		t.Fatal("the running task was not completed")
	}
	if info := e.get("q", second); info.State != engine.Ready || runs.Load() != 1 {
		t.Fatalf("a task was claimed after Stop: %+v, runs %d", info, runs.Load())
	}
	if err := w.Stop(bg); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if err := w.Start(bg); !errors.Is(err, worker.ErrStarted) {
		t.Fatalf("restart after stop: %v", err)
	}
}

// TestRunStopsWhenContextEnds: when Run's context ends, running handlers
// get Options.ShutdownGrace (on the Worker's clock), then are cancelled and
// their tasks released.
func TestRunStopsWhenContextEnds(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	w := e.worker(worker.Options{ShutdownGrace: time.Minute})
	started, cancelled := make(chan context.Context, 1), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- ctx
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	}, worker.QueueOptions{Lease: time.Hour})
	id := e.enqueue("q", engine.Task{})
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	hctx := recv(t, started)
	cancel()
	e.armed(t0.Add(time.Minute)) // the grace timer
	// The stop armed the grace timer after it stopped claiming; a handler
	// cancelled before the grace would be cancelled by now.
	if err := hctx.Err(); err != nil {
		t.Fatalf("the handler was cancelled before the grace ended: %v", err)
	}
	e.clock.Advance(time.Minute)
	recv(t, cancelled)
	if err := recv(t, done); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, worker.ErrShutdown) {
		t.Fatalf("run: %v", err)
	}
	if info := e.get("q", id); info.State != engine.Ready || info.Attempts != 0 {
		t.Fatalf("not released: %+v", info)
	}
}

// TestStartContextEndsStopsByTheSameRule: when Start's context ends, the
// Worker stops as Stop and Run do: the running handler gets the grace and
// commits; Stop then waits for it.
func TestStartContextEndsStopsByTheSameRule(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	claimEnded := make(chan struct{}, 1)
	w := worker.New(&hookedAPI{API: e.db, claimEnded: claimEnded},
		worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	started, finish := make(chan struct{}), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		return block(ctx, finish)
	}, worker.QueueOptions{Concurrency: 2})
	id := e.enqueue("q", engine.Task{})
	ctx, cancel := context.WithCancel(bg)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, started)
	cancel()
	recv(t, claimEnded) // the stop began: the idle slot stopped claiming
	close(finish)
	if err := w.Stop(bg); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !e.gone("q", id) {
		t.Fatalf("the running task did not complete: %+v", e.get("q", id))
	}
}

func TestStartAndStopEdges(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	if err := w.Start(bg); err == nil {
		t.Fatal("started with nothing to run")
	}
	if err := w.Stop(bg); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	w2 := e.worker(worker.Options{})
	w2.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	mustPanic(t, "duplicate queue", func() {
		w2.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	})
	mustPanic(t, "heartbeat not under lease", func() {
		w2.HandleFunc(ns, "r", func(context.Context, *worker.Task) error { return nil },
			worker.QueueOptions{Lease: time.Second, HeartbeatEvery: time.Second})
	})
	e.start(w2)
	if err := w2.Start(bg); !errors.Is(err, worker.ErrStarted) {
		t.Fatalf("second start: %v", err)
	}
	mustPanic(t, "handle after start", func() {
		w2.HandleFunc(ns, "s", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	})
	e.stop(w2)
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// TestStopReleasesWaitingBatch: Stop hands back at once the claimed tasks
// waiting in a goroutine's batch, while the running one finishes and
// commits.
func TestStopReleasesWaitingBatch(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	w := e.worker(worker.Options{})
	started, finish := make(chan uint64, 3), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		return block(ctx, finish)
	}, worker.QueueOptions{ClaimBatch: 3, Lease: time.Hour})
	var ids []uint64
	for range 3 {
		ids = append(ids, e.enqueue("q", engine.Task{}))
	}
	e.start(w)
	if id := recv(t, started); id != ids[0] {
		t.Fatalf("ran %d first", id)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(bg) }()
	for _, id := range ids[1:] {
		if info := e.waitState("q", id, engine.Ready); info.Attempts != 0 {
			t.Fatalf("the release counted an attempt: %+v", info)
		}
	}
	if info := e.get("q", ids[0]); info.State != engine.InFlight {
		t.Fatalf("the running task: %+v", info)
	}
	close(finish)
	if err := recv(t, stopped); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !e.gone("q", ids[0]) || len(started) != 0 {
		t.Fatalf("running task not completed, or a released task ran (%d)", len(started))
	}
	if st := e.db.Stats(); st.LeaseLost != 0 {
		t.Fatalf("stats %+v", st)
	}
}
