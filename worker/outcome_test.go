package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

func TestCompleteCommitsResultOpsAndFollowUps(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) { o.RetainCompleted = time.Hour })
	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "orders", func(ctx context.Context, tk *worker.Task) error {
		var in struct{ N int }
		if err := tk.Unmarshal(&in); err != nil {
			return worker.Permanent(err)
		}
		if tk.Attempt != 1 || tk.Owner != "w1" || tk.Queue != "orders" || tk.Namespace != ns {
			t.Errorf("task fields: %+v", tk)
		}
		tk.SetResult([]byte(`{"ok":true}`))
		tk.AddOps(engine.Set("order/7", []byte("paid")))
		tk.FollowUp("emails", engine.Task{Kind: "receipt", Payload: []byte(`{"order":7}`)})
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("orders", engine.Task{Payload: []byte(`{"N":7}`)})
	e.start(w)

	info := e.waitState("orders", id, engine.Completed)
	if string(info.Result) != `{"ok":true}` {
		t.Fatalf("result %q", info.Result)
	}
	if v, err := e.db.KV(ns).Get(bg, "order/7"); err != nil || string(v.Value) != "paid" {
		t.Fatalf("kv op not applied: %v %q", err, v.Value)
	}
	page, err := e.q("emails").List(bg, engine.ListOptions{State: engine.Ready})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].Kind != "receipt" {
		t.Fatalf("follow-up: %v %+v", err, page.Tasks)
	}
}

func TestErrorRetriesWithBackoff(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	attempts := make(chan int, 10)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		attempts <- tk.Attempt
		if tk.Attempt < 3 {
			return errors.New("flaky")
		}
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{BackoffBase: time.Second, BackoffMax: time.Minute})
	e.start(w)

	if a := recv(t, attempts); a != 1 {
		t.Fatalf("attempt %d", a)
	}
	info := e.waitState("q", id, engine.Scheduled)
	if info.LastError != "flaky" || info.Attempts != 1 || !info.NotBefore.Equal(t0.Add(time.Second)) {
		t.Fatalf("after attempt 1: %+v", info)
	}
	e.armed(t0.Add(time.Second)) // the claim waits for the retry
	e.clock.Advance(time.Second)
	if a := recv(t, attempts); a != 2 {
		t.Fatalf("attempt %d", a)
	}
	info = e.waitState("q", id, engine.Scheduled)
	if info.Attempts != 2 || !info.NotBefore.Equal(t0.Add(3*time.Second)) { // 1 s, then 2 s of backoff
		t.Fatalf("after attempt 2: %+v", info)
	}
	e.armed(t0.Add(3 * time.Second))
	e.waitParked("q", 1)
	parks, _ := e.db.Parks()
	e.clock.Advance(time.Second)
	// A timer that fires inside Advance wakes the parked claim before
	// Advance returns: it is still parked, and has not parked again.
	n, _ := e.db.Parked(ns, "q")
	if again, _ := e.db.Parks(); n != 1 || again != parks {
		t.Fatalf("the claim woke before the backoff ended: %d parked, %d parks after %d", n, again, parks)
	}
	select {
	case a := <-attempts:
		t.Fatalf("attempt %d ran before its backoff ended", a)
	default:
	}
	e.clock.Advance(time.Second)
	if a := recv(t, attempts); a != 3 {
		t.Fatalf("attempt %d", a)
	}
	e.eventually("completion", func() bool { return e.gone("q", id) })
}

func TestFailureOutcomes(t *testing.T) {
	cases := []struct {
		name  string
		ret   func(ctx context.Context) error
		check func(t *testing.T, info engine.TaskInfo)
	}{
		{"permanent", func(context.Context) error { return worker.Permanent(errors.New("bad input")) },
			func(t *testing.T, i engine.TaskInfo) {
				if i.State != engine.Dead || i.Attempts != 1 || i.LastError != "bad input" {
					t.Fatalf("%+v", i)
				}
			}},
		{"wrapped permanent", func(context.Context) error {
			return errorsJoin(worker.Permanent(errors.New("deep")))
		}, func(t *testing.T, i engine.TaskInfo) {
			if i.State != engine.Dead {
				t.Fatalf("%+v", i)
			}
		}},
		{"retry after", func(context.Context) error { return worker.RetryAfter(7*time.Second, errors.New("429")) },
			func(t *testing.T, i engine.TaskInfo) {
				if i.State != engine.Scheduled || !i.NotBefore.Equal(t0.Add(7*time.Second)) || i.LastError != "429" || i.Attempts != 1 {
					t.Fatalf("%+v", i)
				}
			}},
		{"snooze", func(context.Context) error { return worker.Snooze(time.Minute) },
			func(t *testing.T, i engine.TaskInfo) {
				if i.State != engine.Scheduled || !i.NotBefore.Equal(t0.Add(time.Minute)) || i.Attempts != 0 || i.LastError != "" {
					t.Fatalf("%+v", i)
				}
			}},
		{"panic", func(context.Context) error { panic("boom") },
			func(t *testing.T, i engine.TaskInfo) {
				if i.State != engine.Scheduled || !strings.HasPrefix(i.LastError, "panic: boom") ||
					!strings.Contains(i.LastError, "TestFailureOutcomes") || !strings.Contains(i.LastError, "goroutine") {
					t.Fatalf("%+v", i)
				}
			}},
		{"last attempt", func(context.Context) error { return errors.New("again") },
			func(t *testing.T, i engine.TaskInfo) {
				if i.State != engine.Dead || i.LastError != "again" {
					t.Fatalf("%+v", i)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			w := e.worker(worker.Options{})
			ran := make(chan struct{}, 1)
			w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
				ran <- struct{}{}
				tk.AddOps(engine.Set("must-not-exist", []byte("x")))
				return tc.ret(ctx)
			}, worker.QueueOptions{})
			max := 0
			if tc.name == "last attempt" {
				max = 1
			}
			id := e.enqueue("q", engine.Task{MaxAttempts: max})
			e.start(w)
			recv(t, ran)
			var info engine.TaskInfo
			e.eventually("outcome", func() bool {
				info = e.get("q", id)
				return info.State != engine.InFlight
			})
			tc.check(t, info)
			if _, err := e.db.KV(ns).Get(bg, "must-not-exist"); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("ops of a failed attempt were applied: %v", err)
			}
		})
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func errorsJoin(err error) error { return wrapped{err} }

