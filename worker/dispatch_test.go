package worker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// claimCounter records how many tasks each committed claim leased, and
// each committed completion acknowledged.
type claimCounter struct {
	mu          sync.Mutex
	claims      []int
	completions []int
}

func (c *claimCounter) TaskEvents(evs []engine.TaskEvent) {
	claimed, completed := 0, 0
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EvClaimed:
			claimed++
		case engine.EvCompleted:
			completed++
		}
	}
	c.mu.Lock()
	if claimed > 0 {
		c.claims = append(c.claims, claimed)
	}
	if completed > 0 {
		c.completions = append(c.completions, completed)
	}
	c.mu.Unlock()
}

func (c *claimCounter) getCompletions() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.completions...)
}
func (c *claimCounter) Synced(time.Duration, int)     {}
func (c *claimCounter) Snapshot(engine.SnapshotEvent) {}

func (c *claimCounter) get() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.claims...)
}

// block waits for ch to close or ctx to end, so that no test handler can
// hold Stop for ever.
func block(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestConcurrencyClaimsOnePerSlot: with the default ClaimBatch of 1, each
// of the Concurrency goroutines holds one task at a time.
func TestConcurrencyClaimsOnePerSlot(t *testing.T) {
	obs := &claimCounter{}
	e := newEnv(t, func(o *engine.Options) { o.Observer = obs })
	w := e.worker(worker.Options{})
	var running, peak atomic.Int32
	release := make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		n := running.Add(1)
		e.sig.notify()
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		return block(ctx, release)
	}, worker.QueueOptions{Concurrency: 4})
	for range 10 {
		e.enqueue("q", engine.Task{})
	}
	e.start(w)
	e.eventually("4 running", func() bool { return running.Load() == 4 })
	if c, _ := e.q("q").Counts(bg); c.InFlight != 4 || c.Ready != 6 {
		t.Fatalf("counts %+v: claimed more than one task per goroutine", c)
	}
	close(release)
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
	if peak.Load() != 4 {
		t.Fatalf("peak concurrency %d", peak.Load())
	}
	total := 0
	for _, n := range obs.get() {
		if n != 1 {
			t.Fatalf("claims %v, want one task per claim", obs.get())
		}
		total += n
	}
	if total != 10 {
		t.Fatalf("claimed %d tasks in total", total)
	}
}

// TestClaimBatchHeartbeatsWaitingLeases: one goroutine claims a batch in
// one commit and runs it in claim order; the leases waiting behind a slow
// task are extended with it, so none expires and no one else can take
// them.
func TestClaimBatchHeartbeatsWaitingLeases(t *testing.T) {
	obs := &claimCounter{}
	e := newEnv(t, func(o *engine.Options) { o.Observer = obs })
	w := e.worker(worker.Options{})
	release := make(chan struct{})
	order := make(chan uint64, 3)
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		order <- tk.ID
		if tk.Attempt != 1 {
			t.Errorf("task %d on attempt %d", tk.ID, tk.Attempt)
		}
		return block(ctx, release)
	}, worker.QueueOptions{ClaimBatch: 3, Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	var ids []uint64
	for range 3 {
		ids = append(ids, e.enqueue("q", engine.Task{}))
	}
	e.start(w)
	if id := recv(t, order); id != ids[0] {
		t.Fatalf("first run %d, want %d", id, ids[0])
	}
	if got := obs.get(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("claims %v, want one claim of 3", got)
	}
	for i := 1; i <= 9; i++ { // three lease lengths
		e.clock.Advance(10 * time.Second)
		want := t0.Add(time.Duration(i)*10*time.Second + 30*time.Second)
		for _, id := range ids {
			e.eventually("heartbeat", func() bool { return e.get("q", id).LeaseUntil.Equal(want) })
		}
		if ls, err := e.q("q").Claim(bg, "intruder", time.Minute, 3); err != nil || len(ls) != 0 {
			t.Fatalf("a held lease was claimed by another owner: %v %+v", err, ls)
		}
	}
	close(release)
	if a, b := recv(t, order), recv(t, order); a != ids[1] || b != ids[2] {
		t.Fatalf("ran %d, %d after %d; want claim order %v", a, b, ids[0], ids)
	}
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
	if st := e.db.Stats(); st.LeaseLost != 0 || st.Reclaimed != 0 || st.Completed != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBatchCompletionsCommitTogether: in a batch, plain completions wait,
// heartbeated, for the batch to end and commit in one CompleteBatch; a
// completion with something to commit goes at once.
func TestBatchCompletionsCommitTogether(t *testing.T) {
	obs := &claimCounter{}
	e := newEnv(t, func(o *engine.Options) { o.Observer = obs })
	w := e.worker(worker.Options{})
	started, release := make(chan uint64, 4), make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		started <- tk.ID
		switch tk.Kind {
		case "slow":
			return block(ctx, release)
		case "ops":
			tk.AddOps(engine.Set("k", []byte("v")))
		}
		return nil
	}, worker.QueueOptions{ClaimBatch: 4, Lease: 30 * time.Second, HeartbeatEvery: 10 * time.Second})
	plain := e.enqueue("q", engine.Task{Kind: "plain"})
	ops := e.enqueue("q", engine.Task{Kind: "ops"})
	slow := e.enqueue("q", engine.Task{Kind: "slow"})
	last := e.enqueue("q", engine.Task{Kind: "plain"})
	e.start(w)
	for _, id := range []uint64{plain, ops, slow} {
		if got := recv(t, started); got != id {
			t.Fatalf("ran %d, want %d", got, id)
		}
	}
	e.eventually("the completion with ops", func() bool { return e.gone("q", ops) })
	// The plain completion is not committed yet, and its lease outlives
	// its first length.
	for i := 1; i <= 4; i++ {
		e.clock.Advance(10 * time.Second)
		want := t0.Add(time.Duration(i)*10*time.Second + 30*time.Second)
		e.eventually("heartbeat", func() bool { return e.get("q", plain).LeaseUntil.Equal(want) })
	}
	close(release)
	if got := recv(t, started); got != last {
		t.Fatalf("ran %d, want %d", got, last)
	}
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
	e.stop(w) // observers are told after the commit returns: let it all settle
	if got := obs.getCompletions(); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("completions per commit %v, want [1 3]", got)
	}
	if st := e.db.Stats(); st.LeaseLost != 0 || st.Completed != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestClaimBatchOption(t *testing.T) {
	obs := &claimCounter{}
	e := newEnv(t, func(o *engine.Options) { o.Observer = obs })
	w := e.worker(worker.Options{})
	release := make(chan struct{})
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		return block(ctx, release)
	}, worker.QueueOptions{Concurrency: 3, ClaimBatch: 2})
	for range 6 {
		e.enqueue("q", engine.Task{})
	}
	e.start(w)
	e.eventually("6 in flight", func() bool { c, _ := e.q("q").Counts(bg); return c.InFlight == 6 })
	for _, n := range obs.get() {
		if n > 2 {
			t.Fatalf("claims %v exceed ClaimBatch", obs.get())
		}
	}
	close(release)
	e.eventually("all done", func() bool { c, _ := e.q("q").Counts(bg); return c == engine.Counts{} })
}

