package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// Options configure a Worker. The zero value works.
type Options struct {
	// Owner names this runtime in the leases it takes. Default: host name,
	// process id and a random suffix, unique per Worker.
	Owner string
	// Logger receives the runtime's log lines, each with the task id, queue,
	// attempt and owner. Default: slog.Default(), warnings and errors only.
	Logger *slog.Logger
	// Clock times heartbeats, timeouts, retries of failed claims and
	// periodic ticks. It must tell the same time as the engine's clock.
	// Default: the engine's clock (db.Clock()).
	Clock engine.Clock
	// ShutdownGrace is how long running handlers may finish once the Worker
	// begins to stop, however the stop was asked for (Stop, Run's context,
	// Start's context), before their contexts are cancelled. It is measured
	// on Clock. Stop's context can only shorten it. Default 30 s.
	ShutdownGrace time.Duration
	// PresenceEvery is how often the Worker reports its process (host,
	// pid, Version, queues, the tasks it runs, whether it is stopping)
	// and its periodic schedules, when its API keeps them
	// (engine.Presence: the dashboard's Workers and Periodic pages and
	// `docket workers` read them). The same reports take the run-now
	// requests of its schedules. Default DefaultPresenceEvery; negative:
	// no reports.
	PresenceEvery time.Duration
	// PresenceTTL is how long a report stays listed without the next:
	// a process that dies disappears this long after its last report.
	// Default the larger of DefaultPresenceTTL and 3 * PresenceEvery.
	PresenceTTL time.Duration
	// Version is the version the Worker reports. Default the main
	// module's version from the build information.
	Version string
}

// QueueOptions configure how a queue is worked.
type QueueOptions struct {
	// Concurrency is how many goroutines work the queue; each claims tasks
	// and runs them one after another, so it is also how many handlers of
	// the queue run at once. Default 1.
	Concurrency int
	// Lease is how long a claimed task stays leased without a heartbeat;
	// it bounds how long a crashed worker's task waits before another
	// worker retries it. Default 30 s.
	Lease time.Duration
	// HeartbeatEvery is how often every lease the runtime holds is extended
	// (to now + Lease). It must be shorter than Lease. Default Lease/3.
	HeartbeatEvery time.Duration
	// Timeout, if positive, is the deadline of a handler's context: after
	// the handler ran this long on the Worker's clock, its context is
	// cancelled, ctx.Err() is context.DeadlineExceeded and the cause wraps
	// ErrTimeout (ctx.Deadline() reports the deadline from the start). What
	// the handler returns then decides: an error fails the attempt
	// (OutcomeTimedOut, the error text prefixed with the timeout); nil means
	// the work finished, and the task completes like any other.
	Timeout time.Duration
	// ClaimBatch is how many tasks one goroutine claims in one commit. It
	// runs them one after another; those waiting for their turn are
	// heartbeated like the running one, and released at once (Snooze 0)
	// when the Worker stops. Plain completions (no result, ops or
	// follow-ups) of a batch are committed together, in one commit, when
	// the batch ends; their leases are heartbeated until then. So n short
	// tasks cost two commits instead of 2n, at the price of tasks waiting
	// behind a slow one while another goroutine may be idle, and of
	// completions committed later (a crash in between runs them again).
	// Default 1, at most engine.MaxBatch.
	ClaimBatch int
}

