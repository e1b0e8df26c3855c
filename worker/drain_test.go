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

// TestDrainRunsDueTasksSynchronously: Drain runs every task due now through
// the middleware and the handler in the caller's goroutine, follow-ups on
// the queue included, and commits each outcome before it returns; what is
// due later waits for the clock and the next Drain.
func TestDrainRunsDueTasksSynchronously(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	var trail []string // no lock: everything runs in this goroutine
	snoozed := false
	w.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
			trail = append(trail, tk.Kind)
			return next.Work(ctx, tk)
		})
	})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		switch tk.Kind {
		case "chain":
			tk.FollowUp("q", engine.Task{Kind: "ok"})
			tk.SetResult([]byte(`"chained"`))
		case "fail":
			return errors.New("flaky")
		case "snooze":
			if !snoozed {
				snoozed = true
				return worker.Snooze(time.Minute)
			}
		}
		return nil
	}, worker.QueueOptions{})
	fail := e.enqueue("q", engine.Task{Kind: "fail", BackoffBase: time.Second})
	e.enqueue("q", engine.Task{Kind: "chain"})
	later := e.enqueue("q", engine.Task{Kind: "ok", Delay: time.Hour})
	snooze := e.enqueue("q", engine.Task{Kind: "snooze"})

	n, err := w.Drain(bg, ns, "q")
	if err != nil || n != 4 {
		t.Fatalf("Drain = %d, %v; want 4 runs", n, err)
	}
	if got := strings.Join(trail, " "); got != "fail chain snooze ok" {
		t.Fatalf("ran %s", got)
	}
	if c, _ := e.q("q").Counts(bg); c != (engine.Counts{Scheduled: 3}) {
		t.Fatalf("counts after Drain %+v, want the retry, the timer and the snooze scheduled", c)
	}
	if info := e.get("q", fail); info.Attempts != 1 || info.LastError != "flaky" || !info.NotBefore.Equal(t0.Add(time.Second)) {
		t.Fatalf("failed task %+v", info)
	}
	if info := e.get("q", snooze); info.Attempts != 0 || !info.NotBefore.Equal(t0.Add(time.Minute)) {
		t.Fatalf("snoozed task %+v", info)
	}

	trail = nil
	e.clock.Advance(time.Second) // the retry is due, nothing else
	if n, err := w.Drain(bg, ns, "q"); err != nil || n != 1 || strings.Join(trail, " ") != "fail" {
		t.Fatalf("second Drain = %d, %v, ran %v", n, err, trail)
	}
	e.clock.Advance(time.Hour)
	if n, err := w.Drain(bg, ns, "q"); err != nil || n != 3 {
		t.Fatalf("third Drain = %d, %v", n, err)
	}
	if !e.gone("q", later) || !e.gone("q", snooze) {
		t.Fatal("the timer or the snoozed task did not complete")
	}
	if info := e.get("q", fail); info.State != engine.Scheduled || info.Attempts != 3 {
		t.Fatalf("failing task %+v", info)
	}
	// A drained Worker can still start.
	e.start(w)
	e.stop(w)
}

// TestDrainWithAHandler: the package-level Drain runs any handler, a Mux
// here, on a queue.
func TestDrainWithAHandler(t *testing.T) {
	e := newEnv(t)
	mux := worker.NewMux()
	var got []string
	worker.HandleArgs(mux, func(ctx context.Context, j *worker.Job[email]) error {
		got = append(got, j.Args.To)
		return nil
	})
	for _, to := range []string{"ada", "bob"} {
		if _, err := worker.Enqueue(bg, e.q("mail"), email{To: to}, engine.Task{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := worker.Drain(bg, e.q("mail"), mux, worker.Options{Clock: e.clock})
	if err != nil || n != 2 || strings.Join(got, ",") != "ada,bob" {
		t.Fatalf("Drain = %d, %v, handled %v", n, err, got)
	}
	if c, _ := e.q("mail").Counts(bg); c != (engine.Counts{}) {
		t.Fatalf("counts %+v", c)
	}
}

// TestDrainRefuses: what Drain cannot do is an error, and changes nothing.
func TestDrainRefuses(t *testing.T) {
	e := newEnv(t)
	ok := func(context.Context, *worker.Task) error { return nil }
	id := e.enqueue("q", engine.Task{})

	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "q", ok, worker.QueueOptions{})
	if _, err := w.Drain(bg, ns, "other"); err == nil || !strings.Contains(err.Error(), "no handler for queue acme/prod/other") {
		t.Fatalf("Drain of a queue without a handler: %v", err)
	}
	done, cancel := context.WithCancel(bg)
	cancel()
	if n, err := w.Drain(done, ns, "q"); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with an ended context = %d, %v", n, err)
	}
	if _, err := worker.Drain(bg, e.q("q"), nil, worker.Options{}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("Drain of a nil handler: %v", err)
	}
	if _, err := worker.Drain(bg, e.q(""), worker.HandlerFunc(ok), worker.Options{}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("Drain of an unnamed queue: %v", err)
	}
	if info := e.get("q", id); info.State != engine.Ready || info.Attempts != 0 {
		t.Fatalf("a refused Drain touched the task: %+v", info)
	}
	e.start(w)
	if _, err := w.Drain(bg, ns, "q"); !errors.Is(err, worker.ErrStarted) {
		t.Fatalf("Drain of a started Worker: %v", err)
	}
	e.stop(w)

	closed := newEnv(t)
	closed.db.Close()
	if _, err := worker.Drain(bg, closed.q("q"), worker.HandlerFunc(ok), worker.Options{Clock: closed.clock}); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Drain on a closed engine: %v", err)
	}
}

// TestDrainStopsOnMissingPermission: a completion the Worker's caller may
// not commit (a follow-up without the enqueue permission) ends the Drain
// with the error, the task handed back untouched, as it stops a started
// Worker; the Worker itself is not marked failed.
func TestDrainStopsOnMissingPermission(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) {
		o.Authorizer = engine.Policy{"worker": {{Project: "*", Scope: "*", Perms: engine.PermWork}}}
	})
	w := worker.New(e.db.As(engine.Caller{ID: "worker"}), worker.Options{Clock: e.clock, Owner: "w",
		Logger: slog.New(&recHandler{r: e.logs})})
	runs := 0
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		runs++
		tk.FollowUp("next", engine.Task{})
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{})
	n, err := w.Drain(bg, ns, "q")
	if !errors.Is(err, engine.ErrPermission) || n != 1 || runs != 1 {
		t.Fatalf("Drain = %d, %v after %d runs", n, err, runs)
	}
	if info := e.get("q", id); info.State != engine.Ready || info.Attempts != 0 {
		t.Fatalf("the task was not handed back untouched: %+v", info)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("the Worker was marked failed by a Drain: %v", err)
	}
}