func TestMiddlewareOrder(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	var mu sync.Mutex
	var trail []string
	note := func(s string) {
		mu.Lock()
		trail = append(trail, s)
		mu.Unlock()
	}
	mw := func(name string) worker.Middleware {
		return func(next worker.Handler) worker.Handler {
			return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
				note(name + ">")
				err := next.Work(ctx, tk)
				var pe *worker.PanicError
				if errors.As(err, &pe) {
					note(name + " saw panic")
				}
				note("<" + name)
				return err
			})
		}
	}
	w.Use(mw("a"), mw("b"))
	w.HandleFunc(ns, "q", func(ctx context.Context, tk *worker.Task) error {
		note("handler")
		panic("oops")
	}, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	e.waitState("q", id, engine.Scheduled)
	mu.Lock()
	got := strings.Join(trail, " ")
	mu.Unlock()
	if want := "a> b> handler b saw panic <b a saw panic <a"; got != want {
		t.Fatalf("trail %q, want %q", got, want)
	}
}

func TestPanickingMiddlewareRecovered(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	w.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error { panic("in middleware") })
	})
	w.HandleFunc(ns, "q", func(context.Context, *worker.Task) error { return nil }, worker.QueueOptions{})
	id := e.enqueue("q", engine.Task{})
	e.start(w)
	if info := e.waitState("q", id, engine.Scheduled); !strings.HasPrefix(info.LastError, "panic: in middleware") {
		t.Fatalf("%+v", info)
	}
}

func TestMuxRoutesByKind(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{})
	got := make(chan string, 3)
	mux := worker.NewMux()
	mux.HandleFunc("resize", func(ctx context.Context, tk *worker.Task) error { got <- "resize"; return nil })
	mux.HandleFunc("", func(ctx context.Context, tk *worker.Task) error { got <- "no kind"; return nil })
	mustPanic(t, "duplicate kind", func() { mux.HandleFunc("resize", nil) })
	w.Handle(ns, "q", mux, worker.QueueOptions{})
	e.enqueue("q", engine.Task{Kind: "resize"})
	e.enqueue("q", engine.Task{})
	unknown := e.enqueue("q", engine.Task{Kind: "transcode"})
	e.start(w)
	seen := map[string]bool{recv(t, got): true, recv(t, got): true}
	if !seen["resize"] || !seen["no kind"] {
		t.Fatalf("routed %v", seen)
	}
	info := e.waitState("q", unknown, engine.Scheduled)
	if !strings.Contains(info.LastError, `no handler for task kind "transcode"`) || info.Attempts != 1 {
		t.Fatalf("%+v", info)
	}
}

// TestLogLinesCarryTaskAttributes: a warning about a task names its id,
// queue, attempt and owner; nothing below warning is logged by default.
func TestLogLinesCarryTaskAttributes(t *testing.T) {
	e := newEnv(t)
	w := e.worker(worker.Options{Owner: "owner-7"})
	w.HandleFunc(ns, "mail", func(ctx context.Context, tk *worker.Task) error {
		tk.Logger().Info("sending")
		panic("smtp down")
	}, worker.QueueOptions{})
	id := e.enqueue("mail", engine.Task{})
	e.start(w)
	e.waitState("mail", id, engine.Scheduled)
	e.stop(w)
	rec, ok := e.logs.find("task failed")
	if !ok {
		t.Fatal("no log line for the panic")
	}
	want := map[string]string{"task_id": "1", "queue": "mail", "namespace": "acme/prod", "attempt": "1", "owner": "owner-7"}
	for k, v := range want {
		if rec.attrs[k] != v {
			t.Errorf("attr %s = %q, want %q (all: %v)", k, rec.attrs[k], v, rec.attrs)
		}
	}
	if rec, ok := e.logs.find("sending"); !ok || rec.attrs["task_id"] != "1" {
		t.Errorf("task logger: %+v", rec)
	}
}