const (
	defaultLease = 30 * time.Second
	// The pauses between tries of a call that failed without the engine
	// refusing it (a claim, a periodic enqueue, the commit of an outcome)
	// start at retryMin and double up to retryMax, with jitter.
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

func (o QueueOptions) withDefaults() (QueueOptions, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Lease == 0 {
		o.Lease = defaultLease
	}
	if o.HeartbeatEvery == 0 {
		o.HeartbeatEvery = o.Lease / 3
	}
	if o.ClaimBatch <= 0 {
		o.ClaimBatch = 1
	}
	switch {
	case o.Lease < time.Millisecond:
		return o, fmt.Errorf("lease %v is under a millisecond", o.Lease)
	case o.HeartbeatEvery <= 0 || o.HeartbeatEvery >= o.Lease:
		return o, fmt.Errorf("heartbeat every %v is not between 0 and the lease %v", o.HeartbeatEvery, o.Lease)
	case o.Timeout < 0:
		return o, fmt.Errorf("timeout %v is negative", o.Timeout)
	case o.ClaimBatch > engine.MaxBatch:
		return o, fmt.Errorf("claim batch %d is over engine.MaxBatch (%d)", o.ClaimBatch, engine.MaxBatch)
	}
	return o, nil
}

// Worker runs handlers for tasks of one engine, and periodic schedules. Set
// it up with Handle, Use and Periodic, then Start and Stop it (or Run).
type Worker struct {
	db     engine.API
	opts   Options
	clock  engine.Clock
	system bool // clock is the system clock
	log    *slog.Logger
	owner  string

	mu        sync.Mutex
	state     int
	runners   []*runner
	periodics []*periodic
	mws       []Middleware

	runCtx      context.Context // parent of handler contexts
	runCancel   context.CancelCauseFunc
	claimCtx    context.Context // claim loops and schedules
	claimCancel context.CancelFunc
	unwatch     func() bool // stops watching Start's context
	wg          sync.WaitGroup
	stopOnce    sync.Once
	finished    chan struct{} // closed when every goroutine has returned
	grace       chan struct{} // closed when the shutdown grace ran out
	done        chan struct{}
	stopErr     error

	failOnce sync.Once
	failed   chan struct{} // closed when err is set
	err      error         // why the Worker stopped by itself

	draining bool // made for one Drain (drain.go): nothing to shut down

	presence *presence // nil if the API keeps no presence
}

const (
	stateNew = iota
	stateRunning
	stateStopping
	stateStopped
)

// New returns a Worker for db. db may be a view from db.As(caller): every
// call then runs with the caller's permissions.
func New(db engine.API, opts Options) *Worker {
	w := &Worker{db: db, opts: opts, clock: opts.Clock, log: opts.Logger, owner: opts.Owner, done: make(chan struct{}),
		failed: make(chan struct{}), finished: make(chan struct{}), grace: make(chan struct{})}
	if w.clock == nil {
		w.clock = db.Clock()
	}
	w.system = w.clock == engine.SystemClock
	if w.log == nil {
		w.log = slog.New(minLevel{min: slog.LevelWarn, h: slog.Default().Handler()})
	}
	if w.owner == "" {
		w.owner = defaultOwner()
	}
	if w.opts.ShutdownGrace <= 0 {
		w.opts.ShutdownGrace = 30 * time.Second
	}
	w.log = w.log.With(logOwner, w.owner)
	return w
}

func defaultOwner() string {
	host, _ := os.Hostname()
	if len(host) > 200 {
		host = host[:200]
	}
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Owner returns the name this Worker leases tasks under.
func (w *Worker) Owner() string { return w.owner }

// Handle registers h for the queue named queue in namespace ns. It panics
// if the queue already has a handler, if the options are invalid or if the
// Worker has started: these are programming errors. Names the engine would
// refuse (empty, too long, not UTF-8) are reported by Start.
func (w *Worker) Handle(ns engine.Namespace, queue string, h Handler, opts QueueOptions) {
	if h == nil {
		panic("worker: Handle with a nil handler")
	}
	o, err := opts.withDefaults()
	if err != nil {
		panic(fmt.Sprintf("worker: queue %s/%s: %v", ns, queue, err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		panic("worker: Handle after Start")
	}
	for _, r := range w.runners {
		if r.q.Namespace() == ns && r.q.Name() == queue {
			panic(fmt.Sprintf("worker: queue %s/%s already has a handler", ns, queue))
		}
	}
	w.runners = append(w.runners, &runner{w: w, q: w.db.Queue(ns, queue), h: h, opts: o,
		log: w.log.With(logNS, ns.String(), logQueue, queue)})
}

// HandleFunc registers f for a queue, as Handle does.
func (w *Worker) HandleFunc(ns engine.Namespace, queue string, f func(ctx context.Context, t *Task) error, opts QueueOptions) {
	w.Handle(ns, queue, HandlerFunc(f), opts)
}

// Use adds middleware around every handler of the Worker. The first added
// is the outermost. It panics after Start.
func (w *Worker) Use(mw ...Middleware) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		panic("worker: Use after Start")
	}
	w.mws = append(w.mws, mw...)
}

// Start begins claiming and running tasks, and ticking periodic schedules.
// Before it returns, each schedule has caught up its most recent missed
// tick, if any. It returns an error wrapping engine.ErrInvalid for a
// namespace, queue or owner name the engine would refuse. The values of ctx
// reach every handler's context; when ctx ends the Worker stops by the rule
// of Stop (call Stop to wait for that).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return ErrStarted
	}
	if len(w.runners) == 0 && len(w.periodics) == 0 {
		return errors.New("worker: nothing to run: no handler and no periodic schedule")
	}
	if err := checkName("owner", w.owner); err != nil {
		return err
	}
	for _, r := range w.runners {
		if err := checkQueue(r.q.Namespace(), r.q.Name()); err != nil {
			return err
		}
	}
	for _, p := range w.periodics {
		if err := checkQueue(p.ns, p.queue); err != nil {
			return err
		}
	}
	// Clock readings taken here, before any goroutine starts, anchor the
	// heartbeat grids and the schedules: a clock moved right after Start
	// returns is then seen by all of them.
	now := w.clock.Now()
	w.presence = w.newPresence(now)
	seen := make([]time.Time, len(w.periodics))
	for i, p := range w.periodics {
		var err error
		if seen[i], err = p.step(ctx); err != nil {
			return fmt.Errorf("worker: periodic %q on queue %s: %w", p.name, p.queue, err)
		}
	}
	w.runCtx, w.runCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	w.claimCtx, w.claimCancel = context.WithCancel(w.runCtx)
	w.unwatch = context.AfterFunc(ctx, w.shutdown)
	w.state = stateRunning
	for _, r := range w.runners {
		r.start(now)
	}
	for i, p := range w.periodics {
		w.wg.Add(1)
		go p.loop(w.claimCtx, seen[i])
	}
	if p := w.presence; p != nil {
		p.report(w.runCtx, false)
		go p.loop()
	}
	return nil
}

