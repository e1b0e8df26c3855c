package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// errNoServer stands for what a network client returns when no server took
// a call, or a call's answer was lost (client.ErrUnavailable,
// client.ErrOutcomeUnknown): an error that wraps none of the engine's
// sentinels.
var errNoServer = errors.New("docket: no server available")

// outageAPI wraps an engine.API: the calls it names fail with errNoServer,
// without reaching the engine, as often as the count says, as they would
// while a server restarts. It hides the engine's LeaseWatcher, as a
// network client does.
type outageAPI struct {
	engine.API
	mu    sync.Mutex
	down  map[string]int // method name → calls still to fail (-1: all)
	calls map[string]int // method name → calls made
}

func newOutage(api engine.API, down map[string]int) *outageAPI {
	return &outageAPI{API: api, down: down, calls: map[string]int{}}
}

// fails counts a call of method and reports whether it fails.
func (o *outageAPI) fails(method string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[method]++
	switch n := o.down[method]; {
	case n < 0:
		return true
	case n > 0:
		o.down[method] = n - 1
		return true
	}
	return false
}

func (o *outageAPI) made(method string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[method]
}

func (o *outageAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return &outageQueue{Queue: o.API.Queue(ns, name), o: o}
}

type outageQueue struct {
	engine.Queue
	o *outageAPI
}

func (q *outageQueue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	if q.o.fails("ClaimWait") {
		return nil, errNoServer
	}
	return q.Queue.ClaimWait(ctx, owner, lease, max)
}

func (q *outageQueue) Complete(ctx context.Context, l engine.Lease, d engine.Done) (engine.TxResult, error) {
	if q.o.fails("Complete") {
		return engine.TxResult{}, fmt.Errorf("%w: connection refused", errNoServer)
	}
	return q.Queue.Complete(ctx, l, d)
}

func (q *outageQueue) CompleteAndClaim(ctx context.Context, l engine.Lease, d engine.Done, owner string, lease time.Duration,
	max int) (engine.TxResult, []engine.Lease, error) {
	if q.o.fails("CompleteAndClaim") {
		return engine.TxResult{}, nil, errNoServer
	}
	return q.Queue.CompleteAndClaim(ctx, l, d, owner, lease, max)
}

func (q *outageQueue) CompleteBatch(ctx context.Context, ls []engine.Lease) ([]error, error) {
	if q.o.fails("CompleteBatch") {
		return nil, errNoServer
	}
	return q.Queue.CompleteBatch(ctx, ls)
}

func (q *outageQueue) Fail(ctx context.Context, l engine.Lease, f engine.Failure) error {
	if q.o.fails("Fail") {
		return errNoServer
	}
	return q.Queue.Fail(ctx, l, f)
}

func (q *outageQueue) Snooze(ctx context.Context, l engine.Lease, d time.Duration) error {
	if q.o.fails("Snooze") {
		return errNoServer
	}
	return q.Queue.Snooze(ctx, l, d)
}

// nthLog waits for the n-th (from 1) log record whose message holds msg.
func (e *env) nthLog(msg string, n int) logRec {
	e.t.Helper()
	var rec logRec
	e.eventually(fmt.Sprintf("log record %d saying %q", n, msg), func() bool {
		e.logs.mu.Lock()
		defer e.logs.mu.Unlock()
		seen := 0
		for _, r := range e.logs.recs {
			if strings.Contains(r.msg, msg) {
				if seen++; seen == n {
					rec = r
					return true
				}
			}
		}
		return false
	})
	return rec
}

// passRetry waits for the n-th "msg; retrying" record, checks that its
// pause lies within the backoff for that try (50 ms doubling, at most 2 s,
// jittered over the upper half), and moves the clock past the pause once
// the runtime waits on it.
func (e *env) passRetry(msg string, n int) {
	e.t.Helper()
	rec := e.nthLog(msg+"; retrying", n)
	d, err := time.ParseDuration(rec.attrs["retry_in"])
	if err != nil {
		e.t.Fatalf("retry %d of %q: retry_in %q: %v", n, msg, rec.attrs["retry_in"], err)
	}
	hi := min(50*time.Millisecond<<(n-1), 2*time.Second)
	if d < hi/2 || d > hi {
		e.t.Fatalf("retry %d of %q waits %v; want within [%v, %v]", n, msg, d, hi/2, hi)
	}
	e.armed(e.clock.Now().Add(d))
	e.clock.Advance(d)
}

