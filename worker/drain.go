package worker

import (
	"context"
	"fmt"
	"slices"

	"github.com/docketdb/docket/engine"
)

// Drain runs, in the calling goroutine, the handler registered for the
// queue ns/queue, inside the Worker's middleware, on every task of the
// queue that can be claimed now, one at a time, and commits each outcome
// as a started Worker does (completion with its result, ops and follow-ups;
// retry; dead letter; snooze), until a claim finds nothing. Tasks the runs
// make due at once (follow-ups on the queue, a Snooze(0)) are run too; a
// retry or a timer due later is not: move the clock and Drain again. No
// heartbeat runs, so a handler that outlasts QueueOptions.Lease on the
// engine's clock loses its lease.
//
// Drain is meant for tests: what a test sees when it returns is the state
// the runs left, with no goroutine of the Worker involved. It refuses a
// Worker that has started (ErrStarted) and a queue without a handler, and
// it returns how many handler runs it made, with ctx's error if ctx ended,
// or the error that would have stopped a started Worker (the engine closed
// or failed, a permission missing). The Worker can be drained again, or
// started, afterwards.
func (w *Worker) Drain(ctx context.Context, ns engine.Namespace, queue string) (int, error) {
	w.mu.Lock()
	if w.state != stateNew {
		w.mu.Unlock()
		return 0, ErrStarted
	}
	var reg *runner
	for _, r := range w.runners {
		if r.q.Namespace() == ns && r.q.Name() == queue {
			reg = r
		}
	}
	mws := slices.Clone(w.mws)
	w.mu.Unlock()
	if reg == nil {
		return 0, fmt.Errorf("worker: Drain: no handler for queue %s/%s", ns, queue)
	}
	return w.drainer(mws).drain(ctx, reg.q, reg.h, reg.opts)
}

// Drain runs h on the tasks of q that can be claimed now, as Worker.Drain
// does for a registered handler, with the default QueueOptions and the
// given Options (the default Clock is the system clock: give the engine's
// if it is another).
func Drain(ctx context.Context, q engine.Queue, h Handler, opts Options) (int, error) {
	if h == nil {
		return 0, fmt.Errorf("%w: Drain with a nil handler", engine.ErrInvalid)
	}
	if opts.Clock == nil {
		opts.Clock = engine.SystemClock
	}
	qo, err := QueueOptions{}.withDefaults()
	if err != nil {
		return 0, err
	}
	return New(nil, opts).drainer(nil).drain(ctx, q, h, qo)
}

// drainer returns a Worker for one Drain: w's settings with mws, and
// failure state of its own, so that what stops the drain leaves w as it
// was.
func (w *Worker) drainer(mws []Middleware) *Worker {
	return &Worker{opts: w.opts, clock: w.clock, system: w.system, log: w.log, owner: w.owner, mws: mws,
		draining: true, done: make(chan struct{}), failed: make(chan struct{}),
		finished: make(chan struct{}), grace: make(chan struct{})}
}

// drain is the loop of Drain, on a Worker made by drainer.
func (w *Worker) drain(ctx context.Context, q engine.Queue, h Handler, opts QueueOptions) (int, error) {
	if err := checkName("owner", w.owner); err != nil {
		return 0, err
	}
	if err := checkQueue(q.Namespace(), q.Name()); err != nil {
		return 0, err
	}
	opts.ClaimBatch = 1 // each completion commits before the next claim
	w.runCtx, w.claimCtx = ctx, ctx
	r := &runner{w: w, q: q, h: h, opts: opts, log: w.log.With(logNS, q.Namespace().String(), logQueue, q.Name())}
	r.chain = w.chain(HandlerFunc(r.protect))
	r.failures = failLog{w: w, log: r.log}
	s := &slot{r: r, poke: make(chan struct{}, 1)}
	n := 0
	for {
		if err := w.Err(); err != nil {
			return n, err
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		ls, err := q.Claim(ctx, w.owner, opts.Lease, 1)
		if err != nil {
			return n, fmt.Errorf("worker: Drain: claiming on queue %s/%s: %w", q.Namespace(), q.Name(), err)
		}
		if len(ls) == 0 {
			return n, nil
		}
		t := newTask(r, ls[0])
		s.held = append(s.held[:0], t)
		s.run(t, false)
		s.flush()
		s.held[0] = nil
		n++
	}
}
