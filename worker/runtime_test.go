package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// hookedAPI wraps an engine.API to refuse or watch some calls. It hides the
// engine's LeaseWatcher, as a network client without one would.
type hookedAPI struct {
	engine.API
	snooze     func(d time.Duration) error // a non-nil error refuses the snooze
	claimEnded chan struct{}               // told when a ClaimWait returns after its ctx ended
}

func (h *hookedAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return &hookedQueue{Queue: h.API.Queue(ns, name), h: h}
}

type hookedQueue struct {
	engine.Queue
	h *hookedAPI
}

func (q *hookedQueue) Snooze(ctx context.Context, l engine.Lease, d time.Duration) error {
	if q.h.snooze != nil {
		if err := q.h.snooze(d); err != nil {
			return err
		}
	}
	return q.Queue.Snooze(ctx, l, d)
}

func (q *hookedQueue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	ls, err := q.Queue.ClaimWait(ctx, owner, lease, max)
	if ctx.Err() != nil && q.h.claimEnded != nil {
		q.h.claimEnded <- struct{}{}
	}
	return ls, err
}

// TestSnoozeBeyondTheLimitIsClamped: Snooze and RetryAfter longer than the
// engine accepts wait engine.MaxDuration; the task does not sit in flight
// until its lease expires, the snooze uses no attempt, and RetryAfter keeps
// the handler's error.
func TestSnoozeBeyondTheLimitIsClamped(t *testing.T) {
	const forever = 200 * 365 * 24 * time.Hour
	cases := []struct {
		name     string
		ret      error
		attempts int
		lastErr  string
	}{
		{"snooze", worker.Snooze(forever), 0, ""},
		{"retry after", worker.RetryAfter(forever, errors.New("rate limited")), 1, "rate limited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			w := e.worker(worker.Options{})
			w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return c.ret },
				worker.QueueOptions{Lease: time.Minute})
			id := e.enqueue("q", engine.Task{})
			e.start(w)
			info := e.waitState("q", id, engine.Scheduled)
			if info.Attempts != c.attempts || info.LastError != c.lastErr ||
				!info.NotBefore.Equal(t0.Add(engine.MaxDuration)) {
				t.Fatalf("%+v", info)
			}
			e.logs.mu.Lock()
			defer e.logs.mu.Unlock()
			for _, r := range e.logs.recs {
				if r.level >= slog.LevelError {
					t.Fatalf("logged an error: %+v", r)
				}
			}
		})
	}
}

// TestRefusedOutcomeReleasesTheLease: when the engine refuses to record an
// outcome (here a snooze), the runtime fails the attempt at once with both
// reasons instead of leaving the task in flight until its lease expires.
func TestRefusedOutcomeReleasesTheLease(t *testing.T) {
	e := newEnv(t)
	api := &hookedAPI{API: e.db, snooze: func(d time.Duration) error {
		if d > 0 {
			return fmt.Errorf("%w: snooze refused by the test", engine.ErrInvalid)
		}
		return nil
	}}
	w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return worker.Snooze(time.Hour) },
		worker.QueueOptions{Lease: time.Minute})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	defer e.stop(w)
	info := e.waitState("q", id, engine.Scheduled) // no clock moved: the lease did not expire
	if info.Attempts != 1 || !strings.Contains(info.LastError, "snooze refused by the test") ||
		!strings.Contains(info.LastError, "snoozed for 1h") {
		t.Fatalf("%+v", info)
	}
}

// TestUnknownKindRetries: a Mux retries a task of a kind it has no handler
// for (a rolling deploy), with backoff; NotFound can dead-letter instead.
func TestUnknownKindRetries(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	mux := worker.NewMux()
	mux.HandleFunc("known", func(context.Context, *worker.Task) error { return nil })
	w.Handle(ns, "q", mux, worker.QueueOptions{})
	strict := worker.NewMux()
	strict.NotFound(worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
		return worker.Permanent(fmt.Errorf("unknown kind %q", tk.Kind))
	}))
	w.Handle(ns, "strict", strict, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{Kind: "new-kind", BackoffBase: time.Second})
	sid := e.enqueue("strict", engine.Task{Kind: "new-kind"})
	e.start(w)
	info := e.waitState("q", id, engine.Scheduled)
	if info.Attempts != 1 || !strings.Contains(info.LastError, `no handler for task kind "new-kind"`) ||
		!info.NotBefore.Equal(t0.Add(time.Second)) {
		t.Fatalf("%+v", info)
	}
	if info := e.waitState("strict", sid, engine.Dead); info.LastError != `unknown kind "new-kind"` {
		t.Fatalf("%+v", info)
	}
}

// TestDefaultLoggerShowsFailures: with the default logger, a failed
// attempt is logged as a warning and a panic as an error.
func TestDefaultLoggerShowsFailures(t *testing.T) {
	rec := &logRecorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(&recHandler{r: rec}))
	defer slog.SetDefault(old)
	e := newEnv(t)
	w := worker.New(e.db, worker.Options{Clock: e.clock, Owner: "w"})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		tk.Logger().Info("below the default level")
		if tk.Attempt == 1 {
			return errors.New("plain failure")
		}
		panic("loud")
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{BackoffBase: time.Second})
	e.start(w)
	e.waitState("q", id, engine.Scheduled)
	e.armed(t0.Add(time.Second))
	e.clock.Advance(time.Second)
	e.eventually("second failure", func() bool {
		info := e.get("q", id)
		return info.Attempts == 2 && info.State == engine.Scheduled
	})
	e.stop(w)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.recs) != 2 ||
		rec.recs[0].level != slog.LevelWarn || rec.recs[0].attrs["outcome"] != "failed" || rec.recs[0].attrs["err"] != "plain failure" ||
		rec.recs[1].level != slog.LevelError || rec.recs[1].attrs["outcome"] != "panicked" {
		t.Fatalf("default logger passed %+v", rec.recs)
	}
}