// Stop stops the Worker and waits until it has. The rule is the same
// however a stop begins (Stop, Run's context ending, Start's context
// ending, or the Worker failing): claiming and ticking stop at once, every
// claimed task whose handler has not started is released (Snooze 0, the
// attempt not counted), and running handlers get Options.ShutdownGrace to
// finish. Then, or when Stop's ctx ends if that is sooner, their contexts
// are cancelled with the cause ErrShutdown, and each task whose handler
// then returns an error is released too, so another worker takes it at
// once. Heartbeats go on until each handler returns, so a task is never run
// twice at once; a handler that ignores its context delays Stop.
//
// When Stop returns, no goroutine of the Worker is left. It returns the
// error that stopped the Worker by itself (see Run), else ctx's error or
// ErrShutdown-wrapped context.DeadlineExceeded if handlers had to be
// cancelled, else nil. Stop before Start does nothing; calling it again
// waits like the first call.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	if w.state == stateNew {
		w.state = stateStopped
		close(w.done)
		close(w.finished)
		w.mu.Unlock()
		return nil
	}
	started := w.unwatch != nil
	w.mu.Unlock()
	if !started {
		return nil // stopped before it started
	}
	w.shutdown()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.runCancel(ErrShutdown)
		<-w.done
		w.mu.Lock()
		if w.stopErr == nil {
			w.stopErr = ctx.Err()
		}
		w.mu.Unlock()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	return w.stopErr
}

// shutdown begins the stop; the first call starts a goroutine that ends it
// (and closes done) once every goroutine of the Worker has returned.
func (w *Worker) shutdown() {
	w.stopOnce.Do(func() {
		w.mu.Lock()
		w.state = stateStopping
		w.mu.Unlock()
		w.unwatch()
		w.claimCancel()
		go func() {
			w.wg.Wait()
			for _, r := range w.runners {
				r.failures.flush() // the failures of the last interval
			}
			close(w.finished)
		}()
		go func() {
			t := w.clock.NewTimer(w.opts.ShutdownGrace)
			var err error
			select {
			case <-w.finished:
				t.Stop()
			case <-t.C():
				err = fmt.Errorf("%w: handlers still running after the shutdown grace of %v: %w",
					ErrShutdown, w.opts.ShutdownGrace, context.DeadlineExceeded)
				close(w.grace)
				w.runCancel(ErrShutdown)
				<-w.finished
			}
			w.runCancel(ErrShutdown)
			if p := w.presence; p != nil {
				<-p.done // removed its presence
			}
			w.mu.Lock()
			w.state = stateStopped
			if w.stopErr == nil {
				w.stopErr = err
			}
			w.mu.Unlock()
			close(w.done)
		}()
	})
}

// Run starts the Worker and stops it (see Stop) when ctx ends or when the
// Worker cannot go on: the engine was closed or failed, or the Worker's
// caller lacks a permission it needs (work on a queue, enqueue for
// follow-ups, kv-write for AddOps). It returns the error that stopped the
// Worker, nil after a clean stop on ctx, the error of Start, or an error
// wrapping context.DeadlineExceeded if handlers had to be cancelled after
// Options.ShutdownGrace.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-w.failed:
	}
	return w.Stop(context.WithoutCancel(ctx))
}

// Err returns the error that made the Worker stop by itself (the engine
// closed or failed, a permission missing), nil if there is none.
func (w *Worker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// fail stops the Worker because it cannot go on; the first error is kept.
func (w *Worker) fail(err error) {
	w.failOnce.Do(func() {
		w.log.Error("docket: worker stopping", "err", err)
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.failed)
		if !w.draining {
			w.shutdown()
		}
	})
}

// chain wraps h in the Worker's middleware.
func (w *Worker) chain(h Handler) Handler {
	for i := len(w.mws) - 1; i >= 0; i-- {
		h = w.mws[i](h)
	}
	return h
}
