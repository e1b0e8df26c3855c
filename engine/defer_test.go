package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// eventLog is an Observer that keeps the kinds of the task events it hears.
type eventLog struct {
	mu    sync.Mutex
	kinds []EventKind
}

func (o *eventLog) Synced(time.Duration, int) {}
func (o *eventLog) Snapshot(SnapshotEvent)    {}

func (o *eventLog) TaskEvents(evs []TaskEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ev := range evs {
		o.kinds = append(o.kinds, ev.Kind)
	}
}

func (o *eventLog) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.kinds)
}

// TestDeferDurable: calls made with a DeferDurable context answer while
// the log's fsync is held, refusals included; Wait leads one fsync that
// covers them all and returns only once it is done; the Observer hears of
// them only then; and a crash after Wait loses none of them.
func TestDeferDurable(t *testing.T) {
	t.Parallel()
	obs := &eventLog{}
	e, gate := gated(t, func(o *Options) { o.Observer = obs })
	q := e.q("q")
	dctx, d := DeferDurable(ctx)
	syncs := e.db.Stats().LogSyncs
	calls := func() error {
		for range 5 {
			if _, err := q.Enqueue(dctx, Task{Payload: []byte(`1`)}); err != nil {
				return err
			}
		}
		ls, err := q.Claim(dctx, "w", time.Minute, 3)
		if err != nil || len(ls) != 3 {
			return fmt.Errorf("claim: %v %v", ls, err)
		}
		if _, err := q.Complete(dctx, ls[0], Done{}); err != nil {
			return err
		}
		_, next, err := q.CompleteAndClaim(dctx, ls[1], Done{}, "w", time.Minute, 1)
		if err != nil || len(next) != 1 {
			return fmt.Errorf("complete and claim: %v %v", next, err)
		}
		if _, err := q.Complete(dctx, ls[0], Done{}); !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("complete of a completed task: %v, want a refusal", err)
		}
		return nil
	}
	answered := make(chan error, 1)
	go func() { answered <- calls() }()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-gate.waiting:
		gate.release(nil) // so that the DB can close
		t.Fatal("a deferred call waited for an fsync")
	}
	if n := obs.len(); n != 0 {
		t.Fatalf("the Observer heard of %d events before Wait", n)
	}
	waitThroughGate(t, d, gate)
	if got := e.db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for the deferred commits, want 1", got)
	}
	if obs.len() == 0 {
		t.Fatal("the Observer heard of nothing after Wait")
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("Wait again with nothing deferred: %v", err)
	}
	e.crash()
	e.open()
	if c := counts(t, q); c.Ready != 1 || c.InFlight != 2 {
		t.Fatalf("after a crash: %+v, want 1 ready and 2 in flight", c)
	}
}

// TestDeferDurableLogFailure: when the fsync Wait leads fails, Wait
// returns ErrFailed, the Observer hears of none of the deferred commits
// and the engine takes no more writes.
func TestDeferDurableLogFailure(t *testing.T) {
	t.Parallel()
	obs := &eventLog{}
	e, gate := gated(t, func(o *Options) { o.Observer = obs })
	q := e.q("q")
	dctx, d := DeferDurable(ctx)
	for range 3 {
		if _, err := q.Enqueue(dctx, Task{}); err != nil {
			t.Fatal(err)
		}
	}
	gate.release(errors.New("disk gone"))
	if err := d.Wait(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait: %v, want ErrFailed", err)
	}
	if n := obs.len(); n != 0 {
		t.Fatalf("the Observer heard of %d events of commits that failed", n)
	}
	wantErr(t, errOnly(q.Enqueue(ctx, Task{})), ErrFailed)
}

