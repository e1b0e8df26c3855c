package server

import (
	"context"
	"sync"
	"time"
)

// lazyDeadline is a session call's context bounded by the call's
// deadline, whose timer is made only if the call waits on Done. A call of
// a batch on a standalone DB mostly asks Err (a commit checks it before
// it begins) and never waits: a context.WithDeadline would make a timer
// and register with the session's context for each call, and stop both
// when the call ends.
type lazyDeadline struct {
	context.Context // the batch's
	deadline        time.Time

	mu     sync.Mutex
	real   context.Context // context.WithDeadline, made by the first Done
	cancel context.CancelFunc
	done   bool // stop was called
}

// withLazyDeadline bounds ctx by the call's deadline, if it has one, as
// withDeadline does; the call must not be left running past stop.
func (sc *scall) withLazyDeadline(ctx context.Context) (context.Context, func()) {
	if sc.deadline.IsZero() {
		return ctx, func() {}
	}
	c := &lazyDeadline{Context: ctx, deadline: sc.deadline}
	return c, c.stop
}

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// made returns the context made by Done, nil if none.
func (c *lazyDeadline) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real
}

func (c *lazyDeadline) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.cancel = context.WithDeadline(c.Context, c.deadline)
		if c.done {
			c.cancel()
		}
	}
	return c.real.Done()
}

func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	real, done := c.real, c.done
	c.mu.Unlock()
	if real != nil {
		return real.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if done {
		return context.Canceled
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *lazyDeadline) Value(key any) any {
	if real := c.made(); real != nil {
		return real.Value(key)
	}
	return c.Context.Value(key)
}

// stop ends the context, as a CancelFunc does.
func (c *lazyDeadline) stop() {
	c.mu.Lock()
	c.done = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}