// TestMissingPermissionStopsTheWorker: a Worker whose caller may work the
// queue but not enqueue the follow-ups its handler records runs the handler
// once, hands the task back untouched and stops: Run returns the
// permission error, rather than burning the task's attempts.
func TestMissingPermissionStopsTheWorker(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) {
		o.Authorizer = engine.Policy{"worker": {{Project: "*", Scope: "*", Perms: engine.PermWork}}}
	})
	w := worker.New(e.db.As(engine.Caller{ID: "worker"}), worker.Options{Clock: e.clock, Owner: "w",
		Logger: slog.New(&recHandler{r: e.logs})})
	runs := make(chan int, 10)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		runs <- tk.Attempt
		tk.FollowUp("next", engine.Task{})
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{})
	err := w.Run(bg)
	if !errors.Is(err, engine.ErrPermission) || !strings.Contains(err.Error(), "lacks a permission") {
		t.Fatalf("run: %v", err)
	}
	if len(runs) != 1 {
		t.Fatalf("the handler ran %d times", len(runs))
	}
	if info := e.get("q", id); info.State != engine.Ready || info.Attempts != 0 {
		t.Fatalf("the task was not handed back untouched: %+v", info)
	}
	if !errors.Is(w.Err(), engine.ErrPermission) {
		t.Fatalf("Err: %v", w.Err())
	}
}

// TestRunReturnsTheEngineError: when the engine is closed under a running
// Worker, Run returns ErrClosed instead of running on doing nothing.
func TestRunReturnsTheEngineError(t *testing.T) {
	defer verifyNoLeaks(t)
	e := newEnv(t)
	api := &hookedAPI{API: e.db, claimEnded: make(chan struct{}, 1)}
	w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	ran := make(chan struct{})
	w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { close(ran); return nil }, worker.QueueOptions{})
	e.enqueue("q", engine.Task{})
	done := make(chan error, 1)
	go func() { done <- w.Run(bg) }()
	recv(t, ran) // the Worker is running
	e.db.Close()
	if err := recv(t, done); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("run: %v", err)
	}
	if _, ok := e.logs.find("worker stopping"); !ok {
		t.Fatal("no error log")
	}
}

// TestStartRefusesInvalidNames: a queue, namespace or owner name the engine
// would refuse at every claim is reported by Start, which starts nothing.
func TestStartRefusesInvalidNames(t *testing.T) {
	noop := func(context.Context, *worker.Task) error { return nil }
	cases := []struct {
		name  string
		setup func(w *worker.Worker)
		owner string
		want  string
	}{
		{"empty queue", func(w *worker.Worker) { w.HandleFunc(ns, "", noop, worker.QueueOptions{}) }, "", "queue name"},
		{"long queue", func(w *worker.Worker) {
			w.HandleFunc(ns, strings.Repeat("q", engine.MaxNameBytes+1), noop, worker.QueueOptions{})
		}, "", "over the limit"},
		{"bad namespace", func(w *worker.Worker) {
			w.HandleFunc(engine.NS("acme", ""), "q", noop, worker.QueueOptions{})
		}, "", "namespace scope"},
		{"NUL owner", func(w *worker.Worker) { w.HandleFunc(ns, "q", noop, worker.QueueOptions{}) }, "w\x00", "owner"},
		{"periodic queue", func(w *worker.Worker) {
			if err := w.Periodic(ns, "bad\xff", "@hourly", engine.Task{Kind: "k"}); err != nil {
				t.Fatal(err)
			}
		}, "", "UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			w := e.worker(worker.Options{Owner: c.owner})
			c.setup(w)
			err := w.Start(bg)
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("start: %v", err)
			}
			if st := e.db.Stats(); st.Commits != 0 {
				t.Fatalf("something ran: %+v", st)
			}
		})
	}
}

// TestTimeoutOnAnyClock: with a manual clock, a handler's context has the
// timeout as its Deadline, and once the clock passes it, ctx.Err() (and
// that of a context derived from it) is context.DeadlineExceeded. A
// handler that returns nil after its timeout has finished its work: the
// task completes.
func TestTimeoutOnAnyClock(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	type seen struct {
		deadline        time.Time
		ok              bool
		err, derivedErr error
	}
	got := make(chan seen, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		d, ok := ctx.Deadline()
		derived, cancel := context.WithCancel(ctx)
		defer cancel()
		<-derived.Done()
		got <- seen{d, ok, ctx.Err(), derived.Err()}
		return nil // the work is done, late
	}, worker.QueueOptions{Timeout: 5 * time.Second, Lease: time.Minute})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	e.armed(t0.Add(5 * time.Second))
	e.clock.Advance(5 * time.Second)
	s := recv(t, got)
	if !s.ok || !s.deadline.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("deadline %v %v", s.deadline, s.ok)
	}
	if s.err != context.DeadlineExceeded || s.derivedErr != context.DeadlineExceeded {
		t.Fatalf("errors %v, derived %v", s.err, s.derivedErr)
	}
	e.eventually("completion", func() bool { return e.gone("q", id) })
}
