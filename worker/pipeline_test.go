package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// countingAPI counts the calls a Worker makes on its queues. It hides the
// engine's LeaseWatcher, as a network client without one would, so that
// only the calls counted here reach the engine.
type countingAPI struct {
	engine.API
	claimWaits, completes, completeClaims, heartbeats, heartbeatBatches atomic.Int32
}

func (a *countingAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return &countingQueue{Queue: a.API.Queue(ns, name), a: a}
}

type countingQueue struct {
	engine.Queue
	a *countingAPI
}

func (q *countingQueue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	q.a.claimWaits.Add(1)
	return q.Queue.ClaimWait(ctx, owner, lease, max)
}

func (q *countingQueue) Complete(ctx context.Context, l engine.Lease, d engine.Done) (engine.TxResult, error) {
	q.a.completes.Add(1)
	return q.Queue.Complete(ctx, l, d)
}

func (q *countingQueue) CompleteAndClaim(ctx context.Context, l engine.Lease, d engine.Done, owner string, lease time.Duration, max int) (engine.TxResult, []engine.Lease, error) {
	q.a.completeClaims.Add(1)
	return q.Queue.CompleteAndClaim(ctx, l, d, owner, lease, max)
}

func (q *countingQueue) Heartbeat(ctx context.Context, l *engine.Lease, extend time.Duration, progress []byte) error {
	q.a.heartbeats.Add(1)
	return q.Queue.Heartbeat(ctx, l, extend, progress)
}

func (q *countingQueue) HeartbeatBatch(ctx context.Context, ls []*engine.Lease, extend time.Duration) ([]error, error) {
	q.a.heartbeatBatches.Add(1)
	return q.Queue.HeartbeatBatch(ctx, ls, extend)
}

func (e *env) countingWorker() (*worker.Worker, *countingAPI) {
	api := &countingAPI{API: e.db}
	w := worker.New(api, worker.Options{Clock: e.clock, Owner: "w", Logger: slog.New(&recHandler{r: e.logs})})
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w, api
}

// TestSlotTakesTheNextTaskWithItsCompletion: a slot draining a queue
// commits each completion together with the claim of the next task: one
// blocking claim to start, one CompleteAndClaim per task, and a blocking
// claim again once one finds the queue empty.
func TestSlotTakesTheNextTaskWithItsCompletion(t *testing.T) {
	e := newEnv(t)
	w, api := e.countingWorker()
	var order []uint64
	w.HandleFunc(ns, "q", func(_ context.Context, tk *worker.Task) error {
		order = append(order, tk.ID) // one slot: one handler at a time
		return nil
	}, worker.QueueOptions{})
	var ids []uint64
	for range 5 {
		ids = append(ids, e.enqueue("q", engine.Task{}))
	}
	commits := e.db.Stats().Commits
	e.start(w)
	e.waitParked("q", 1)
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
	e.stop(w)
	if n := api.completeClaims.Load(); n != 5 {
		t.Fatalf("%d CompleteAndClaim calls, want 5", n)
	}
	if c, cw := api.completes.Load(), api.claimWaits.Load(); c != 0 || cw != 2 {
		t.Fatalf("%d Complete and %d ClaimWait calls, want 0 and 2", c, cw)
	}
	if d := e.db.Stats().Commits - commits; d != 6 {
		t.Fatalf("%d commits for 5 tasks, want 6: one claim, then one per task", d)
	}
	for i, id := range ids {
		if order[i] != id {
			t.Fatalf("ran %v, want %v", order, ids)
		}
	}
}

// TestCompleteAndClaimOnALostLease: a completion refused because the lease
// was lost (the task was cancelled while its handler ran) claims nothing;
// the slot goes back to a blocking claim and runs the next task.
func TestCompleteAndClaimOnALostLease(t *testing.T) {
	e := newEnv(t)
	w, api := e.countingWorker()
	started, release := make(chan uint64, 2), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		if tk.Kind == "slow" {
			return block(ctx, release)
		}
		return nil
	}, worker.QueueOptions{})
	first := e.enqueue("q", engine.Task{Kind: "slow"})
	second := e.enqueue("q", engine.Task{})
	e.start(w)
	if id := recv(t, started); id != first {
		t.Fatalf("ran %d first", id)
	}
	if err := e.q("q").Cancel(bg, first); err != nil {
		t.Fatal(err)
	}
	close(release)
	if id := recv(t, started); id != second {
		t.Fatalf("ran %d second, want %d", id, second)
	}
	e.eventually("the second completed", func() bool { return e.gone("q", second) })
	if _, ok := e.logs.find("the lease was lost"); !ok {
		t.Fatal("no log of the refused completion")
	}
	if st := e.db.Stats(); st.LeaseLost != 1 || st.Completed != 1 {
		t.Fatalf("stats %+v", st)
	}
	if n := api.claimWaits.Load(); n < 2 {
		t.Fatalf("%d blocking claims: the refused completion must not have claimed", n)
	}
}

// TestBatchHeartbeatIsOneCommit: a slot holding a batch extends every
// lease with one HeartbeatBatch per beat; a lease refused in the batch
// (its task cancelled while it waited) is dropped and never run, and the
// others go on.
func TestBatchHeartbeatIsOneCommit(t *testing.T) {
	e := newEnv(t)
	w, api := e.countingWorker()
	started, release := make(chan uint64, 3), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		if tk.Kind == "slow" {
			return block(ctx, release)
		}
		return nil
	}, worker.QueueOptions{ClaimBatch: 3, Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	ids := []uint64{e.enqueue("q", engine.Task{Kind: "slow"}), e.enqueue("q", engine.Task{}), e.enqueue("q", engine.Task{})}
	e.start(w)
	if id := recv(t, started); id != ids[0] {
		t.Fatalf("ran %d first", id)
	}
	e.armed(t0.Add(10 * time.Second))
	commits := e.db.Stats().Commits
	e.clock.Advance(10 * time.Second)
	want := t0.Add(40 * time.Second)
	for _, id := range ids {
		e.eventually("heartbeat", func() bool { return e.get("q", id).LeaseUntil.Equal(want) })
	}
	if b, h := api.heartbeatBatches.Load(), api.heartbeats.Load(); b != 1 || h != 0 {
		t.Fatalf("%d HeartbeatBatch and %d Heartbeat calls for one beat, want 1 and 0", b, h)
	}
	if d := e.db.Stats().Commits - commits; d != 1 {
		t.Fatalf("%d commits for one beat of 3 leases", d)
	}

	if err := e.q("q").Cancel(bg, ids[2]); err != nil {
		t.Fatal(err)
	}
	e.armed(t0.Add(20 * time.Second))
	e.clock.Advance(10 * time.Second)
	want = t0.Add(50 * time.Second)
	for _, id := range ids[:2] {
		e.eventually("heartbeat", func() bool { return e.get("q", id).LeaseUntil.Equal(want) })
	}
	e.eventually("the refusal logged", func() bool { _, ok := e.logs.find("lease lost before the handler started"); return ok })
	if b := api.heartbeatBatches.Load(); b != 2 {
		t.Fatalf("%d HeartbeatBatch calls after two beats", b)
	}
	close(release)
	if id := recv(t, started); id != ids[1] {
		t.Fatalf("ran %d second, want %d", id, ids[1])
	}
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
	e.stop(w)
	select {
	case id := <-started:
		t.Fatalf("the cancelled task %d ran", id)
	default:
	}
	if st := e.db.Stats(); st.Completed != 2 {
		t.Fatalf("stats %+v", st)
	}
}
