package engine

import (
	"context"
	"errors"
	"testing"
)

// mustPanic runs f and returns what it panicked with (failing the test if
// it did not).
func mustPanic(t *testing.T, f func()) (p any) {
	t.Helper()
	defer func() { p = recover() }()
	f()
	t.Fatal("no panic")
	return nil
}

// TestPanicInPlanningReleasesTheLock: a plan that panics (a bug) lets the
// panic go on with the engine lock released, and the DB, whose state the
// plan did not change, goes on working.
func TestPanicInPlanningReleasesTheLock(t *testing.T) {
	for _, mem := range []bool{true, false} {
		e := newEnv(t, mem)
		ctx := context.Background()
		c := e.db.c
		if p := mustPanic(t, func() { c.commit(ctx, func(*planner) error { panic("planning") }) }); p != "planning" {
			t.Fatalf("panicked with %v", p)
		}
		locked := c.mu.TryLock()
		c.mu.Unlock() // held by nobody: released either way, for Close
		if !locked {
			t.Fatal("the engine lock is held after a plan panicked")
		}
		q := e.q("q")
		id := e.enqueue(q, Task{})
		if _, err := q.Get(ctx, id); err != nil {
			t.Fatalf("mem=%v: the DB after the panics: %v", mem, err)
		}
	}
}

// TestPanicInApplyFailsTheEngine: a panic while a batch is logged and
// applied (a call's commit, a run's step) releases the lock and fails the
// engine, whose state may be half changed: every later write is
// ErrFailed.
func TestPanicInApplyFailsTheEngine(t *testing.T) {
	ctx := context.Background()
	for _, run := range []bool{false, true} {
		e := newEnv(t, false, func(o *Options) {
			o.tap = func(uint64, []byte) { panic("applying") }
		})
		q := e.q("q")
		p := mustPanic(t, func() {
			if run {
				e.db.EnqueueRun(ctx, []RunEnqueue{{Namespace: ns, Queue: "q"}, {Namespace: ns, Queue: "q"}})
			} else {
				q.Enqueue(ctx, Task{})
			}
		})
		if err, ok := p.(error); !ok || !errors.Is(err, ErrFailed) {
			t.Fatalf("run=%v: panicked with %v, want the engine's failure", run, p)
		}
		locked := e.db.c.mu.TryLock()
		e.db.c.mu.Unlock() // held by nobody: released either way, for Close
		if !locked {
			t.Fatalf("run=%v: the engine lock is held after applying panicked", run)
		}
		if _, err := q.Enqueue(ctx, Task{}); !errors.Is(err, ErrFailed) {
			t.Fatalf("run=%v: a write after the panic: %v, want ErrFailed", run, err)
		}
	}
}
