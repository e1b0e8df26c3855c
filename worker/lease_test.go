package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

func TestHeartbeatKeepsLeaseAlive(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	started, release := make(chan *worker.Task), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk
		return block(ctx, release)
	}, worker.QueueOptions{Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	tk := recv(t, started)
	if !tk.Deadline().Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("first deadline %v", tk.Deadline())
	}
	// Run for five lease lengths; each heartbeat moves the deadline on.
	for i := 1; i <= 15; i++ {
		e.clock.Advance(10 * time.Second)
		want := t0.Add(time.Duration(i)*10*time.Second + 30*time.Second)
		e.eventually("heartbeat", func() bool { return e.get("q", id).LeaseUntil.Equal(want) })
		if ls, err := e.q("q").Claim(bg, "intruder", time.Minute, 1); err != nil || len(ls) != 0 {
			t.Fatalf("a live task was claimed by another owner: %v %+v", err, ls)
		}
	}
	close(release)
	e.eventually("completion", func() bool { return e.gone("q", id) })
	// The task's own deadline is read once it completed: the last
	// heartbeat records it after its commit, which the loop above saw,
	// and the task's end waits for a heartbeat under way.
	if !tk.Deadline().Equal(t0.Add(180 * time.Second)) {
		t.Fatalf("task deadline %v", tk.Deadline())
	}
}

// TestLeaseLostCancelsHandler: the process stalls past its lease (the
// engine's clock moves, the worker's does not), another owner claims the
// task, and the next heartbeat finds the lease lost.
func TestLeaseLostCancelsHandler(t *testing.T) {
	e := newEnv(t)
	wclock := engine.NewManualClock(t0)
	w := e.worker(worker.Options{Clock: wclock})
	started := make(chan struct{})
	causes := make(chan error, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		// The late result a zombie would commit.
		tk.AddOps(engine.Set("zombie", []byte("1")))
		tk.FollowUp("next", engine.Task{})
		return nil
	}, worker.QueueOptions{Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)

	e.clock.Advance(31 * time.Second)
	ls, err := e.q("q").Claim(bg, "intruder", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != id || ls[0].Attempt != 2 {
		t.Fatalf("intruder claim: %v %+v", err, ls)
	}
	wclock.Advance(10 * time.Second) // the stalled worker's next heartbeat

	cause := recv(t, causes)
	if !errors.Is(cause, engine.ErrLeaseLost) {
		t.Fatalf("cause %v", cause)
	}
	e.eventually("warning", func() bool { _, ok := e.logs.find("lease lost"); return ok })
	e.stop(w) // the handler's outcome is fully processed
	info := e.get("q", id)
	if info.State != engine.InFlight || info.Owner != "intruder" || info.Token != ls[0].Token {
		t.Fatalf("the new owner's lease was disturbed: %+v", info)
	}
	if _, err := e.db.KV(ns).Get(bg, "zombie"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the zombie's ops were committed: %v", err)
	}
	if n, _ := e.q("next").Counts(bg); n.Ready != 0 {
		t.Fatalf("the zombie's follow-up was enqueued")
	}
	if st := e.db.Stats(); st.LeaseLost != 1 || st.Completed != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := e.q("q").Complete(bg, ls[0], engine.Done{}); err != nil {
		t.Fatalf("the new owner cannot complete: %v", err)
	}
}

// TestLateCompletionRefused: the handler finishes after its lease was taken
// over but before any heartbeat noticed; the engine's fencing refuses the
// completion and nothing of it is applied.
func TestLateCompletionRefused(t *testing.T) {
	e := newEnv(t)
	wclock := engine.NewManualClock(t0) // never advanced: no heartbeat runs
	w := e.worker(worker.Options{Clock: wclock})
	started, finish := make(chan struct{}), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		if err := block(ctx, finish); err != nil {
			return err
		}
		tk.AddOps(engine.Set("zombie", []byte("1")))
		tk.FollowUp("next", engine.Task{})
		return nil
	}, worker.QueueOptions{Lease: 30 * time.Second})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)
	e.clock.Advance(31 * time.Second)
	ls, err := e.q("q").Claim(bg, "intruder", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("intruder claim: %v %+v", err, ls)
	}
	close(finish)
	e.eventually("refusal", func() bool { return e.db.Stats().LeaseLost == 1 })
	e.stop(w)
	if rec, ok := e.logs.find("completion refused"); !ok || rec.attrs["task_id"] == "" {
		t.Fatalf("no warning about the refused completion: %+v", e.logs.recs)
	}
	info := e.get("q", id)
	if info.State != engine.InFlight || info.Owner != "intruder" {
		t.Fatalf("%+v", info)
	}
	if _, err := e.db.KV(ns).Get(bg, "zombie"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the refused completion's ops were applied: %v", err)
	}
	if n, _ := e.q("next").Counts(bg); n.Ready != 0 {
		t.Fatalf("the refused completion's follow-up was enqueued")
	}
}