func TestTimeoutCancelsHandler(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	started := make(chan struct{})
	causes := make(chan error, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, worker.QueueOptions{Timeout: 5 * time.Second, Lease: time.Minute})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	recv(t, started)
	e.clock.Advance(4 * time.Second)
	e.armed(t0.Add(5 * time.Second)) // the timeout has not fired
	select {
	case <-causes:
		t.Fatal("cancelled before the timeout")
	default:
	}
	e.clock.Advance(time.Second)
	cause := recv(t, causes)
	if !errors.Is(cause, worker.ErrTimeout) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Fatalf("cause %v", cause)
	}
	info := e.waitState("q", id, engine.Scheduled)
	if !strings.Contains(info.LastError, "timed out after 5s") || info.Attempts != 1 {
		t.Fatalf("%+v", info)
	}
}

func TestTimeoutWithSystemClock(t *testing.T) {
	e := newEnv(t, func(o *engine.Options) { o.Clock = nil })
	db := e.db
	w := worker.New(db, worker.Options{Owner: "sys"})
	deadlines := make(chan bool, 1)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		_, ok := ctx.Deadline()
		deadlines <- ok
		<-ctx.Done()
		return ctx.Err()
	}, worker.QueueOptions{Timeout: 10 * time.Millisecond})
	res, _ := db.Queue(ns, "q").Enqueue(bg, engine.Task{})
	if err := w.Start(bg); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(bg)
	if !recv(t, deadlines) {
		t.Fatal("the handler's context has no deadline")
	}
	e.eventually("timed-out failure", func() bool {
		info, _ := db.Queue(ns, "q").Get(bg, res.ID)
		return info.State == engine.Scheduled && strings.Contains(info.LastError, "timed out")
	})
}

func TestCompletionConflictFailsAttempt(t *testing.T) {
	e := newEnv(t)
	if _, err := e.db.KV(ns).Commit(bg, engine.Set("seat/1", []byte("taken"))); err != nil {
		t.Fatal(err)
	}
	w := e.worker(worker.Options{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		tk.AddOps(engine.IfAbsent("seat/1"), engine.Set("seat/1", []byte("mine")))
		tk.FollowUp("next", engine.Task{})
		return nil
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	info := e.waitState("q", id, engine.Scheduled)
	if !strings.Contains(info.LastError, "completion refused") || !strings.Contains(info.LastError, "conflict") {
		t.Fatalf("%+v", info)
	}
	if n, _ := e.q("next").Counts(bg); n.Ready != 0 {
		t.Fatalf("follow-up of a refused completion was enqueued: %+v", n)
	}
}

func TestOutcomeOf(t *testing.T) {
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(bg)
		cancel(cause)
		return ctx
	}
	lost := cancelled(errorsJoin(engine.ErrLeaseLost))
	cases := []struct {
		ctx  context.Context
		err  error
		want worker.Outcome
	}{
		{bg, nil, worker.OutcomeCompleted},
		{bg, errors.New("x"), worker.OutcomeFailed},
		{lost, nil, worker.OutcomeLeaseLost},
		{lost, errors.New("x"), worker.OutcomeLeaseLost},
		{cancelled(worker.ErrShutdown), context.Canceled, worker.OutcomeShutdown},
		{cancelled(worker.ErrShutdown), nil, worker.OutcomeCompleted},
		{cancelled(worker.ErrTimeout), context.Canceled, worker.OutcomeTimedOut},
		{cancelled(worker.ErrTimeout), worker.Permanent(context.Canceled), worker.OutcomePermanent},
		{bg, worker.Snooze(time.Second), worker.OutcomeSnoozed},
		{bg, worker.RetryAfter(time.Second, nil), worker.OutcomeRetryAfter},
		{bg, &worker.PanicError{Value: 1}, worker.OutcomePanicked},
	}
	for _, tc := range cases {
		if got := worker.OutcomeOf(tc.ctx, tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v, %v) = %v, want %v", context.Cause(tc.ctx), tc.err, got, tc.want)
		}
	}
	if worker.Permanent(nil) != nil {
		t.Error("Permanent(nil) is not nil")
	}
}
