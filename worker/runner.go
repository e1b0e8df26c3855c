package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// runner works one queue with Concurrency slots. A slot is a goroutine that
// claims up to ClaimBatch tasks with the engine's blocking claim and runs
// them one after another, plus a companion goroutine that heartbeats every
// lease the slot holds, the running one and those waiting their turn. Slots
// share nothing but the queue, so there is no hand-off to get wrong: every
// lease is owned by exactly one slot from claim to outcome.
type runner struct {
	w     *Worker
	q     engine.Queue
	h     Handler // as registered
	chain Handler // h inside the middleware, set by start
	opts  QueueOptions
	log   *slog.Logger
	fatal sync.Once
}

// start launches the slots; now anchors their heartbeat grids.
func (r *runner) start(now time.Time) {
	w := r.w
	r.chain = w.chain(HandlerFunc(r.protect))
	for range r.opts.Concurrency {
		s := &slot{r: r}
		hbCtx, stopHB := context.WithCancel(context.Background())
		w.wg.Add(2)
		go s.heartbeats(hbCtx, now)
		go func() {
			defer w.wg.Done()
			defer stopHB() // the heartbeats outlive the slot's last outcome
			s.loop()
		}()
	}
}

// slot is one claim-and-run goroutine of a runner.
type slot struct {
	r *runner

	mu   sync.Mutex
	held []*Task // the current batch, in claim order; only loop writes it

	// Plain completions of the current batch, committed together when it
	// ends; loop's alone.
	pending []*Task
	leases  []engine.Lease
}

// loop claims and runs batches until the Worker stops claiming or the
// engine becomes unusable.
func (s *slot) loop() {
	w := s.r.w
	for {
		ls, ok := s.claim(w.claimCtx)
		if !ok {
			return
		}
		s.mu.Lock()
		for _, l := range ls {
			s.held = append(s.held, newTask(s.r, l))
		}
		batch := s.held
		s.mu.Unlock()
		for _, t := range batch {
			if w.claimCtx.Err() != nil {
				t.release() // stopping: hand back what has not started
				continue
			}
			s.run(t)
		}
		s.flush()
		s.mu.Lock()
		clear(s.held)
		s.held = s.held[:0]
		s.mu.Unlock()
	}
}

// claim waits for up to ClaimBatch leases. It returns false when the slot
// must stop: ctx ended, or the engine is closed or failed.
func (s *slot) claim(ctx context.Context) ([]engine.Lease, bool) {
	r := s.r
	for {
		ls, err := r.q.ClaimWait(ctx, r.w.owner, r.opts.Lease, r.opts.ClaimBatch)
		switch {
		case err == nil && ctx.Err() != nil:
			// The claim committed as the Worker began to stop.
			for _, l := range ls {
				r.release(l)
			}
			return nil, false
		case err == nil:
			return ls, true
		case ctx.Err() != nil:
			return nil, false
		case isFatal(err):
			r.fatal.Do(func() {
				why := "the engine is unusable"
				if errors.Is(err, engine.ErrInvalid) {
					why = "the queue or owner name is invalid"
				}
				r.log.Error("docket: stopped claiming: "+why, "err", err)
			})
			return nil, false
		}
		r.log.Warn("docket: claim failed; retrying", "err", err, "retry_in", claimRetry)
		if !r.w.sleep(ctx, claimRetry) {
			return nil, false
		}
	}
}

// isFatal reports errors after which claiming again cannot succeed.
func isFatal(err error) bool {
	return errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrFailed) || errors.Is(err, engine.ErrInvalid)
}

// heartbeats extends every lease the slot holds every HeartbeatEvery, until
// ctx ends (after the slot's last outcome). When the Worker stops claiming,
// it releases at once the leases still waiting in the batch.
func (s *slot) heartbeats(ctx context.Context, start time.Time) {
	w := s.r.w
	defer w.wg.Done()
	every := s.r.opts.HeartbeatEvery
	stopping := w.claimCtx.Done()
	var buf []*Task
	// Beats follow a fixed grid (not "every after the last beat") so that a
	// beat that took long, or a clock that jumped, does not push the next
	// one past a deadline.
	next := start.Add(every)
	for {
		t := w.timerAt(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-stopping:
			t.Stop()
			stopping = nil
			for _, tk := range s.snapshot(&buf) {
				tk.release()
			}
			clear(buf)
		case <-t.C():
			for _, tk := range s.snapshot(&buf) {
				tk.heartbeat()
			}
			clear(buf) // let finished tasks go
			next = next.Add(every)
			if now := w.clock.Now(); now.After(next) {
				next = now
			}
		}
	}
}

// snapshot copies the held tasks into *buf.
func (s *slot) snapshot(buf *[]*Task) []*Task {
	s.mu.Lock()
	*buf = append((*buf)[:0], s.held...)
	s.mu.Unlock()
	return *buf
}

