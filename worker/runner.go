package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	watch engine.LeaseWatcher // nil if the API cannot tell of cancellations
	// failures writes the "task failed" lines, aggregated per interval.
	failures failLog

	smu   sync.Mutex
	slots []*slot // for the presence reports
}

// start launches the slots; now anchors their heartbeat grids.
func (r *runner) start(now time.Time) {
	w := r.w
	r.chain = w.chain(HandlerFunc(r.protect))
	r.watch, _ = w.db.(engine.LeaseWatcher)
	r.failures = failLog{w: w, log: r.log}
	for range r.opts.Concurrency {
		s := &slot{r: r, poke: make(chan struct{}, 1)}
		r.smu.Lock()
		r.slots = append(r.slots, s)
		r.smu.Unlock()
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
	// cur is the task whose handler runs, since curStart; nil between.
	cur      *Task
	curStart time.Time

	// poke asks the heartbeat goroutine to beat now: the engine told of a
	// cancelled task, which the beat will find lost.
	poke chan struct{}

	// Plain completions of the current batch, committed together when it
	// ends; loop's alone.
	pending []*Task
	leases  []engine.Lease
}

// loop claims and runs batches until the Worker stops claiming or the
// engine becomes unusable. A batch whose last task completes takes the
// next batch in the same commit (CompleteAndClaim), so a slot draining a
// queue pays one commit per task; it waits in ClaimWait only when that
// finds nothing.
func (s *slot) loop() {
	w := s.r.w
	var next []engine.Lease
	for {
		ls := next
		next = nil
		if len(ls) == 0 {
			var ok bool
			if ls, ok = s.claim(w.claimCtx); !ok {
				return
			}
		}
		s.mu.Lock()
		for _, l := range ls {
			s.held = append(s.held, newTask(s.r, l))
		}
		batch := s.held
		s.mu.Unlock()
		for i, t := range batch {
			if w.claimCtx.Err() != nil {
				t.release() // stopping: hand back what has not started
				continue
			}
			next = s.run(t, i == len(batch)-1)
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
	var b backoff
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
				r.w.fail(fmt.Errorf("worker: claiming on queue %s/%s: %w", r.q.Namespace(), r.q.Name(), err))
			})
			return nil, false
		}
		// Not a refusal that will last: a network client that found no
		// server (a restart), a lost answer, a conflict. Keep trying.
		d := b.next()
		r.log.Warn("docket: claim failed; retrying", "err", err, "retry_in", d)
		if !r.w.sleep(ctx, d) {
			return nil, false
		}
	}
}

// isFatal reports errors after which claiming again cannot succeed: the
// engine is closed or failed, a name is invalid, or the caller lacks the
// permission (retrying would only hammer the engine with refusals).
func isFatal(err error) bool {
	return errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrFailed) ||
		errors.Is(err, engine.ErrInvalid) || errors.Is(err, engine.ErrPermission)
}

// sentinels are the engine's errors: an error wrapping one is the engine's
// answer.
var sentinels = [...]error{engine.ErrInvalid, engine.ErrNotFound, engine.ErrLeaseLost, engine.ErrConflict,
	engine.ErrPermission, engine.ErrClosed, engine.ErrFailed, engine.ErrCorrupt, engine.ErrLocked, engine.ErrReadOnly}

// transient reports an error that is no answer of the engine: it wraps
// none of the engine's sentinel errors. A network client returns such
// errors when no server took a call (a server restarting, unreachable or
// draining) or when a call's answer was lost; the same call may succeed
// when made again. An in-process DB answers every call.
func transient(err error) bool {
	if err == nil {
		return false
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return false
		}
	}
	return true
}

// unanswered says, for a log line, what a transient error is: a server's
// refusal for being over its limit on the caller's calls (a network
// client's error says so by an OverLimit method), or no answer.
func unanswered(err error) string {
	var ol interface{ OverLimit() bool }
	if errors.As(err, &ol) && ol.OverLimit() {
		return "refused for being over the server's limit on the caller's calls"
	}
	return "no answer"
}

// backoff is the pauses between tries of a call that keeps failing
// transiently: jittered, doubling from retryMin to retryMax.
type backoff struct{ n int }

func (b *backoff) next() time.Duration {
	d := min(retryMin<<min(b.n, 16), retryMax)
	b.n++
	return d/2 + rand.N(d/2+1)
}

