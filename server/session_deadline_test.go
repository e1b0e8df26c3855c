package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

type lazyKey struct{}

// TestLazyDeadline: a session call's context bounded by its deadline
// behaves as context.WithDeadline's: its deadline, its error once the
// deadline passed or its parent ended or it was stopped, its Done closed
// by any of them (and a context made from it ended with it), its parent's
// values; and it makes nothing but itself unless Done is asked for.
func TestLazyDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), lazyKey{}, "v")
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Done not closed", what)
		}
	}

	dl := time.Now().Add(time.Hour)
	sc := scall{deadline: dl}
	ctx, stop := sc.withLazyDeadline(parent)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(dl) {
		t.Fatalf("deadline %v, %v", d, ok)
	}
	if ctx.Err() != nil || ctx.Value(lazyKey{}) != "v" {
		t.Fatalf("a live context: %v, %v", ctx.Err(), ctx.Value(lazyKey{}))
	}
	if ctx.(*lazyDeadline).made() != nil {
		t.Fatal("a context nobody waited on made its timer")
	}
	stop()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("stopped: %v", ctx.Err())
	}
	wait("stopped, Done asked after", ctx.Done())

	past := scall{deadline: time.Now().Add(-time.Millisecond)}
	ctx, stop = past.withLazyDeadline(parent)
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("past its deadline: %v", ctx.Err())
	}
	wait("past its deadline", ctx.Done())
	stop()

	soon := scall{deadline: time.Now().Add(20 * time.Millisecond)}
	ctx, stop = soon.withLazyDeadline(parent)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	wait("a child at the deadline", child.Done())
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("at the deadline: %v, child %v", ctx.Err(), child.Err())
	}
	if ctx.Value(lazyKey{}) != "v" {
		t.Fatal("the parent's value is lost once Done was asked for")
	}
	stop()

	pctx, pcancel := context.WithCancel(parent)
	ctx, stop = sc.withLazyDeadline(pctx)
	defer stop()
	pcancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("its parent ended: %v", ctx.Err())
	}
	wait("its parent ended", ctx.Done())

	var none scall
	if ctx, _ := none.withLazyDeadline(parent); ctx != parent {
		t.Fatal("a call without a deadline got a context of its own")
	}
}

// TestLazyDeadlineAllocations: a call's context that nobody waits on is
// one allocation, where context.WithDeadline makes a timer and registers
// with its parent.
func TestLazyDeadlineAllocations(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc := scall{deadline: time.Now().Add(time.Hour)}
	n := testing.AllocsPerRun(100, func() {
		ctx, stop := sc.withLazyDeadline(parent)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		stop()
	})
	if n > 1 {
		t.Fatalf("%.1f allocations, want 1", n)
	}
}