// TestClaimKeepsTryingWhileNoServerAnswers: a claim that fails without an
// answer of the engine (a network client during a server's restart) is
// tried again with a growing, jittered pause; the Worker does not stop, and
// runs the queue's tasks once claims work again.
func TestClaimKeepsTryingWhileNoServerAnswers(t *testing.T) {
	e := newEnv(t)
	api := newOutage(e.db, map[string]int{"ClaimWait": 8})
	w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	ran := make(chan uint64, 1)
	w.HandleFunc(ns, "q", func(_ context.Context, tk *worker.Task) error { ran <- tk.ID; return nil },
		worker.QueueOptions{Lease: time.Minute})
	e.start(w)
	defer e.stop(w)
	for n := 1; n <= 8; n++ {
		e.passRetry("claim failed", n)
	}
	if err := w.Err(); err != nil {
		t.Fatalf("the Worker stopped: %v", err)
	}
	id := e.enqueue("q", engine.Task{})
	if got := recv(t, ran); got != id {
		t.Fatalf("ran task %d, want %d", got, id)
	}
	e.eventually("the task completed", func() bool { return e.gone("q", id) })
	if n := api.made("ClaimWait"); n < 9 {
		t.Fatalf("%d claims", n)
	}
}

// TestOutcomeCommittedAcrossAnOutage: the commit of an outcome that fails
// without an answer of the engine is made again, with backoff, until the
// engine answers, so that the work is not given up (nor the attempt
// failed) because a server was restarting. A completion that would have
// claimed the next task (CompleteAndClaim) and got no answer is committed
// alone, retried as the others.
func TestOutcomeCommittedAcrossAnOutage(t *testing.T) {
	done := func(t *testing.T, e *env, id uint64) {
		e.eventually("completed", func() bool { return e.gone("q", id) })
	}
	cases := []struct {
		name    string
		method  string
		down    map[string]int // default: method fails 4 times
		retries int            // of method, after the tries that failed
		ret     error
		batch   int // ClaimBatch; with more than 1, two tasks are claimed together
		want    func(t *testing.T, e *env, id uint64)
	}{
		{"complete", "Complete", map[string]int{"CompleteAndClaim": 1, "Complete": 4}, 4, nil, 1, done},
		{"complete and claim", "CompleteAndClaim", map[string]int{"CompleteAndClaim": 1}, 0, nil, 1, done},
		{"complete batch", "CompleteBatch", nil, 4, nil, 3, func(t *testing.T, e *env, id uint64) {
			e.eventually("completed", func() bool { return e.gone("q", id) && e.gone("q", id+1) })
		}},
		{"fail", "Fail", nil, 4, errors.New("smtp 451"), 1, func(t *testing.T, e *env, id uint64) {
			if info := e.waitState("q", id, engine.Scheduled); info.Attempts != 1 || info.LastError != "smtp 451" {
				t.Fatalf("%+v", info)
			}
		}},
		{"snooze", "Snooze", nil, 4, worker.Snooze(time.Hour), 1, func(t *testing.T, e *env, id uint64) {
			if info := e.waitState("q", id, engine.Scheduled); info.Attempts != 0 || info.LastError != "" {
				t.Fatalf("%+v", info)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			down := c.down
			if down == nil {
				down = map[string]int{c.method: 4}
			}
			api := newOutage(e.db, down)
			w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
			runs := 0
			var mu sync.Mutex
			w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error {
				mu.Lock()
				runs++
				mu.Unlock()
				return c.ret
			}, worker.QueueOptions{Lease: time.Minute, ClaimBatch: c.batch})
			id := e.enqueue("q", engine.Task{BackoffBase: time.Hour})
			if c.batch > 1 {
				e.enqueue("q", engine.Task{})
			}
			e.start(w)
			defer e.stop(w)
			for n := 1; n <= c.retries; n++ {
				e.passRetry("failed", n)
			}
			c.want(t, e, id)
			mu.Lock()
			defer mu.Unlock()
			if want := min(c.batch, 2); runs != want {
				t.Fatalf("%d handler runs, want %d", runs, want)
			}
			if n, want := api.made(c.method), c.retries+1; n != want {
				t.Fatalf("%s made %d times; want %d: the failed tries and the one that worked", c.method, n, want)
			}
			if c.method == "CompleteAndClaim" {
				// Not made again: the completion alone is.
				if _, found := e.logs.find("committing the completion alone"); !found || api.made("Complete") != 1 {
					t.Fatalf("after a CompleteAndClaim without an answer: Complete made %d times", api.made("Complete"))
				}
			}
			if err := w.Err(); err != nil {
				t.Fatalf("the Worker stopped: %v", err)
			}
			if _, found := e.logs.find("failing the attempt"); found {
				t.Fatal("the outcome was recorded as a failed attempt instead of being committed again")
			}
		})
	}
}

// TestStopEndsCommitRetries: retries of a commit that gets no answer end
// when Stop's context does; the task stays leased (it comes back when the
// lease expires) and the log says so.
func TestStopEndsCommitRetries(t *testing.T) {
	e := newEnv(t)
	api := newOutage(e.db, map[string]int{"CompleteAndClaim": -1, "Complete": -1})
	w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{Lease: time.Minute})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	e.passRetry("completing failed", 1)
	e.nthLog("completing failed; retrying", 2)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v", err)
	}
	if _, ok := e.logs.find("completion not committed"); !ok {
		t.Fatal("the log does not say the completion was not committed")
	}
	if info := e.get("q", id); info.State != engine.InFlight || info.Attempts != 1 {
		t.Fatalf("%+v", info)
	}
}