// run works one claimed task to its end: handler, then outcome.
func (s *slot) run(t *Task) {
	r := s.r
	w := r.w
	ctx, cancel := context.WithCancelCause(w.runCtx)
	defer cancel(nil)
	if !t.begin(cancel) {
		return // lost or released while it waited
	}
	hctx, stop := ctx, func() {}
	if d := r.opts.Timeout; d > 0 {
		hctx, stop = w.withTimeout(ctx, d, fmt.Errorf("%w after %v: %w", ErrTimeout, d, context.DeadlineExceeded))
	}
	err := r.call(hctx, t)
	cause := context.Cause(hctx)
	o := outcomeOf(cause, err)
	// In a batch, a plain completion (nothing to commit but the
	// acknowledgement) waits, still heartbeated, to be committed with the
	// others of the batch in one CompleteBatch.
	deferred := o == OutcomeCompleted && r.opts.ClaimBatch > 1 && t.plain()
	lost := t.end(deferred)
	stop()
	switch {
	case lost != nil:
		// Logged when found; nothing may be committed.
	case deferred:
		s.pending = append(s.pending, t)
	default:
		r.finish(t, o, cause, err)
	}
}

// flush commits the batch's deferred completions in one commit.
func (s *slot) flush() {
	r := s.r
	tasks, leases := s.pending[:0], s.leases[:0]
	for _, t := range s.pending {
		if t.commit() {
			tasks, leases = append(tasks, t), append(leases, t.lease)
		}
	}
	switch len(tasks) {
	case 0:
	case 1:
		_, err := r.q.Complete(context.Background(), leases[0], engine.Done{})
		r.completed(tasks[0], err)
	default:
		errs, err := r.q.CompleteBatch(context.Background(), leases)
		for i, t := range tasks {
			terr := err
			if err == nil {
				terr = errs[i]
			}
			r.completed(t, terr)
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	clear(leases)
	s.leases = leases[:0]
}

// release hands a lease back at once without counting the attempt.
func (r *runner) release(l engine.Lease) {
	if err := r.q.Snooze(context.Background(), l, 0); err != nil && !errors.Is(err, engine.ErrClosed) {
		r.log.Warn("docket: releasing a lease failed", logTask, l.ID, logAttempt, l.Attempt, "err", err)
	}
}

// protect runs the handler, turning a panic into a *PanicError so that
// middleware sees it as an error.
func (r *runner) protect(ctx context.Context, t *Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return r.h.Work(ctx, t)
}

// call runs the handler inside the middleware; a panicking middleware is
// caught here.
func (r *runner) call(ctx context.Context, t *Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return r.chain.Work(ctx, t)
}

// finish commits the outcome o of a handler run whose lease was not lost;
// cause is the cause of the handler's context, nil if it was not cancelled.
func (r *runner) finish(t *Task, o Outcome, cause, err error) {
	bg := context.Background()
	switch o {
	case OutcomeCompleted:
		_, err := r.q.Complete(bg, t.lease, t.done())
		r.completed(t, err)
	case OutcomeShutdown:
		r.release(t.lease)
	case OutcomeSnoozed:
		var sz *snoozeError
		errors.As(err, &sz)
		if serr := r.q.Snooze(bg, t.lease, sz.d); serr != nil {
			t.Logger().Warn("docket: snooze failed", "err", serr)
		}
	default:
		lvl := slog.LevelInfo
		if o == OutcomePanicked {
			lvl = slog.LevelWarn
		}
		if r.log.Enabled(bg, lvl) {
			t.Logger().Log(bg, lvl, "docket: task failed", "outcome", o.String(), "err", err)
		}
		r.fail(t, failureOf(cause, o, err))
	}
}

// completed acts on the result of committing a completion.
func (r *runner) completed(t *Task, err error) {
	switch {
	case err == nil:
		if r.log.Enabled(context.Background(), slog.LevelDebug) {
			t.Logger().Debug("docket: task completed")
		}
	case errors.Is(err, engine.ErrLeaseLost):
		t.Logger().Warn("docket: completion refused: the lease was lost; the result is discarded", "err", err)
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrFailed):
		t.Logger().Warn("docket: completion failed", "err", err)
	default:
		// The commit itself was refused (an assertion of AddOps did not
		// hold, a follow-up was invalid): the work did not take effect, so
		// the attempt fails and is retried.
		t.Logger().Warn("docket: completion refused; failing the attempt", "err", err)
		r.fail(t, engine.Failure{Err: "completion refused: " + err.Error()})
	}
}

func (r *runner) fail(t *Task, f engine.Failure) {
	if err := r.q.Fail(context.Background(), t.lease, f); err != nil {
		t.Logger().Warn("docket: recording the failure failed", "err", err)
	}
}
