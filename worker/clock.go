package worker

import (
	"context"
	"time"

	"github.com/docketdb/docket/engine"
)

// timerAt returns a timer that fires once the worker's clock reads at
// least at (at once if it already does).
func (w *Worker) timerAt(at time.Time) engine.Timer {
	for {
		now := w.clock.Now()
		t := w.clock.NewTimer(at.Sub(now))
		// A clock that jumps (a test's manual clock) may have moved between
		// Now and NewTimer, leaving the timer due after at: try again then.
		if w.system || w.clock.Now().Equal(now) {
			return t
		}
		t.Stop()
	}
}

// sleepUntil waits until the worker's clock reads at least at, or ctx ends
// (then it returns false).
func (w *Worker) sleepUntil(ctx context.Context, at time.Time) bool {
	t := w.timerAt(at)
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// sleep waits for d on the worker's clock, or until ctx ends (false).
func (w *Worker) sleep(ctx context.Context, d time.Duration) bool {
	return w.sleepUntil(ctx, w.clock.Now().Add(d))
}

// withTimeout returns a child of ctx cancelled with cause once d has passed
// on the worker's clock, and a function that releases it. With the system
// clock this is context.WithTimeoutCause; with another clock a goroutine
// waits on the clock's timer, and the release function waits for it to
// exit, so none outlives the handler run.
func (w *Worker) withTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, func()) {
	if w.system {
		return context.WithTimeoutCause(ctx, d, cause)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := w.clock.NewTimer(d)
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-t.C():
			cancel(cause)
		case <-stop:
		}
	}()
	return ctx, func() {
		t.Stop()
		close(stop)
		<-exited
		cancel(nil)
	}
}