// TestCancelledTaskStopsHandler: Cancel removes a running task; the next
// heartbeat cancels its handler.
func TestCancelledTaskStopsHandler(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	started := make(chan struct{})
	causes := make(chan error, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, worker.QueueOptions{Lease: 30 * time.Second})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)
	if err := e.q("q").Cancel(bg, id); err != nil {
		t.Fatal(err)
	}
	// No time passes: the engine tells the Worker, in process, at once.
	if cause := recv(t, causes); !errors.Is(cause, engine.ErrLeaseLost) {
		t.Fatalf("cause %v", cause)
	}
}

func TestProgressRecordedAndResumed(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	seen := make(chan string, 2)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		seen <- string(tk.LastProgress)
		if tk.Attempt == 1 {
			if err := tk.Progress(ctx, []byte(`{"done":40}`)); err != nil {
				return err
			}
			return errors.New("crashed at 40%")
		}
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{BackoffBase: time.Second})
	e.start(w)
	if p := recv(t, seen); p != "" {
		t.Fatalf("first attempt saw progress %q", p)
	}
	e.waitState("q", id, engine.Scheduled)
	e.armed(t0.Add(time.Second))
	e.clock.Advance(time.Second)
	if p := recv(t, seen); p != `{"done":40}` {
		t.Fatalf("second attempt saw progress %q", p)
	}
}

func TestProgressAfterLeaseLost(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{Clock: engine.NewManualClock(t0)})
	started, next := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		if err := block(ctx, next); err != nil {
			return err
		}
		err := tk.Progress(ctx, []byte(`1`))
		errs <- err
		if ctx.Err() == nil {
			t.Error("context not cancelled after Progress found the lease lost")
		}
		return err
	}, worker.QueueOptions{Lease: 30 * time.Second})
	e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)
	e.clock.Advance(31 * time.Second)
	if ls, _ := e.q("q").Claim(bg, "intruder", time.Minute, 1); len(ls) != 1 {
		t.Fatal("intruder got nothing")
	}
	close(next)
	if err := recv(t, errs); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("progress: %v", err)
	}
}

// TestLeaseLostWhileWaitingInBatch: a task cancelled while it waits in a
// batch is found lost by the heartbeat and never run.
func TestLeaseLostWhileWaitingInBatch(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	started, finish := make(chan uint64, 2), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		return block(ctx, finish)
	}, worker.QueueOptions{ClaimBatch: 2, Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	first := e.enqueue("q", engine.Task{})
	second := e.enqueue("q", engine.Task{})
	e.start(w)
	if id := recv(t, started); id != first {
		t.Fatalf("ran %d first", id)
	}
	if err := e.q("q").Cancel(bg, second); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	e.eventually("warning", func() bool { _, ok := e.logs.find("lease lost before the handler started"); return ok })
	close(finish)
	e.eventually("completion", func() bool { return e.gone("q", first) })
	e.stop(w)
	if len(started) != 0 {
		t.Fatal("the cancelled task ran")
	}
}