// retrying makes call, which commits a task's outcome, and makes it again
// with backoff while it fails transiently (see transient), so that a
// worker on a network client commits across a server's restart instead of
// giving the work up. Outcome calls are fenced by the lease's token: a
// repeat of one that took effect is refused with engine.ErrLeaseLost, never
// applied twice. It returns whether a try failed transiently before the
// last one, and the last one's error. It stops trying when the Worker cancels its
// handlers (Stop's context or the shutdown grace ended), and in a Drain,
// whose clock may be a test's that nobody moves.
func (r *runner) retrying(log *slog.Logger, what string, call func() error) (retried bool, err error) {
	var b backoff
	for {
		err = call()
		if !transient(err) || r.w.draining {
			return retried, err
		}
		d := b.next()
		lvl := slog.LevelDebug
		if !retried {
			lvl = slog.LevelWarn
		}
		log.Log(context.Background(), lvl, "docket: "+what+" failed; retrying", "err", err, "retry_in", d)
		retried = true
		if !r.w.sleep(r.w.runCtx, d) {
			return retried, err
		}
	}
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
		case <-s.poke:
			t.Stop()
			s.r.heartbeat(s.snapshot(&buf))
			clear(buf)
		case <-t.C():
			s.r.heartbeat(s.snapshot(&buf))
			clear(buf) // let finished tasks go
			next = next.Add(every)
			if now := w.clock.Now(); now.After(next) {
				next = now
			}
		}
	}
}

// pokeNow asks for a heartbeat now, without waiting.
func (s *slot) pokeNow() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// snapshot copies the held tasks into *buf.
func (s *slot) snapshot(buf *[]*Task) []*Task {
	s.mu.Lock()
	*buf = append((*buf)[:0], s.held...)
	s.mu.Unlock()
	return *buf
}

// run works one claimed task to its end: handler, then outcome. For the
// last task of a batch, a completion committed at once also claims the
// next batch, which run returns.
func (s *slot) run(t *Task, last bool) []engine.Lease {
	r := s.r
	w := r.w
	ctx, cancel := context.WithCancelCause(w.runCtx)
	defer cancel(nil)
	if !t.begin(cancel) {
		return nil // lost or released while it waited
	}
	if r.watch != nil {
		// In process, a cancellation cancels the handler at once, not at the
		// next heartbeat.
		if unwatch, err := r.watch.WatchLease(t.lease, s.pokeNow); err == nil {
			defer unwatch()
		}
	}
	hctx, stop := ctx, func() {}
	if d := r.opts.Timeout; d > 0 {
		hctx, stop = w.withTimeout(ctx, d, fmt.Errorf("%w after %v: %w", ErrTimeout, d, context.DeadlineExceeded))
	}
	s.mu.Lock()
	s.cur, s.curStart = t, w.clock.Now()
	s.mu.Unlock()
	err := r.call(hctx, t)
	s.mu.Lock()
	s.cur = nil
	s.mu.Unlock()
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
	case o == OutcomeCompleted && last && len(s.pending) == 0 && w.claimCtx.Err() == nil:
		return s.completeAndClaim(t)
	default:
		r.finish(t, o, cause, err)
	}
	return nil
}

