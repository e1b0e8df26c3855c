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
	// ShutdownGrace is how long Run lets running handlers finish after its
	// context ends before cancelling them. Default 30 s.
	ShutdownGrace time.Duration
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
	// Timeout, if positive, cancels a handler's context after it ran this
	// long (the cause wraps ErrTimeout); the attempt then fails.
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
	claimRetry   = time.Second // pause after a claim that failed
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
	done        chan struct{}
	stopErr     error
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
	w := &Worker{db: db, opts: opts, clock: opts.Clock, log: opts.Logger, owner: opts.Owner, done: make(chan struct{})}
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
// Worker has started: these are programming errors.
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
// tick, if any. The values of ctx reach every handler's context; cancelling
// ctx stops the Worker as an expired Stop context would (handlers are
// cancelled and their leases released): call Stop to wait for that.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		return ErrStarted
	}
	if len(w.runners) == 0 && len(w.periodics) == 0 {
		return errors.New("worker: nothing to run: no handler and no periodic schedule")
	}
	// Clock readings taken here, before any goroutine starts, anchor the
	// heartbeat grids and the schedules: a clock moved right after Start
	// returns is then seen by all of them.
	now := w.clock.Now()
	seen := make([]time.Time, len(w.periodics))
	for i, p := range w.periodics {
		var err error
		if seen[i], err = p.step(ctx); err != nil {
			return fmt.Errorf("worker: periodic %q on queue %s: %w", p.name, p.queue, err)
		}
	}
	w.runCtx, w.runCancel = context.WithCancelCause(context.WithoutCancel(ctx))
	w.claimCtx, w.claimCancel = context.WithCancel(w.runCtx)
	w.unwatch = context.AfterFunc(ctx, func() {
		w.claimCancel()
		w.runCancel(ErrShutdown)
	})
	w.state = stateRunning
	for _, r := range w.runners {
		r.start(now)
	}
	for i, p := range w.periodics {
		w.wg.Add(1)
		go p.loop(w.claimCtx, seen[i])
	}
	return nil
}

// Stop stops claiming and ticking, and at once releases (Snooze 0, the
// attempt not counted) every claimed task whose handler has not started.
// Then it waits for running handlers to finish until ctx ends. If ctx ends
// first, it cancels the handlers' contexts (with the cause ErrShutdown) and
// waits for them to return: each task whose handler then returns an error
// is released too, so another worker takes it without waiting for the lease
// to expire. Heartbeats go on until each handler returns, so a task is
// never run twice at once; a handler that ignores its context delays Stop.
// When Stop returns, no goroutine of the Worker is left. It returns ctx's
// error if handlers had to be cancelled. Stop before Start does nothing;
// calling it again waits like the first call.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	switch w.state {
	case stateNew:
		w.state = stateStopped
		close(w.done)
		w.mu.Unlock()
		return nil
	case stateStopping, stateStopped:
		w.mu.Unlock()
		select {
		case <-w.done:
			return w.stopErr
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.state = stateStopping
	w.mu.Unlock()

	w.unwatch()
	w.claimCancel()
	finished := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(finished)
	}()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		err = ctx.Err()
		w.runCancel(ErrShutdown)
		<-finished
	}
	w.runCancel(ErrShutdown)
	w.mu.Lock()
	w.state, w.stopErr = stateStopped, err
	w.mu.Unlock()
	close(w.done)
	return err
}

// Run starts the Worker, waits until ctx ends, then stops it, giving
// running handlers Options.ShutdownGrace to finish. It returns nil after a
// clean stop, the error of Start, or context.DeadlineExceeded if handlers
// had to be cancelled.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.ShutdownGrace)
	defer cancel()
	return w.Stop(sctx)
}

// chain wraps h in the Worker's middleware.
func (w *Worker) chain(h Handler) Handler {
	for i := len(w.mws) - 1; i >= 0; i-- {
		h = w.mws[i](h)
	}
	return h
}
