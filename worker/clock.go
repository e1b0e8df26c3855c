package worker

import (
	"context"
	"sync/atomic"
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

// withTimeout returns a child of ctx that ends once d has passed on the
// worker's clock, with ctx.Err() context.DeadlineExceeded, the given cause
// and a Deadline, and a function that releases it. With the system clock
// this is context.WithTimeoutCause; with another clock a goroutine waits on
// the clock's timer, and the release function waits for it to exit, so
// none outlives the handler run.
func (w *Worker) withTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, func()) {
	if w.system {
		return context.WithTimeoutCause(ctx, d, cause)
	}
	inner, cancel := context.WithCancelCause(ctx)
	c := &clockDeadline{Context: inner, deadline: w.clock.Now().Add(d), done: make(chan struct{})}
	if pd, ok := ctx.Deadline(); ok && pd.Before(c.deadline) {
		c.deadline = pd
	}
	context.AfterFunc(inner, func() { close(c.done) })
	t := w.clock.NewTimer(d)
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-t.C():
			c.expired.Store(true)
			cancel(cause)
		case <-stop:
		}
	}()
	return c, func() {
		t.Stop()
		close(stop)
		<-exited
		cancel(nil)
		<-c.done // the AfterFunc has run: nothing of it outlives the release
	}
}

// clockDeadline is a context with a deadline on a clock other than the
// system's: it reports the deadline, and context.DeadlineExceeded once it
// has passed. Its Done channel is its own (closed after inner's), so that
// contexts derived from it take its Err, not inner's context.Canceled.
type clockDeadline struct {
	context.Context // inner: values, and the cause (context.Cause finds it)
	deadline        time.Time
	expired         atomic.Bool
	done            chan struct{}
}

func (c *clockDeadline) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *clockDeadline) Done() <-chan struct{}       { return c.done }

func (c *clockDeadline) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}