// completeAndClaim commits t's completion and claims the slot's next batch
// in one commit. Leases that arrive as the Worker begins to stop are
// handed back at once. A try without an answer (a network client that
// found no server, or lost the answer) is not made again, since leases it
// may have taken would be held by nobody until they expire: the
// completion alone is committed instead, retried as every outcome is
// (fenced: if the first try took effect, the repeat is refused).
func (s *slot) completeAndClaim(t *Task) []engine.Lease {
	r := s.r
	bg := context.Background()
	d := t.done()
	_, ls, err := r.q.CompleteAndClaim(bg, t.lease, d, r.w.owner, r.opts.Lease, r.opts.ClaimBatch)
	retried := false
	if transient(err) {
		t.Logger().Warn("docket: completing and claiming failed; committing the completion alone", "err", err)
		ls = nil
		_, err = r.retrying(t.Logger(), "completing", func() error {
			_, err := r.q.Complete(bg, t.lease, d)
			return err
		})
		retried = true
	}
	r.completed(t, err, retried)
	if len(ls) > 0 && r.w.claimCtx.Err() != nil {
		for _, l := range ls {
			r.release(l)
		}
		return nil
	}
	return ls
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
		retried, err := r.retrying(tasks[0].Logger(), "completing", func() error {
			_, err := r.q.Complete(context.Background(), leases[0], engine.Done{})
			return err
		})
		r.completed(tasks[0], err, retried)
	default:
		var errs []error
		retried, err := r.retrying(r.log, fmt.Sprintf("completing a batch of %d", len(leases)), func() (err error) {
			errs, err = r.q.CompleteBatch(context.Background(), leases)
			return err
		})
		for i, t := range tasks {
			terr := err
			if err == nil {
				terr = errs[i]
			}
			r.completed(t, terr, retried)
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	clear(leases)
	s.leases = leases[:0]
}

// release hands a lease back at once without counting the attempt.
func (r *runner) release(l engine.Lease) {
	log := r.log.With(logTask, l.ID, logAttempt, l.Attempt)
	_, err := r.retrying(log, "releasing a lease", func() error { return r.q.Snooze(context.Background(), l, 0) })
	if err != nil && !errors.Is(err, engine.ErrClosed) {
		log.Warn("docket: releasing a lease failed", "err", err)
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
		d := t.done()
		retried, err := r.retrying(t.Logger(), "completing", func() error {
			_, err := r.q.Complete(bg, t.lease, d)
			return err
		})
		r.completed(t, err, retried)
	case OutcomeShutdown:
		r.release(t.lease)
	case OutcomeSnoozed:
		var sz *snoozeError
		errors.As(err, &sz)
		_, serr := r.retrying(t.Logger(), "snoozing", func() error { return r.q.Snooze(bg, t.lease, sz.d) })
		if serr != nil {
			r.recordFailed(t, "snooze", serr, err)
		}
	default:
		// A failed attempt is worth a line at the default level (warnings):
		// a task failing over and over must not go unnoticed.
		lvl := slog.LevelWarn
		if o == OutcomePanicked || o == OutcomePermanent {
			lvl = slog.LevelError
		}
		if r.log.Enabled(bg, lvl) {
			r.failures.failed(t, lvl, o, err) // aggregated per interval
		}
		r.fail(t, failureOf(cause, o, err))
	}
}

// completed acts on the result of committing a completion; retried says
// whether an earlier try failed transiently (it may have taken effect).
func (r *runner) completed(t *Task, err error, retried bool) {
	switch {
	case err == nil:
		if r.log.Enabled(context.Background(), slog.LevelDebug) {
			t.Logger().Debug("docket: task completed")
		}
	case errors.Is(err, engine.ErrLeaseLost) && retried:
		t.Logger().Warn("docket: completion refused: the lease was lost, or an earlier try whose answer was lost took effect", "err", err)
	case errors.Is(err, engine.ErrLeaseLost):
		t.Logger().Warn("docket: completion refused: the lease was lost; the result is discarded", "err", err)
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrFailed):
		t.Logger().Warn("docket: completion failed", "err", err)
		r.w.fail(fmt.Errorf("worker: completing task %d: %w", t.ID, err))
	case errors.Is(err, engine.ErrPermission):
		// The Worker's caller may not do what the handler asked (enqueue its
		// follow-ups, write its KV ops): running the handler again cannot
		// help, and would burn the task's attempts. Hand the task back
		// untouched and stop, loudly.
		r.release(t.lease)
		r.w.fail(fmt.Errorf("worker: completing task %d of queue %s/%s: the worker's caller lacks a permission the completion needs: %w",
			t.ID, t.Namespace, t.Queue, err))
	case transient(err):
		// Still no answer (or a refusal for being over a server's limit)
		// when the Worker stopped retrying (it is stopping): the task runs
		// again once its lease expires.
		t.Logger().Warn("docket: completion not committed: "+unanswered(err)+"; the task runs again after its lease expires", "err", err)
	default:
		// The commit itself was refused (an assertion of AddOps did not
		// hold, a follow-up was invalid): the work did not take effect, so
		// the attempt fails and is retried.
		t.Logger().Warn("docket: completion refused; failing the attempt", "err", err)
		r.fail(t, engine.Failure{Err: "completion refused: " + err.Error()})
	}
}

// fail records a failed attempt.
func (r *runner) fail(t *Task, f engine.Failure) {
	_, err := r.retrying(t.Logger(), "recording the failure", func() error { return r.q.Fail(context.Background(), t.lease, f) })
	if err != nil {
		r.recordFailed(t, "recording the failure", err, errors.New(f.Err))
	}
}

// recordFailed handles an outcome the engine refused to record (what names
// it, err why, herr the handler's error): rather than leave the task in
// flight, unheartbeated, until its lease expires and it is dead-lettered
// for a lost attempt, it fails the attempt with both reasons and the
// task's own backoff, or, if even that is refused, releases the lease at
// once.
func (r *runner) recordFailed(t *Task, what string, err, herr error) {
	switch {
	case errors.Is(err, engine.ErrLeaseLost):
		t.Logger().Warn("docket: "+what+" refused: the lease was lost", "err", err)
		return
	case errors.Is(err, engine.ErrClosed), errors.Is(err, engine.ErrFailed):
		t.Logger().Warn("docket: "+what+" failed", "err", err)
		r.w.fail(fmt.Errorf("worker: task %d: %s: %w", t.ID, what, err))
		return
	case transient(err):
		// Still no answer when the Worker stopped retrying: nothing else
		// would get one either; the lease expires and the task comes back.
		t.Logger().Warn("docket: "+what+" failed: "+unanswered(err)+"; the task comes back after its lease expires", "err", err)
		return
	}
	t.Logger().Error("docket: "+what+" failed; failing the attempt instead", "err", err)
	reason := fmt.Sprintf("%s failed (%v); the handler returned: %v", what, err, herr)
	if ferr := r.q.Fail(context.Background(), t.lease, engine.Failure{Err: reason}); ferr != nil {
		t.Logger().Error("docket: failing the attempt failed too; releasing the lease", "err", ferr)
		r.release(t.lease)
	}
}