// TestDeferDurableNotDeferred: in memory there is nothing to wait for, and
// a call on another DB than the one a Deferred first met waits on its own.
func TestDeferDurableNotDeferred(t *testing.T) {
	t.Parallel()
	mem := newEnv(t, true)
	dctx, d := DeferDurable(ctx)
	if _, err := mem.q("q").Enqueue(dctx, Task{}); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("Wait in memory: %v", err)
	}

	a, b := newEnv(t, false), newEnv(t, false)
	dctx, d = DeferDurable(ctx)
	if _, err := a.q("q").Enqueue(dctx, Task{}); err != nil {
		t.Fatal(err)
	}
	syncs, took := b.db.Stats().LogSyncs, b.db.Stats().LogSyncTime
	if _, err := b.q("q").Enqueue(dctx, Task{}); err != nil {
		t.Fatal(err)
	}
	if got := b.db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("the other DB's enqueue made %d fsyncs, want its own 1", got)
	}
	if b.db.Stats().LogSyncTime <= took {
		t.Fatalf("an fsync added nothing to LogSyncTime (%v)", took)
	}
	if got := a.db.Stats().LogSyncs; got != 1 {
		t.Fatalf("the first DB made %d fsyncs before Wait, want only Open's", got)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := a.db.Stats().LogSyncs; got != 2 {
		t.Fatalf("the first DB made %d fsyncs after Wait, want Open's and Wait's", got)
	}
}

// TestDeferDurableEnqueueAsync: an EnqueueAsync with a DeferDurable
// context is settled while the log's fsync is held, holding no slot of
// MaxInFlight; Wait leads the one fsync that covers them all; a crash
// after Wait loses none of them. When that fsync fails, Wait says so and
// the engine takes no more writes.
func TestDeferDurableEnqueueAsync(t *testing.T) {
	t.Parallel()
	e, gate := gated(t, func(o *Options) { o.MaxInFlight = 2 })
	q := e.q("q")
	dctx, d := DeferDurable(ctx)
	syncs := e.db.Stats().LogSyncs
	for i := range 5 { // more than MaxInFlight: none holds a slot
		p := q.EnqueueAsync(dctx, Task{Payload: []byte(`1`)})
		if !isSettled(p) {
			t.Fatalf("deferred enqueue %d is not settled at once", i)
		}
		if res, err := p.Wait(ctx); err != nil || res.ID == 0 {
			t.Fatalf("deferred enqueue %d: %+v %v", i, res, err)
		}
	}
	waitThroughGate(t, d, gate)
	if got := e.db.Stats().LogSyncs - syncs; got != 1 {
		t.Fatalf("%d fsyncs for the deferred enqueues, want 1", got)
	}
	e.crash()
	e.open()
	if c := counts(t, q); c.Ready != 5 {
		t.Fatalf("after a crash: %+v, want 5 ready", c)
	}

	f, fgate := gated(t)
	dctx, d = DeferDurable(ctx)
	if _, err := f.q("q").EnqueueAsync(dctx, Task{}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	fgate.release(errors.New("disk gone"))
	if err := d.Wait(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Wait: %v, want ErrFailed", err)
	}
	wantErr(t, errOnly(f.q("q").EnqueueAsync(ctx, Task{}).Wait(ctx)), ErrFailed)
}

// waitThroughGate calls d.Wait, which must lead an fsync that gate holds:
// it must not return while the fsync is held, and returns nil once gate
// lets it through.
func waitThroughGate(t *testing.T, d *Deferred, gate *syncGate) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	gate.held(t)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while the fsync is held", err)
	default:
	}
	gate.release(nil)
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// TestEnqueueAsyncReportsHousekeeping: an EnqueueAsync whose own step has
// nothing to tell (a refused assertion) still tells the Observer, once its round is
// durable, of what the step's housekeeping did: here the death of a parent
// whose last lease expired.
func TestEnqueueAsyncReportsHousekeeping(t *testing.T) {
	t.Parallel()
	obs := &eventLog{}
	e := newEnv(t, false, func(o *Options) { o.Observer = obs; o.Logger = quiet })
	q := e.q("q")
	if _, err := q.EnqueueBatch(ctx, []Task{{MaxAttempts: 1}, {DependsOnSibling: []int{0}}}); err != nil {
		t.Fatal(err)
	}
	if ls, err := q.Claim(ctx, "w", time.Minute, 1); err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	e.clock.Advance(2 * time.Minute)
	before := obs.len()
	_, err := q.EnqueueAsync(ctx, Task{}, IfExists("absent")).Wait(ctx)
	wantErr(t, err, ErrConflict)
	// The round tells the Observer after it settles its Pendings; Close
	// waits for the round's goroutine.
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.db = nil
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !slices.Contains(obs.kinds[before:], EvDead) {
		t.Fatalf("events after the refused EnqueueAsync: %v, want the parent's death", obs.kinds[before:])
	}
}
